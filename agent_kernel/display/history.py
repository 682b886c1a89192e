"""A stored session rendered as Markdown, for ``%agent_history``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from agent_kernel.model.conversation import is_turn_context
from agent_kernel.model.shapes import ContentBlock


class StoredMessage(Protocol):
    """One stored message as the history shows it (the store's rows have these fields)."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> list[ContentBlock]: ...

    @property
    def created_at(self) -> datetime: ...

    @property
    def turn(self) -> int: ...


RESULT_PREVIEW = 300


def render_history(name: str, messages: Sequence[StoredMessage], limit: int | None = None) -> str:
    """The last ``limit`` messages of session ``name`` as Markdown."""
    shown = list(messages)[-limit:] if limit else list(messages)
    if not shown:
        return f"Session **{name}** has no messages yet."
    lines = [f"### Session {name} ({len(messages)} messages, showing {len(shown)})"]
    for message in shown:
        lines.extend(_render(message))
    return "\n\n".join(lines)


def _render(message: StoredMessage) -> list[str]:
    out = []
    stamp = f"{message.created_at:%H:%M:%S}"
    for block in message.content:
        if message.role == "user" and is_turn_context(block):
            continue  # what the notebook added for the model, not the user's words
        if block["type"] == "text" and block.get("text", "").strip():
            who = "You" if message.role == "user" else "Agent"
            out.append(f"**{who}** ({stamp}, turn {message.turn}): {block['text']}")
        elif block["type"] == "tool_use":
            out.append(f"`{block['name']}` {_code(block.get('input'))}")
        elif block["type"] == "tool_result":
            mark = "error" if block.get("is_error") else "result"
            out.append(f"> {mark}: {_preview(block.get('content'))}")
    return out


def _code(value: object) -> str:
    if isinstance(value, dict) and isinstance(value.get("code"), str):
        return f"\n```python\n{value['code']}\n```"
    return f"`{_clip(json.dumps(value, ensure_ascii=False, default=str), RESULT_PREVIEW)}`"


def _preview(content: object) -> str:
    if isinstance(content, list):
        content = " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return _clip(str(content).replace("\n", " "), RESULT_PREVIEW)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
