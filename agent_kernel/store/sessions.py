"""Sessions and their messages: durable conversations.

A session's stored messages are exactly what was said, in order; repairing them into a
valid Messages conversation (a result for every ``tool_use``) happens when they are
loaded, in :mod:`agent_kernel.conversation`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import SessionError
from .schema import UTC_NOW

if TYPE_CHECKING:
    import duckdb

    from . import Store

STATES = ("idle", "running", "waiting_for_input", "completed", "error", "token_limit_reached")

_COLUMNS = (
    "id, name, notebook, state, model, token_limit, tokens_used, parent_id, last_error, "
    "created_at, updated_at"
)


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


@dataclass(frozen=True)
class StoredMessage:
    """A message as stored: its role, content blocks, and the turn that produced it."""

    seq: int
    turn: int
    role: str
    content: list[dict[str, Any]]
    created_at: datetime


class SessionStore:
    """Reads and writes sessions through a :class:`~agent_kernel.store.Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # -- reading -------------------------------------------------------------------------

    def _one(self, where: str, params: list[Any]) -> Session | None:
        with self.store.connect() as con:
            row = con.execute(f"SELECT {_COLUMNS} FROM sessions WHERE {where}", params).fetchone()
        return Session(*row) if row else None

    def get(self, session_id: str) -> Session | None:
        return self._one("id = ?", [session_id])

    def by_name(self, name: str) -> Session | None:
        return self._one("name = ?", [name])

    def latest_for_notebook(self, notebook: str) -> Session | None:
        """The session this notebook used last (created or continued)."""
        return self._one("notebook = ? ORDER BY updated_at DESC LIMIT 1", [notebook])

    def list(self, notebook: str | None = None) -> list[Session]:
        where = "WHERE notebook = ?" if notebook is not None else ""
        params = [notebook] if notebook is not None else []
        with self.store.connect() as con:
            rows = con.execute(
                f"SELECT {_COLUMNS} FROM sessions {where} ORDER BY updated_at DESC", params
            ).fetchall()
        return [Session(*row) for row in rows]

    def messages(self, session_id: str) -> list[StoredMessage]:
        with self.store.connect() as con:
            rows = con.execute(
                "SELECT seq, turn, role, content, created_at FROM messages "
                "WHERE session_id = ? ORDER BY seq",
                [session_id],
            ).fetchall()
        return [StoredMessage(seq, turn, role, json.loads(content), at) for seq, turn, role, content, at in rows]

    def last_turn(self, session_id: str) -> int:
        with self.store.connect() as con:
            row = con.execute(
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
        session_id = uuid.uuid4().hex
        with self.store.connect() as con:
            if con.execute("SELECT 1 FROM sessions WHERE name = ?", [name]).fetchone():
                raise SessionError(
                    f"A session named {name!r} already exists; continue it with --session {name}."
                )
            con.execute(
                "INSERT INTO sessions (id, name, notebook, model, token_limit, parent_id) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [session_id, name, notebook, model, token_limit, parent_id],
            )
        created = self.get(session_id)
        assert created is not None
        return created

    def unused_name(self, base: str) -> str:
        """``base`` if no session has it yet, else ``base-2``, ``base-3``, ..."""
        with self.store.connect() as con:
            taken = {
                row[0]
                for row in con.execute(
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

    def touch(self, session_id: str, *, notebook: str | None = None) -> None:
        """Mark the session as the one used last (by ``notebook``, when given)."""
        with self.store.connect() as con:
            touch(con, session_id, notebook=notebook)


# Writes used inside a connection that is already open (the turn's write-behind batches).


def touch(con: duckdb.DuckDBPyConnection, session_id: str, *, notebook: str | None = None) -> None:
    if notebook is None:
        con.execute(f"UPDATE sessions SET updated_at = {UTC_NOW} WHERE id = ?", [session_id])
    else:
        con.execute(
            f"UPDATE sessions SET updated_at = {UTC_NOW}, notebook = ? WHERE id = ?",
            [notebook, session_id],
        )


def set_state(
    con: duckdb.DuckDBPyConnection, session_id: str, state: str, *, error: str | None = None
) -> None:
    if state not in STATES:
        raise ValueError(f"unknown session state {state!r}")
    con.execute(
        f"UPDATE sessions SET state = ?, last_error = ?, updated_at = {UTC_NOW} WHERE id = ?",
        [state, error, session_id],
    )


def add_usage(con: duckdb.DuckDBPyConnection, session_id: str, tokens: int) -> None:
    con.execute(
        f"UPDATE sessions SET tokens_used = tokens_used + ?, updated_at = {UTC_NOW} "
        "WHERE id = ?",
        [tokens, session_id],
    )


def set_token_limit(con: duckdb.DuckDBPyConnection, session_id: str, limit: int) -> None:
    con.execute("UPDATE sessions SET token_limit = ? WHERE id = ?", [limit, session_id])


def append_message(
    con: duckdb.DuckDBPyConnection,
    session_id: str,
    *,
    turn: int,
    role: str,
    content: list[dict[str, Any]],
) -> None:
    """Append after the last stored message; numbering happens under the file lock."""
    con.execute(
        "INSERT INTO messages (session_id, seq, turn, role, content) "
        "SELECT ?, coalesce(max(seq), -1) + 1, ?, ?, ? FROM messages WHERE session_id = ?",
        [session_id, turn, role, json.dumps(content), session_id],
    )
