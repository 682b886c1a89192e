"""What a person manages of an agent's store between turns: its sessions (list, rename,
archive, delete, read), its audit trail, its stored instructions, its skills and what it
kept after reading untrusted content.

The magics (``%agent_sessions``, ``%agent_history``, ``%agent_stats``, ``%agent_failures``,
``%agent_prompt``, ``%agent_skills``, ``%agent_tainted``) parse, call these and render;
each call opens the store once. A
mistake (a session that does not exist, a name that is taken) raises an
:class:`~agent_kernel.errors.AgentKernelError` whose message the magic shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_kernel.errors import SessionError
from agent_kernel.store import audit, provenance, retention, usage
from agent_kernel.store.prompts import SystemPrompts
from agent_kernel.store.sessions import Sessions
from agent_kernel.store.skills import Skills, skills_folder
from agent_kernel.store.subsessions import tree_order
from agent_kernel.store.usage import sessions_cost

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from pathlib import Path

    import duckdb

    from agent_kernel.authority import PersonEvent
    from agent_kernel.store import Store
    from agent_kernel.store.prompts import PromptVersion
    from agent_kernel.store.sessions import Session, StoredMessage
    from agent_kernel.store.skills import Skill

__all__ = ["Admin", "SessionListing", "StoredRows"]


@dataclass(frozen=True)
class SessionListing:
    """Sessions as ``%agent_sessions`` lists them: sub-sessions under their parent (with their
    depth), each one's (cost of priced calls, unpriced calls), and the current session."""

    sessions: list[tuple[Session, int]]
    costs: dict[str, tuple[float, int]]
    current: str | None


@dataclass(frozen=True)
class StoredRows:
    """A session about to be deleted and how many rows of each kind it has."""

    session: Session
    rows: dict[str, int]


class Admin:
    """The store side of the magics that manage what an agent keeps, for one agent."""

    def __init__(self, store: Callable[[], Store], notebook: Callable[[], str], current: Callable[[], str | None]):
        self._store = store  # the agent's store, as it is now (db_path may change)
        self._notebook = notebook
        self._current = current

    def _connect(self, *, read_only: bool = False) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        return self._store().connect(read_only=read_only)

    # -- sessions ----------------------------------------------------------------------------

    def listing(self, *, every_notebook: bool = False) -> SessionListing:
        """This notebook's sessions (or every notebook's), sub-sessions under their parent."""
        notebook = None if every_notebook else self._notebook()
        with self._connect() as con:
            found = Sessions(con).list(notebook)
            costs = sessions_cost(con, [s.id for s in found])
        return SessionListing(list(tree_order(found)), costs, self._current())

    def rename(self, old: str, new: str) -> None:
        """Rename session ``old`` to ``new``."""
        if not new.strip():
            raise SessionError("The new session name is empty.")
        with self._connect() as con:
            sessions = Sessions(con)
            sessions.rename(_existing(sessions, old).id, new)

    def archive(self, name: str) -> None:
        """Archive session ``name`` (state completed: a plain ``%agent`` moves on from it)."""
        with self._connect() as con:
            sessions = Sessions(con)
            sessions.set_state(_existing(sessions, name).id, "completed")

    def stored_rows(self, name: str) -> StoredRows:
        """Session ``name`` and what deleting it would delete."""
        with self._connect() as con:
            sessions = Sessions(con)
            session = _existing(sessions, name)
            return StoredRows(session, sessions.stored_rows(session.id))

    def delete(self, found: StoredRows) -> None:
        """Delete the session :meth:`stored_rows` found, unless its name now means another one."""
        name = found.session.name
        with self._connect() as con:
            sessions = Sessions(con)
            current = sessions.by_name(name)
            if current is None or current.id != found.session.id:
                raise SessionError(f"Session {name!r} changed meanwhile; nothing was deleted.")
            sessions.delete(found.session.id)

    def messages(self, session: Session) -> list[StoredMessage]:
        """The stored messages of ``session``."""
        with self._connect() as con:
            return Sessions(con).messages(session.id)

    # -- the audit trail ---------------------------------------------------------------------

    def stats(self, days: int) -> tuple[audit.Stats, list[usage.DayUsage]]:
        """The code runs and tool calls of the last ``days`` days, and model usage per day."""
        with self._connect() as con:
            return audit.stats(con, days), usage.daily(con, days)

    def store_size(self) -> retention.SizeLine:
        """The store's size on disk and its growth over the last week (``%agent_stats``'s last line)."""
        return retention.size_line(self._store())

    def failures(self, n: int) -> list[audit.Failure]:
        """The last ``n`` failed code runs, newest first."""
        with self._connect() as con:
            return audit.failures(con, n)

    # -- the stored instructions -------------------------------------------------------------

    def save_instructions(self, text: str, *, clear: bool = False) -> PromptVersion:
        """Store ``text`` as the new version of the stored instructions (blank with ``clear``)."""
        with self._connect() as con:
            return SystemPrompts(con).save(text, operation="clear" if clear else "replace", author="user")

    def restore_instructions(self, version: int) -> PromptVersion:
        """Make ``version`` current again, as a new version."""
        with self._connect() as con:
            return SystemPrompts(con).rollback(version, author="user")

    def instruction_versions(self) -> list[PromptVersion]:
        """Every version of the stored instructions."""
        with self._connect() as con:
            return SystemPrompts(con).history()

    def instructions(self) -> tuple[PromptVersion, bool]:
        """The current version of the stored instructions and whether it is tainted."""
        with self._connect() as con:
            prompts = SystemPrompts(con)
            return prompts.current(), prompts.taint() is not None

    # -- skills and what is tainted ----------------------------------------------------------

    def skills(self, skills_dir: str) -> tuple[Path, list[Skill]]:
        """The skills folder ``skills_dir`` names, and every skill (stored, or in the folder)."""
        folder = skills_folder(skills_dir)
        with self._connect() as con:
            return folder, Skills(con, folder).all()

    def tainted(self) -> list[provenance.Record]:
        """What was kept after the agent read untrusted content, not cleared yet."""
        with self._connect() as con:
            return provenance.tainted(con)

    def clear_taint(self, kind: str | None = None, name: str | None = None, *, by: PersonEvent) -> int:
        """Trust one item (``kind``, ``name``) as the person's own, or every one (neither given),
        as the person's event ``by`` asked; how many were cleared."""
        with self._connect() as con:
            return provenance.clear(con, kind, name, by=by)


def _existing(sessions: Sessions, name: str) -> Session:
    found = sessions.by_name(name)
    if found is None:
        raise SessionError(f"No session named {name!r}; %agent_sessions --all lists them.")
    return found
