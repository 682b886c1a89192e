"""Usage and cost of every model call: stored, shown in the footer, the magics, and limited."""

from __future__ import annotations

import duckdb
import pytest

from agent_kernel.errors import TurnFailedError
from agent_kernel.magics.agent import AgentMagics
from agent_kernel.magics.data import DataMagics
from agent_kernel.model.usage import CallUsage, InputEstimate
from agent_kernel.testing import reply, say, tool_use

# USD per million tokens for the scripted model in these tests.
PRICE = {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.30}
FIRST = {
    "input_tokens": 200,
    "output_tokens": 50,
    "cache_read_input_tokens": 8_000,
    "cache_creation_input_tokens": 1_000,
}
SECOND = {"input_tokens": 300, "output_tokens": 80, "cache_read_input_tokens": 9_000, "cache_creation_input_tokens": 0}


def cost(usage: dict) -> float:
    return (
        usage["input_tokens"] * 3.0 + usage["output_tokens"] * 15.0
        + usage["cache_read_input_tokens"] * 0.30 + usage["cache_creation_input_tokens"] * 3.75
    ) / 1e6  # fmt: skip


def model_calls(db) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            "SELECT turn, call, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, "
            "cost_usd, duration_ms, request_chars, stop_reason FROM model_calls ORDER BY turn, call"
        ).fetchall()


def test_every_model_call_is_stored_with_its_tokens_and_cost(shell_agent, scripted_model, agent_db):
    shell_agent.agent.config.prices = {"scripted-model": PRICE}
    scripted_model.add(reply(tool_use("run_code", {"code": "x = 1"}), usage=FIRST), say("Done.", usage=SECOND))
    cell = shell_agent.ok("set x")
    rows = model_calls(agent_db)
    assert [r[:7] for r in rows] == [
        (1, 1, "scripted-model", 200, 50, 8_000, 1_000),
        (1, 2, "scripted-model", 300, 80, 9_000, 0),
    ]
    assert [r[7] for r in rows] == [pytest.approx(cost(FIRST)), pytest.approx(cost(SECOND))]
    assert all(r[8] > 0 and r[9] > 1_000 for r in rows)  # duration, request size
    assert [r[10] for r in rows] == ["tool_use", "end_turn"]
    result = shell_agent.agent.last_result
    assert result.cost == pytest.approx(cost(FIRST) + cost(SECOND))
    # The footer: the turn's cost and the share of its input read from the cache.
    footer = cell.lines[-1]
    read, prompt = 8_000 + 9_000, 200 + 8_000 + 1_000 + 300 + 9_000
    assert f"{read / prompt:.0%} of input from cache" in footer
    assert f"${cost(FIRST) + cost(SECOND):.4f}" in footer
    # A second turn: the session's cost adds up.
    scripted_model.add(say("Again.", usage=SECOND))
    footer = shell_agent.ok("again").lines[-1]
    # The session's tokens as its limit counts them: cache reads at a tenth.
    counted = (200 + 50 + 800 + 1_000) + 2 * (300 + 80 + 900)
    assert footer.endswith(
        f": under 1% of its token limit · {counted:,} of 10,000,000 tokens, ${cost(FIRST) + 2 * cost(SECOND):.4f})"
    )
    assert shell_agent.agent.session(create=False).tokens_used == counted
    assert [r[:2] for r in model_calls(agent_db)][-1] == (2, 1)


def test_an_unknown_model_shows_tokens_and_no_cost(shell_agent, scripted_model, agent_db):
    scripted_model.add(say("Hello.", usage=FIRST))
    footer = shell_agent.ok("hi").lines[-1]
    assert "9,250 tokens" in footer and "no price for this model" in footer and "$" not in footer
    [row] = model_calls(agent_db)
    assert row[3:8] == (200, 50, 8_000, 1_000, None)
    magics = AgentMagics(shell_agent.shell, shell_agent.agent.config)
    listed = repr(magics.agent_sessions("--all"))
    assert listed.splitlines()[0].split() == ["session", "notebook", "state", "tokens", "cost", "last", "used"]
    assert "no price" in listed.splitlines()[2]


def test_sessions_and_stats_show_cost_per_session_day_and_model(shell_agent, scripted_model):
    shell_agent.agent.config.prices = {"scripted-model": PRICE}
    scripted_model.add(say("One.", usage=FIRST), say("Two.", usage=SECOND))
    shell_agent.ok("one")
    shell_agent.ok("two")
    magics = AgentMagics(shell_agent.shell, shell_agent.agent.config)
    session_row = repr(magics.agent_sessions("--all")).splitlines()[2]
    assert f"${cost(FIRST) + cost(SECOND):.4f}" in session_row
    stats = repr(DataMagics(shell_agent.shell, magics).agent_stats("1"))
    usage_table = stats.split("Model calls, last day\n", 1)[1].splitlines()
    assert usage_table[0].split() == ["day", "model", "source", "calls", "input", "tokens", "output", "tokens", "cost"]
    [day] = usage_table[2:3]
    read, prompt = 17_000, 9_200 + 9_300
    assert day.split()[1:7] == ["scripted-model", "turn", "2", f"{prompt:,}", f"({read / prompt:.0%}", "from"]
    assert day.split()[-2:] == ["130", f"${cost(FIRST) + cost(SECOND):.4f}"]
    assert usage_table[-1] == f"Total ${cost(FIRST) + cost(SECOND):.4f} (UTC days; priced calls only)."


