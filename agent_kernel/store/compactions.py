"""Compactions of long sessions: the summary that stands in for a session's oldest messages.

A row says: send ``summary`` in place of the first ``covers`` messages of the session's
conversation (as :func:`agent_kernel.model.conversation.repair` loads it), send the images
of the messages before ``unimaged`` as one-line placeholders, and send the tool results
of the messages before ``trimmed`` shortened (without their images too). The messages themselves stay in
``messages``; a compaction only changes what a request carries. ``fingerprint`` identifies
the last covered message, so a row is never applied to a conversation it was not made from.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

__all__ = ["Compaction", "load", "merged", "save"]


@dataclass(frozen=True)
class Compaction:
    """What a request sends in place of the oldest part of the conversation."""

    covers: int = 0  # the first `covers` messages are replaced by `summary`
    trimmed: int = 0  # tool results of the messages before this one are sent shortened
    summary: str | None = None
    fingerprint: str = ""
    model: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    duration_ms: float | None = None
    unimaged: int = 0  # images of the messages before this one are sent as placeholders


_COLUMNS = "covers, trimmed, summary, fingerprint, model, tokens_before, tokens_after, duration_ms, unimaged"


def load(con: duckdb.DuckDBPyConnection, session_id: str) -> list[Compaction]:
    """The session's compactions, newest (most covered, then most trimmed, then most
    images dropped) first."""
    rows = con.execute(
        f"SELECT {_COLUMNS} FROM context_summaries WHERE session_id = ? "
        "ORDER BY covers DESC, trimmed DESC, unimaged DESC",
        [session_id],
    ).fetchall()
    return [
        Compaction(covers, trimmed, summary, fingerprint, model, before, after, ms, unimaged or 0)
        for covers, trimmed, summary, fingerprint, model, before, after, ms, unimaged in rows
    ]


def save(con: duckdb.DuckDBPyConnection, session_id: str, compaction: Compaction) -> None:
    """Store ``compaction`` (a second kernel that made the same one replaces it)."""
    c = compaction
    con.execute(
        f"INSERT OR REPLACE INTO context_summaries (session_id, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            session_id,
            c.covers,
            c.trimmed,
            c.summary,
            c.fingerprint,
            c.model,
            c.tokens_before,
            c.tokens_after,
            c.duration_ms,
            c.unimaged,
        ],
    )


def merged(stored: Iterable[Compaction], saved: Iterable[Compaction]) -> list[Compaction]:
    """What :func:`load` returns once the ``saved`` compactions (in the order saved) are
    stored beside ``stored`` (as :func:`load` returned them): a row of the same ``covers``
    and ``trimmed`` is replaced, the newest come first."""
    rows = {(c.covers, c.trimmed): c for c in [*stored, *saved]}
    return sorted(rows.values(), key=lambda c: (c.covers, c.trimmed, c.unimaged), reverse=True)
