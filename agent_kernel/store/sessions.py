"""Sessions and their messages: durable conversations.

A session's stored messages are exactly what was said, in order; repairing them into a
valid Messages conversation (a result for every ``tool_use``) happens when they are
loaded, in :mod:`agent_kernel.model.conversation`.
"""

from __future__ import annotations

import builtins
import json
import os
import threading
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agent_kernel.errors import SessionError
from agent_kernel.store.schema import UTC_NOW

if TYPE_CHECKING:
    from collections.abc import Sequence

    import duckdb

    from agent_kernel.model.shapes import ContentBlock, Role


STATES = (
    "idle",
    "running",
    "waiting_for_input",
    "completed",
    "error",
    "token_limit_reached",
    "cost_limit_reached",
)

_COLUMNS = (
    "id, name, notebook, state, model, token_limit, tokens_used, parent_id, last_error, "
    "created_at, updated_at, cost_limit, untrusted_sources"
)


# What a session leaves in other tables; deleting it deletes these rows too. Memories and
# stored-prompt versions outlive the session that wrote them. (Its context summaries and its
# session summary, made from its messages, go too; they are not counted.)
_SESSION_TABLES = ("messages", "tool_calls", "code_executions", "model_calls")


@dataclass(frozen=True)
class Session:
    """One stored conversation."""

    id: str
    name: str
    notebook: str | None
    state: str
    model: str | None
    token_limit: int | None
    tokens_used: int
    parent_id: str | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    cost_limit: float | None = None  # USD, once Continue raised it past AgentKernel.cost_limit
    # The untrusted sources (web pages, MCP results, fetched files) the session has read, as
    # JSON; NULL while it has read none. Once set, it stays: the conversation holds them.
    untrusted_json: str | None = None

    @property
    def untrusted_sources(self) -> tuple[str, ...]:
        return tuple(json.loads(self.untrusted_json)) if self.untrusted_json else ()


@dataclass(frozen=True)
class StoredMessage:
    """A message as stored: its role, content blocks, and the turn that produced it."""

    seq: int
    turn: int
    role: Role
    content: list[ContentBlock]
    created_at: datetime


