"""The API's JSON: sessions, the jobs list and stats read from one open connection (a
page of a list at a time); single jobs and runs as the scheduler service returns them.

Plain functions of what they show and the server's root directory, so the handlers stay
thin and the shapes can be tested without a server. Paths inside the root are also
given relative to it (what JupyterLab opens); instants are ISO 8601 UTC.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from agent_kernel.scheduler.checks import KINDS
from agent_kernel.scheduler.clock import from_db, iso
from agent_kernel.scheduler.jobs import Jobs
from agent_kernel.scheduler.rundir import RunDir
from agent_kernel.scheduler.runs import Runs
from agent_kernel.store.audit import stats
from agent_kernel.store.retention import measure
from agent_kernel.store.sessions import Sessions
from agent_kernel.store.usage import SOURCES, sessions_cost

if TYPE_CHECKING:
    import duckdb

    from agent_kernel.grants import GrantsJson
    from agent_kernel.scheduler.jobs import Job
    from agent_kernel.scheduler.runs import Run
    from agent_kernel.server.shapes import (
        JobJson,
        RunDetailJson,
        RunJson,
        SessionDetailJson,
        SessionJson,
        SourceUsageJson,
        StatsJson,
        StoreSizeJson,
    )
    from agent_kernel.store.sessions import Session

MAX_MESSAGES = 500
PAGE = 100  # a list's page when the request names no limit
MAX_PAGE = 1_000


def session_costs(con: duckdb.DuckDBPyConnection, sessions: list[Session]) -> dict[str, float | None]:
    """What each session has cost in US dollars, from its recorded model calls; None for a
    session with no priced call (no call yet, or only calls to a model without a price)."""
    found = sessions_cost(con, [s.id for s in sessions])
    costs: dict[str, float | None] = {}
    for session in sessions:
        cost, unpriced = found.get(session.id, (0.0, 0))
        calls_priced = cost > 0 or (session.id in found and not unpriced)
        costs[session.id] = cost if calls_priced else None
    return costs


def relative_path(path: str | None, root: Path) -> str | None:
    """``path`` relative to the server's root (with ``/``), or None when it lies outside
    the root or in a hidden folder (JupyterLab cannot open it there)."""
    if not path:
        return None
    try:
        relative = Path(path).resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return None
    if any(part.startswith(".") for part in relative.parts):
        return None
    return relative.as_posix()


# -- sessions ---------------------------------------------------------------------------------


def session_json(session: Session, root: Path, cost: float | None) -> SessionJson:
    return {
        "id": session.id,
        "name": session.name,
        "notebook": session.notebook,
        "notebook_path": relative_path(session.notebook, root),
        "state": session.state,
        "model": session.model,
        "tokens": session.tokens_used,
        "token_limit": session.token_limit,
        "cost": cost,
        "parent_id": session.parent_id,
        "last_error": session.last_error,
        "created_at": _iso_naive(session.created_at),
        "updated_at": _iso_naive(session.updated_at),
    }


def list_sessions(
    con: duckdb.DuckDBPyConnection, root: Path, notebook: str | None, *, limit: int = PAGE, offset: int = 0
) -> list[SessionJson]:
    """A page of sessions, most recently used first; with ``notebook`` (a path relative to
    the root) only that notebook's sessions and the sub-sessions they spawned.

    Only the page is read and priced: the store may hold thousands of sessions. A session
    keeps the notebook's path as its kernel saw it, so the filter matches the path under
    the root as given and as resolved (a symlinked root), not each stored path resolved."""
    notebooks: tuple[str, ...] = ()
    if notebook is not None:
        given = root / notebook
        try:
            resolved = str(given.resolve())
        except (OSError, RuntimeError):  # a symlink loop
            resolved = os.path.normpath(given)
        notebooks = tuple(dict.fromkeys((os.path.normpath(given), resolved)))
    sessions = Sessions(con).page(limit=limit, offset=offset, notebooks=notebooks)
    costs = session_costs(con, sessions)
    return [session_json(s, root, costs[s.id]) for s in sessions]


def session_detail(con: duckdb.DuckDBPyConnection, root: Path, session_id: str) -> SessionDetailJson | None:
    sessions = Sessions(con)
    session = sessions.get(session_id)
    if session is None:
        return None
    messages = sessions.messages(session_id)
    shown = messages[-MAX_MESSAGES:]
    return {
        **session_json(session, root, session_costs(con, [session])[session.id]),
        "messages": [
            {"seq": m.seq, "turn": m.turn, "role": m.role, "content": m.content, "created_at": _iso_naive(m.created_at)}
            for m in shown
        ],
        "messages_total": len(messages),
    }


# -- jobs and runs ----------------------------------------------------------------------------


def list_jobs(con: duckdb.DuckDBPyConnection, root: Path, *, limit: int = PAGE, offset: int = 0) -> list[JobJson]:
    """A page of the jobs, newest first, each with its latest run (skipped firings aside).

    Only the page's jobs are read, and their latest runs are found by one grouped query
    over their ids: a window over every run grows with the store (half a second at
    64,000 runs)."""
    marks = ", ".join("?" * len(KINDS))
    ids = [
        job_id
        for (job_id,) in con.execute(
            f"SELECT id FROM jobs WHERE deleted_at IS NULL AND kind IN ({marks}) "
            "ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
            [*KINDS, limit, offset],
        ).fetchall()
    ]
    jobs = Jobs(con).all_by_id(set(ids))
    latest = Runs(con).latest_by_job(job_ids=ids)
    return [job_json(jobs[job_id], latest.get(job_id), root) for job_id in ids if job_id in jobs]


def job_json(job: Job, last: Run | None, root: Path) -> JobJson:
    return {
        "id": job.id,
        "name": job.name,
        "kind": job.kind,
        "type": job.type,
        "schedule": job.schedule.describe(),
        "cron": job.cron,
        "at": iso(job.run_at),
        "timezone": job.timezone,
        "notebook": job.notebook,
        "notebook_path": relative_path(job.notebook, root),
        "task": job.task,
        "parameters": job.parameters,
        "overlap": job.overlap,
        "enabled": job.enabled,
        "next_run": iso(job.next_run_at),
        "last_run": iso(last.started_at or last.scheduled_for) if last else None,
        "last_status": last.status if last else None,
        "last_run_id": last.id if last else None,
        "created_by": job.created_by,
        "created_at": iso(job.created_at),
        "version": job.version,
        "timeout_s": job.timeout_s,
        "notify": job.options.get("notify"),  # target names and when: never a URL
        "explain": bool(job.options.get("explain")),
        "grants": _grants(job),
        "granted_by": job.granted_by if job.grants else None,
    }


def _grants(job: Job) -> GrantsJson | None:
    """The job's standing grants as stored; None when it has none or they are malformed
    (such a job's runs are refused: its runs' errors say why)."""
    try:
        granted = job.standing_grants
    except ValueError:
        return None
    return granted.as_json() if granted else None


def run_json(run: Run, job: Job | None, root: Path) -> RunJson:
    return {
        **run.to_json(),
        "job_name": job.name if job else None,
        "output_notebook": relative_path(run.output_path, root),
    }


def run_detail(run: Run, job: Job | None, root: Path, log_chars: int = 20_000) -> RunDetailJson:
    """A run with the tails of its logs (the cells' stdout and stderr, the runner's own)."""
    data = run_json(run, job, root)
    logs: dict[str, str] = {}
    if run.run_dir:
        run_dir = RunDir(Path(run.run_dir))
        for name, target in (("runner", run_dir.runner_log), ("stdout", run_dir.stdout), ("stderr", run_dir.stderr)):
            if target.exists():
                logs[name] = run_dir.log_tail(target, log_chars)
    return {**data, "log": logs}


# -- stats ------------------------------------------------------------------------------------


def stats_json(con: duckdb.DuckDBPyConnection, days: int, now: datetime) -> StatsJson:
    """Code runs, failures by category, tool calls, tokens and cost per day."""
    summary = stats(con, days)
    since = (now - timedelta(days=days)).replace(tzinfo=None)
    per_day = con.execute(
        "SELECT CAST(created_at AS DATE) AS day, count(*), count(*) FILTER (WHERE NOT success) "
        "FROM code_executions WHERE created_at >= ? GROUP BY ALL ORDER BY day",
        [since],
    ).fetchall()
    tokens = con.execute(
        # A parent's tokens_used includes its sub-sessions': top-level sessions hold them all.
        "SELECT coalesce(sum(tokens_used), 0) FROM sessions WHERE updated_at >= ? AND parent_id IS NULL",
        [since],
    ).fetchone()
    cost_per_day = dict(
        con.execute(
            "SELECT CAST(created_at AS DATE), sum(cost_usd) FROM model_calls WHERE created_at >= ? GROUP BY ALL",
            [since],
        ).fetchall()
    )
    return {
        "days": days,
        "model_calls": model_calls_by_source(con, since),
        "code_runs": summary.executions,
        "succeeded": summary.succeeded,
        "failed": summary.failed,
        "mean_ms": summary.mean_ms,
        "failures_by_category": dict(summary.categories),
        "tool_calls": summary.tool_calls,
        "tool_errors": summary.tool_errors,
        "top_tools": dict(summary.top_tools),
        "tokens": int(tokens[0]) if tokens else 0,
        "per_day": [
            {"day": day.isoformat(), "code_runs": runs, "failures": failed, "cost": cost_per_day.get(day)}
            for day, runs, failed in per_day
        ],
        "store": store_size_json(con),
    }


def store_size_json(con: duckdb.DuckDBPyConnection) -> StoreSizeJson:
    """The size and growth of the store ``con`` is open on (the panel's size line)."""
    row = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    size = measure(con, Path(row[0] if row and row[0] else ""))
    oldest = size.oldest.isoformat() + "Z" if size.oldest else None
    return {
        "bytes": size.total_bytes,
        "per_day": round(size.per_day),
        "oldest": oldest,
        "text": size.text(),
    }


def model_calls_by_source(con: duckdb.DuckDBPyConnection, since: datetime) -> dict[str, SourceUsageJson]:
    """Model calls since ``since`` for each source (``turn``, ``completion``): calls, tokens, cost."""
    rows = con.execute(
        "SELECT coalesce(source, 'turn'), count(*), sum(input_tokens + cache_read_tokens + cache_write_tokens), "
        "sum(output_tokens), sum(cost_usd) FROM model_calls WHERE created_at >= ? GROUP BY ALL",
        [since],
    ).fetchall()
    found: dict[str, SourceUsageJson] = {
        source: {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost": None} for source in SOURCES
    }
    for source, calls, given, output, cost in rows:
        found[source] = {
            "calls": int(calls), "input_tokens": int(given or 0), "output_tokens": int(output or 0),
            "cost": None if cost is None else float(cost),
        }  # fmt: skip
    return found


def _iso_naive(value: datetime | None) -> str | None:
    """A stored (naive UTC) timestamp as ISO 8601 UTC."""
    return iso(from_db(value)) if value is not None else None


def dumps(value: object) -> str:
    return json.dumps(value, default=str)
