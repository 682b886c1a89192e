"""Runs: one row per firing of a job's slot (and per retry of it).

Statuses::

    QUEUED --> RUNNING --> SUCCEEDED | FAILED | TIMED_OUT | CANCELLED | LOST
    QUEUED --> CANCELLED
    (fired) -> SKIPPED          missed while no scheduler ran, or overlapping a live run

The status comes from how the run's process ended (see :mod:`.execute`), never from
the output notebook's metadata. ``UNIQUE(job_id, scheduled_for, attempt)`` makes a slot
fire once: inserting a firing that exists already does nothing.
"""

from __future__ import annotations

import builtins
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from agent_kernel.scheduler.clock import from_db, iso, to_db

if TYPE_CHECKING:
    import duckdb

    from agent_kernel.scheduler.records import RunRecord, RunResult

QUEUED, RUNNING = "QUEUED", "RUNNING"
SUCCEEDED, FAILED, TIMED_OUT, CANCELLED, LOST, SKIPPED = (
    "SUCCEEDED", "FAILED", "TIMED_OUT", "CANCELLED", "LOST", "SKIPPED",
)  # fmt: skip
STATUSES = (QUEUED, RUNNING, SUCCEEDED, FAILED, TIMED_OUT, CANCELLED, LOST, SKIPPED)
ACTIVE = (QUEUED, RUNNING)
FINISHED = (SUCCEEDED, FAILED, TIMED_OUT, CANCELLED, LOST)

_COLUMNS = (
    "id", "job_id", "scheduled_for", "attempt", "cause", "status", "not_before", "created_at",
    "started_at", "finished_at", "heartbeat_at", "worker", "executor", "executor_detail",
    "run_dir", "output_path", "error", "error_cell", "exit_code", "cells_done", "cells_total",
    "cancel_requested", "job_version", "notified", "notify_error", "explanation", "explain_tokens",
    "explain_cost", "parameters",
)  # fmt: skip
_INSTANTS = {"scheduled_for", "not_before", "created_at", "started_at", "finished_at", "heartbeat_at"}
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM runs"
# The version its job has now: what a run starting now runs with.
_JOB_VERSION = "(SELECT version FROM jobs WHERE jobs.id = ?)"


@dataclass(frozen=True)
class Run:
    """One row of ``runs``."""

    id: str
    job_id: str
    scheduled_for: datetime
    attempt: int
    cause: str  # schedule | catchup | manual | retry
    status: str
    not_before: datetime
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    heartbeat_at: datetime | None = None
    worker: str | None = None
    executor: str | None = None
    executor_detail: str | None = None
    run_dir: str | None = None
    output_path: str | None = None
    error: str | None = None
    error_cell: int | None = None  # the code cell that failed: its In [N] in a clean run
    exit_code: int | None = None
    cells_done: int | None = None
    cells_total: int | None = None
    cancel_requested: bool = False
    job_version: int | None = None  # the version of its job it started with (history.py)
    notified: str | None = None  # the notification targets told of its end (notify.py)
    notify_error: str | None = None  # why a notification was not delivered
    explanation: str | None = None  # why it failed, by the small model (explain.py)
    explain_tokens: int | None = None
    explain_cost: float | None = None
    parameters: dict[str, Any] | None = None  # over its job's (a run now with other values)

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> Run:
        values = dict(zip(_COLUMNS, row))
        for name in _INSTANTS:
            values[name] = from_db(values[name])
        if isinstance(values["parameters"], str):
            values["parameters"] = json.loads(values["parameters"])
        return cls(**values)

    @property
    def seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()

    def to_json(self) -> RunRecord:
        """Plain JSON values (instants as ISO 8601 UTC), keyed in the order of ``_COLUMNS``."""
        return {
            "id": self.id,
            "job_id": self.job_id,
            "scheduled_for": iso(self.scheduled_for),
            "attempt": self.attempt,
            "cause": self.cause,
            "status": self.status,
            "not_before": iso(self.not_before),
            "created_at": iso(self.created_at),
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
            "heartbeat_at": iso(self.heartbeat_at),
            "worker": self.worker,
            "executor": self.executor,
            "executor_detail": self.executor_detail,
            "run_dir": self.run_dir,
            "output_path": self.output_path,
            "error": self.error,
            "error_cell": self.error_cell,
            "exit_code": self.exit_code,
            "cells_done": self.cells_done,
            "cells_total": self.cells_total,
            "cancel_requested": self.cancel_requested,
            "job_version": self.job_version,
            "notified": self.notified,
            "notify_error": self.notify_error,
            "explanation": self.explanation,
            "explain_tokens": self.explain_tokens,
            "explain_cost": self.explain_cost,
            "parameters": self.parameters,
            "seconds": self.seconds,
        }


