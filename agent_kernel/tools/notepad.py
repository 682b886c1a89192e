"""The ``skills`` group, part two: the session notepad, shown to you at the start of each turn."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal, TypeVar

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from agent_kernel.store.notepad import NOTEPAD_CHARS, Notepad
from agent_kernel.store.provenance import TAINTED_NOTE, Provenance
from agent_kernel.tools import Tool, current_context
from agent_kernel.tools.data import with_connection

Text = Annotated[str, Field(max_length=NOTEPAD_CHARS)]
T = TypeVar("T")


class NotepadText(TypedDict):
    content: str


class NotepadWritten(TypedDict):
    ok: bool
    note: NotRequired[str]  # written after untrusted content (TAINTED_NOTE)


async def read_notepad() -> NotepadText:
    """Read this session's notepad (your working notes: plan, findings, open items)."""
    content, tainted = await _with_notepad(lambda n: n.read_shown())
    if tainted:
        current_context().note_untrusted([f"notepad of session {current_context().session_id[:8]}"])
    return {"content": content}


async def write_notepad(content: Text) -> NotepadWritten:
    """Replace this session's notepad; it is shown to you at the start of every later turn of the session.

    Args:
        content: The whole new notepad (Markdown).
    """
    writer = current_context().provenance()
    await _with_notepad(lambda n: n.write(content, writer))
    return _written(writer)


async def update_notepad(
    operation: Literal["find_replace", "append", "prepend", "delete"],
    content: Text | None = None,
    find: Text | None = None,
    replace: Text | None = None,
) -> NotepadWritten:
    """Edit the notepad in place.

    Args:
        operation: find_replace (find -> replace), append or prepend content, delete content.
        content: Text.
        find: Exact text to find.
        replace: New text.
    """
    writer = current_context().provenance()
    await _with_notepad(lambda n: n.update(operation, content=content, find=find, replace=replace, writer=writer))
    return _written(writer)


def _written(writer: Provenance) -> NotepadWritten:
    return {"ok": True, "note": TAINTED_NOTE} if writer.untrusted else {"ok": True}


async def _with_notepad(action: Callable[[Notepad], T]) -> T:
    context = current_context()
    return await with_connection(context.store, lambda con: action(Notepad(con, context.session_id)))


TOOLS = [
    Tool(read_notepad, name="read_notepad", group="skills"),
    Tool(write_notepad, name="write_notepad", group="skills", writes=True),
    Tool(update_notepad, name="update_notepad", group="skills", writes=True),
]
