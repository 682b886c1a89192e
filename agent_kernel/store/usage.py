"""Every model call, stored with its tokens and cost; what the usage magics read.

Like the :class:`~agent_kernel.store.audit.AuditLog`, a :class:`UsageLog` collects a
turn's calls while it runs and its :meth:`~UsageLog.write` goes to the write-behind
thread. ``cost_usd`` is NULL for a model without a price: sums over it are the cost of
the priced calls, and the ``unpriced`` counts say how many calls they leave out.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from agent_kernel.store.rows import aggregate_row, insert_rows

if TYPE_CHECKING:
    import duckdb

    from agent_kernel.model.usage import CallUsage

__all__ = [
    "SOURCES",
    "DayUsage",
    "SessionUsage",
    "UsageLog",
    "daily",
    "record_completion",
    "session_usage",
    "sessions_cost",
]

# What made a model call (model_calls.source): a turn (with its side calls) or an inline
# completion (no session: the server extension makes it for the editor).
SOURCES = ("turn", "completion")


def _utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class UsageLog:
    """A turn's model calls, not stored yet."""

    def __init__(self, session_id: str, turn: int) -> None:
        self.session_id = session_id
        self.turn = turn
        self._lock = threading.Lock()
        self._rows: list[list[Any]] = []
        self._calls = 0

    def call(
        self,
        usage: CallUsage,
        *,
        duration_ms: float | None,
        request_chars: int | None = None,
        stop_reason: str | None = None,
    ) -> None:
        with self._lock:
            self._calls += 1
            self._rows.append([
                self.session_id, self.turn, self._calls, usage.model, usage.input_tokens,
                usage.output_tokens, usage.cache_read, usage.cache_write, request_chars,
                duration_ms, usage.cost, stop_reason, _utc_now(),
            ])  # fmt: skip

    def write(self, con: duckdb.DuckDBPyConnection) -> None:
        with self._lock:
            rows, self._rows = self._rows, []
        insert_rows(con, "model_calls", _CALL_COLUMNS, rows)


_CALL_COLUMNS = (
    "session_id, turn, call, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, "
    "request_chars, duration_ms, cost_usd, stop_reason, created_at"
)


def record_completion(
    con: duckdb.DuckDBPyConnection,
    usage: CallUsage,
    *,
    duration_ms: float | None,
    request_chars: int | None,
    stop_reason: str | None,
) -> None:
    """Store one inline completion's model call: source ``completion``, no session or turn.

    A completion cancelled while it streamed is stored too, with the tokens the API had
    reported by then (its input is billed whether or not the answer was read)."""
    insert_rows(con, "model_calls", _CALL_COLUMNS + ", source", [[
        None, None, 1, usage.model, usage.input_tokens, usage.output_tokens, usage.cache_read,
        usage.cache_write, request_chars, duration_ms, usage.cost, stop_reason, _utc_now(), "completion",
    ]])  # fmt: skip


@dataclass(frozen=True)
class SessionUsage:
    """A session's cost so far and the size of its last request (for the next estimate)."""

    cost: float  # USD of its priced calls
    unpriced: int  # calls of models without a price
    last_prompt_tokens: int | None  # all input tokens of the last call
    last_request_chars: int | None


def session_usage(con: duckdb.DuckDBPyConnection, session_id: str) -> SessionUsage:
    """The session's usage; its cost includes its sub-sessions' (at any depth), as its
    ``tokens_used`` does: both count against its limits."""
    since = _calls_since(con, [session_id])  # as in sessions_cost: only the calls it can have
    cost, unpriced = aggregate_row(
        con.execute(
            "WITH RECURSIVE tree(id) AS (SELECT CAST(? AS VARCHAR) UNION "
            "SELECT s.id FROM sessions s JOIN tree ON s.parent_id = tree.id) "
            "SELECT coalesce(sum(cost_usd), 0), count(*) FILTER (WHERE cost_usd IS NULL) "
            "FROM model_calls WHERE created_at >= ? AND session_id IN (SELECT id FROM tree)",
            [session_id, since],
        )
    )
    last = con.execute(
        "SELECT input_tokens + cache_read_tokens + cache_write_tokens, request_chars FROM model_calls "
        "WHERE created_at >= ? AND session_id = ? ORDER BY created_at DESC, turn DESC, call DESC LIMIT 1",
        [since, session_id],
    ).fetchone()
    return SessionUsage(float(cost), int(unpriced), *(last if last else (None, None)))


def sessions_cost(con: duckdb.DuckDBPyConnection, session_ids: list[str]) -> dict[str, tuple[float, int]]:
    """Each session's (cost of its priced calls, number of unpriced calls), its sub-sessions'
    included as in its ``tokens_used``; absent: no calls."""
    if not session_ids:
        return {}
    since = _calls_since(con, session_ids)
    rows = con.execute(
        "WITH RECURSIVE tree(root, id) AS (SELECT unnest(?), unnest(?) UNION "
        "SELECT tree.root, s.id FROM sessions s JOIN tree ON s.parent_id = tree.id) "
        "SELECT tree.root, coalesce(sum(cost_usd), 0), count(*) FILTER (WHERE cost_usd IS NULL) "
        "FROM model_calls JOIN tree ON model_calls.session_id = tree.id WHERE model_calls.created_at >= ? "
        "GROUP BY tree.root",
        [session_ids, session_ids, since],
    ).fetchall()
    return {sid: (float(cost), int(unpriced)) for sid, cost, unpriced in rows}


@dataclass(frozen=True)
class DayUsage:
    """One model's calls of one source (:data:`SOURCES`) on one day (UTC)."""

    day: date
    model: str
    source: str
    calls: int
    input_tokens: int
    output_tokens: int
    cache_read: int
    cache_write: int
    cost: float | None  # None: none of these calls had a price
    unpriced: int

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read + self.cache_write


def daily(con: duckdb.DuckDBPyConnection, days: int) -> list[DayUsage]:
    """Tokens and cost per day, model and source over the last ``days`` days, newest first."""
    since = _utc_now() - timedelta(days=days)
    rows = con.execute(
        "SELECT CAST(created_at AS DATE) AS day, model, coalesce(source, 'turn') AS source, count(*), "
        "sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens), sum(cost_usd), "
        "count(*) FILTER (WHERE cost_usd IS NULL) "
        "FROM model_calls WHERE created_at >= ? GROUP BY ALL ORDER BY day DESC, source DESC, model",
        [since],
    ).fetchall()
    return [
        DayUsage(day, model, source, int(n), int(i), int(o), int(r), int(w), None if c is None else float(c), int(u))
        for day, model, source, n, i, o, r, w, c, u in rows
    ]


def _calls_since(con: duckdb.DuckDBPyConnection, session_ids: list[str]) -> datetime:
    """No call predates its session (nor a sub-session its parent): bounding the calls by the
    oldest session's creation, a day early for safety, lets DuckDB skip the older row groups
    of model_calls, so a recent session reads only the recent calls, whatever the store holds."""
    oldest = con.execute(
        "SELECT min(created_at) - INTERVAL 1 DAY FROM sessions WHERE id IN (SELECT unnest(?))", [session_ids]
    ).fetchone()
    return oldest[0] if oldest and oldest[0] is not None else datetime.min