@dataclass(frozen=True)
class Outcome:
    """How a run ended, as the executor reports it."""

    status: str
    error: str | None = None
    error_cell: int | None = None
    exit_code: int | None = None
    cells_done: int | None = None
    cells_total: int | None = None
    executor_detail: str | None = None

    @classmethod
    def from_result(cls, result: RunResult) -> Outcome:
        return cls(
            status=result["status"],
            error=result.get("error"),
            error_cell=result.get("error_cell"),
            exit_code=result.get("exit_code"),
            cells_done=result.get("cells_done"),
            cells_total=result.get("cells_total"),
            executor_detail=result.get("executor_detail"),
        )


class Runs:
    """The ``runs`` table through one open connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    # -- reading -------------------------------------------------------------------------

    def get(self, run_id: str) -> Run | None:
        row = self.con.execute(f"{_SELECT} WHERE id = ?", [run_id]).fetchone()
        return Run.from_row(row) if row else None

    def find(self, key: str) -> Run | None:
        """A run by id or unique id prefix."""
        rows = self.con.execute(f"{_SELECT} WHERE id LIKE ?", [key.replace("%", "") + "%"]).fetchall()
        return Run.from_row(rows[0]) if len(rows) == 1 else None

    def list(self, *, job_id: str | None = None, limit: int = 50, statuses: tuple[str, ...] = ()) -> list[Run]:
        where, params = [], []
        if job_id is not None:
            where.append("job_id = ?")
            params.append(job_id)
        if statuses:
            where.append(f"status IN ({', '.join('?' * len(statuses))})")
            params.extend(statuses)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self.con.execute(
            f"{_SELECT}{clause} ORDER BY scheduled_for DESC, attempt DESC, created_at DESC LIMIT ?",
            [*params, limit],
        ).fetchall()
        return [Run.from_row(row) for row in rows]

    def latest_by_job(self, *, finished_only: bool = False, job_ids: Sequence[str] | None = None) -> dict[str, Run]:
        """Each job's most recent run (by slot, then attempt), skipped firings excluded;
        ``job_ids`` narrows it to those jobs (a page of them reads only their runs)."""
        wanted = FINISHED if finished_only else (*ACTIVE, *FINISHED)
        marks = ", ".join("?" * len(wanted))
        narrowed = " AND job_id IN (SELECT unnest(?))" if job_ids is not None else ""
        rows = self.con.execute(
            f"{_SELECT} WHERE status IN ({marks}){narrowed} "
            "QUALIFY row_number() OVER (PARTITION BY job_id ORDER BY scheduled_for DESC, attempt DESC) = 1",
            [*wanted, *([list(job_ids)] if job_ids is not None else [])],
        ).fetchall()
        return {run.job_id: run for run in map(Run.from_row, rows)}

    def active(self, job_id: str | None = None) -> builtins.list[Run]:
        clause = " AND job_id = ?" if job_id is not None else ""
        params = [job_id] if job_id is not None else []
        rows = self.con.execute(
            f"{_SELECT} WHERE status IN ('QUEUED', 'RUNNING'){clause} ORDER BY not_before, scheduled_for", params
        ).fetchall()
        return [Run.from_row(row) for row in rows]

    def running_count(self) -> int:
        row = self.con.execute("SELECT count(*) FROM runs WHERE status = 'RUNNING'").fetchone()
        return int(row[0]) if row else 0

    def next_due_at(self) -> datetime | None:
        """When something is next due: a job's slot or a queued run's start."""
        row = self.con.execute(
            "SELECT least((SELECT min(next_run_at) FROM jobs WHERE deleted_at IS NULL AND enabled), "
            "(SELECT min(not_before) FROM runs WHERE status = 'QUEUED'))"
        ).fetchone()
        return from_db(row[0]) if row else None

    # -- writing -------------------------------------------------------------------------

    def insert(
        self,
        job_id: str,
        scheduled_for: datetime,
        *,
        cause: str,
        status: str = QUEUED,
        attempt: int = 1,
        not_before: datetime | None = None,
        error: str | None = None,
        worker: str | None = None,
        now: datetime | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> Run | None:
        """Record a firing; None when this (job, slot, attempt) was fired already.
        ``parameters``: values the run uses over its job's parameters (by name)."""
        run_id = uuid.uuid4().hex[:12]
        running = status == RUNNING
        row = self.con.execute(
            "INSERT INTO runs (id, job_id, scheduled_for, attempt, cause, status, not_before, error, "
            "worker, started_at, heartbeat_at, finished_at, parameters, job_version) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            f"{_JOB_VERSION if running else 'NULL'}) ON CONFLICT DO NOTHING RETURNING {', '.join(_COLUMNS)}",
            [
                run_id,
                job_id,
                to_db(scheduled_for),
                attempt,
                cause,
                status,
                to_db(not_before or scheduled_for),
                error,
                worker,
                to_db(now) if running else None,
                to_db(now) if running else None,
                to_db(now) if status == SKIPPED else None,
                None if parameters is None else json.dumps(parameters),
                *([job_id] if running else []),
            ],
        ).fetchone()
        return Run.from_row(row) if row else None

    def notified(self, run_id: str, targets: str, error: str | None, now: datetime) -> None:
        """Record the notification of the run's end: to whom, and what failed (None: delivered)."""
        self.con.execute(
            "UPDATE runs SET notified = ?, notify_error = ?, notified_at = ? WHERE id = ?",
            [targets, error, to_db(now), run_id],
        )

    def explained(self, run_id: str, text: str, tokens: int, cost: float | None) -> None:
        """Keep why the run failed (and what finding out cost)."""
        self.con.execute(
            "UPDATE runs SET explanation = ?, explain_tokens = ?, explain_cost = ? WHERE id = ?",
            [text, tokens, cost, run_id],
        )

    def claim(
        self, run_id: str, *, worker: str, executor: str, run_dir: str, output_path: str, now: datetime
    ) -> Run | None:
        """QUEUED -> RUNNING for ``worker``; None if someone else got there first."""
        row = self.con.execute(
            "UPDATE runs SET status = 'RUNNING', worker = ?, executor = ?, run_dir = ?, output_path = ?, "
            f"started_at = ?, heartbeat_at = ?, job_version = {_JOB_VERSION.replace('?', 'runs.job_id')} "
            f"WHERE id = ? AND status = 'QUEUED' RETURNING {', '.join(_COLUMNS)}",
            [worker, executor, run_dir, output_path, to_db(now), to_db(now), run_id],
        ).fetchone()
        return Run.from_row(row) if row else None

    def heartbeat(
        self, worker: str, now: datetime, progress: dict[str, tuple[int | None, int | None]]
    ) -> builtins.list[str]:
        """Renew ``worker``'s running runs; return those whose cancellation was asked for."""
        self.con.execute(
            "UPDATE runs SET heartbeat_at = ? WHERE worker = ? AND status = 'RUNNING'", [to_db(now), worker]
        )
        for run_id, (done, total) in progress.items():
            self.con.execute("UPDATE runs SET cells_done = ?, cells_total = ? WHERE id = ?", [done, total, run_id])
        rows = self.con.execute(
            "SELECT id FROM runs WHERE worker = ? AND status = 'RUNNING' AND cancel_requested", [worker]
        ).fetchall()
        return [row[0] for row in rows]

    def finish(self, run_id: str, outcome: Outcome, now: datetime) -> Run | None:
        """Record how a run ended (also over LOST: a late result is the truth)."""
        row = self.con.execute(
            "UPDATE runs SET status = ?, finished_at = ?, error = ?, error_cell = ?, exit_code = ?, "
            "cells_done = coalesce(?, cells_done), cells_total = coalesce(?, cells_total), "
            "executor_detail = coalesce(?, executor_detail) "
            f"WHERE id = ? AND status IN ('QUEUED', 'RUNNING', 'LOST') RETURNING {', '.join(_COLUMNS)}",
            [
                outcome.status,
                to_db(now),
                outcome.error,
                outcome.error_cell,
                outcome.exit_code,
                outcome.cells_done,
                outcome.cells_total,
                outcome.executor_detail,
                run_id,
            ],
        ).fetchone()
        return Run.from_row(row) if row else None

    def expired(self, now: datetime, lease_s: float, *, except_worker: str) -> builtins.list[Run]:
        """RUNNING runs of other workers whose heartbeat is older than the lease."""
        rows = self.con.execute(
            f"{_SELECT} WHERE status = 'RUNNING' AND worker IS DISTINCT FROM ? AND heartbeat_at < ?",
            [except_worker, to_db(now - timedelta(seconds=lease_s))],
        ).fetchall()
        return [Run.from_row(row) for row in rows]

    def running_of_others(self, worker: str) -> builtins.list[Run]:
        rows = self.con.execute(
            f"{_SELECT} WHERE status = 'RUNNING' AND worker IS DISTINCT FROM ?", [worker]
        ).fetchall()
        return [Run.from_row(row) for row in rows]

    def request_cancel(self, run_id: str, now: datetime, reason: str = "cancelled") -> str | None:
        """Cancel a queued run at once; ask the owner of a running one to stop it."""
        run = self.get(run_id)
        if run is None:
            return None
        if run.status == QUEUED:
            self.finish(run_id, Outcome(CANCELLED, error=reason), now)
            return CANCELLED
        if run.status == RUNNING:
            self.con.execute("UPDATE runs SET cancel_requested = true WHERE id = ?", [run_id])
            return RUNNING
        return run.status
