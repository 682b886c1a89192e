"""The DuckDB store: sessions, messages, write-behind and sharing the file between processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from agent_kernel.errors import SessionError
from agent_kernel.store import Store
from agent_kernel.store.sessions import Journal, Sessions
from agent_kernel.store.writer import WriteBehind


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "agent.duckdb")


def test_sessions_and_messages_round_trip(store):
    with store.connect() as con:
        sessions = Sessions(con)
        created = sessions.create("analysis", notebook="nb.ipynb", model="m")
        assert sessions.by_name("analysis") == created and created.state == "idle"
        with pytest.raises(SessionError, match="already exists"):
            sessions.create("analysis", notebook="nb.ipynb")
        assert sessions.unused_name("analysis") == "analysis-2"
        journal = Journal(created.id, turn=1)
        journal.message("user", [{"type": "text", "text": "hi"}])
        journal.message("assistant", [{"type": "text", "text": "yo"}])
        journal.state("token_limit_reached")
        journal.usage(120)
        journal.write(con)
        journal.write(con)  # nothing new recorded: writes nothing twice
    with store.connect() as con:  # a new connection sees what the first one wrote
        sessions = Sessions(con)
        stored = sessions.messages(created.id)
        assert [(m.seq, m.role, m.content[0]["text"]) for m in stored] == [(0, "user", "hi"), (1, "assistant", "yo")]
        again = sessions.get(created.id)
        assert again.state == "token_limit_reached" and again.tokens_used == 120
        assert sessions.last_turn(created.id) == 1
        second = sessions.create("other", notebook="nb.ipynb")
        sessions.touch(created.id, notebook="nb.ipynb")
        assert sessions.latest_for_notebook("nb.ipynb").id == created.id
        assert {s.name for s in sessions.list("nb.ipynb")} == {"analysis", "other"} and second.notebook == "nb.ipynb"


def test_write_behind_applies_in_order_and_reports_errors(store):
    with store.connect() as con:
        session = Sessions(con).create("s", notebook=None)
    writer = WriteBehind(store)
    journal = Journal(session.id, turn=1)
    for i in range(50):
        journal.message("user", [{"n": i}])
        writer.submit(journal.write)
    writer.flush()
    with store.connect() as con:
        assert [m.content[0]["n"] for m in Sessions(con).messages(session.id)] == list(range(50))
    writer.submit(lambda con: con.execute("INSERT INTO no_such_table VALUES (1)"))
    with pytest.raises(Exception, match="Could not save"):
        writer.flush()
    journal.state("idle")
    writer.submit(journal.write)
    writer.flush()  # the writer keeps working after a failed write
    with store.connect() as con:
        assert Sessions(con).get(session.id).state == "idle"


WRITER = textwrap.dedent(
    """
    import sys
    from agent_kernel.store import Store
    from agent_kernel.store.sessions import Journal
    store = Store(sys.argv[1])
    journal = Journal(sys.argv[2], turn=1)
    for i in range(int(sys.argv[3])):
        journal.message("user", [{"i": i}])
        with store.connect() as con:
            journal.write(con)
    """
)


def test_processes_share_the_file_without_losing_writes(store):
    with store.connect() as con:
        session = Sessions(con).create("shared", notebook=None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store.path), session.id, "40"], stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    with store.connect() as con:
        stored = Sessions(con).messages(session.id)
    assert len(stored) == 120
    assert [m.seq for m in stored] == list(range(120))


def _session_with_rows(con, name):
    from agent_kernel.model.usage import CallUsage
    from agent_kernel.store.audit import AuditLog
    from agent_kernel.store.usage import UsageLog

    session = Sessions(con).create(name, notebook="nb.ipynb")
    journal = Journal(session.id, turn=1)
    journal.message("user", [{"type": "text", "text": f"hello from {name}"}])
    journal.message("assistant", [{"type": "tool_use", "id": "t1", "name": "run_code", "input": {"code": "1"}}])
    journal.write(con)
    audit = AuditLog(session.id, turn=1, prompt="hello")
    audit.tool_call(
        {"id": "t1", "name": "run_code", "input": {"code": "1"}},
        result_chars=10,
        is_error=False,
        duration_ms=1.0,
        executions=[{"execution_id": "e1", "code": "1", "success": True}],
    )
    audit.write(con)
    usage = UsageLog(session.id, turn=1)
    usage.call(CallUsage("scripted-model", 10, 5), duration_ms=1.0)
    usage.write(con)
    return session


def test_delete_removes_the_session_its_messages_and_its_audit_rows_only(store):
    with store.connect() as con:
        doomed = _session_with_rows(con, "doomed")
        kept = _session_with_rows(con, "kept")
        sessions = Sessions(con)
        rows = {"messages": 2, "tool_calls": 1, "code_executions": 1, "model_calls": 1}
        assert sessions.stored_rows(doomed.id) == rows
        assert sessions.delete(doomed.id) == rows
        assert sessions.get(doomed.id) is None and sessions.by_name("doomed") is None
        assert sessions.stored_rows(doomed.id) == dict.fromkeys(rows, 0)
        assert sessions.stored_rows(kept.id) == rows


def test_rename_archive_and_kept_names(store):
    with store.connect() as con:
        sessions = Sessions(con)
        first = sessions.create("report", notebook="nb.ipynb")
        other = sessions.create("other", notebook="nb.ipynb")
        assert sessions.kept_name("report") == "report~1"
        sessions.rename(first.id, "report~1")
        sessions.create("report~7", notebook=None)
        sessions.create("report~draft", notebook=None)
        assert sessions.kept_name("report") == "report~8"  # after the highest, whatever is between
        with pytest.raises(SessionError, match="'other' already exists"):
            sessions.rename(first.id, "other")
        assert sessions.get(first.id).name == "report~1"
        sessions.touch(other.id, notebook="nb.ipynb")
        assert sessions.latest_for_notebook("nb.ipynb").id == other.id
        sessions.set_state(other.id, "completed")
        assert sessions.get(other.id).state == "completed"
        # An archived session is not what the notebook continues by default.
        assert sessions.latest_for_notebook("nb.ipynb").id == first.id
        with pytest.raises(ValueError, match="unknown session state"):
            sessions.set_state(other.id, "finished")


def test_every_statement_is_scrubbed_before_it_reaches_the_file(store, monkeypatch):
    from agent_kernel.secrets import Secrets
    from agent_kernel.store.memories import Memories

    monkeypatch.setenv("AK_STORE_TOKEN", 'tok"en\\with-quotes-42')
    secrets = Secrets(["AK_STORE_TOKEN"])  # noqa: F841 - alive while the statements run
    value = 'tok"en\\with-quotes-42'
    with store.connect() as con:
        con.execute("CREATE TABLE ai_t (a VARCHAR, b VARCHAR[])")
        con.execute("INSERT INTO ai_t VALUES (?, ?)", ["out: " + value, [value, "ok"]])
        con.executemany("INSERT INTO ai_t VALUES (?, ?)", [["bad \udc80 text", []]])
        con.execute(f"COMMENT ON TABLE ai_t IS 'uses {value.replace(chr(39), chr(39) * 2)}'")
        Memories(con).remember("the token is " + " ".join(value))
        rows = con.execute("SELECT a, b FROM ai_t ORDER BY a").fetchall()
        comment = con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'ai_t'").fetchone()[0]
        memory = con.execute("SELECT content FROM memories").fetchone()[0]
    assert rows == [("bad \ufffd text", []), ("out: [secret AK_STORE_TOKEN]", ["[secret AK_STORE_TOKEN]", "ok"])]
    assert comment == "uses [secret AK_STORE_TOKEN]"
    assert memory == "the token is [secret AK_STORE_TOKEN]"


def test_a_notebook_continues_its_own_session_never_a_sub_session(store):
    with store.connect() as con:
        sessions = Sessions(con)
        parent = sessions.create("work", notebook="nb.ipynb")
        child = sessions.create("work/sub-1", notebook="nb.ipynb", parent_id=parent.id)
        sessions.touch(child.id)  # the child was used last
        assert sessions.latest_for_notebook("nb.ipynb").id == parent.id


def test_migration_80_keeps_a_sub_sessions_task_and_result(store):
    from agent_kernel.store.subsessions import FINISHED, ChildRow, insert_child, outcome, record_result

    with store.connect() as con:
        parent = Sessions(con).create("top", notebook=None)
        insert_child(ChildRow("c1", "top/sub-c1", None, parent.id, "count rows", None, 5_000))(con)
        insert_child(ChildRow("c2", "top/sub-c1/sub-c2", None, "c1", "count more", "m", None))(con)
        kept = {"parent_id": parent.id, "name": "top/sub-c1", "untrusted_sources": []}
        assert outcome(con, "c1") == {"id": "c1", "status": "running", **kept}
        record_result("c1", "completed", "42 rows", None)(con)
        record_result("c2", "error", None, "timed out after 120 s")(con)
        assert outcome(con, "c1") == {"id": "c1", "status": "completed", "result": "42 rows", **kept}
        assert outcome(con, "c2")["error"] == "timed out after 120 s"
        assert outcome(con, "nope") is None and "running" not in FINISHED
        assert con.execute("SELECT task, token_limit FROM sessions WHERE id = 'c1'").fetchone() == ("count rows", 5_000)


def test_a_connection_inside_another_shares_its_way_to_the_file(store):
    with store.connect() as con:  # the first: migrates (its own instance)
        con.execute("CREATE TABLE ai_outer (n INTEGER)")
    with store.connect() as outer:
        outer.execute("INSERT INTO ai_outer VALUES (1)")
        with store.connect(read_only=True) as inner:  # e.g. a helper that reads the store
            assert inner.execute("SELECT count(*) FROM ai_outer").fetchone() == (1,)
        with store.connect() as inner:
            inner.execute("INSERT INTO ai_outer VALUES (2)")
        outer.execute("INSERT INTO ai_outer VALUES (3)")
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT list(n ORDER BY n) FROM ai_outer").fetchone() == ([1, 2, 3],)


def test_a_read_only_connection_cannot_write_and_a_plain_one_leaves_no_log(store):
    import duckdb

    with store.connect() as con:
        con.execute("CREATE TABLE ai_notes (text VARCHAR)")
    with store.connect(read_only=True) as con, pytest.raises(duckdb.Error, match="read-only"):
        con.execute("INSERT INTO ai_notes VALUES ('no')")
    with store.connect() as con:
        con.execute("INSERT INTO ai_notes VALUES ('kept')")
    # Folded into the file as closing a connection of its own would: a new process reads it
    # without replaying a log.
    assert not (store.path.parent / (store.path.name + ".wal")).exists()
    out = subprocess.run(
        [sys.executable, "-c", f"import duckdb; print(duckdb.connect({str(store.path)!r}, read_only=True).sql('SELECT * FROM ai_notes').fetchall())"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.stdout.strip() == "[('kept',)]"
