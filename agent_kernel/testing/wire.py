"""The JSON the scripted model reads and writes, as TypedDicts: requests, messages, usage, errors.

A request body is what the SDK sent (``json.loads`` of it, checked by nothing here): the
keys the scripted model reads are typed, every one optional, as a request may leave any
out; the content blocks of its messages and of a reply are :data:`~agent_kernel.model.shapes.Block`.
What the scripted model answers (a message, its usage, an error, a batch) has fixed keys.
JSON it only passes on (a tool's schema, an SSE event's data) is ``Mapping[str, object]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, TypedDict

from agent_kernel.model.shapes import Block, CacheControl, MessageParam, TextBlock

if TYPE_CHECKING:
    from typing_extensions import NotRequired

__all__ = [
    "BatchRequest",
    "BatchResult",
    "BatchStatus",
    "BatchesRequest",
    "ErrorBody",
    "EventData",
    "Message",
    "MessagesRequest",
    "ServerToolUsage",
    "ToolSpec",
    "Usage",
]

EventData = Mapping[str, object]
"""The data of one SSE event: written out as JSON, never read back."""


class ToolSpec(TypedDict, total=False):
    """One entry of a request's ``tools``: a client tool (``name``, ``input_schema``) or a
    server tool (``type``, ``name``); ``defer_loading`` leaves it for a tool search to load."""

    type: str
    name: str
    description: str
    input_schema: Mapping[str, object]
    defer_loading: bool
    cache_control: CacheControl


class MessagesRequest(TypedDict, total=False):
    """A ``POST /v1/messages`` (or ``count_tokens``) body, as far as the scripted model reads it."""

    model: str
    max_tokens: int
    system: str | list[TextBlock]
    messages: list[MessageParam]
    tools: list[ToolSpec]
    stream: bool
    cache_control: CacheControl


class ServerToolUsage(TypedDict):
    """The server tools a response used, as the API bills them."""

    web_search_requests: int
    web_fetch_requests: int


class Usage(TypedDict, total=False):
    """A response's usage: its tokens, the prompt cache's share, the server tools it ran."""

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    server_tool_use: ServerToolUsage


class Message(TypedDict):
    """A Messages API response (what a stream's events add up to)."""

    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[Block]
    stop_reason: str | None
    stop_sequence: None
    usage: Usage


class ErrorDetail(TypedDict):
    """What went wrong: the API's error type and a sentence."""

    type: str
    message: str


class ErrorBody(TypedDict):
    """An HTTP error response's body (and a stream's ``error`` event)."""

    type: Literal["error"]
    error: ErrorDetail


class BatchRequest(TypedDict, total=False):
    """One request of a Message Batch: its id and its Messages request body."""

    custom_id: str
    params: MessagesRequest


class BatchesRequest(TypedDict, total=False):
    """A ``POST /v1/messages/batches`` body."""

    requests: list[BatchRequest]


class BatchOutcome(TypedDict):
    """How one request of a batch ended: ``succeeded`` with its message, ``errored``, ``canceled``."""

    type: Literal["succeeded", "errored", "canceled", "expired"]
    message: NotRequired[Message | None]
    error: NotRequired[ErrorBody]


class BatchResult(TypedDict):
    """One line of a batch's JSONL results."""

    custom_id: str | None
    result: BatchOutcome


class BatchCounts(TypedDict):
    """A batch's requests by where they are."""

    processing: int
    succeeded: int
    errored: int
    canceled: int
    expired: int


class BatchStatus(TypedDict):
    """A Message Batch as ``retrieve`` reports it."""

    id: str
    type: Literal["message_batch"]
    processing_status: Literal["in_progress", "ended"]
    request_counts: BatchCounts
    created_at: str
    expires_at: str
    ended_at: str | None
    cancel_initiated_at: str | None
    archived_at: None
    results_url: str | None
