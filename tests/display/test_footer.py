"""The footer under a turn: each figure labelled with what it counts, and the session's
figures the sums of its turns'."""

from __future__ import annotations

import re

import duckdb

from agent_kernel.display.footer import TurnFigures, footer_line
from agent_kernel.model.usage import CallUsage
from agent_kernel.testing import reply, say, tool_use

PRICE = {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.30}
CALLS = [
    {"input_tokens": 200, "output_tokens": 50, "cache_read_input_tokens": 8_000, "cache_creation_input_tokens": 1_000},
    {"input_tokens": 300, "output_tokens": 80, "cache_read_input_tokens": 9_000, "cache_creation_input_tokens": 0},
    {"input_tokens": 120, "output_tokens": 900, "cache_read_input_tokens": 9_400, "cache_creation_input_tokens": 7},
]
FOOTER = re.compile(
    r"this turn: (?P<turn>[\d,]+) tokens, \d+% of input from cache · \$(?P<cost>[\d.]+) "
    r"\((?:new )?session 'footer': [^·]+ · (?P<session>[\d,]+) of 10,000,000 tokens, \$(?P<session_cost>[\d.]+)\)$"
)


def number(text: str) -> int:
    return int(text.replace(",", ""))


def test_the_turns_figure_is_labelled_and_the_session_part_says_it_is_the_limits():
    figures = TurnFigures(
        model="claude-x", tool_calls=1, seconds=2.0, tokens=10_199, input_tokens=10_000, cache_read_tokens=9_000,
        cost=0.01, unpriced_calls=0, session="s", session_tokens=4_759, token_limit=10_000_000, session_cost=0.02,
    )  # fmt: skip
    line = footer_line(figures)
    assert "· this turn: 10,199 tokens, 90% of input from cache · $0.0100" in line
    assert line.endswith("(session 's': under 1% of its token limit · 4,759 of 10,000,000 tokens, $0.0200)")


def test_a_sessions_figures_are_the_sums_of_its_turns(shell_agent, scripted_model, agent_db):
    shell_agent.agent.config.prices = {"scripted-model": PRICE}
    scripted_model.add(reply(tool_use("run_code", {"code": "x = 1"}), usage=CALLS[0]), say("Set.", usage=CALLS[1]))
    first = FOOTER.search(shell_agent.ok("set x", session="footer").lines[-1])
    scripted_model.add(say("Again.", usage=CALLS[2]))
    second = FOOTER.search(shell_agent.ok("again", session="footer").lines[-1])
    assert first and second
    usages = [CallUsage.of("scripted-model", call, {"scripted-model": PRICE}) for call in CALLS]
    # Each turn's figure: every token its calls sent and received.
    assert number(first["turn"]) == usages[0].total + usages[1].total
    assert number(second["turn"]) == usages[2].total
    # The session's cost is the sum of its turns' costs; its tokens, the sum of what each
    # call counts against its limit (cache reads at a tenth), as stored with every call.
    assert float(second["session_cost"]) == round(float(first["cost"]) + float(second["cost"]), 4)
    assert number(first["session"]) == usages[0].counted + usages[1].counted
    assert number(second["session"]) == number(first["session"]) + usages[2].counted
    with duckdb.connect(str(agent_db), read_only=True) as con:
        stored = con.execute(
            "SELECT sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens) FROM model_calls"
        ).fetchone()
    assert stored == (number(first["turn"]) + number(second["turn"]),)
    assert shell_agent.agent.session(name="footer", create=False).tokens_used == number(second["session"])
