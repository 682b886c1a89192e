"""What a turn starts from: the session it continues, what it reads of that session before
its first model call, and the tools it offers.

An :class:`~agent_kernel.turn.agent.Agent` keeps one :class:`Starts`. It resolves the
session a request names (``--new``, ``--session``, else the notebook's), reads the stored
conversation, the prompt's stored sections, the session's cost and summaries in one
connection (:class:`TurnStart`), and keeps that for the next turn, which uses it without
opening the file while nobody else changed it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from agent_kernel.config import TOOL_GROUPS, AgentKernel
from agent_kernel.errors import ConfigError, SessionError
from agent_kernel.kernel import channel
from agent_kernel.model.conversation import Message, Repair
from agent_kernel.model.usage import InputEstimate
from agent_kernel.store import Store, compactions
from agent_kernel.store.compactions import Compaction, merged
from agent_kernel.store.notepad import Notepad
from agent_kernel.store.sessions import Journal, Session, Sessions
from agent_kernel.store.skills import skills_folder
from agent_kernel.store.usage import SessionUsage, session_usage
from agent_kernel.tools import Registry, Tool
from agent_kernel.tools.agent_tools import sync
from agent_kernel.tools.browser_driver import DRIVER
from agent_kernel.turn import summaries
from agent_kernel.turn.loaded import LoadedConversation
from agent_kernel.turn.prompt import stored_sections
from agent_kernel.turn.summaries import RecallStart

if TYPE_CHECKING:
    from agent_kernel.turn.loop import TurnResult
    from agent_kernel.turn.request import TurnRequest

__all__ = ["Resolved", "Starts", "TurnStart", "skills_folder_state"]


@dataclass(frozen=True)
class Resolved:
    """The session a turn uses, whether it was started for it, and where an earlier
    session of its name went."""

    session: Session | None
    created: bool = False
    kept_as: str | None = None


@dataclass(frozen=True)
class TurnStart:
    """What a turn reads from the store before it starts: its session, the stored
    conversation, the prompt's stored sections. Kept for the next turn, which uses it
    without opening the file while :meth:`Store.unchanged_since` says ``changes`` holds
    (the turn's own writes, its messages and compactions, are mirrored into it)."""

    changes: int
    resolved: Resolved
    session: Session
    conversation: LoadedConversation  # the stored messages, repaired (see loaded.py)
    last_turn: int
    notebook: str
    sections_key: tuple[str, frozenset[str]]
    sections: list[tuple[str, str]]
    compactions: tuple[Compaction, ...]  # the session's stored context summaries
    usage: SessionUsage  # its cost so far and the size of its last request
    notepad: str  # the session's notepad ("" unless the skills group is on)
    recall: RecallStart  # summaries due, the previous session (see session_summary.py)
    ended: float = 0.0  # time.monotonic() when the turn that last used it ended (0: none did)
    skills_folder: tuple[object, ...] = ()  # the skills folder as read (see skills_folder_state)

    def history(self) -> Repair:
        """The stored conversation, repaired, for a turn to continue (what its requests
        may send is copied for it: the turn may change what it is given)."""
        return self.conversation.for_turn(list(self.compactions))

    def after(self, journal: Journal, estimate: InputEstimate, result: TurnResult, made: list[Compaction]) -> TurnStart:
        """This start as the next turn finds it: the session with what ``journal`` recorded,
        the compactions ``made`` during the turn (saved as mirrored writes), the cost and
        last request size the turn's calls added."""
        # As stored: the JSON the journal writes, decoded (nothing shared with the turn).
        said: list[Message] = [
            {"role": role, "content": json.loads(json.dumps(content))} for role, content in journal.recorded
        ]

        session = journal.applied_to(self.session)
        measured = estimate.tokens is not None
        usage = SessionUsage(
            cost=self.usage.cost + (result.cost or 0.0),
            unpriced=self.usage.unpriced + result.unpriced_calls,
            last_prompt_tokens=estimate.tokens if measured else self.usage.last_prompt_tokens,
            last_request_chars=estimate.chars if measured else self.usage.last_request_chars,
        )
        return replace(
            self,
            resolved=Resolved(session),
            session=session,
            conversation=self.conversation.extended(said) if said else self.conversation,
            compactions=tuple(merged(self.compactions, made)),
            last_turn=max(self.last_turn, journal.turn),
            usage=usage,
            # Made and shown; unless the turn stored nothing (a failed first request): its
            # retry is the session's first turn still.
            recall=RecallStart() if said else RecallStart(previous=self.recall.previous),
            ended=time.monotonic(),
        )


class Starts:
    """Where one agent's turns start: the current session, what the last turn read and
    wrote (:attr:`last`), and the tools a turn offers.

    ``settings``, ``store``, ``registry`` and ``notebook`` are asked each time: the
    agent's settings may change between turns, and so may its DuckDB file.
    """

    def __init__(
        self,
        *,
        settings: Callable[[], AgentKernel],
        store: Callable[[], Store],
        registry: Callable[[], Registry],
        notebook: Callable[[], str],
        kernel_key: str,
        session_name: str | None = None,
        document: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._registry = registry
        self._notebook = notebook
        self._document = document  # the notebook's id as its front end says it, once saved
        self._kernel_key = kernel_key
        self._session_name = session_name  # Agent(session=...): the session to continue
        self.session_id: str | None = None  # the session turns continue now
        self._path: str | None = None  # the notebook's path when the current session was resolved
        self.last: TurnStart | None = None  # what the last turn read and wrote, for the next
        self.tools_synced: int | None = None  # store.changes when the agent's own tools were last read

    # -- sessions ------------------------------------------------------------------------

    def session(self, new: str | bool | None, name: str | None, create: bool) -> Session | None:
        """The session a turn would use (see :meth:`Agent.session`)."""
        with self._store().connect() as con:
            return self.resolve(Sessions(con), new, name, create).session

    def start_session(self, name: str | bool) -> TurnStart:
        """Start a fresh session now, read as the next turn continues it."""
        settings = self._settings()
        try:
            groups = {t.group for t in self.offered(settings.approve.lower())}
        except ConfigError:
            groups = set()  # the turn will say what is wrong with tool_groups
        start = self.read(name or True, None, settings.instruction, groups)
        # The next turn continues it as read here (no "new session" notice again).
        self.last = replace(start, resolved=Resolved(start.session))
        return start

    def resolve(self, sessions: Sessions, new: str | bool | None, name: str | None, create: bool) -> Resolved:
        """The session ``new`` or ``name`` asks for, else the current one, else the
        notebook's latest, else a new one (``Resolved(None)`` when ``create`` is false);
        it becomes the current session."""
        notebook = self._notebook()
        document = self._document()
        if document and _notebook_file(notebook):
            sessions.follow_document(document, notebook)  # moved on disk since: its sessions follow
        kept_as = None
        if new:
            if isinstance(new, str):
                earlier = sessions.by_name(new)
                if earlier is not None:
                    kept_as = sessions.kept_name(new)
                    sessions.rename(earlier.id, kept_as)
                found = sessions.create(new, notebook=notebook)
            else:
                name = sessions.unused_name(self._default_name())
                found = sessions.create(name, notebook=notebook)
            resolved = Resolved(found, created=True, kept_as=kept_as)
        elif name is not None:
            resolved = self._named(sessions, name, create)
        else:
            found = None
            if self.session_id is not None:
                found = sessions.get(self.session_id)
                if found is not None and found.state == "completed":
                    found = None  # archived since: the notebook moves on to a new session
                elif found is not None and self._path not in (None, notebook) and found.notebook == self._path:
                    found = self._followed(sessions, found, notebook)  # the notebook moved or was copied
            elif self._session_name is not None:
                return self._adopt(self._named(sessions, self._session_name, create))
            if found is None:
                found = sessions.latest_for_notebook(notebook) or self._refiled(sessions, notebook)
            if found is not None:
                resolved = Resolved(found)
            elif not create:
                return Resolved(None)
            else:
                name = sessions.unused_name(self._default_name())
                resolved = Resolved(sessions.create(name, notebook=notebook), created=True)
        return self._adopt(resolved)

    @staticmethod
    def _followed(sessions: Sessions, found: Session, notebook: str) -> Session | None:
        """The session turns continued, ``found``, filed under the path the notebook had
        then, now that the notebook is at ``notebook``.

        That path still holds a file: this notebook is a copy of that one (Save As), and
        starts a session of its own while the original keeps its session. No file is there
        any more: the notebook was renamed or moved and nothing re-filed its sessions yet
        (the server does when its extension runs): they follow it now."""
        before = found.notebook
        if before is None or before == notebook or not (_notebook_file(before) and _notebook_file(notebook)):
            return found
        if os.path.exists(before):
            return None
        sessions.move_notebook(before, notebook, by="kernel")
        return sessions.get(found.id)

    @staticmethod
    def _refiled(sessions: Sessions, notebook: str) -> Session | None:
        """The latest session filed under the path the server started this kernel for, when
        the notebook has moved from there since (a kernel restarted after a rename keeps its
        first environment): its sessions are re-filed under ``notebook``, once."""
        started = os.environ.get("JPY_SESSION_NAME", "")
        if not (_notebook_file(started) and _notebook_file(notebook)) or started == notebook:
            return None
        if os.path.exists(started) or sessions.latest_for_notebook(started) is None:
            return None
        sessions.move_notebook(started, notebook, by="kernel")
        return sessions.latest_for_notebook(notebook)

    def _named(self, sessions: Sessions, name: str, create: bool) -> Resolved:
        """The session called ``name``, started when there is none (so a notebook re-runs)."""
        found = sessions.by_name(name)
        if found is not None:
            return Resolved(found)
        if not create:
            raise SessionError(f"No session named {name!r}; %agent_sessions --all lists them.")
        return Resolved(sessions.create(name, notebook=self._notebook()), created=True)

    def _adopt(self, resolved: Resolved) -> Resolved:
        self._path = self._notebook()
        if resolved.session is not None:
            if self.session_id is not None and self.session_id != resolved.session.id:
                DRIVER.end_session(self.session_id)  # the session left behind closes its browser
            self.session_id = resolved.session.id
        return resolved

    def _default_name(self) -> str:
        notebook = self._notebook()
        if notebook == self._kernel_key:
            return notebook
        return Path(notebook).stem or "session"

    # -- what a turn reads first -----------------------------------------------------------

    def begin(self, request: TurnRequest, groups: set[str]) -> TurnStart:
        """What the turn ``request`` starts from: the last turn's start while it holds,
        else read from the store."""
        instruction = self._settings().instruction
        start = self._unchanged(request.new, request.session, instruction, groups)
        if start is None:
            start = self.read(request.new, request.session, instruction, groups)
        return start

    def _unchanged(
        self, new: str | bool | None, name: str | None, instruction: str, groups: set[str]
    ) -> TurnStart | None:
        """The last turn's start, brought up to date by its writes, when it still holds:
        the same session, notebook and prompt sections, and a file nobody else changed."""
        start = self.last
        if (
            start is None
            or new
            or (name is not None and name != start.session.name)
            or start.session.id != self.session_id
            or start.notebook != self._notebook()
            or start.sections_key != (instruction, frozenset(groups))
            or not self._store().unchanged_since(start.changes)
            or ("skills" in groups and start.skills_folder != skills_folder_state(self._settings().skills_dir))
            or self._idle_since(start)  # a summary may be due: see session_summary.py
        ):
            return None
        return start

    def _idle_since(self, start: TurnStart) -> bool:
        """Whether the session has been idle past summary_idle_minutes since ``start``'s turn."""
        minutes = self._settings().summary_idle_minutes
        return bool(minutes) and time.monotonic() - start.ended > minutes * 60

    def read(self, new: str | bool | None, name: str | None, instruction: str, groups: set[str]) -> TurnStart:
        """Resolve the session and read what a turn needs first, in one connection."""
        settings = self._settings()
        store = self._store()
        notebook = self._notebook()
        synced = self.tools_synced
        with store.connect() as con:
            sessions = Sessions(con)
            resolved = self.resolve(sessions, new, name, True)
            current = resolved.session
            assert current is not None
            stored = sessions.messages(current.id)
            last_turn = sessions.last_turn(current.id)
            sessions.touch(current.id, notebook=notebook)
            sections = stored_sections(con, instruction, groups, settings.skills_dir)
            notepad = Notepad(con, current.id).read_shown()[0] if "skills" in groups else ""
            compacted = compactions.load(con, current.id)
            spent = session_usage(con, current.id)
            recall = summaries.at_start(
                con,
                current,
                first_turn=last_turn == 0,
                notebook=notebook,
                idle_minutes=settings.summary_idle_minutes,
            )
            changes = store.changes  # this connection's own count: it is still open
        if synced is not None and changes == synced + 1:
            # This connection's write was the only change since the agent's tools were
            # read (another process's, or another connection's, would have counted too),
            # and it wrote no tool: they are still as read.
            self.tools_synced = changes
        return TurnStart(
            changes=changes,
            resolved=resolved,
            session=current,
            conversation=LoadedConversation().extended({"role": m.role, "content": m.content} for m in stored),
            last_turn=last_turn,
            notebook=notebook,
            sections_key=(instruction, frozenset(groups)),
            sections=sections,
            compactions=tuple(compacted),
            usage=spent,
            notepad=notepad,
            recall=recall,
            skills_folder=skills_folder_state(settings.skills_dir) if "skills" in groups else (),
        )

    # -- the tools -------------------------------------------------------------------------

    def offered(self, mode: str) -> list[Tool]:
        """The tools a turn in approval ``mode`` offers (none with tools_enabled = False).

        Group names are checked here, not when they are set: a group of ``@tool``
        functions may be named before the cell that defines them runs.
        """
        settings = self._settings()
        groups = list(settings.tool_groups) if settings.tools_enabled else []
        registry = self._registry()
        known = set(TOOL_GROUPS) | {t.group for t in registry.tools.values()}
        unknown = [g for g in groups if g not in known]
        if unknown:
            raise ConfigError(
                f"Unknown tool group {', '.join(map(repr, unknown))} in AgentKernel.tool_groups: "
                f"the groups are {', '.join(sorted(known))}. (tools_enabled = False switches "
                "all tools off.)"
            )
        if "tools" in groups and not (  # the agent's own tools, as stored now
            self.tools_synced is not None and self._store().unchanged_since(self.tools_synced)
        ):
            with self._store().connect(read_only=True) as con:
                sync(registry, con)
            self.tools_synced = self._store().changes
        if settings.tools_enabled and settings.mcp_servers:
            groups.append("mcp")  # the servers' tools, see tools/mcp.py
        return registry.offered(groups, read_only=mode == "read-only", notebook=channel.attached() is not None)


def _notebook_file(path: str) -> bool:
    """Whether ``path`` names a notebook file (not a kernel's own key, not a relative name)."""
    return os.path.isabs(path) and path.endswith(".ipynb")


def skills_folder_state(configured: str) -> tuple[object, ...]:
    """The skills folder's SKILL.md files as ``stat`` sees them: a skill added, changed or
    removed there changes this, and the next turn reads its prompt sections afresh."""
    folder = skills_folder(configured)
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.is_dir())
    except OSError:
        return ()
    found: list[object] = [str(folder)]
    for name in names:
        try:
            stat = os.stat(folder / name / "SKILL.md")
        except OSError:
            continue
        found.append((name, stat.st_mtime_ns, stat.st_size, stat.st_ino))
    return tuple(found)
