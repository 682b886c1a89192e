"""Which of a session's turns ran after it had read untrusted content.

The session keeps what it read (``sessions.untrusted_sources``, set by the turn that
first read it and never unset); the turn that read it first is the earliest whose stored
messages hold untrusted content: a result inside the untrusted envelope, or a server
tool's web result. Every step of that turn and of later turns counts as written after
untrusted content (a step before the read in that same turn too: the order inside a turn
is not kept with the steps). When no turn shows it (a sub-session that started with its
parent's taint, text since compacted away), every turn counts: an export then marks more
cells than it needs to, never fewer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

__all__ = ["SessionTaint", "session_taint"]

# What a stored message holds when it brought untrusted content into the conversation.
_READ_MARKS = ("<untrusted_content", "web_search_tool_result", "web_fetch_tool_result")


@dataclass(frozen=True)
class SessionTaint:
    """The session's untrusted sources and the first turn that ran after them."""

    sources: tuple[str, ...] = ()
    first_turn: int = 0  # 0: no turn is tainted

    def of_turn(self, turn: int) -> tuple[str, ...]:
        """The sources turn ``turn`` ran after (empty: it ran before any)."""
        return self.sources if self.sources and turn >= self.first_turn else ()


def session_taint(con: duckdb.DuckDBPyConnection, session_id: str) -> SessionTaint:
    """What the session read and from which turn on (see the module docstring)."""
    row = con.execute("SELECT untrusted_sources FROM sessions WHERE id = ?", [session_id]).fetchone()
    sources = _sources(row[0] if row else None)
    if not sources:
        return SessionTaint()
    conditions = " OR ".join(["contains(content, ?)"] * len(_READ_MARKS))
    found = con.execute(
        f"SELECT min(turn) FROM messages WHERE session_id = ? AND ({conditions})", [session_id, *_READ_MARKS]
    ).fetchone()
    first = int(found[0]) if found and found[0] is not None else 1
    return SessionTaint(sources, first)


def _sources(raw: object) -> tuple[str, ...]:
    if not raw:
        return ()
    try:
        value = json.loads(str(raw))
    except ValueError:
        return ("the session's untrusted sources (unreadable)",)
    return tuple(str(s) for s in value) if isinstance(value, list) and value else ()
