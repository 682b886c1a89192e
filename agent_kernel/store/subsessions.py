"""Sub-sessions as stored: a child session row (its parent, task) and the result it ended with.

A child is an ordinary row of ``sessions`` with ``parent_id`` set; its messages, tool
calls and usage are stored like any session's. These writes go through the write-behind
queue, so they are ordered with the child's own :class:`~.sessions.Journal` writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from agent_kernel.store.schema import UTC_NOW

if TYPE_CHECKING:
    import duckdb
    from typing_extensions import NotRequired

    from agent_kernel.store.sessions import Session

__all__ = ["FINISHED", "ChildOutcome", "ChildRow", "insert_child", "outcome", "record_result", "tree_order"]

# The states a parent's wait_for_sessions stops waiting at.
FINISHED = ("completed", "error", "token_limit_reached")


@dataclass(frozen=True)
class ChildRow:
    """What a new child session's row holds."""

    id: str
    name: str
    notebook: str | None
    parent_id: str
    task: str
    model: str | None
    token_limit: int | None
    cost_limit: float | None = None  # USD; None: no limit (no session above it has one)


def insert_child(row: ChildRow) -> Any:
    """A write (for :class:`~.writer.WriteBehind`) that stores the child's session row."""

    def write(con: duckdb.DuckDBPyConnection) -> None:
        con.execute(
            "INSERT INTO sessions (id, name, notebook, state, model, token_limit, cost_limit, parent_id, task) "
            "VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?)",
            [row.id, row.name, row.notebook, row.model, row.token_limit, row.cost_limit, row.parent_id, row.task],
        )

    return write


def record_result(session_id: str, state: str, result: str | None, error: str | None) -> Any:
    """A write that stores how a child ended: its final state, its result or its error."""

    def write(con: duckdb.DuckDBPyConnection) -> None:
        con.execute(
            f"UPDATE sessions SET state = ?, result = ?, last_error = ?, updated_at = {UTC_NOW} WHERE id = ?",
            [state, result, error, session_id],
        )

    return write


class ChildOutcome(TypedDict):
    """How a sub-session ended, as its parent's ``wait_for_sessions`` hands it over."""

    id: str
    status: str  # completed, error or token_limit_reached
    result: NotRequired[str]  # what it reported (partial: its last text)
    error: NotRequired[str]


def outcome(con: duckdb.DuckDBPyConnection, session_id: str) -> dict[str, Any] | None:
    """``{id, status, result?, error?, parent_id, name, untrusted_sources}`` of a stored
    session, or None when absent (the last three are for the parent, not the model)."""
    row = con.execute(
        "SELECT id, state, result, last_error, parent_id, name, untrusted_sources FROM sessions WHERE id = ?",
        [session_id],
    ).fetchone()
    if row is None:
        return None
    found: dict[str, Any] = {
        "id": row[0], "status": row[1], "parent_id": row[4], "name": row[5],
        "untrusted_sources": list(json.loads(row[6])) if row[6] else [],
    }  # fmt: skip
    if row[2] is not None:
        found["result"] = row[2]
    if row[3] is not None:
        found["error"] = row[3]
    return found


def tree_order(sessions: list[Session]) -> list[tuple[Session, int]]:
    """``sessions`` with each child right under its parent, and its indentation level.

    The order among siblings (and of the top-level sessions) is kept; a child whose
    parent is not in the list stands at the top level.
    """
    ids = {s.id for s in sessions}
    children: dict[str, list[Session]] = {}
    roots = []
    for session in sessions:
        if session.parent_id is not None and session.parent_id in ids:
            children.setdefault(session.parent_id, []).append(session)
        else:
            roots.append(session)
    ordered: list[tuple[Session, int]] = []
    seen: set[str] = set()

    def visit(session: Session, level: int) -> None:
        if session.id in seen:
            return
        seen.add(session.id)
        ordered.append((session, level))
        for child in children.get(session.id, []):
            visit(child, level + 1)

    for root in roots:
        visit(root, 0)
    return ordered
