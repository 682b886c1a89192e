"""Scripted model replies: what the scripted server answers, one reply per request.

Build replies with the helpers::

    say("Done.")                                  # a text answer that ends the turn
    call("run_code", code="x = 1")                # one tool call
    reply(text("Let me look."), tool_use("inspect_namespace", {}))
    reply(thinking("The user wants x."), call_block)   # thinking, streamed with its signature
    fail(529, "overloaded_error")                 # an HTTP error response
    reply(text("Partial"), stream_error="overloaded_error")   # an error event mid-stream

A script item may also be a function of the request body returning a reply, for
answers that depend on what the agent sent (see :mod:`agent_kernel.testing.demo`).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union

SCRIPTED_MODEL_NAME = "scripted-model"
_ids = itertools.count(1)


@dataclass
class Reply:
    """One successful model response (streamed or not)."""

    content: list[dict[str, Any]]
    stop_reason: str | None = None
    usage: dict[str, int] | None = None
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


ScriptItem = Union[Reply, Failure, Callable[[dict[str, Any]], Union[Reply, Failure]]]


def text(value: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": value}


def tool_use(name: str, tool_input: dict[str, Any] | None = None, *, id: str | None = None) -> dict[str, Any]:
    """A tool_use content block (its id is generated unless given)."""
    return {"type": "tool_use", "id": id or f"toolu_scripted_{next(_ids):04d}", "name": name, "input": tool_input or {}}


def thinking(value: str, *, signature: str | None = None) -> dict[str, Any]:
    """A thinking block, streamed as ``thinking_delta`` events then a ``signature_delta``.

    Its signature is :func:`signature_for` its text unless given. The scripted model
    answers 400, as the API does, when a request sends a thinking block back changed.
    """
    return {"type": "thinking", "thinking": value, "signature": signature or signature_for(value)}


def redacted_thinking(data: str | None = None) -> dict[str, Any]:
    """A ``redacted_thinking`` block (encrypted thinking); it must come back unchanged too."""
    return {"type": "redacted_thinking", "data": data or f"scripted-redacted-{next(_ids):04d}"}


def signature_for(value: str) -> str:
    """The signature the scripted model gives a thinking block with text ``value``."""
    digest = hashlib.sha256(b"scripted-thinking\0" + value.encode("utf-8", "surrogatepass")).digest()
    return base64.b64encode(digest).decode("ascii")


def reply(*blocks: dict[str, Any], **options: Any) -> Reply:
    """A response made of ``blocks`` (``text(...)``, ``tool_use(...)``)."""
    return Reply(list(blocks), **options)


def say(value: str, **options: Any) -> Reply:
    """A text answer that ends the turn."""
    return Reply([text(value)], **options)


def call(name: str, /, **tool_input: Any) -> Reply:
    """A response that calls one tool with ``tool_input``."""
    return Reply([tool_use(name, tool_input)])


def fail(status: int, error_type: str, message: str = "scripted failure", **headers: str) -> Failure:
    """An HTTP error response (e.g. ``fail(529, "overloaded_error")``)."""
    return Failure(status, error_type, message, dict(headers))


def estimate_tokens(payload: Any) -> int:
    """A stable, rough token count (about four characters a token)."""
    return max(1, len(json.dumps(payload, sort_keys=True, default=str)) // 4)