class Sessions:
    """Sessions and messages, read and written through one open connection.

    Open it for a short piece of work::

        with store.connect() as con:
            session = Sessions(con).by_name("analysis")
    """

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    # -- reading -------------------------------------------------------------------------

    def _one(self, where: str, params: list[Any]) -> Session | None:
        row = self.con.execute(f"SELECT {_COLUMNS} FROM sessions WHERE {where}", params).fetchone()
        return Session(*row) if row else None

    def get(self, session_id: str) -> Session | None:
        return self._one("id = ?", [session_id])

    def by_name(self, name: str) -> Session | None:
        return self._one("name = ?", [name])

    def latest_for_notebook(self, notebook: str) -> Session | None:
        """The session this notebook used last (created or continued), unless archived;
        never a sub-session (those are continued only by name)."""
        return self._one(
            "notebook = ? AND state <> 'completed' AND parent_id IS NULL ORDER BY updated_at DESC LIMIT 1",
            [notebook],
        )

    def list(self, notebook: str | None = None) -> list[Session]:
        where = "WHERE notebook = ?" if notebook is not None else ""
        params = [notebook] if notebook is not None else []
        rows = self.con.execute(f"SELECT {_COLUMNS} FROM sessions {where} ORDER BY updated_at DESC", params).fetchall()
        return [Session(*row) for row in rows]

    def page(self, *, limit: int, offset: int = 0, notebooks: Sequence[str] = ()) -> builtins.list[Session]:
        """One page of sessions, most recently used first (the store may hold thousands);
        with ``notebooks`` (paths as stored) only those notebooks' sessions and the
        sub-sessions they spawned, at any depth."""
        order = "ORDER BY updated_at DESC, id LIMIT ? OFFSET ?"
        if not notebooks:
            rows = self.con.execute(f"SELECT {_COLUMNS} FROM sessions {order}", [limit, offset]).fetchall()
            return [Session(*row) for row in rows]
        rows = self.con.execute(
            "WITH RECURSIVE own(id) AS (SELECT id FROM sessions WHERE notebook IN (SELECT unnest(?)) "
            "UNION SELECT s.id FROM sessions s JOIN own ON s.parent_id = own.id) "
            f"SELECT {_COLUMNS} FROM sessions WHERE id IN (SELECT id FROM own) {order}",
            [list(notebooks), limit, offset],
        ).fetchall()
        return [Session(*row) for row in rows]

    def messages(self, session_id: str) -> builtins.list[StoredMessage]:
        rows = self.con.execute(
            "SELECT seq, turn, role, content, created_at FROM messages WHERE session_id = ? ORDER BY seq",
            [session_id],
        ).fetchall()
        return [StoredMessage(seq, turn, role, json.loads(content), at) for seq, turn, role, content, at in rows]

    def last_turn(self, session_id: str) -> int:
        row = self.con.execute(
            "SELECT coalesce(max(turn), 0) FROM messages WHERE session_id = ?", [session_id]
        ).fetchone()
        return int(row[0]) if row else 0

    # -- writing -------------------------------------------------------------------------

    def create(
        self,
        name: str,
        *,
        notebook: str | None,
        model: str | None = None,
        token_limit: int | None = None,
        parent_id: str | None = None,
    ) -> Session:
        if self.by_name(name) is not None:
            raise SessionError(f"A session named {name!r} already exists; continue it with --session {name}.")
        session_id = uuid.uuid4().hex
        self.con.execute(
            "INSERT INTO sessions (id, name, notebook, model, token_limit, parent_id) VALUES (?, ?, ?, ?, ?, ?)",
            [session_id, name, notebook, model, token_limit, parent_id],
        )
        created = self.get(session_id)
        assert created is not None
        return created

    def unused_name(self, base: str) -> str:
        """``base`` if no session has it yet, else ``base-2``, ``base-3``, ..."""
        taken = {
            row[0]
            for row in self.con.execute(
                "SELECT name FROM sessions WHERE name = ? OR name LIKE ?",
                [base, base.replace("%", r"\%") + "-%"],
            ).fetchall()
        }
        if base not in taken:
            return base
        n = 2
        while f"{base}-{n}" in taken:
            n += 1
        return f"{base}-{n}"

    def kept_name(self, name: str) -> str:
        """The name an earlier session called ``name`` keeps when a new one takes its name:
        ``name~1``, then ``name~2``, ... (one more than the highest so far, so the numbers
        follow the order the sessions were replaced in)."""
        prefix = name + "~"
        rows = self.con.execute("SELECT name FROM sessions WHERE starts_with(name, ?)", [prefix]).fetchall()
        numbers = [int(n[len(prefix) :]) for (n,) in rows if n[len(prefix) :].isdigit()]
        return f"{prefix}{max(numbers, default=0) + 1}"

    def rename(self, session_id: str, name: str) -> None:
        taken = self.by_name(name)
        if taken is not None and taken.id != session_id:
            raise SessionError(f"A session named {name!r} already exists; choose another name.")
        self.con.execute("UPDATE sessions SET name = ? WHERE id = ?", [name, session_id])

    def set_state(self, session_id: str, state: str) -> None:
        if state not in STATES:
            raise ValueError(f"unknown session state {state!r}")
        self.con.execute(f"UPDATE sessions SET state = ?, updated_at = {UTC_NOW} WHERE id = ?", [state, session_id])

    def stored_rows(self, session_id: str) -> dict[str, int]:
        """How many rows each table holds for the session (what :meth:`delete` removes)."""
        counts = {}
        for table in _SESSION_TABLES:
            sql = f"SELECT count(*) FROM {table} WHERE session_id = ?"
            row = self.con.execute(sql, [session_id]).fetchone()
            counts[table] = int(row[0]) if row else 0
        return counts

    def delete(self, session_id: str) -> dict[str, int]:
        """Remove the session, its messages and its audit trail (tool calls, code runs),
        all or nothing; return how many rows each table lost."""
        counts = self.stored_rows(session_id)
        self.con.execute("BEGIN")
        try:
            for table in (*_SESSION_TABLES, "context_summaries", "session_summaries"):
                self.con.execute(f"DELETE FROM {table} WHERE session_id = ?", [session_id])
            self.con.execute("DELETE FROM sessions WHERE id = ?", [session_id])
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        return counts

    # -- a notebook renamed or moved ------------------------------------------------------

    def move_notebook(self, old: str, new: str, *, by: str) -> int:
        """Re-file the sessions of the notebook at ``old`` under ``new`` (a folder's: every
        notebook below it, under the same place below ``new``) and record the move, so a
        kernel that still knows the notebook by ``old`` finds where it went (:meth:`moved_to`).
        ``by`` says what saw the move (``server``, ``kernel``). How many sessions moved."""
        if old == new:
            return 0
        prefix = old.rstrip("/") + "/"
        rows = self.con.execute(
            "SELECT id, notebook FROM sessions WHERE notebook = ? OR starts_with(notebook, ?)", [old, prefix]
        ).fetchall()
        self.con.execute("BEGIN")
        try:
            for session_id, path in rows:
                self.con.execute("UPDATE sessions SET notebook = ? WHERE id = ?", [new + path[len(old) :], session_id])
            self.con.execute(
                "INSERT INTO notebook_moves (old_path, new_path, moved_by) VALUES (?, ?, ?)", [old, new, by]
            )
            self.con.execute(
                "UPDATE notebook_documents SET path = ? || substr(path, ?) WHERE path = ? OR starts_with(path, ?)",
                [new, len(old) + 1, old, prefix],
            )
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        return len(rows)

    def follow_document(self, document: str, path: str) -> int:
        """The notebook with the id ``document`` is at ``path`` now: record it, and when it was
        last seen at a path where no file is any more (moved on disk while no kernel ran, or
        renamed before anything recorded the move), re-file its sessions from there under
        ``path``. A recorded path that still holds a file means this notebook is a copy (Save
        As, ``cp``): the original keeps its sessions and its record, the copy starts fresh.
        How many sessions moved."""
        row = self.con.execute("SELECT path FROM notebook_documents WHERE document = ?", [document]).fetchone()
        if row is None:
            self.con.execute("INSERT INTO notebook_documents (document, path) VALUES (?, ?)", [document, path])
            return 0
        seen = str(row[0])
        if seen == path or os.path.exists(seen):
            return 0
        moved = self.move_notebook(seen, path, by="document")
        self.con.execute(
            f"UPDATE notebook_documents SET path = ?, seen_at = {UTC_NOW} WHERE document = ?", [path, document]
        )
        return moved

    def moved_to(self, path: str) -> str | None:
        """Where the notebook that was at ``path`` is now, following every recorded move
        (the file's own, or a folder's above it); None when it never moved."""
        current, since = path, datetime(1970, 1, 1)
        for _ in range(100):  # each step is a later move: a chain ends
            row = self.con.execute(
                "SELECT old_path, new_path, moved_at FROM notebook_moves"
                " WHERE (old_path = ? OR starts_with(?, old_path || '/')) AND moved_at > ?"
                " ORDER BY moved_at, length(old_path) DESC LIMIT 1",
                [current, current, since],
            ).fetchone()
            if row is None:
                break
            current, since = row[1] + current[len(row[0]) :], row[2]
        return None if current == path else current

    def forget_moves_from(self, path: str) -> None:
        """A new notebook was made at ``path``: a kernel started for it is that notebook's,
        not the one that once moved away from there."""
        self.con.execute("DELETE FROM notebook_moves WHERE old_path = ?", [path])

    def touch(self, session_id: str, *, notebook: str | None = None) -> None:
        """Mark the session as the one used last (by ``notebook``, when given)."""
        touch(self.con, session_id, notebook=notebook)


