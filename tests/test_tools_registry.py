"""Registry.dispatch: the input cap checked before anything else, and the JSON checks."""

from __future__ import annotations

import json
import time

import pytest

from agent_kernel.tools import INPUT_BYTES, INPUT_DEPTH, input_problem

from .inprocess import in_process


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
