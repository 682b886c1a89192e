"""The stored system prompt: instructions the agent (and the user) edit, every version kept.

Version 0 is the empty prompt, before anything was stored. Each edit, including a
rollback, adds a version, so nothing is ever lost and history reads top to bottom.

Each version records who wrote it (kind "prompt", name "system" in the provenance
table). A version written after untrusted content is tainted, and so is every edit made
from it; a rollback carries the taint of the version it restores, since that is whose
text becomes current again. A tainted current version is shown to the model as data.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from agent_kernel.errors import ToolInputError
from agent_kernel.store import provenance
from agent_kernel.store.provenance import Provenance

if TYPE_CHECKING:
    import duckdb

OPERATIONS = ("replace", "find_replace", "append", "prepend", "delete")
INSTRUCTIONS_CHARS = 20_000  # the longest the stored instructions may be: they are in every system prompt


@dataclass(frozen=True)
class PromptVersion:
    """One stored version of the system prompt."""

    version: int
    prompt: str
    operation: str
    author: str
    created_at: datetime | None


EMPTY = PromptVersion(0, "", "initial", "agent-kernel", None)


class SystemPrompts:
    """``system_prompt_versions`` through one open connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def current(self) -> PromptVersion:
        row = self.con.execute(
            "SELECT version, prompt, operation, author, created_at FROM system_prompt_versions "
            "ORDER BY version DESC LIMIT 1"
        ).fetchone()
        return PromptVersion(*row) if row else EMPTY

    def get(self, version: int) -> PromptVersion | None:
        if version == 0:
            return EMPTY
        row = self.con.execute(
            "SELECT version, prompt, operation, author, created_at FROM system_prompt_versions WHERE version = ?",
            [version],
        ).fetchone()
        return PromptVersion(*row) if row else None

    def history(self) -> list[PromptVersion]:
        """Every version, newest first."""
        rows = self.con.execute(
            "SELECT version, prompt, operation, author, created_at FROM system_prompt_versions ORDER BY version DESC"
        ).fetchall()
        return [PromptVersion(*row) for row in rows]

    def save(
        self,
        prompt: str,
        *,
        operation: str,
        author: str,
        session_id: str | None = None,
        writer: Provenance | None = None,
        inherit: bool = False,
    ) -> PromptVersion:
        """Store ``prompt`` as the next version (unless it is the current text already).

        ``writer`` is who wrote it (the person when not given); ``inherit``: the text was
        made from the current version (an edit), so that version's taint carries over.
        Refuses (:class:`ToolInputError`) a text over :data:`INSTRUCTIONS_CHARS`.
        """
        if len(prompt) > INSTRUCTIONS_CHARS:
            raise ToolInputError(
                f"Not saved: the instructions would be {len(prompt):,} characters, over their cap of "
                f"{INSTRUCTIONS_CHARS:,} (they are part of every system prompt). Keep them to lasting "
                "guidance: shorten or delete parts first, and keep reference material in a memory "
                "summary or a table instead."
            )
        current = self.current()
        if prompt == current.prompt:
            return current
        self.con.execute(
            "INSERT INTO system_prompt_versions (version, prompt, operation, author, session_id) "
            "VALUES (?, ?, ?, ?, ?)",
            [current.version + 1, prompt, operation, author, session_id],
        )
        saved = self.current()
        provenance.record(
            self.con, "prompt", "system", writer or Provenance.person(), version=saved.version,
            inherit=inherit and bool(current.version),
        )  # fmt: skip
        return saved

    def taint(self, version: int | None = None) -> provenance.Record | None:
        """The provenance of ``version`` (default the current one) when it is tainted, else None."""
        chosen = self.current().version if version is None else version
        if chosen == 0:
            return None
        found = provenance.of_version(self.con, "prompt", "system", chosen)
        return found if found is not None and found.tainted else None

    def rollback(self, version: int, *, author: str) -> PromptVersion:
        """Make ``version``'s text current again, as a new version."""
        old = self.get(version)
        if old is None:
            latest = self.current().version
            raise ToolInputError(f"There is no version {version} of the system prompt (versions 0 to {latest}).")
        restored = self.taint(version)
        writer = restored.provenance() if restored is not None else Provenance.person()
        return self.save(old.prompt, operation=f"rollback to {version}", author=author, writer=writer)


def edit(
    prompt: str,
    operation: str,
    *,
    content: str | None = None,
    find: str | None = None,
    replace: str | None = None,
    replace_all: bool = False,
) -> str:
    """``prompt`` after one of the five edit operations; a clear error when it cannot apply."""
    if operation == "find_replace":
        if not find:
            raise ToolInputError("find_replace needs find (the exact text to look for) and replace.")
        if replace is None:
            raise ToolInputError('find_replace needs replace (the new text; "" removes it).')
        if find not in prompt:
            raise ToolInputError(f"{find!r} is not in the system prompt; read_system_prompt shows its exact text.")
        return prompt.replace(find, replace) if replace_all else prompt.replace(find, replace, 1)
    if content is None:
        raise ToolInputError(f"{operation} needs content.")
    if operation == "replace":
        return content
    if operation == "append":
        return f"{prompt.rstrip()}\n{content}" if prompt.strip() else content
    if operation == "prepend":
        return f"{content}\n{prompt.lstrip()}" if prompt.strip() else content
    if operation == "delete":
        if not content or content not in prompt:
            raise ToolInputError(f"{content!r} is not in the system prompt; read_system_prompt shows its exact text.")
        return _tidy(prompt.replace(content, "", 1))
    raise ToolInputError(f"Unknown operation {operation!r}: use one of {', '.join(OPERATIONS)}.")


def _tidy(text: str) -> str:
    """Collapse the blank lines a deletion leaves behind."""
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.strip("\n")
