"""Session administration (turn/admin.py) from a plain script: real DuckDB file, library errors."""

from __future__ import annotations

import pytest

from agent_kernel import Agent, AgentKernelError
from agent_kernel.errors import SessionError
from agent_kernel.store import retention


@pytest.fixture
def agent(tmp_path):
    from IPython.core.interactiveshell import InteractiveShell

    return Agent(shell=InteractiveShell.instance(), db_path=str(tmp_path / "agent.duckdb"))


def test_rename_archive_list_and_delete(agent):
    first = agent.session(name="first")
    agent.session(name="second")
    admin = agent.admin
    admin.rename("first", "renamed")
    admin.archive("renamed")
    listed = admin.listing(every_notebook=True)
    assert {(s.name, s.state) for s, _ in listed.sessions} >= {("renamed", "completed")}
    assert listed.current == agent.session(create=False).id
    found = admin.stored_rows("renamed")
    assert found.session.id == first.id and found.rows["messages"] == 0
    admin.delete(found)
    assert "renamed" not in {s.name for s, _ in admin.listing(every_notebook=True).sessions}


def test_mistakes_are_library_errors_not_ipython_ones(agent):
    agent.session(name="kept")
    agent.session(name="other")
    with pytest.raises(SessionError, match="No session named 'nope'"):
        agent.admin.archive("nope")
    with pytest.raises(SessionError, match="new session name is empty"):
        agent.admin.rename("kept", " ")
    with pytest.raises(AgentKernelError):
        agent.admin.rename("kept", "other")  # taken
    found = agent.admin.stored_rows("kept")
    agent.admin.rename("kept", "moved")
    agent.session(name="kept")  # the name now means another session
    with pytest.raises(SessionError, match="changed meanwhile; nothing was deleted"):
        agent.admin.delete(found)


def test_the_store_size_line_says_how_big_the_store_is_and_how_fast_it_grows(agent, tmp_path):
    agent.session(name="kept")
    size = agent.admin.store_size()
    assert size.file_bytes == (tmp_path / "agent.duckdb").stat().st_size > 0
    assert size.text().startswith(retention.human_bytes(size.file_bytes + size.log_bytes) + " on disk, growing about ")
