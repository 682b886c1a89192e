"""Retention prunes only what its setting names (old tool results, code outputs and run
outputs, to a stub; never the conversation's text or the summaries), a vacuum gives the space
back and keeps every row, and the daily prune is cheap when nothing is due."""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import duckdb
import pytest

from agent_kernel.errors import StoreError
from agent_kernel.store import Store, retention
from agent_kernel.store.sessions import Sessions

NOW = datetime.now(timezone.utc).replace(tzinfo=None)
OLD = NOW - timedelta(days=200)
RECENT = NOW - timedelta(days=3)
# A tool result far past what is kept whole, as incompressible as real output.
BIG = "row 1: " + random.Random(1).randbytes(10_000).hex()


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "agent.duckdb")


def _message(con, session_id, seq, role, content, at):
    con.execute(
        "INSERT INTO messages (session_id, seq, turn, role, content, created_at) VALUES (?, ?, 1, ?, ?, ?)",
        [session_id, seq, role, json.dumps(content), at],
    )


def _tool_pair(con, session_id, seq, at, result, *, tool_id):
    _message(con, session_id, seq, "assistant", [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": tool_id, "name": "run_code", "input": {"code": "print('x' * 20000)"}},
    ], at)  # fmt: skip
    _message(con, session_id, seq + 1, "user", [{"type": "tool_result", "tool_use_id": tool_id, "content": result}], at)


def _execution(con, ident, at, stdout):
    con.execute(
        "INSERT INTO code_executions (id, session_id, turn, code, stdout, stderr, success, traceback, created_at) "
        "VALUES (?, 's', 1, 'print(1)', ?, '', true, ?, ?)",
        [ident, stdout, "Traceback\n" + "  frame\n" * 300 + "ValueError: the end", at],
    )


def _fill(store, *, pairs=0):
    """A session with an old and a recent conversation; ``pairs`` more old tool round trips."""
    with store.connect() as con:
        session = Sessions(con).create("kept", notebook="/n.ipynb")
        sid = session.id
        long_prompt = "Please analyse this: " + "y" * 5000  # the person's own long text
        _message(con, sid, 0, "user", [{"type": "text", "text": long_prompt}], OLD)
        _tool_pair(con, sid, 1, OLD, BIG, tool_id="old_big")
        _tool_pair(con, sid, 3, OLD, "short result", tool_id="old_small")
        _tool_pair(con, sid, 5, OLD, [{"type": "text", "text": BIG}], tool_id="old_blocks")
        _tool_pair(con, sid, 7, OLD, BIG, tool_id="covered")  # the last message a compaction covers
        con.execute(
            "INSERT INTO context_summaries (session_id, covers, trimmed, summary, fingerprint) VALUES (?, 9, 0, 'sum', 'f')",
            [sid],
        )
        seq = 9
        for n in range(pairs):
            _tool_pair(con, sid, seq, OLD, random.Random(n).randbytes(10_000).hex(), tool_id=f"more{n}")
            seq += 2
        _tool_pair(con, sid, seq, RECENT, BIG, tool_id="recent_big")
        _message(con, sid, seq + 2, "assistant", [{"type": "text", "text": "Done: " + "z" * 3000}], RECENT)
        con.execute(
            "INSERT INTO session_summaries (session_id, summary, covers) VALUES (?, 'what the session did', 3)", [sid]
        )
        _execution(con, "old", OLD, "out " + "o" * 9000)
        _execution(con, "recent", RECENT, "out " + "o" * 9000)
        return sid


def _results(store, sid):
    with store.connect() as con:
        messages = Sessions(con).messages(sid)
    found = {}
    for m in messages:
        for block in m.content:
            if block.get("type") == "tool_result":
                found[block["tool_use_id"]] = block["content"]
    return messages, found


def test_prune_replaces_old_tool_results_and_code_outputs_with_stubs_and_keeps_the_conversation(store):
    sid = _fill(store)
    before, _ = _results(store, sid)
    dry = retention.prune(store, 90, dry_run=True, now=NOW)
    assert dry.kinds["tool results"][0] == 2 and dry.kinds["code run outputs"][0] == 2  # stdout and traceback
    assert _results(store, sid)[0] == before  # a dry run changes nothing

    done = retention.prune(store, 90, now=NOW)
    assert done.kinds == dry.kinds and not done.dry_run
    after, results = _results(store, sid)
    # every row stays, in order; the conversation's text and tool inputs are as they were
    assert [(m.seq, m.role) for m in after] == [(m.seq, m.role) for m in before]
    for old, new in zip(before, after):
        kept = [b for b in old.content if b.get("type") != "tool_result"]
        assert [b for b in new.content if b.get("type") != "tool_result"] == kept
    # old big results became stubs saying what was there; the rest are whole
    for tool_id in ("old_big", "old_blocks"):
        (stub,) = results[tool_id]
        assert stub["type"] == "text" and stub["text"].startswith(BIG[:100])
        assert f"[pruned {NOW:%Y-%m-%d}: this tool result of 20,0" in stub["text"] and len(stub["text"]) < 600
        assert f"from {OLD:%Y-%m-%d}" in stub["text"]
    assert results["old_small"] == "short result"
    assert results["recent_big"] == BIG
    assert results["covered"] == BIG  # its compaction is still found by its fingerprint
    with store.connect() as con:
        rows = dict(con.execute("SELECT id, stdout FROM code_executions").fetchall())
        (traceback,) = con.execute("SELECT traceback FROM code_executions WHERE id = 'old'").fetchone()
        (summary,) = con.execute("SELECT summary FROM session_summaries").fetchone()
        (compaction,) = con.execute("SELECT summary FROM context_summaries").fetchone()
    assert rows["recent"] == "out " + "o" * 9000
    assert rows["old"].startswith("out ooo") and "9,004 characters of stdout" in rows["old"] and len(rows["old"]) < 500
    assert traceback.count("ValueError: the end") == 1 and "[pruned " in traceback
    assert summary == "what the session did" and compaction == "sum"
    # a second prune finds nothing left to do
    again = retention.prune(store, 90, now=NOW)
    assert again.items == 0 and again.lines() == [f"Nothing older than {again.cutoff:%Y-%m-%d %H:%M} UTC to prune."]


