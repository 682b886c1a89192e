"""``agent-kernel store stats|prune|vacuum`` as a person runs them in a terminal: the figures,
what a prune would replace before it does, a vacuum that shrinks the file and keeps every
row, a sentence for bad input, and prune refused when a command an agent turn started asks."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from agent_kernel.store import Store
from agent_kernel.store.sessions import Sessions

OLD = datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(days=400)


@pytest.fixture
def db(tmp_path):
    """A store with 150 old tool round trips (incompressible results) and one new message."""
    path = tmp_path / "agent.duckdb"
    store = Store(path)
    with store.connect() as con:
        sid = Sessions(con).create("old work", notebook="/n.ipynb").id
        rows = []
        for n in range(150):
            use = [{"type": "tool_use", "id": f"t{n}", "name": "run_code", "input": {"code": "big()"}}]
            result = [
                {"type": "tool_result", "tool_use_id": f"t{n}", "content": random.Random(n).randbytes(8000).hex()}
            ]
            rows += [[sid, 2 * n, "assistant", json.dumps(use), OLD], [sid, 2 * n + 1, "user", json.dumps(result), OLD]]
        rows.append([sid, 300, "assistant", json.dumps([{"type": "text", "text": "All done."}]), OLD + timedelta(400)])
        for row in rows:
            con.execute(
                "INSERT INTO messages (session_id, seq, turn, role, content, created_at) VALUES (?, ?, 1, ?, ?, ?)", row
            )
    return path


def store_cli(db, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "agent_kernel.cli", "--db", str(db), "store", *args]
    environment = {k: v for k, v in os.environ.items() if k != "AGENT_KERNEL_IN_TURN"}
    return subprocess.run(command, capture_output=True, text=True, env={**environment, **(env or {})}, timeout=300)


def test_stats_prune_and_vacuum(db):
    stats = store_cli(db, "stats")
    assert stats.returncode == 0, stats.stderr
    assert f"Store {db}" in stats.stdout and "growth" in stats.stdout and "a week (last 7 days)" in stats.stdout
    assert "messages" in stats.stdout and "301" in stats.stdout and "pruned        never" in stats.stdout
    figures = json.loads(store_cli(db, "stats", "--json").stdout)
    assert figures["bytes"] == os.path.getsize(db) and figures["path"] == str(db)
    assert {k: v for k, v in figures["tables"][0].items() if k != "bytes"} == {"name": "messages", "rows": 301}

    dry = store_cli(db, "prune", "--older-than", "30", "--dry-run")
    assert dry.returncode == 0 and "would prune 150 tool results" in dry.stdout and "Done" not in dry.stdout
    done = store_cli(db, "prune", "--older-than", "30")
    assert done.returncode == 0, done.stderr
    assert "would prune 150 tool results" in done.stdout and "Done: pruned 150 tool results" in done.stdout
    assert "agent-kernel store vacuum" in done.stdout
    assert "Nothing older than" in store_cli(db, "prune", "--older-than", "30").stdout

    before = os.path.getsize(db)
    vacuum = store_cli(db, "vacuum")
    assert vacuum.returncode == 0, vacuum.stderr
    assert "given back" in vacuum.stdout and "every one kept" in vacuum.stdout
    assert os.path.getsize(db) < before * 0.75
    with Store(db).connect() as con:
        assert con.execute("SELECT count(*) FROM messages").fetchone() == (301,)
    assert "pruned        older than" in store_cli(db, "stats").stdout


def test_bad_input_and_a_turns_command_are_refused_with_a_sentence(db, tmp_path):
    for days, why in (("soon", "DAYS is a number of days, not 'soon'"), ("0", "DAYS must be more than 0")):
        bad = store_cli(db, "prune", "--older-than", days)
        assert bad.returncode == 2 and why in bad.stderr
    missing = store_cli(tmp_path / "none.duckdb", "stats")
    assert missing.returncode == 1 and "there is no store at" in missing.stderr
    assert not (tmp_path / "none.duckdb").exists()
    refused = store_cli(db, "prune", "--older-than", "30", env={"AGENT_KERNEL_IN_TURN": "1"})
    assert refused.returncode == 2 and "refused here" in refused.stderr
    assert "would prune 150 tool results" in store_cli(db, "prune", "--older-than", "30", "--dry-run").stdout
    usage = store_cli(db)
    assert usage.returncode == 2 and "stats" in usage.stdout and "vacuum" in usage.stdout