class Journal:
    """What a turn has said but not stored yet, written in as few statements as possible.

    The turn records messages, token usage and its state as they happen; :meth:`write`
    (run by the write-behind thread) stores everything recorded so far: one INSERT for
    the messages, one UPDATE for the session.
    """

    def __init__(self, session_id: str, turn: int) -> None:
        self.session_id = session_id
        self.turn = turn
        self._lock = threading.Lock()
        self._messages: list[tuple[Role, list[ContentBlock]]] = []
        self._tokens = 0
        self._state: tuple[str, str | None] | None = None
        self._token_limit: int | None = None
        self._cost_limit: float | None = None
        self._untrusted: list[str] | None = None
        # Everything recorded this turn, written or not: what the session has after it.
        self.recorded: list[tuple[Role, list[ContentBlock]]] = []
        self.recorded_tokens = 0
        self.recorded_state: tuple[str, str | None] | None = None
        self.recorded_token_limit: int | None = None
        self.recorded_cost_limit: float | None = None
        self.recorded_untrusted: list[str] | None = None

    def message(self, role: Role, content: list[ContentBlock]) -> None:
        with self._lock:
            self._messages.append((role, content))
            self.recorded.append((role, content))

    def usage(self, tokens: int) -> None:
        with self._lock:
            self._tokens += tokens
            self.recorded_tokens += tokens

    def state(self, state: str, error: str | None = None) -> None:
        if state not in STATES:
            raise ValueError(f"unknown session state {state!r}")
        with self._lock:
            self._state = self.recorded_state = (state, error)

    def token_limit(self, limit: int) -> None:
        """The session's token limit from now on (raised by Continue)."""
        with self._lock:
            self._token_limit = self.recorded_token_limit = limit

    def untrusted(self, sources: list[str]) -> None:
        """Every untrusted source the session has read so far (earlier turns' included)."""
        with self._lock:
            self._untrusted = self.recorded_untrusted = list(sources)

    def applied_to(self, session: Session) -> Session:
        """``session`` as it is once everything recorded so far is written."""
        with self._lock:
            changes: dict[str, Any] = {"tokens_used": session.tokens_used + self.recorded_tokens}
            if self.recorded_state is not None:
                changes["state"], changes["last_error"] = self.recorded_state
            if self.recorded_token_limit:
                changes["token_limit"] = self.recorded_token_limit
            if self.recorded_cost_limit:
                changes["cost_limit"] = self.recorded_cost_limit
            if self.recorded_untrusted:
                changes["untrusted_json"] = json.dumps(self.recorded_untrusted)
        return replace(session, **changes)

    def cost_limit(self, limit: float) -> None:
        """The session's cost limit in USD from now on (raised by Continue)."""
        with self._lock:
            self._cost_limit = self.recorded_cost_limit = limit

    def write(self, con: duckdb.DuckDBPyConnection) -> None:
        with self._lock:
            messages, self._messages = self._messages, []
            tokens, self._tokens = self._tokens, 0
            state, self._state = self._state, None
            limit, self._token_limit = self._token_limit, None
            cost_limit, self._cost_limit = self._cost_limit, None
            untrusted, self._untrusted = self._untrusted, None
        if messages:
            row = con.execute(
                "SELECT coalesce(max(seq), -1) + 1 FROM messages WHERE session_id = ?", [self.session_id]
            ).fetchone()
            first = int(row[0]) if row else 0
            values = ", ".join(["(?, ?, ?, ?, ?)"] * len(messages))
            params: list[Any] = []
            for offset, (role, content) in enumerate(messages):
                params += [self.session_id, first + offset, self.turn, role, json.dumps(content)]
            con.execute(f"INSERT INTO messages (session_id, seq, turn, role, content) VALUES {values}", params)
        if tokens or state or limit or cost_limit or untrusted:
            sets, params = [f"updated_at = {UTC_NOW}"], []
            if untrusted:
                sets.append("untrusted_sources = ?")
                params.append(json.dumps(untrusted))
            if limit:
                sets.append("token_limit = ?")
                params.append(limit)
            if cost_limit:
                sets.append("cost_limit = ?")
                params.append(cost_limit)
            if tokens:
                sets.append("tokens_used = tokens_used + ?")
                params.append(tokens)
            if state:
                sets += ["state = ?", "last_error = ?"]
                params += list(state)
            con.execute(f"UPDATE sessions SET {', '.join(sets)} WHERE id = ?", [*params, self.session_id])


def touch(con: duckdb.DuckDBPyConnection, session_id: str, *, notebook: str | None = None) -> None:
    if notebook is None:
        con.execute(f"UPDATE sessions SET updated_at = {UTC_NOW} WHERE id = ?", [session_id])
    else:
        con.execute(
            f"UPDATE sessions SET updated_at = {UTC_NOW}, notebook = ? WHERE id = ?",
            [notebook, session_id],
        )
