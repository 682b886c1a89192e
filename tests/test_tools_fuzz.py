"""Every built-in tool, driven with malformed input: each call ends in a result or an is_error.

Inputs follow each tool's own JSON schema closely enough to get past its first checks
(right names, sometimes right types), then break it: wrong types, huge strings and
lists, NaN/inf/huge numbers, nested junk, missing and extra keys, lone surrogates, NUL.
Hypothesis runs derandomized, so the same inputs run every time.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_kernel.tools import INPUT_BYTES
from agent_kernel.tools.builtin import builtin_registry
from agent_kernel.tools.web import ServerTool

from .inprocess import in_process

REGISTRY = builtin_registry()
EXAMPLES_PER_TOOL = 15
# The API runs its server tools (web_search, web_fetch): the kernel never dispatches them.
TOOL_NAMES = sorted(name for name, t in REGISTRY.tools.items() if not isinstance(t, ServerTool))

_DEEP: list[Any] = []
for _ in range(200):
    _DEEP = [_DEEP]

EDGE_STRINGS = [
    "", " ", "\x00", "a\x00b", "\ud800", "x\udfffy", "nan", "NaN", "inf", "-inf", "1e308", "-1",
    "__builtins__", "print", "../../etc/passwd", "'; DROP TABLE memories; --", "{x}", "%%",
    "é" * 3_000, "y" * 30_000, "z" * 300_000, "w" * (INPUT_BYTES + 1),
]
EDGE_NUMBERS = [
    0, -1, 1, 2**63, -(2**63), 10**30, 1e308, -1e308, 1e-320, float("nan"), float("inf"),
    float("-inf"), 0.5, True, False,
]
# Code the model might send to run_code: malformed or hostile but safe to run here.
CODE = [
    "", "1 + 1", "def broken(:", "\x00", "'\ud800'", "print('\\x00' * 10)", "raise ValueError('x')",
    "raise KeyboardInterrupt", "raise SystemExit(3)", "import time\ntime.sleep(0.05)",
    "await __import__('asyncio').sleep(0.01)", "x = [0] * 1000\nx", "'q' * 100_000",
    "import sys; print('e', file=sys.stderr)", "%time 1", "class A:\n    def __repr__(self): raise RuntimeError\nA()",
]

scalars = st.one_of(
    st.none(),
    st.sampled_from(EDGE_NUMBERS),
    st.sampled_from(EDGE_STRINGS),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
)
junk = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def plausible(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of the schema's type (often edge cases of it), sometimes junk."""
    if "anyOf" in schema:
        return st.one_of([plausible(s) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        return st.text(max_size=20) | st.sampled_from(EDGE_STRINGS)
    if kind in ("number", "integer"):
        return st.sampled_from(EDGE_NUMBERS) | st.integers(-5, 5000) | st.floats()
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(plausible(schema.get("items", {})), max_size=4) | st.lists(st.just("i"), min_size=300, max_size=300)
    if kind == "object" and "properties" in schema:  # e.g. a render_blocks block
        return st.fixed_dictionaries(
            {}, optional={key: plausible(sub) for key, sub in schema["properties"].items()}
        )
    if kind == "object":
        return st.dictionaries(st.sampled_from(["type", "content", "start", "end", "x"]) | st.text(max_size=4), junk, max_size=4)
    if kind == "null":
        return st.none()
    return junk


@st.composite
def tool_inputs(draw: st.DrawFn, name: str) -> object:
    """An input for ``name``: mostly an object with its fields, sometimes anything at all."""
    mode = draw(st.integers(0, 19))
    if mode == 0:
        return draw(junk)  # not an object, or one of junk
    if mode == 1:
        return {"value": _DEEP}
    schema = REGISTRY.get(name).definition()["input_schema"]
    tool_input: dict[str, Any] = {}
    for field, field_schema in schema.get("properties", {}).items():
        choice = draw(st.integers(0, 9))
        if choice == 0:
            continue  # missing
        if choice == 9:
            tool_input[field] = draw(junk)
        elif field == "code" and name == "run_code":
            tool_input[field] = draw(st.sampled_from(CODE))
        else:
            tool_input[field] = draw(plausible(field_schema))
    if draw(st.integers(0, 7)) == 0:
        tool_input[draw(st.text(max_size=8))] = draw(junk)  # an extra key
    return tool_input


def fuzz_one_tool(caller: Any, name: str, calls: list[tuple[str, float, bool]]) -> None:
    """Call ``name`` with EXAMPLES_PER_TOOL malformed inputs (the same ones every run)."""

    @settings(
        max_examples=EXAMPLES_PER_TOOL,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(tool_input=tool_inputs(name))
    def one_call(tool_input: object) -> None:
        started = time.perf_counter()
        outcome = caller.call(name, tool_input)
        seconds = time.perf_counter() - started
        assert isinstance(outcome.content, str) and isinstance(outcome.is_error, bool)
        assert seconds < 10, (name, seconds)  # nothing waits for a person or hangs
        assert "Traceback (most recent call last)" not in outcome.content
        calls.append((name, seconds, outcome.is_error))

    one_call()


@pytest.fixture
def caller(tmp_path):
    with in_process(tmp_path) as caller:
        yield caller


def test_the_fuzz_covers_every_tool_group():
    assert {REGISTRY.get(n).group for n in TOOL_NAMES} == {
        "code", "data", "memory", "ui", "schedule", "web", "tools", "skills", "llm",
    }  # fmt: skip


def test_every_tool_answers_malformed_input_and_the_shell_and_store_stay_healthy(caller):
    calls: list[tuple[str, float, bool]] = []
    for name in TOOL_NAMES:
        fuzz_one_tool(caller, name, calls)
    assert {name for name, _, _ in calls} == set(TOOL_NAMES)
    assert len(calls) >= len(TOOL_NAMES) * EXAMPLES_PER_TOOL // 2
    assert any(not is_error for _, _, is_error in calls) and any(is_error for _, _, is_error in calls)

    # The same shell and DuckDB file still work.
    assert caller.value("run_code", {"code": "21 * 2"})["result"] == "42"
    stopped = caller.value("run_code", {"code": "while True: pass", "timeout_s": 0.5})
    assert stopped["error"]["type"] == "TimeoutError"
    assert caller.value("set_state", {"key": "after", "value": [1, "two"]}) == {"ok": True}
    assert caller.value("get_state", {"key": "after"}) == {"value": [1, "two"]}
    assert caller.value("db_schema", {})["tables"]
    if "db_sql" in REGISTRY.tools:
        assert caller.value("db_sql", {"sql": "SELECT 42 AS answer"})["rows"] == [[42]]
    with caller.store.connect() as con:
        assert con.execute("SELECT count(*) FROM sessions").fetchone()[0] >= 1
