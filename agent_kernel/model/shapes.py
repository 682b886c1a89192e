"""The shapes of what crosses the Messages API boundary: messages, content blocks, tool results.

The SDK's own param types (``anthropic.types.MessageParam``, ``ContentBlockParam``,
``ToolResultBlockParam``) describe the same JSON, as a union of one TypedDict per block
type. The package reads blocks by their ``"type"`` key and passes them on unchanged, so a
block here is a plain mapping; a message and a tool result, whose keys are fixed, are
TypedDicts. At run time these are ordinary dicts (nothing here is checked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypedDict

if TYPE_CHECKING:
    from typing_extensions import NotRequired

Role = Literal["user", "assistant"]

ContentBlock = dict[str, Any]
"""One content block as the API sends and takes it (``text``, ``tool_use``, ``tool_result``,
``thinking``, ``image``, ``server_tool_use``, ...): its ``"type"`` says which."""


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
