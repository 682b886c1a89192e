"""The shapes of what crosses the Messages API boundary: messages, content blocks, tool results.

The SDK's own param types (``anthropic.types.MessageParam``, ``ContentBlockParam``,
``ToolResultBlockParam``) describe the same JSON, as a union of one TypedDict per block
type. The package does the same with its own: a content block (:data:`ContentBlock`) is
one TypedDict per type it reads, and :class:`OtherBlock` for the types it passes on
unchanged; code narrows a block by testing ``block["type"]``. A message and a tool result,
whose keys are fixed, are TypedDicts, and so is a request (:class:`RequestParams`), from
the turn or ``llm`` through the budget and the cache marks to the model client. At run time
these are ordinary dicts (nothing here is checked); the model client fills a block from
stream deltas as a plain dict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, TypedDict

from agent_kernel.model.thinking import ThinkingParams

if TYPE_CHECKING:
    from typing_extensions import NotRequired

Role = Literal["user", "assistant"]


class MessageParam(TypedDict):
    """One message of a conversation, as stored and as sent."""

    role: Role
    content: str | list[ContentBlock]


class ToolResultBlock(TypedDict):
    """The answer to one ``tool_use``: the tool's text (or blocks), an error when ``is_error``."""

    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[ContentBlock]
    is_error: NotRequired[bool]


# -- the content blocks, one TypedDict per type ---------------------------------------------
# What the loop reads of a block, by its "type". A block of a type not named here (the API
# adds some) is an OtherBlock: the package passes it on unchanged.


class CacheControl(TypedDict):
    """A cache breakpoint on a block (see :mod:`agent_kernel.model.caching`)."""

    type: Literal["ephemeral"]
    ttl: NotRequired[Literal["5m", "1h"]]


class Base64Source(TypedDict):
    """An image's bytes, base64-encoded."""

    type: Literal["base64"]
    media_type: str
    data: str


class UrlSource(TypedDict):
    """An image the API fetches from a URL."""

    type: Literal["url"]
    url: str


class TextBlock(TypedDict):
    """Text the model wrote, or the person's prompt; ``citations`` when it cites a page."""

    type: Literal["text"]
    text: str
    citations: NotRequired[list[dict[str, object]]]
    cache_control: NotRequired[CacheControl]


class ToolUseBlock(TypedDict):
    """A call of one of our tools."""

    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, object]
    caller: NotRequired[dict[str, object]]


class ImageBlock(TypedDict):
    """An image the person attached, or a tool returned (base64 or a URL source)."""

    type: Literal["image"]
    source: Base64Source | UrlSource
    cache_control: NotRequired[CacheControl]


class ThinkingBlock(TypedDict):
    """Claude's thinking, sent back unchanged with its signature."""

    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingBlock(TypedDict):
    """Thinking the API returns encrypted, sent back unchanged."""

    type: Literal["redacted_thinking"]
    data: str


class ServerToolUseBlock(TypedDict):
    """A call of a tool the API runs itself (web search, web fetch, tool search)."""

    type: Literal["server_tool_use"]
    id: str
    name: str
    input: dict[str, object]


class WebResultBlock(TypedDict):
    """What a server tool found: ``web_search_tool_result``, ``web_fetch_tool_result``,
    ``tool_search_tool_result``; ``content`` is its results, or an error object."""

    type: Literal["web_search_tool_result", "web_fetch_tool_result", "tool_search_tool_result"]
    tool_use_id: str
    content: object


class CompactionBlock(TypedDict):
    """The API's own summary of the earlier conversation (``compaction = "server"``)."""

    type: Literal["compaction"]
    content: NotRequired[str | None]
    encrypted_content: NotRequired[str]


class OtherBlock(TypedDict):
    """A block of a type the package does not read (passed on as it came).

    Its ``type`` names the API's other block types, so that a test of ``block["type"]``
    narrows a :data:`Block` to one shape; nothing checks it at run time, and a block of a
    type added later passes through the same way.
    """

    type: Literal[
        "document",
        "search_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "container_upload",
        "mcp_tool_use",
        "mcp_tool_result",
    ]


Block = (
    TextBlock
    | ToolUseBlock
    | ToolResultBlock
    | ImageBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ServerToolUseBlock
    | WebResultBlock
    | CompactionBlock
    | OtherBlock
)
"""One content block, typed by its ``"type"`` key."""

ContentBlock = Block
"""One content block as the API sends and takes it (``text``, ``tool_use``, ``tool_result``,
``thinking``, ``image``, ``server_tool_use``, ...): its ``"type"`` says which shape it has."""


class RequestParams(ThinkingParams, total=False):
    """A Messages API request as the package builds it, what the model client scrubs and the
    SDK is given as keywords: the thinking parameters, and the prompt. Tool definitions and
    the server's context management pass through as they were made."""

    model: str
    system: str | list[TextBlock]
    messages: list[MessageParam]
    tools: Sequence[Mapping[str, object]]
    betas: list[str]
    context_management: Mapping[str, object]
