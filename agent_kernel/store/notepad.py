"""Each session's notepad: one Markdown document the agent keeps while it works.

It is shown to the model at the start of every user message (the per-turn context), so
it never changes the system prompt; its size is bounded because it is resent each turn.
Each write records who wrote it (kind "notepad", name the session id): a notepad written
after untrusted content is shown inside the untrusted envelope, as data. An edit keeps the
taint of the text it edits; a whole new text is judged on its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_kernel.errors import ToolInputError
from agent_kernel.store import provenance
from agent_kernel.store.provenance import Provenance

if TYPE_CHECKING:
    import duckdb

__all__ = ["NOTEPAD_CHARS", "Notepad"]

NOTEPAD_CHARS = 8_000
OPERATIONS = ("find_replace", "append", "prepend", "delete")


class Notepad:
    """The notepad of one session, through one open connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection, session_id: str) -> None:
        self.con = con
        self.session_id = session_id

    def read(self) -> str:
        row = self.con.execute("SELECT content FROM notepads WHERE session_id = ?", [self.session_id]).fetchone()
        return row[0] if row else ""

    def write(self, content: str, writer: Provenance | None = None, *, inherit: bool = False) -> None:
        """Store ``content`` as the whole notepad, written by ``writer`` (the person when not given)."""
        if len(content) > NOTEPAD_CHARS:
            raise ToolInputError(
                f"The notepad holds at most {NOTEPAD_CHARS:,} characters; this would make it "
                f"{len(content):,}. Keep it to what you still need: drop done items, summarise, "
                "or store long material in a skill, memory or table."
            )
        self.con.execute(
            "INSERT OR REPLACE INTO notepads (session_id, content, updated_at) VALUES (?, ?, now() AT TIME ZONE 'UTC')",
            [self.session_id, content],
        )
        provenance.record(self.con, "notepad", self.session_id, writer or Provenance.person(), inherit=inherit)

    def taint(self) -> provenance.Record | None:
        """The notepad's provenance when it is tainted, else None."""
        found = provenance.latest(self.con, "notepad", [self.session_id]).get(self.session_id)
        return found if found is not None and found.tainted else None

    def read_shown(self) -> tuple[str, bool]:
        """The notepad as the model reads it (inside the untrusted envelope when tainted),
        and whether it is tainted."""
        content = self.read()
        taint = self.taint() if content.strip() else None
        if taint is None:
            return content, False
        return provenance.shown(content, taint, f"notepad of session {self.session_id[:8]}"), True

    def update(
        self,
        operation: str,
        *,
        content: str | None,
        find: str | None,
        replace: str | None,
        writer: Provenance | None = None,
    ) -> str:
        """Apply one edit and store the result, which is returned; the notepad's taint carries over."""
        current = self.read()
        if operation == "find_replace":
            if not find:
                raise ToolInputError("find_replace needs find: the exact text to replace.")
            if find not in current:
                raise ToolInputError("find was not found in the notepad; read_notepad shows it.")
            new = current.replace(find, replace if replace is not None else (content or ""), 1)
        elif operation in ("append", "prepend"):
            if not content:
                raise ToolInputError(f"{operation} needs content.")
            joiner = (
                "\n"
                if current and not (current.endswith("\n") if operation == "append" else content.endswith("\n"))
                else ""
            )
            new = current + joiner + content if operation == "append" else content + joiner + current
        elif operation == "delete":
            if not content:
                raise ToolInputError("delete needs content: the exact text to remove.")
            if content not in current:
                raise ToolInputError("That text is not in the notepad; read_notepad shows it.")
            new = current.replace(content, "", 1)
        else:
            raise ToolInputError(f"Unknown operation {operation!r}: one of {', '.join(OPERATIONS)}.")
        self.write(new, writer, inherit=True)
        return new


def turn_section(content: str) -> str:
    """The notepad as the per-turn context shows it ("" when empty)."""
    if not content.strip():
        return ""
    return "Your notepad for this session (read_notepad / update_notepad edit it):\n" + content.strip()