def test_cost_limit_stops_the_session_before_the_next_call(shell_agent, scripted_model):
    config = shell_agent.agent.config
    config.prices = {"scripted-model": PRICE}
    config.cost_limit = 0.003  # the first call costs $0.00714
    scripted_model.add(
        reply(tool_use("run_code", {"code": "step = 1"}), usage=FIRST),
        reply(tool_use("run_code", {"code": "step = 2"}), usage=FIRST),
    )
    first = shell_agent.execute("work")  # no front end: no Continue
    assert isinstance(first.error, TurnFailedError)
    assert f"reached its cost limit (${cost(FIRST):.4f} of $0.00)" in str(first.error)
    assert len(scripted_model.requests) == 1 and shell_agent.value("step") == 1
    assert shell_agent.agent.session(create=False).state == "cost_limit_reached"
    assert shell_agent.agent.last_result.ending == "cost_limit"
    # A higher limit lets the session go on.
    config.cost_limit = 1.0
    scripted_model.script.clear()
    scripted_model.add(say("Finished.", usage=SECOND))
    assert "Finished." in shell_agent.ok("go on").lines


def test_cost_limit_warns_when_the_model_has_no_price(shell_agent, scripted_model):
    shell_agent.agent.config.cost_limit = 0.001
    scripted_model.add(reply(tool_use("run_code", {"code": "y = 1"}), usage=FIRST), say("ok", usage=FIRST))
    cell = shell_agent.ok("go")  # not stopped: there is no cost to count
    assert any("cost_limit does not count calls to 'scripted-model': it has no price" in line for line in cell.lines)


def test_the_footer_says_how_close_the_session_is_to_the_limit_it_reaches_first(shell_agent, scripted_model):
    config = shell_agent.agent.config
    config.prices = {"scripted-model": PRICE}
    config.token_limit = 50_000
    scripted_model.add(say("Hi.", usage=FIRST))
    assert ": 4% of its token limit · 2,050 of 50,000 tokens" in shell_agent.ok("hi").lines[-1]
    config.cost_limit = 0.05  # the two calls cost $0.0150: 30% of it, more than the 8% of the tokens
    scripted_model.add(say("Again.", usage=FIRST))
    footer = shell_agent.ok("again").lines[-1]
    assert ": 30% of its cost limit · 4,100 of 50,000 tokens, $0.0150)" in footer


def test_cache_reads_count_a_tenth_against_the_token_limit():
    usage = CallUsage.of("scripted-model", FIRST)
    assert usage.total == 9_250
    assert usage.counted == 200 + 1_000 + 50 + 8_000 // 10
    assert CallUsage("m", cache_read=1).counted == 1  # a part of a token counts as one
    assert CallUsage("m", input_tokens=7, output_tokens=3).counted == 10


def test_call_usage_and_the_input_estimate():
    usage = CallUsage.of("claude-sonnet-4-5", {**FIRST, "cache_creation": {"ephemeral_1h_input_tokens": 400}})
    assert (usage.prompt_tokens, usage.total) == (9_200, 9_250)
    expected = (200 * 3 + 50 * 15 + 8_000 * 0.30 + 600 * 3.75 + 400 * 6) / 1e6
    assert usage.cost == pytest.approx(expected)
    assert CallUsage.of("no-such-model", FIRST).cost is None
    estimate = InputEstimate()
    assert estimate.next(40_000) == 0  # nothing reported yet: nothing to hold a call back on
    estimate.reported(9_200, 40_000)
    assert estimate.next(44_000) == 9_200 + 1_000  # four characters a token for what was added
    assert estimate.next(20_000) == 9_200 - 5_000  # a compacted request is smaller


def test_stats_show_inline_completions_as_their_own_source_and_sessions_leave_them_out(
    shell_agent, scripted_model, agent_db
):
    from agent_kernel.store import Store
    from agent_kernel.store.usage import record_completion

    shell_agent.agent.config.prices = {"scripted-model": PRICE}
    scripted_model.add(say("One.", usage=FIRST))
    shell_agent.ok("one")
    completion = CallUsage.of("claude-haiku-4-5", {"input_tokens": 400, "output_tokens": 20})
    with Store(agent_db).connect() as con:  # what the server extension stores for each completion
        record_completion(con, completion, duration_ms=80.0, request_chars=1_600, stop_reason="end_turn")
    magics = AgentMagics(shell_agent.shell, shell_agent.agent.config)
    stats = repr(DataMagics(shell_agent.shell, magics).agent_stats("1"))
    usage_table = stats.split("Model calls, last day\n", 1)[1].splitlines()
    sources = {line.split()[2]: line.split() for line in usage_table[2:-1]}
    assert set(sources) == {"turn", "completion"}
    assert sources["completion"][1:5] == ["claude-haiku-4-5", "completion", "1", "400"]
    assert completion.cost is not None and f"Inline completion: ${completion.cost:.4f}." in usage_table[-1]
    session_row = repr(magics.agent_sessions("--all")).splitlines()[2]
    assert f"${cost(FIRST):.4f}" in session_row  # the session's cost has no completion in it


def test_the_stored_request_size_is_that_of_the_request_sent(shell_agent, scripted_model, agent_db):
    from agent_kernel.model.usage import request_chars
    from agent_kernel.testing import call

    scripted_model.add(call("run_code", code="x = 1"), call("run_code", code="y = x + 1"), say("Done."))
    shell_agent.ok("set x and y")
    stored = [r[9] for r in model_calls(agent_db)]
    # Counted from the budget's running figures, not by sizing each request again, and
    # before the request's cache marks went on (the system prompt then a string): the size
    # of the request sent but for its three marks (~150 characters).
    sent = [request_chars(body) for body in scripted_model.requests[-3:]]
    assert all(0 < s - n <= 200 for n, s in zip(stored, sent)), (stored, sent)
