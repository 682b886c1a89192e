"""Scripted model replies: what the scripted server answers, one reply per request.

Build replies with the helpers::

    say("Done.")                                  # a text answer that ends the turn
    call("run_code", code="x = 1")                # one tool call
    reply(text("Let me look."), tool_use("inspect_namespace", {}))
    reply(thinking("The user wants x."), call_block)   # thinking, streamed with its signature
    fail(529, "overloaded_error")                 # an HTTP error response
    reply(text("Partial"), stream_error="overloaded_error")   # an error event mid-stream

The API's server tools (web search and fetch run on its side, inside one response)::

    reply(*web_search("duckdb release", [("https://duckdb.org/news", "News")]),
          cited("DuckDB 2.0 is out.", citation("https://duckdb.org/news", "News", "2.0 released")))
    pause(*web_fetch("https://duckdb.org/docs", "The docs text"))  # stop_reason pause_turn
    reply(*tool_search("schedule a notebook"), tool_use("create_scheduled_task", {...}))

Their usage (``server_tool_use.web_search_requests``) is counted from the blocks.

A script item may also be a function of the request body returning a reply, for
answers that depend on what the agent sent (see :mod:`agent_kernel.testing.demo`).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from agent_kernel.model.shapes import (
    Block,
    RedactedThinkingBlock,
    ServerToolUseBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    WebResultBlock,
)
from agent_kernel.testing.wire import MessagesRequest, ServerToolUsage, Usage

if TYPE_CHECKING:
    from typing_extensions import Unpack

SCRIPTED_MODEL_NAME = "scripted-model"
_ids = itertools.count(1)


@dataclass
class Reply:
    """One successful model response (streamed or not)."""

    content: list[Block]
    stop_reason: str | None = None
    usage: Usage | None = None
    model: str = SCRIPTED_MODEL_NAME
    delay: float = 0.0  # seconds before the response starts
    chunk_delay: float = 0.0  # seconds between streamed deltas
    chunk_size: int = 12  # characters per text delta
    stream_error: str | None = None  # error type sent mid-stream instead of finishing

    def resolved_stop_reason(self) -> str:
        if self.stop_reason:
            return self.stop_reason
        return "tool_use" if any(b["type"] == "tool_use" for b in self.content) else "end_turn"


@dataclass
class Failure:
    """An HTTP error response, as the API sends it."""

    status: int
    type: str
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)


class PausedOptions(TypedDict, total=False):
    """The fields of a :class:`Reply` besides its content and stop reason, as keywords of :func:`pause`."""

    usage: Usage | None
    model: str
    delay: float
    chunk_delay: float
    chunk_size: int
    stream_error: str | None


class ReplyOptions(PausedOptions, total=False):
    """The fields of a :class:`Reply` besides its content, as keywords of the helpers that make one."""

    stop_reason: str | None


ScriptItem = Reply | Failure | Callable[[MessagesRequest], Reply | Failure]


def text(value: str) -> TextBlock:
    """A text content block."""
    return {"type": "text", "text": value}


def tool_use(name: str, tool_input: dict[str, object] | None = None, *, id: str | None = None) -> ToolUseBlock:
    """A tool_use content block (its id is generated unless given)."""
    return {"type": "tool_use", "id": id or f"toolu_scripted_{next(_ids):04d}", "name": name, "input": tool_input or {}}


def thinking(value: str, *, signature: str | None = None) -> ThinkingBlock:
    """A thinking block, streamed as ``thinking_delta`` events then a ``signature_delta``.

    Its signature is :func:`signature_for` its text unless given. The scripted model
    answers 400, as the API does, when a request sends a thinking block back changed.
    """
    return {"type": "thinking", "thinking": value, "signature": signature or signature_for(value)}


def redacted_thinking(data: str | None = None) -> RedactedThinkingBlock:
    """A ``redacted_thinking`` block (encrypted thinking); it must come back unchanged too."""
    return {"type": "redacted_thinking", "data": data or f"scripted-redacted-{next(_ids):04d}"}


def signature_for(value: str) -> str:
    """The signature the scripted model gives a thinking block with text ``value``."""
    digest = hashlib.sha256(b"scripted-thinking\0" + value.encode("utf-8", "surrogatepass")).digest()
    return base64.b64encode(digest).decode("ascii")


def reply(*blocks: Block, **options: Unpack[ReplyOptions]) -> Reply:
    """A response made of ``blocks`` (``text(...)``, ``tool_use(...)``)."""
    return Reply(list(blocks), **options)


def say(value: str, **options: Unpack[ReplyOptions]) -> Reply:
    """A text answer that ends the turn."""
    return Reply([text(value)], **options)


def call(name: str, /, **tool_input: object) -> Reply:
    """A response that calls one tool with ``tool_input``."""
    return Reply([tool_use(name, tool_input)])


def fail(status: int, error_type: str, message: str = "scripted failure", **headers: str) -> Failure:
    """An HTTP error response (e.g. ``fail(529, "overloaded_error")``)."""
    return Failure(status, error_type, message, dict(headers))


def estimate_tokens(payload: object) -> int:
    """A stable, rough token count (about four characters a token)."""
    return max(1, len(json.dumps(payload, sort_keys=True, default=str)) // 4)


# -- the API's server tools ------------------------------------------------------------------


def server_tool_use(name: str, tool_input: dict[str, object], *, id: str | None = None) -> ServerToolUseBlock:
    """A server_tool_use block (a tool the API runs itself: web_search, web_fetch)."""
    return {
        "type": "server_tool_use",
        "id": id or f"srvtoolu_scripted_{next(_ids):04d}",
        "name": name,
        "input": tool_input,
    }


def search_result(url: str, title: str, *, page_age: str | None = None) -> dict[str, object]:
    """One web_search_result (its encrypted_content is a placeholder the API would fill)."""
    block: dict[str, object] = {
        "type": "web_search_result",
        "url": url,
        "title": title,
        "encrypted_content": f"scripted:{url}",
    }
    if page_age:
        block["page_age"] = page_age
    return block


def web_search(
    query: str,
    results: Iterable[tuple[str, str] | dict[str, object]] = (),
    *,
    error: str | None = None,
    id: str | None = None,
) -> list[Block]:
    """A web search as the API returns it: the server_tool_use block and its result block.

    ``results`` are ``(url, title)`` pairs (or :func:`search_result` blocks); ``error`` an
    error code (``max_uses_exceeded``, ``unavailable``...) instead of results.
    """
    use = server_tool_use("web_search", {"query": query}, id=id)
    if error is not None:
        content: object = {"type": "web_search_tool_result_error", "error_code": error}
    else:
        content = [r if isinstance(r, dict) else search_result(*r) for r in results]
    result: WebResultBlock = {"type": "web_search_tool_result", "tool_use_id": use["id"], "content": content}
    return [use, result]


def web_fetch(
    url: str, text: str = "", *, title: str | None = None, error: str | None = None, id: str | None = None
) -> list[Block]:
    """A web fetch as the API returns it: the server_tool_use block and its result block
    (the page as a plain-text document, citable; or an ``error`` code)."""
    use = server_tool_use("web_fetch", {"url": url}, id=id)
    if error is not None:
        content: dict[str, object] = {"type": "web_fetch_tool_result_error", "error_code": error}
    else:
        document: dict[str, object] = {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": text},
            "citations": {"enabled": True},
        }
        if title is not None:
            document["title"] = title
        content = {"type": "web_fetch_result", "url": url, "retrieved_at": "2026-01-01T00:00:00Z", "content": document}
    result: WebResultBlock = {"type": "web_fetch_tool_result", "tool_use_id": use["id"], "content": content}
    return [use, result]


def tool_search(
    query: str, found: Iterable[str] | None = None, *, variant: str = "bm25", id: str | None = None
) -> list[Block]:
    """A tool search as the API returns it: the server_tool_use block and its result block.

    The scripted model works out the result from the request's deferred tools (see
    ``agent_kernel.testing.search``) unless ``found`` names the tools it references.
    ``variant``: ``bm25`` (``query`` in words) or ``regex`` (``query`` a pattern), the
    search tool the request offers.
    """
    use = server_tool_use(f"tool_search_tool_{variant}", {"query": query}, id=id)
    content: dict[str, object] | None = None
    if found is not None:
        references = [{"type": "tool_reference", "tool_name": name} for name in found]
        content = {"type": "tool_search_tool_search_result", "tool_references": references}
    result: WebResultBlock = {"type": "tool_search_tool_result", "tool_use_id": use["id"], "content": content}
    return [use, result]


def citation(url: str, title: str, cited_text: str) -> dict[str, object]:
    """A web search citation (of a result's page)."""
    return {
        "type": "web_search_result_location",
        "url": url,
        "title": title,
        "cited_text": cited_text,
        "encrypted_index": f"scripted:{url}",
    }


def document_citation(cited_text: str, *, title: str | None = None, document_index: int = 0) -> dict[str, object]:
    """A citation of a fetched document (web_fetch with citations on)."""
    block: dict[str, object] = {
        "type": "char_location",
        "cited_text": cited_text,
        "document_index": document_index,
        "start_char_index": 0,
        "end_char_index": len(cited_text),
    }
    if title is not None:
        block["document_title"] = title
    return block


def cited(value: str, *citations: dict[str, object]) -> TextBlock:
    """A text block with its citations (streamed as citations_delta events, as the API does)."""
    return {"type": "text", "text": value, "citations": list(citations)}


def pause(*blocks: Block, **options: Unpack[PausedOptions]) -> Reply:
    """A response the API paused (stop_reason ``pause_turn``): the agent sends it back to go on."""
    return Reply(list(blocks), stop_reason="pause_turn", **options)


def server_tool_counts(content: Iterable[Mapping[str, object]]) -> ServerToolUsage | None:
    """The usage.server_tool_use the API would bill for ``content`` (None when it used none)."""
    names = [b.get("name") for b in content if b.get("type") == "server_tool_use"]
    if not names:
        return None
    return {"web_search_requests": names.count("web_search"), "web_fetch_requests": names.count("web_fetch")}


# How the system prompts of the agent's own summary requests start: a compaction's
# (agent_kernel.turn.budget.SUMMARY_SYSTEM) and a session's for recall
# (agent_kernel.turn.summaries.SESSION_SUMMARY_SYSTEM), as far as the agent itself compares
# them. This package serves the agent without importing its turn; tests/test_docs_drift.py
# holds the two alike.
SUMMARY_SYSTEM_STARTS = (
    "You summarise the earlier part of a conversation between a user and an AI agent ",
    "You write the summary of a finished session between a user and an AI agent worki",
)


def is_summary_request(request: MessagesRequest) -> bool:
    """Whether a Messages request body is one of the agent's summary requests."""
    system = request.get("system")
    return isinstance(system, str) and system.startswith(SUMMARY_SYSTEM_STARTS)


def summary_reply(request: MessagesRequest) -> Reply:
    """The scripted answer to a conversation-summary request: the user's prompts it saw.

    Deterministic, and short whatever it summarises: the previous summary's prompts and
    the new part's, the last 20, each cut at 80 characters.
    """
    text = "".join(
        b.get("text", "")
        for m in request.get("messages", [])
        for b in m.get("content", [])
        if isinstance(b, dict) and b["type"] == "text"
    )
    prompts = [line[len("[user] ") :][:80] for line in text.splitlines() if line.startswith("[user] ")]
    earlier = [line[2:] for line in text.splitlines() if line.startswith("- ")]  # a previous summary's
    kept = (earlier + prompts)[-20:]
    return say("Scripted summary. The user asked, in order:\n" + "\n".join(f"- {p}" for p in kept))


def structured(value: object, **options: Unpack[ReplyOptions]) -> Reply:
    """The answer to a request with a JSON-schema output format: ``value`` as its JSON text."""
    return Reply([text(json.dumps(value))], **options)
