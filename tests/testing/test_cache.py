"""The scripted model's prompt-cache accounting: exact figures for known request sequences."""

from __future__ import annotations

import anthropic
import pytest

from agent_kernel.testing import ScriptedModel, say
from agent_kernel.testing.cache import CacheError, PromptCache, block_tokens

BP = {"type": "ephemeral"}


def text(tokens: int, char: str = "a", *, mark: bool = False) -> dict:
    """A text block of exactly ``tokens`` estimated tokens (its canonical JSON is 25 + n chars)."""
    block = {"type": "text", "text": char * (tokens * 4 - 25)}
    if mark:
        block["cache_control"] = BP
    assert block_tokens(block) == tokens
    return block


def user(*blocks: dict) -> dict:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict) -> dict:
    return {"role": "assistant", "content": list(blocks)}


def usage(read: int, write: int, fresh: int) -> dict:
    return {"cache_read_input_tokens": read, "cache_creation_input_tokens": write, "input_tokens": fresh}


def test_a_conversation_reads_what_the_request_before_wrote():
    cache = PromptCache(min_tokens=0)
    system = [text(100, "s", mark=True)]
    first = {"model": "m", "system": system, "messages": [user(text(100, "u", mark=True))]}
    assert cache.usage(first) == usage(0, 200, 0)
    second = {
        "model": "m",
        "system": system,
        "messages": [user(text(100, "u")), assistant(text(100, "r")), user(text(100, "v", mark=True))],
    }
    assert cache.usage(second) == usage(200, 200, 0)
    assert cache.usage(second) == usage(400, 0, 0)  # the same request again: all read
    # A changed system prompt changes every prefix after it: nothing is read.
    changed = dict(second, system=[text(100, "S", mark=True)])
    assert cache.usage(changed) == usage(0, 400, 0)
    # The same conversation under a different model is cached apart.
    assert cache.usage(dict(second, model="other")) == usage(0, 400, 0)


def test_tokens_after_the_last_breakpoint_are_input_and_a_top_level_mark_takes_the_last_block():
    cache = PromptCache(min_tokens=0)
    system = [text(100, "s", mark=True)]
    assert cache.usage({"model": "m", "system": system, "messages": [user(text(50))]}) == usage(0, 100, 50)
    automatic = {
        "model": "m",
        "system": [text(100, "s")],
        "messages": [user(text(50)), assistant(text(10))],
        "cache_control": BP,
    }
    # The system prefix is the same whether or not its block carries the mark.
    assert cache.usage(automatic) == usage(100, 60, 0)
    assert cache.usage(dict(automatic, messages=[*automatic["messages"], user(text(30))])) == usage(160, 30, 0)


def test_a_system_string_and_tools_are_blocks_and_deferred_tools_do_not_count():
    cache = PromptCache(min_tokens=0)
    tool = {"name": "t", "description": "d", "input_schema": {"type": "object"}}
    deferred = {**tool, "name": "later", "defer_loading": True}
    request = {
        "model": "m",
        "tools": [{**tool, "cache_control": BP}, deferred],
        "system": "s" * 75,
        "messages": [user(text(10))],
    }
    tool_tokens = block_tokens(tool)  # ceil(62 / 4)
    assert tool_tokens == 16
    assert cache.usage(request) == usage(0, 16, 25 + 10)  # {"text":"s"*75,"type":"text"}: 100 chars


def test_lookback_reaches_twenty_blocks_before_a_breakpoint():
    cache = PromptCache(min_tokens=0)
    head = [text(10, str(i)) for i in range(3)]
    cache.usage({"model": "m", "messages": [user(*head[:2], {**head[2], "cache_control": BP})]})
    near = [text(7, "n") for _ in range(19)]  # index 22 is the mark: 22 - 20 = 2 is in reach
    assert cache.usage({"model": "m", "messages": [user(*head, *near, text(7, "z", mark=True))]}) == usage(30, 140, 0)
    far = [text(7, "f") for _ in range(20)]  # index 23: 23 - 20 = 3, the written block 2 is out of reach
    assert cache.usage({"model": "m", "messages": [user(*head, *far, text(7, "z", mark=True))]}) == usage(0, 177, 0)


def test_a_prefix_under_the_minimum_is_not_written():
    cache = PromptCache(min_tokens=1024)
    request = {"model": "m", "system": [text(1000, mark=True)], "messages": [user(text(100, mark=True))]}
    assert cache.usage(request) == usage(0, 1100, 0)  # only the longer prefix is written
    assert cache.usage(request) == usage(1100, 0, 0)
    short = {"model": "m", "system": [text(1000, "b", mark=True)], "messages": [user(text(10, mark=True))]}
    assert cache.usage(short) == usage(0, 0, 1010)
    assert cache.usage(short) == usage(0, 0, 1010)


def test_more_than_four_breakpoints_is_refused():
    cache = PromptCache(min_tokens=0)
    request = {"model": "m", "messages": [user(*[text(10, mark=True) for _ in range(4)])], "cache_control": BP}
    with pytest.raises(CacheError, match="A maximum of 4 blocks with cache_control may be provided. Found 5."):
        cache.usage(request)


def test_the_sdk_sees_cache_usage_from_the_scripted_model():
    model = ScriptedModel([say("one"), say("two")], cache_min_tokens=0)
    system = [text(100, "s", mark=True)]

    async def calls(client):
        first = await client.messages.create(model="m", max_tokens=10, system=system, messages=[user(text(10))])
        second = await client.messages.create(model="m", max_tokens=10, system=system, messages=[user(text(20))])
        return first.usage, second.usage

    async def main():
        async with anthropic.AsyncAnthropic(api_key="k", http_client=model.http_client()) as client:
            return await calls(client)

    import asyncio

    first, second = asyncio.run(main())
    assert (first.cache_creation_input_tokens, first.cache_read_input_tokens, first.input_tokens) == (100, 0, 10)
    assert (second.cache_creation_input_tokens, second.cache_read_input_tokens, second.input_tokens) == (0, 100, 20)
    assert model.usages[1]["cache_read_input_tokens"] == 100
