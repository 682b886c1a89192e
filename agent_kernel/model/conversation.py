"""Turning stored messages into a valid Messages API conversation.

The API requires that every assistant ``tool_use`` is answered by a ``tool_result`` in the
next user message, and it is simplest to send roles strictly alternating. A kernel that
died mid-tool, or a turn cut off by a token limit, can leave the stored history short of
that, so the repair happens here, on every load, rather than being trusted to every writer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from agent_kernel.model.shapes import ContentBlock, MessageParam, Role, ToolUseBlock

if TYPE_CHECKING:
    from pydantic import BaseModel

# What the turn hands over and gets back: a role and its text or content blocks.
Message = MessageParam

# A streamed tool input longer than this is not kept: the stored and re-sent conversation
# holds {OVERSIZED_INPUT: its size} instead, and the tool call is refused for its size.
KEPT_INPUT_CHARS = 2_000_000
OVERSIZED_INPUT = "oversized_input_bytes"
INTERRUPTED_RESULT = "The tool call was interrupted before it finished; it produced no result."


def tool_uses(content: list[ContentBlock]) -> list[ToolUseBlock]:
    """The ``tool_use`` blocks of ``content`` (as the API sends them: an id, a name, an input)."""
    return [cast("ToolUseBlock", block) for block in content if block.get("type") == "tool_use"]


def from_api(blocks: Iterable[BaseModel]) -> list[ContentBlock]:
    """A reply's content blocks (the SDK's models) as the JSON the conversation stores and
    sends back. What the API sends is one of the shapes of :data:`ContentBlock` by its
    contract; nothing here checks it."""
    dumped: list[object] = [block.model_dump(mode="json", exclude_none=True) for block in blocks]
    return [cast("ContentBlock", block) for block in dumped]


def tool_result(tool_use_id: str, payload: str, *, is_error: bool = False) -> ContentBlock:
    """The ``tool_result`` answering ``tool_use_id`` with ``payload``; ``is_error`` only when set."""
    if is_error:
        return {"type": "tool_result", "tool_use_id": tool_use_id, "content": payload, "is_error": True}
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": payload}


def as_blocks(content: str | list[ContentBlock]) -> list[ContentBlock]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def repair(messages: list[Message]) -> list[Message]:
    """A valid conversation from ``messages``: results for dangling tool calls, merged roles.

    - every ``tool_use`` gets a ``tool_result`` (an "interrupted" error when none was stored);
    - ``tool_result`` blocks that answer nothing are dropped;
    - consecutive messages of the same role are merged, tool results first;
    - a conversation never starts with an assistant message;
    - a ``server_tool_use`` whose result never came (a paused turn that was stopped) is dropped.
    """
    return Repair().extend(messages).messages()


@dataclass(frozen=True)
class Repair:
    """:func:`repair` part way through a conversation: what the messages so far became,
    and the tool calls the next message must answer. Extending it with later messages
    gives what repairing the whole conversation gives, without going over the earlier
    messages again (a long session's turn repairs only what it adds).

    A message in ``fixed`` is never changed in place: the last one, when the next message
    merges into it, is replaced by a new one.
    """

    fixed: tuple[Message, ...] = ()
    pending: tuple[str, ...] = ()  # tool_use ids the next user message must answer

    def extend(self, messages: Iterable[Message]) -> Repair:
        """The repair of the conversation so far followed by ``messages``."""
        fixed = list(self.fixed)
        pending = list(self.pending)
        for message in messages:
            role = message["role"]
            blocks = as_blocks(message["content"])
            if role == "assistant":
                if pending:
                    fixed.append(_user([_interrupted(i) for i in pending]))
                    pending = []
                if not fixed:
                    continue
                _append(fixed, "assistant", [b for b in _answered_server_tools(blocks) if not _empty_text(b)])
                pending = [b["id"] for b in tool_uses(blocks)]
            else:
                answered = [b for b in blocks if b.get("type") == "tool_result"]
                others = [b for b in blocks if b.get("type") != "tool_result" and not _empty_text(b)]
                results = [b for b in answered if b.get("tool_use_id") in pending]
                answered_ids = {str(b.get("tool_use_id")) for b in results}
                results += [_interrupted(i) for i in pending if i not in answered_ids]
                pending = []
                _append(fixed, "user", results + others)
        return Repair(tuple(fixed), tuple(pending))

    def messages(self) -> list[Message]:
        """The valid conversation: ``fixed``, and results for the calls still pending.

        No message is empty (the API rejects one): :func:`_append` adds none.
        """
        if self.pending:
            return [*self.fixed, _user([_interrupted(i) for i in self.pending])]
        return list(self.fixed)


def _append(fixed: list[Message], role: Role, blocks: list[ContentBlock]) -> None:
    if not blocks:
        return
    if fixed and fixed[-1]["role"] == role:
        previous = as_blocks(fixed[-1]["content"])
        if role == "user":
            # Tool results must come first in a user message.
            results = [b for b in previous + blocks if b.get("type") == "tool_result"]
            rest = [b for b in previous + blocks if b.get("type") != "tool_result"]
            fixed[-1] = _user(results + rest)
        else:
            fixed[-1] = {"role": role, "content": previous + blocks}
    else:
        fixed.append({"role": role, "content": blocks})


def _answered_server_tools(blocks: list[ContentBlock]) -> list[ContentBlock]:
    """``blocks`` without the server tool calls (web search, fetch) no result block answers:
    the API runs them inside its response, so an answer can only be in the same message."""
    answered = {b.get("tool_use_id") for b in blocks if str(b.get("type", "")).endswith("_tool_result")}
    return [b for b in blocks if b.get("type") != "server_tool_use" or b.get("id") in answered]


def _user(blocks: list[ContentBlock]) -> Message:
    return {"role": "user", "content": blocks}


def _interrupted(tool_use_id: str) -> ContentBlock:
    return tool_result(tool_use_id, INTERRUPTED_RESULT, is_error=True)


def _empty_text(block: ContentBlock) -> bool:
    return block.get("type") == "text" and not str(block.get("text", "")).strip()


# -- the per-turn context block that leads a user message (see prompt.turn_context) --------

CONTEXT_START = "<turn-context>\n"
CONTEXT_END = "\n</turn-context>"


def is_turn_context(block: Mapping[str, object]) -> bool:
    """Whether ``block`` is a turn-context block (:func:`agent_kernel.turn.prompt.turn_context`) (not words the user wrote).

    It takes any mapping: the store's readers pass blocks decoded from JSON.
    """
    return block.get("type") == "text" and str(block.get("text", "")).startswith(CONTEXT_START)


def context_texts(messages: Iterable[Message]) -> list[str]:
    """The texts of the turn-context blocks in ``messages``, oldest first."""
    found: list[str] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            found.extend(str(b.get("text", "")) for b in content if is_turn_context(b))
    return found
