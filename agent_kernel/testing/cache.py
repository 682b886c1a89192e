"""Prompt-cache accounting for the scripted model, following the Messages API's rules.

The API caches *prefixes* of a request, read in the order tools → system → messages,
block by block: each tool definition is a block, each system text block, each content
block of each message (a string system prompt or message content is one text block).

- A block carrying ``cache_control`` is a **breakpoint**; a top-level ``cache_control``
  puts one on the last block. At most :data:`MAX_BREAKPOINTS` (4) per request, or the
  request is refused (400), as the API does.
- Each breakpoint **writes** the prefix ending at its block (when that prefix holds at
  least ``min_tokens``; the API's minimum is 1,024 tokens for Sonnet and Opus models).
- A request **reads** the longest prefix that an earlier request wrote, looked for at
  each breakpoint and at the :data:`LOOKBACK` (20) block boundaries before it.
- Usage: ``cache_read_input_tokens`` is the read prefix; ``cache_creation_input_tokens``
  the blocks after it up to the last breakpoint that writes; ``input_tokens`` the rest.

Entries are kept per model and never expire (a scripted test runs well inside the
API's five minutes). Tools with ``defer_loading`` are not part of the prompt and are
not counted where they are sent: a tool search result that references one loads its
definition, which counts as part of that result block (where the API appends it).
``cache_control`` itself is not part of a block's identity: a block
matches an earlier one when all its other fields are the same.

Token estimate (deterministic, documented so tests can assert exact figures): a block
costs ``ceil(len(canonical) / 4)`` tokens, where ``canonical`` is the block without
``cache_control`` as JSON with sorted keys, ``separators=(",", ":")`` and
``ensure_ascii=False``; a request costs the sum over its blocks.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from agent_kernel.model import images
from agent_kernel.model.tool_search import RESULT_TYPE, referenced
from agent_kernel.testing.wire import MessagesRequest, Usage

__all__ = ["LOOKBACK", "MAX_BREAKPOINTS", "Block", "CacheError", "PromptCache", "block_tokens", "blocks_of"]

MAX_BREAKPOINTS = 4
LOOKBACK = 20


class CacheError(ValueError):
    """A request the API would refuse for its cache_control (too many breakpoints)."""


@dataclass(frozen=True)
class Block:
    """One block of a request in cache order: its tokens, whether it is a breakpoint, and
    the hash of the whole prefix ending with it."""

    tokens: int
    breakpoint: bool
    prefix: str


def canonical(block: Mapping[str, object]) -> str:
    """The block as the cache sees it: without ``cache_control``, as compact sorted JSON."""
    bare = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(bare, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def block_tokens(block: Mapping[str, object]) -> int:
    """The token estimate of one block: ``ceil(len(canonical(block)) / 4)``, an image in it
    counted as the API counts one (about ``width × height / 750``), not by its base64."""
    return _tokens(block, canonical(block))


def _tokens(block: Mapping[str, object], text: str) -> int:
    found = images.blocks_in(block)
    size = len(text) + sum(images.tokens(b) * 4 - len(canonical(b)) for b in found)
    return math.ceil(size / 4)


def blocks_of(request: MessagesRequest) -> list[Block]:
    """The request's blocks in cache order (tools, system, messages), each with its prefix hash."""
    parts: list[tuple[str, Mapping[str, object]]] = []
    deferred: dict[str, str] = {}
    for item in request.get("tools") or []:
        if not item.get("defer_loading"):
            parts.append(("tool", item))
        else:
            deferred[str(item.get("name"))] = canonical(item)
    system = request.get("system")
    if isinstance(system, str) and system:
        parts.append(("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        parts.extend(("system", b) for b in system)
    for message in request.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for index, part in enumerate(content or []):
            # Where a message starts and whose it is are part of the prompt, not of the block.
            parts.append((f"{message.get('role')}:{'start' if index == 0 else 'more'}", part))
    automatic = request.get("cache_control") is not None
    digest = hashlib.sha256(str(request.get("model")).encode())
    blocks = []
    for position, (where, block) in enumerate(parts):
        text = canonical(block)
        if block.get("type") == RESULT_TYPE:  # the definitions it loads, appended where it is
            text += "".join(deferred.get(name, "") for name in referenced([{"content": [block]}]))
        digest.update(f"\x00{where}\x00{len(text)}\x00{text}".encode())
        marked = block.get("cache_control") is not None or (automatic and position == len(parts) - 1)
        blocks.append(Block(_tokens(block, text), marked, digest.copy().hexdigest()))
    return blocks


class PromptCache:
    """What earlier requests wrote; :meth:`usage` accounts one more request against it."""

    def __init__(self, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens
        self.written: set[str] = set()

    def usage(self, request: MessagesRequest) -> Usage:
        """``input_tokens``, ``cache_creation_input_tokens`` and ``cache_read_input_tokens``
        of ``request``; the prefixes it writes are kept for later requests."""
        blocks = blocks_of(request)
        marks = [i for i, b in enumerate(blocks) if b.breakpoint]
        found = _explicit_breakpoints(request) + (request.get("cache_control") is not None)
        if found > MAX_BREAKPOINTS:
            raise CacheError(
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {found}."
            )
        totals = [0]
        for block in blocks:
            totals.append(totals[-1] + block.tokens)  # totals[i]: tokens of the first i blocks
        read = 0  # blocks read from the cache
        for mark in marks:
            for end in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                if blocks[end].prefix in self.written:
                    read = max(read, end + 1)
                    break
        writes = [m for m in marks if totals[m + 1] >= self.min_tokens]
        self.written.update(blocks[m].prefix for m in writes)
        written_to = max([read, *(m + 1 for m in writes)])
        return {
            "input_tokens": totals[-1] - totals[written_to],
            "cache_creation_input_tokens": totals[written_to] - totals[read],
            "cache_read_input_tokens": totals[read],
        }


def _explicit_breakpoints(request: MessagesRequest) -> int:
    """Blocks that carry their own ``cache_control`` (a top-level one takes one more slot)."""
    system = request.get("system")
    found: list[Mapping[str, object]] = [*(request.get("tools") or []), *(system if isinstance(system, list) else [])]
    for message in request.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            found.extend(content)
    return sum(1 for block in found if isinstance(block, dict) and block.get("cache_control") is not None)
