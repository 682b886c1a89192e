"""A built store holds months of use in the store's own tables, and the agent reads it."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from agent_kernel.store import Store
from agent_kernel.store.recall import SearchFilters, search
from agent_kernel.store.schema import PROTECTED_TABLES, migrate
from agent_kernel.store.sessions import Sessions
from agent_kernel.testing.stores import Proportions, cached, copy_of, fill, sessions_for

# Tables a history fills; the others hold what a person switched or granted, or a lease.
LEFT_EMPTY = {"scheduler_leases", "skill_states", "agent_tool_grants"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stores") / "store.duckdb"
    done = fill(path, 14, migrate)
    assert done.sessions == sessions_for(14) and done.messages > 40 * done.sessions
    return path


def test_every_table_a_history_fills_has_rows_in_realistic_proportions(built: Path) -> None:
    con = duckdb.connect(str(built), read_only=True)
    try:
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in PROTECTED_TABLES}  # type: ignore[index]
        ai_rows = con.execute("SELECT count(*) FROM ai_daily_sales").fetchone()[0]  # type: ignore[index]
    finally:
        con.close()
    assert {t for t, n in counts.items() if n == 0} == LEFT_EMPTY
    sessions = counts["sessions"]
    shape = Proportions()
    assert 20 * sessions < counts["messages"] < 120 * sessions
    assert counts["tool_calls"] > counts["code_executions"] > sessions
    assert counts["model_calls"] > counts["tool_calls"]
    assert 0.7 * sessions < counts["session_summaries"] <= sessions
    assert counts["context_summaries"] < counts["session_summaries"]
    assert counts["runs"] == round(sessions * shape.runs_per_session)
    assert counts["memories"] >= 365 and ai_rows == sessions * shape.ai_rows_per_session


def test_every_tool_use_has_its_result_and_the_agent_loads_the_session(built: Path) -> None:
    with Store(built).connect(read_only=True) as con:
        session = Sessions(con).by_name("session-3")
        assert session is not None
        messages = Sessions(con).messages(session.id)
    assert messages[0].role == "user" and messages[-1].role == "assistant"
    uses = [b["id"] for m in messages for b in m.content if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for m in messages for b in m.content if b["type"] == "tool_result"]
    assert uses == results and len(set(uses)) == len(uses)
    for m in messages:
        for block in m.content:
            if block["type"] == "tool_result":
                assert isinstance(block["content"], str) and json.loads(block["content"])["stdout"]


def test_search_finds_the_generated_words(built: Path) -> None:
    with Store(built).connect(read_only=True) as con:
        found = search(con, "revenue forecast", SearchFilters(), limit=5)
    assert len(found) == 5 and all("revenue" in m.snippet or "forecast" in m.snippet for m in found)


def test_a_cached_store_is_built_once_and_copies_stay_apart(tmp_path: Path) -> None:
    first = cached(0.5, migrate, folder=tmp_path / "cache")
    built_at = first.stat().st_mtime_ns
    assert cached(0.5, migrate, folder=tmp_path / "cache") == first and first.stat().st_mtime_ns == built_at
    copy = copy_of(first, tmp_path / "copy.duckdb")
    with Store(copy).connect() as con:
        con.execute("DELETE FROM sessions")
    assert first.stat().st_mtime_ns == built_at


def test_zero_megabytes_is_a_fresh_migrated_store(tmp_path: Path) -> None:
    done = fill(tmp_path / "fresh.duckdb", 0, migrate)
    assert done.sessions == 0 and done.messages == 0 and done.megabytes < 5
