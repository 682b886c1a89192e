"""Prompt-cache breakpoints on a Messages API request.

The API caches prefixes in the order tools → system → messages, at blocks marked with
``cache_control`` (at most four a request). Three marks pay here:

- the last tool: the tool definitions change only with the configuration, so they stay
  cached when the system prompt changes (a memory stored, an instruction edited);
- the system prompt: it changes only when the user changes something;
- the last block of the conversation: the next request (the next step of the turn, or
  the next turn) starts with this whole request and reads it from the cache.

The request's own lists are not changed: marked blocks are copies.
"""

from __future__ import annotations

from typing import cast

from agent_kernel.model.shapes import Block, CacheControl, MessageParam, RequestParams

EPHEMERAL: CacheControl = {"type": "ephemeral"}

# Blocks the API does not let carry cache_control.
_UNMARKABLE = {"thinking", "redacted_thinking"}


def with_breakpoints(params: RequestParams) -> RequestParams:
    """``params`` with ``cache_control`` on the last tool, the system prompt and the last
    markable block of the last message."""
    marked = params.copy()
    tools = params.get("tools")
    if tools:
        stable = [i for i, t in enumerate(tools) if not t.get("defer_loading")]
        if stable:
            listed = list(tools)
            listed[stable[-1]] = {**tools[stable[-1]], "cache_control": EPHEMERAL}
            marked["tools"] = listed
    system = params.get("system")
    if isinstance(system, str) and system:
        marked["system"] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    messages = params.get("messages")
    if messages:
        last = messages[-1]
        content: str | list[Block] = last["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for index in range(len(content) - 1, -1, -1):
            if content[index].get("type") not in _UNMARKABLE:
                content = list(content)
                # Every markable block type takes cache_control; the union does not say so.
                content[index] = cast("Block", {**content[index], "cache_control": EPHEMERAL})
                ended: MessageParam = {**last, "content": content}
                marked["messages"] = [*messages[:-1], ended]
                break
    return marked