def test_a_prune_in_many_parts_prunes_the_same(store, tmp_path):
    _fill(store, pairs=30)
    whole = retention.prune(store, 90, dry_run=True, now=NOW)
    parts = retention.prune(store, 90, now=NOW, part_rows=7)
    assert parts.kinds == whole.kinds and whole.kinds["tool results"][0] == 2 + 30
    assert retention.prune(store, 90, now=NOW).items == 0


def test_a_longer_retention_prunes_nothing_newer_than_it(store):
    sid = _fill(store)
    assert retention.prune(store, 365, now=NOW).items == 0
    assert _results(store, sid)[1]["old_big"] == BIG
    with pytest.raises(StoreError, match="must be positive"):
        retention.prune(store, 0)


def test_a_finished_runs_output_notebook_and_logs_are_pruned_but_its_errors_kept(store, tmp_path):
    run_dir = tmp_path / "runs" / "job" / "run"
    run_dir.mkdir(parents=True)
    output = run_dir / "output.ipynb"
    cells = [
        {"cell_type": "code", "source": "big()", "metadata": {}, "execution_count": 1,
         "outputs": [{"output_type": "stream", "name": "stdout", "text": "z" * 50_000}]},
        {"cell_type": "code", "source": "fail()", "metadata": {}, "execution_count": 2,
         "outputs": [{"output_type": "display_data", "data": {"text/plain": "p" * 5000}, "metadata": {}},
                     {"output_type": "error", "ename": "ValueError", "evalue": "bad", "traceback": ["t"]}]},
        {"cell_type": "code", "source": "small()", "metadata": {}, "execution_count": 3,
         "outputs": [{"output_type": "stream", "name": "stdout", "text": "ok"}]},
    ]  # fmt: skip
    output.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    (run_dir / "stdout.log").write_text("log line\n" * 2000 + "the last line\n")
    (run_dir / "stderr.log").write_text("short")
    with store.connect() as con:
        for run_id, finished in (("old", OLD), ("new", RECENT)):
            con.execute(
                "INSERT INTO runs (id, job_id, scheduled_for, cause, status, not_before, finished_at, run_dir, "
                "output_path) VALUES (?, 'job', ?, 'schedule', 'SUCCEEDED', ?, ?, ?, ?)",
                [run_id, finished, finished, finished, str(run_dir if run_id == "old" else tmp_path / "none"),
                 str(output) if run_id == "old" else None],
            )  # fmt: skip
    done = retention.prune(store, 90, now=NOW)
    assert done.kinds["run logs"][0] == 1 and done.kinds["run output notebooks"][0] == 1
    pruned = json.loads(output.read_text())
    first, second, third = (cell["outputs"] for cell in pruned["cells"])
    assert [c["source"] for c in pruned["cells"]] == ["big()", "fail()", "small()"]
    assert len(first) == 1 and "[pruned " in first[0]["text"] and "50,0" in first[0]["text"]
    assert second[0]["output_type"] == "error" and second[0]["evalue"] == "bad"
    assert third == cells[2]["outputs"]
    assert pruned["metadata"]["agent_kernel"]["pruned"]["characters"] > 50_000
    log = (run_dir / "stdout.log").read_text()
    assert log.startswith("[pruned ") and log.endswith("the last line\n") and len(log) < 1200
    assert (run_dir / "stderr.log").read_text() == "short"
    assert retention.prune(store, 90, now=NOW).items == 0  # pruned once


