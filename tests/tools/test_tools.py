"""Registry.dispatch: the input cap checked before anything else, and the JSON checks; the definitions a request offers."""

from __future__ import annotations

import json
import time

import pytest

from agent_kernel.tools import INPUT_BYTES, INPUT_DEPTH, input_problem
from tests.support.inprocess import in_process


@pytest.fixture
def caller(tmp_path):
    with in_process(tmp_path) as caller:
        yield caller


def test_a_10_mb_input_is_refused_at_once_and_says_how_to_send_less(caller):
    for name, tool_input in [
        ("run_code", {"code": "x = 1\n" * 1_750_000}),  # 10.5 MB of code
        ("set_state", {"key": "k", "value": ["é" * 1000] * 5_300}),  # 10.6 MB of UTF-8 in a list
        ("db_sql", {"sql": "SELECT 1", "params": list(range(1_400_000))}),  # 10 MB as JSON
        ("no_such_tool", {"junk": "y" * 10_500_000}),
    ]:
        assert len(json.dumps(tool_input, ensure_ascii=False).encode()) > 10_000_000
        started = time.perf_counter()
        outcome = caller.call(name, tool_input)
        seconds = time.perf_counter() - started
        assert outcome.is_error and seconds < 0.2, (name, seconds)
        assert f"over {INPUT_BYTES:,} bytes" in outcome.content
        assert "split the work into several smaller calls" in outcome.content
        assert outcome.duration_ms is None  # the tool never ran
    with caller.store.connect() as con:  # nothing of it was stored
        assert con.execute("SELECT count(*) FROM agent_state").fetchone() == (0,)


def test_an_input_just_under_the_cap_still_runs(caller):
    code = "text = '" + "a" * (INPUT_BYTES - 200) + "'\nlen(text)"
    assert input_problem("run_code", {"code": code}, INPUT_BYTES) is None
    outcome = caller.call("run_code", {"code": code})
    # run_code's own field limit answers, naming the field: not the whole-input cap.
    assert outcome.is_error and "code: String should have at most 200000 characters" in outcome.content
    assert caller.value("run_code", {"code": "'a' * 150_000 == 'a' * 150_000"})["result"] == "True"


def test_deep_nesting_is_refused_before_validation(caller):
    deep: list = []
    for _ in range(900):
        deep = [deep]
    outcome = caller.call("set_state", {"key": "deep", "value": deep})
    assert outcome.is_error and f"nested more than {INPUT_DEPTH} levels deep" in outcome.content
    shallow: list = []
    for _ in range(INPUT_DEPTH - 3):
        shallow = [shallow]
    assert caller.value("set_state", {"key": "ok", "value": shallow}) == {"ok": True}


def test_a_smaller_cap_per_dispatch(caller):
    outcome = caller.call("get_state", {"key": "k" * 200}, input_bytes=100)
    assert outcome.is_error and "over 100 bytes" in outcome.content


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [1.0, float("-inf")], {"a": float("nan")}])
def test_state_values_must_be_finite_json(caller, value):
    outcome = caller.call("set_state", {"key": "k", "value": value})
    assert outcome.is_error and "NaN or an infinity" in outcome.content
    assert caller.value("get_state", {"key": "k"}) == {"value": None}


def test_definitions_load_the_core_tools_and_defer_the_rest_behind_tool_search():
    from agent_kernel.config import AgentKernel
    from agent_kernel.model.caching import with_breakpoints
    from agent_kernel.tools import NOT_OFFERED, Tool, definitions, is_loaded
    from agent_kernel.tools.builtin import builtin_registry

    def mine(text: str) -> str:
        """Echo text."""
        return text

    registry = builtin_registry()
    registry.add(Tool(mine, name="mine", group="user"))
    registry.add(Tool(mine, name="notes__read", group="mcp"))  # an MCP server's tool
    offered = registry.offered(["code", "schedule", "user", "mcp"])
    settings = AgentKernel()
    sent = definitions(offered, settings, model="claude-sonnet-5-5")
    names = [t["name"] for t in sent]
    assert names[:3] == ["run_code", "inspect_namespace", "mine"] and names[-1] == "tool_search_tool_bm25"
    deferred = {t["name"] for t in sent if t.get("defer_loading")}
    assert {"create_scheduled_task", "notes__read"} <= deferred and not deferred & {"run_code", "mine"}
    marked = with_breakpoints({"tools": sent})["tools"]
    assert [t["name"] for t in marked if "cache_control" in t] == ["tool_search_tool_bm25"]
    # Only loaded tools offered: nothing to search, no search tool.
    assert [t["name"] for t in definitions([t for t in registry.offered(["code"]) if is_loaded(t)], settings, model="claude-sonnet-5-5")] == [
        "run_code", "inspect_namespace",
    ]  # fmt: skip
    # A tool an earlier search found and the turn no longer offers is still there, saying so.
    gone = definitions(registry.offered(["code"]), settings, model="claude-sonnet-5-5", absent=["old_tool"])
    assert gone[-2] == {
        "name": "old_tool",
        "description": NOT_OFFERED,
        "input_schema": {"type": "object", "properties": {}},
        "defer_loading": True,
    }
    assert gone[-1]["name"] == "tool_search_tool_bm25"
    # Without tool search (the setting, or a model that has none): every definition loaded.
    for model, search in (("claude-opus-4-1", True), ("claude-sonnet-5-5", False)):
        settings.tool_search = search
        sent = definitions(offered, settings, model=model)
        assert "tool_search_tool_bm25" not in [t["name"] for t in sent] and not any(
            t.get("defer_loading") for t in sent
        )
