"""Cache-stable requests: breakpoints, a stable prefix across turns, and what the cache reads."""

from __future__ import annotations

import json

from agent_kernel.model.caching import with_breakpoints
from agent_kernel.testing import call, say

BP = {"type": "ephemeral"}


def test_breakpoints_mark_copies_of_the_last_tool_the_system_and_the_last_markable_block():
    tools = [{"name": "a"}, {"name": "b"}, {"name": "c", "defer_loading": True}]
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "thinking", "thinking": "t"}]},
    ]
    params = {"system": "sys", "tools": tools, "messages": messages}
    marked = with_breakpoints(params)
    assert marked["tools"][1] == {"name": "b", "cache_control": BP} and "cache_control" not in marked["tools"][2]
    assert marked["system"] == [{"type": "text", "text": "sys", "cache_control": BP}]
    assert marked["messages"][-1]["content"][0] == {"type": "text", "text": "x", "cache_control": BP}
    assert marked["messages"][0] == {"role": "user", "content": "hi"}
    assert params == {"system": "sys", "tools": tools, "messages": messages}  # nothing changed in place
    assert "cache_control" not in tools[1] and "cache_control" not in messages[1]["content"][0]


def test_system_prompt_and_tools_stay_byte_identical_while_variables_change(shell_agent, scripted_model):
    scripted_model.add(say("one"), say("two"), say("three"))
    shell_agent.code("x = 1")
    shell_agent.ok("first")
    shell_agent.code("x = 2\ny = 'new'")
    shell_agent.ok("second")
    first, second = scripted_model.requests
    assert json.dumps(first["system"]) == json.dumps(second["system"])
    assert json.dumps(first["tools"]) == json.dumps(second["tools"])
    # The second request starts with the whole first conversation, byte for byte.
    sent = first["messages"][0]["content"]
    resent = second["messages"][0]["content"]
    assert [{k: v for k, v in b.items() if k != "cache_control"} for b in sent] == resent
    context = second["messages"][-1]["content"][0]["text"]
    assert "changed since the last list" in context
    assert "`x` (int): 2" in context and "`y` (str)" in context
    # Instructions are part of the system prompt: changing them changes it.
    shell_agent.agent.config.instruction = "Answer in French."
    shell_agent.ok("third")
    third = scripted_model.requests[-1]
    assert third["system"] != second["system"] and "Answer in French." in third["system"][0]["text"]
    assert json.dumps(third["tools"]) == json.dumps(second["tools"])
    assert "Variables in the kernel: unchanged since the last list." in third["messages"][-1]["content"][0]["text"]


def test_twenty_turns_read_nine_tenths_of_their_input_from_the_cache(shell_agent, scripted_model):
    """The user changes variables between turns; every third turn calls tools."""
    for turn in range(1, 21):
        shell_agent.code(f"value_{turn % 4} = {turn}\ntotal = {turn * 10}")
        if turn % 3 == 0:
            scripted_model.add(call("run_code", code=f"step = {turn}"), call("inspect_namespace"), say(f"done {turn}"))
        else:
            scripted_model.add(say(f"Answer {turn}: " + "words " * 30))
        shell_agent.ok(f"turn {turn}: what changed?")
    requests, usages = scripted_model.requests, scripted_model.usages
    assert len(requests) == len(usages) == 20 + 2 * 6
    later = usages[1:]  # turns 2-20: every request after the first
    total = sum(u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"] for u in later)
    read = sum(u["cache_read_input_tokens"] for u in later)
    assert read / total >= 0.9, f"{read:,} of {total:,} input tokens read from the cache"
    # Each turn's first request reads the whole conversation before it.
    firsts = [i for i, r in enumerate(requests) if r["messages"][-1]["content"][-1].get("text", "").startswith("turn ")]
    assert all(usages[i]["cache_read_input_tokens"] > 0 for i in firsts[1:])
