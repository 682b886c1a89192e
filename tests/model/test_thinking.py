"""Claude's thinking: request parameters, kept in the conversation, shown collapsed."""

from __future__ import annotations

import json

import duckdb
import pytest
from traitlets import TraitError

from agent_kernel.config import AgentKernel
from agent_kernel.errors import ConfigError
from agent_kernel.model.thinking import thinking_params
from agent_kernel.testing import redacted_thinking, reply, say, text, thinking, tool_use
from tests.support.frontend import FrontEnd


def test_levels_are_adaptive_effort_or_a_budget_on_older_models():
    assert thinking_params("claude-sonnet-5-5", "", 8192) == {}
    assert thinking_params("claude-sonnet-5-5", "adaptive", 8192) == {
        "thinking": {"type": "adaptive", "display": "summarized"}
    }
    assert thinking_params("claude-opus-4-6", "high", 8192) == {
        "thinking": {"type": "adaptive", "display": "summarized"},
        "output_config": {"effort": "high"},
    }
    # Claude 4.5 and earlier take only a fixed budget, which must stay under max_tokens.
    older = thinking_params("claude-sonnet-4-5-20250929", "high", 8192)
    assert older == {"thinking": {"type": "enabled", "budget_tokens": 16_000}, "max_tokens": 16_000 + 4096}
    assert thinking_params("claude-haiku-4-5", "low", 8192)["max_tokens"] == 8192
    with pytest.raises(TraitError, match="thinking must be off or one of adaptive, low"):
        AgentKernel(thinking="deep")
    assert AgentKernel(thinking="OFF").thinking == ""


def _stored(db) -> list[tuple[str, list]]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT role, content FROM messages ORDER BY seq").fetchall()
    return [(role, json.loads(content)) for role, content in rows]


def test_a_turn_with_thinking_and_tools_keeps_the_blocks_unchanged(shell_agent, scripted_model, agent_db):
    shell_agent.agent.config.thinking = "medium"
    first = [thinking("The user wants x. I will set it and check."), tool_use("run_code", {"code": "x = 6 * 7"})]
    second = [thinking("x is set; now answer."), redacted_thinking(), text("x is 42.")]
    scripted_model.add(reply(*first), reply(*second))
    cell = shell_agent.ok("set x")
    assert "▸ Thinking (10 words)" in cell.lines and "▸ Thinking (5 words)" in cell.lines
    assert "▸ Thinking (encrypted by the API, not shown)" in cell.lines
    assert "The user wants x" not in cell.shown  # collapsed: the thinking itself is not printed
    opening = scripted_model.requests[0]
    assert opening["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert opening["output_config"] == {"effort": "medium"}
    # The second request carries the first response exactly, thinking and signature included.
    assert scripted_model.requests[1]["messages"][-2] == {"role": "assistant", "content": first}
    assert shell_agent.value("x") == 42
    assert [content for role, content in _stored(agent_db) if role == "assistant"] == [first, second]
    usage = shell_agent.agent.last_result
    assert usage.tokens > 0 and usage.model_calls == 2  # thinking counts as output tokens
    # The next turn sends both responses back unchanged (the scripted model refuses changes).
    scripted_model.add(say("Still 42."))
    assert "Still 42." in shell_agent.ok("and now?", thinking=False).lines
    last = scripted_model.requests[-1]
    assert "thinking" not in last
    assert [m["content"] for m in last["messages"] if m["role"] == "assistant"] == [first, second]


def test_think_flag_overrides_the_setting_for_one_turn(shell_agent, scripted_model):
    scripted_model.add(say("a"), say("b"), say("c"))
    shell_agent.ok("one", thinking=True)
    shell_agent.agent.config.thinking = "low"
    shell_agent.ok("two", thinking="max")
    shell_agent.ok("three")
    sent = [(r.get("thinking", {}).get("type"), r.get("output_config")) for r in scripted_model.requests]
    assert sent == [("adaptive", None), ("adaptive", {"effort": "max"}), ("adaptive", {"effort": "low"})]
    with pytest.raises(ConfigError, match="--think takes one of"):
        shell_agent.agent.run("four", thinking="deep")


def test_thinking_shows_collapsed_and_escaped_in_the_cell(kernel, scripted_model):
    scripted_model.add(reply(thinking("Is <script>alert(1)</script> safe? No."), text("Done.")))
    result = kernel.ok("%agent --think high look", on_message=FrontEnd(kernel).hook)
    [section] = [h for h in result.final_texts("text/html") if "agent-kernel-thinking" in h]
    assert section.startswith('<details class="agent-kernel-thinking"') and "<details open" not in section
    assert "<summary>Thinking (4 words)</summary>" in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section and "<script>" not in section
    assert "▸ Thinking (4 words)" in result.final_texts()
    assert scripted_model.requests[0]["output_config"] == {"effort": "high"}
