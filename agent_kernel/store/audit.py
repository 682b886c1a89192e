"""The audit trail: every tool call and every ``run_code`` execution, stored with the turn.

Like :class:`~agent_kernel.store.sessions.Journal`, an :class:`AuditLog` only collects
while the turn runs; its :meth:`~AuditLog.write` goes to the write-behind thread with the
messages, so recording costs the turn no DuckDB connection of its own.

The tables are read-only to the model (the SQL guard writes only ``ai_*``); ``%agent_stats``
and ``%agent_failures`` read them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from agent_kernel.store.rows import aggregate_row, insert_rows

if TYPE_CHECKING:
    import duckdb

ERROR_CATEGORIES = ("syntax", "import", "type", "reference", "timeout", "network", "runtime")

_BY_TYPE = {
    "SyntaxError": "syntax",
    "IndentationError": "syntax",
    "TabError": "syntax",
    "ImportError": "import",
    "ModuleNotFoundError": "import",
    "TypeError": "type",
    "NameError": "reference",
    "UnboundLocalError": "reference",
    "AttributeError": "reference",
    "TimeoutError": "timeout",
}
# Exception names (from any library) that mean the network failed.
_NETWORK_TYPES = {
    "ConnectionError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "ConnectionAbortedError",
    "gaierror",
    "herror",
    "URLError",
    "HTTPError",
    "ConnectError",
    "ConnectTimeout",
    "ReadTimeout",
    "RemoteDisconnected",
    "ProxyError",
    "SSLError",
    "NetworkError",
    "TransportError",
}
_NETWORK_WORDS = (
    "connection refused",
    "name or service not known",
    "temporary failure in name resolution",
    "network is unreachable",
    "max retries exceeded",
    "nodename nor servname",
)


def error_category(error: Mapping[str, Any] | None) -> str | None:
    """syntax / import / type / reference / timeout / network / runtime (None: no error)."""
    if not error:
        return None
    kind = str(error.get("type", ""))
    message = str(error.get("message", "")).lower()
    if kind in _NETWORK_TYPES or any(word in message for word in _NETWORK_WORDS):
        return "network"
    return _BY_TYPE.get(kind, "runtime")


def _utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class AuditLog:
    """A turn's tool calls and code executions, not stored yet."""

    def __init__(self, session_id: str, turn: int, prompt: str) -> None:
        self.session_id = session_id
        self.turn = turn
        self.prompt = prompt
        self._lock = threading.Lock()
        self._calls: list[list[Any]] = []
        self._executions: list[list[Any]] = []
        self._runs = 0  # code runs recorded so far: the next one's place in the turn

    def tool_call(
        self,
        use: Mapping[str, Any],
        *,
        result_chars: int,
        is_error: bool,
        duration_ms: float | None,
        executions: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        """Record one call (``use`` is the tool_use block) and the code it ran."""
        now = _utc_now()
        tool_input = use.get("input")
        isolated = bool(isinstance(tool_input, dict) and tool_input.get("isolated"))
        with self._lock:
            self._calls.append(
                [
                    self.session_id,
                    self.turn,
                    use.get("id"),
                    use.get("name"),
                    tool_input,
                    result_chars,
                    is_error,
                    duration_ms,
                    now,
                ]
            )
            for run in executions:
                error = run.get("error") or {}
                self._runs += 1
                self._executions.append(
                    [
                        run.get("execution_id"),
                        self.session_id,
                        self.turn,
                        run.get("code", ""),
                        run.get("stdout"),
                        run.get("stderr"),
                        bool(run.get("success")),
                        run.get("duration_ms"),
                        error.get("type"),
                        error.get("message"),
                        error.get("traceback"),
                        error_category(error) if not run.get("success") else None,
                        self.prompt,
                        isolated,
                        now,
                        self._runs,
                    ]
                )

    def write(self, con: duckdb.DuckDBPyConnection) -> None:
        """Store everything recorded so far (run by the write-behind thread)."""
        with self._lock:
            calls, self._calls = self._calls, []
            executions, self._executions = self._executions, []
        if calls:
            for row in calls:
                row[4] = json.dumps(row[4], ensure_ascii=False, default=str)
            insert_rows(con, "tool_calls", _CALL_COLUMNS, calls)
        if executions:
            insert_rows(con, "code_executions", _EXECUTION_COLUMNS, executions)


_CALL_COLUMNS = "session_id, turn, tool_use_id, tool, input, result_chars, is_error, duration_ms, created_at"
_EXECUTION_COLUMNS = (
    "id, session_id, turn, code, stdout, stderr, success, duration_ms, error_type, error_message, "
    "traceback, error_category, trigger_prompt, isolated, created_at, seq"
)


# -- reading ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stats:
    """Code executions and tool calls over a time window."""

    days: int
    executions: int
    succeeded: int
    failed: int
    mean_ms: float | None
    categories: list[tuple[str, int]]
    tool_calls: int
    tool_errors: int
    top_tools: list[tuple[str, int]]


@dataclass(frozen=True)
class Failure:
    """One failed execution."""

    id: str
    created_at: datetime
    session: str | None
    category: str | None
    error_type: str | None
    error_message: str | None
    code: str


def stats(con: duckdb.DuckDBPyConnection, days: int) -> Stats:
    since = _utc_now() - timedelta(days=days)
    total, succeeded, mean_ms = aggregate_row(
        con.execute(
            "SELECT count(*), count(*) FILTER (WHERE success), avg(duration_ms) "
            "FROM code_executions WHERE created_at >= ?",
            [since],
        )
    )
    categories = con.execute(
        "SELECT error_category, count(*) AS n FROM code_executions "
        "WHERE created_at >= ? AND NOT success GROUP BY ALL ORDER BY n DESC, error_category",
        [since],
    ).fetchall()
    calls, errors = aggregate_row(
        con.execute("SELECT count(*), count(*) FILTER (WHERE is_error) FROM tool_calls WHERE created_at >= ?", [since])
    )
    tools = con.execute(
        "SELECT tool, count(*) AS n FROM tool_calls WHERE created_at >= ? GROUP BY ALL ORDER BY n DESC, tool LIMIT 5",
        [since],
    ).fetchall()
    return Stats(
        days,
        total,
        succeeded,
        total - succeeded,
        mean_ms,
        [(c or "runtime", n) for c, n in categories],
        calls,
        errors,
        [(t, n) for t, n in tools],
    )


def failures(con: duckdb.DuckDBPyConnection, limit: int) -> list[Failure]:
    rows = con.execute(
        "SELECT e.id, e.created_at, s.name, e.error_category, e.error_type, e.error_message, e.code "
        "FROM code_executions e LEFT JOIN sessions s ON s.id = e.session_id "
        "WHERE NOT e.success ORDER BY e.created_at DESC LIMIT ?",
        [limit],
    ).fetchall()
    return [Failure(*row) for row in rows]
