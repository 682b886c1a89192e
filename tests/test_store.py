"""The DuckDB store: sessions, messages, write-behind and sharing the file between processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from agent_kernel.errors import SessionError
from agent_kernel.store import Store
from agent_kernel.store import sessions as rows
from agent_kernel.store.sessions import SessionStore
from agent_kernel.store.writer import WriteBehind


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "agent.duckdb")


def test_sessions_and_messages_round_trip(store):
    sessions = SessionStore(store)
    created = sessions.create("analysis", notebook="nb.ipynb", model="m")
    assert sessions.by_name("analysis") == created and created.state == "idle"
    with pytest.raises(SessionError, match="already exists"):
        sessions.create("analysis", notebook="nb.ipynb")
    assert sessions.unused_name("analysis") == "analysis-2"
    with store.connect() as con:
        rows.append_message(con, created.id, turn=1, role="user", content=[{"type": "text", "text": "hi"}])
        rows.append_message(con, created.id, turn=1, role="assistant", content=[{"type": "text", "text": "yo"}])
        rows.set_state(con, created.id, "token_limit_reached")
        rows.add_usage(con, created.id, 120)
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
    sessions = SessionStore(store)
    session = sessions.create("s", notebook=None)
    writer = WriteBehind(store)
    for i in range(50):
        writer.submit(lambda con, i=i: rows.append_message(con, session.id, turn=1, role="user", content=[{"n": i}]))
    writer.flush()
    assert [m.content[0]["n"] for m in sessions.messages(session.id)] == list(range(50))
    writer.submit(lambda con: con.execute("INSERT INTO no_such_table VALUES (1)"))
    with pytest.raises(Exception, match="Could not save"):
        writer.flush()
    writer.submit(lambda con: rows.set_state(con, session.id, "idle"))
    writer.flush()  # the writer keeps working after a failed write


WRITER = textwrap.dedent(
    """
    import sys
    from agent_kernel.store import Store
    from agent_kernel.store import sessions as rows
    store = Store(sys.argv[1])
    for i in range(int(sys.argv[3])):
        with store.connect() as con:
            rows.append_message(con, sys.argv[2], turn=1, role="user", content=[{"i": i}])
    """
)


def test_processes_share_the_file_without_losing_writes(store):
    session = SessionStore(store).create("shared", notebook=None)
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(store.path), session.id, "40"], stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    stored = SessionStore(store).messages(session.id)
    assert len(stored) == 120
    assert [m.seq for m in stored] == list(range(120))
