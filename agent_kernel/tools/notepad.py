"""The ``skills`` group, part two: the session notepad, shown to you at the start of each turn."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from ..store.notepad import NOTEPAD_CHARS, Notepad
from . import Tool, current_context
from .data import with_connection

Text = Annotated[str, Field(max_length=NOTEPAD_CHARS)]


async def read_notepad() -> dict[str, Any]:
    """Read this session's notepad (your working notes: plan, findings, open items)."""
    return {"content": await _with_notepad(lambda n: n.read())}


async def write_notepad(content: Text) -> dict[str, Any]:
    """Replace this session's notepad; it is shown to you at the start of every later turn of the session.

    Args:
        content: The whole new notepad (Markdown).
    """
    await _with_notepad(lambda n: n.write(content))
    return {"ok": True}


async def update_notepad(
    operation: Literal["find_replace", "append", "prepend", "delete"],
    content: Text | None = None,
    find: Text | None = None,
    replace: Text | None = None,
) -> dict[str, Any]:
    """Edit the notepad in place.

    Args:
        operation: find_replace (find -> replace), append or prepend content, delete content.
        content: Text.
        find: Exact text to find.
        replace: New text.
    """
    await _with_notepad(lambda n: n.update(operation, content=content, find=find, replace=replace))
    return {"ok": True}


async def _with_notepad(action: Any) -> Any:
    context = current_context()
    return await with_connection(context.store, lambda con: action(Notepad(con, context.session_id)))


TOOLS = [
    Tool(read_notepad, name="read_notepad", group="skills"),
    Tool(write_notepad, name="write_notepad", group="skills", writes=True),
    Tool(update_notepad, name="update_notepad", group="skills", writes=True),
]