def test_vacuum_gives_the_space_back_after_a_prune_and_keeps_every_row(store):
    sid = _fill(store, pairs=600)
    with store.connect() as con:
        con.execute("CREATE TABLE ai_notes AS SELECT 42 AS answer")
        con.execute("COMMENT ON TABLE ai_notes IS 'the model''s own table'")
    retention.prune(store, 90, now=NOW)
    pruned_size = os.path.getsize(store.path)
    stats = retention.store_stats(store)
    assert stats.free_bytes > 0 and stats.pruned_through == NOW - timedelta(days=90)
    done = retention.vacuum(store)
    assert done.before == pruned_size and done.after < done.before / 2, done.line()
    assert done.rows["messages"] == 2 * (4 + 600 + 1) + 2 and done.rows["ai_notes"] == 1
    assert retention.store_stats(store).size.file_bytes == done.after
    assert not os.path.exists(f"{store.path}.vacuum-backup") and not os.path.exists(f"{store.path}.vacuum-new")
    # the store works on: its rows, comments, keys and defaults are there
    _, results = _results(store, sid)
    assert results["recent_big"] == BIG and len(results) == 4 + 600 + 1
    with store.connect() as con:
        assert con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'ai_notes'").fetchone() == (
            "the model's own table",
        )
        assert Sessions(con).by_name("kept").id == sid
        Sessions(con).create("after the vacuum", notebook="/n.ipynb")  # defaults and keys still hold
        with pytest.raises(duckdb.ConstraintException):
            con.execute("INSERT INTO sessions (id, name) VALUES (?, 'same id')", [sid])


def test_store_stats_and_the_size_line_read_growth_from_timestamps(store):
    _fill(store, pairs=20)
    stats = retention.store_stats(store, now=NOW)
    by_name = {t.name: t for t in stats.tables}
    assert by_name["messages"].rows == 2 * (4 + 20 + 1) + 2 and by_name["messages"].bytes > 0
    assert stats.tables[0].bytes >= stats.tables[-1].bytes
    line = stats.size
    assert line.file_bytes == os.path.getsize(store.path) and line.oldest == OLD and line.newest == RECENT
    # 4 of 54 dated rows were written in the last week (3 messages and a code run)
    assert line.per_day == pytest.approx(line.file_bytes * 4 / 54 / 7)
    assert stats.per_week == pytest.approx(line.per_day * 7)
    text = retention.size_line(store, now=NOW).text()
    assert " on disk, growing about " in text and f"messages since {OLD:%Y-%m-%d}" in text
    assert retention.human_bytes(1536) == "1.5 KB" and retention.human_bytes(3 * 1024**3) == "3.0 GB"


def test_the_daily_prune_runs_at_most_once_a_day_and_reads_only_what_became_due(store):
    sid = _fill(store)
    assert retention.prune_if_due(store, 0, now=NOW) is None  # 0: keep everything
    first = retention.prune_if_due(store, 90, now=NOW)
    assert first is not None and first.kinds["tool results"][0] == 2
    assert retention.prune_if_due(store, 90, now=NOW) is None  # done today: one stat, no connection
    # a week later the recent results (3 days old then 10) are not due yet; next year they are
    os.utime(f"{store.path}.retention.json", (0, 0))
    later = retention.prune_if_due(store, 90, now=NOW + timedelta(days=7))
    assert later is not None and later.items == 0
    os.utime(f"{store.path}.retention.json", (0, 0))
    year = retention.prune_if_due(store, 90, now=NOW + timedelta(days=365))
    assert year is not None and year.kinds["tool results"][0] == 1
    assert "[pruned " in _results(store, sid)[1]["recent_big"][0]["text"]


def test_the_daily_loop_prunes_what_is_due_until_it_is_stopped(store, caplog):
    sid = _fill(store)
    stop = threading.Event()
    stop.set()  # one pass, then it returns
    with caplog.at_level(logging.INFO, logger="agent_kernel.store"):
        retention.tidy_daily(store, 90, stop, check_s=0.01)
    assert "[pruned " in _results(store, sid)[1]["old_big"][0]["text"]
    assert "store retention (90 days): pruned 2 tool results" in caplog.text
    retention.tidy_daily(store, 0, threading.Event())  # 0 days: returns at once, prunes nothing


WRITER = """
import sys
from agent_kernel.store import Store
from agent_kernel.store.state import State
store = Store(sys.argv[1])
for n in range(int(sys.argv[2])):
    with store.connect() as con:
        State(con).set("writer/" + str(n), n)
"""


def test_a_vacuum_while_another_process_writes_loses_nothing(store):
    _fill(store, pairs=100)
    retention.prune(store, 90, now=NOW)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store.path), "100"])
    done = []
    try:
        while not _state_keys(store) and writer.poll() is None:
            time.sleep(0.05)  # the writer has started writing
        while writer.poll() is None:
            done.append(retention.vacuum(store))
            time.sleep(0.3)  # the writer's turn at the lock (a vacuum at once again would take it first)
    finally:
        assert writer.wait(timeout=300) == 0
    assert done, "the writer finished before a vacuum ran"
    assert all(v.rows["messages"] == 2 * (4 + 100 + 1) + 2 for v in done)
    assert _state_keys(store) == {f"writer/{n}" for n in range(100)}


def _state_keys(store):
    with store.connect(read_only=True) as con:
        return {row[0] for row in con.execute("SELECT key FROM agent_state").fetchall()}
