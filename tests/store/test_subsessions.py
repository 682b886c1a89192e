"""Sub-sessions as stored: the child's row and limits, its outcome with what it read, and
a parent's usage that includes its children's (a real DuckDB file)."""

from __future__ import annotations

from agent_kernel.model.usage import CallUsage
from agent_kernel.store import Store
from agent_kernel.store.sessions import Journal, Sessions
from agent_kernel.store.subsessions import ChildRow, insert_child, outcome, record_result
from agent_kernel.store.usage import UsageLog, session_usage, sessions_cost


def child(con, parent_id: str, name: str, *, cost_limit: float | None = None) -> str:
    insert_child(ChildRow(name, name, "nb.ipynb", parent_id, f"task of {name}", "m", 1_000, cost_limit))(con)
    return name


def calls(con, session_id: str, *costs: float | None) -> None:
    log = UsageLog(session_id, 1)
    for cost in costs:
        log.call(CallUsage("m", input_tokens=100, output_tokens=10, cost=cost), duration_ms=1.0)
    log.write(con)


def test_a_child_row_keeps_its_limits_and_its_outcome_what_it_read(tmp_path):
    with Store(tmp_path / "a.duckdb").connect() as con:
        parent = Sessions(con).create("top", notebook="nb.ipynb")
        kid = child(con, parent.id, "kid", cost_limit=0.25)
        journal = Journal(kid, 1)
        journal.untrusted(["web_search planted", "fetch_url https://evil.example/"])
        journal.write(con)
        record_result(kid, "completed", "found it", None)(con)
        stored = Sessions(con).get(kid)
        assert stored is not None
        assert (stored.token_limit, stored.cost_limit, stored.parent_id) == (1_000, 0.25, parent.id)
        assert outcome(con, kid) == {
            "id": kid, "status": "completed", "result": "found it", "parent_id": parent.id, "name": "kid",
            "untrusted_sources": ["web_search planted", "fetch_url https://evil.example/"],
        }  # fmt: skip
        quiet = child(con, parent.id, "quiet")
        assert outcome(con, quiet)["untrusted_sources"] == []
        assert outcome(con, "absent") is None


def test_a_sessions_cost_includes_its_children_at_any_depth(tmp_path):
    with Store(tmp_path / "a.duckdb").connect() as con:
        top = Sessions(con).create("top", notebook=None)
        other = Sessions(con).create("other", notebook=None)
        kid = child(con, top.id, "kid")
        grandkid = child(con, kid, "grandkid")
        calls(con, top.id, 0.5)
        calls(con, kid, 0.25, None)
        calls(con, grandkid, 0.125)
        calls(con, other.id, 100.0)
        assert (session_usage(con, top.id).cost, session_usage(con, top.id).unpriced) == (0.875, 1)
        assert session_usage(con, kid).cost == 0.375
        assert session_usage(con, other.id).cost == 100.0
        assert sessions_cost(con, [top.id, kid, other.id, "none"]) == {
            top.id: (0.875, 1), kid: (0.375, 1), other.id: (100.0, 0),
        }  # fmt: skip
        # The last request's size is the session's own, not a child's.
        assert session_usage(con, top.id).last_prompt_tokens == 100
