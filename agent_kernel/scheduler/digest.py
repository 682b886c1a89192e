"""What the daily digest notebook (``notebooks/daily_digest.ipynb``) summarises.

:func:`collect_digest` gathers, from the agent's database, the last ``hours`` of
scheduled runs (failures first), what fires in the next ``hours``, and the sessions
that were active; the result shows as Markdown in a notebook and its ``markdown`` goes
into the ``%agent`` prompt that writes the digest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from agent_kernel.scheduler.clock import SystemClock, from_db, iso, to_db

MAX_ITEMS = 15


@dataclass
class Digest:
    since: datetime
    hours: float
    timezone: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    upcoming: list[dict[str, Any]] = field(default_factory=list)
    sessions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failures(self) -> list[dict[str, Any]]:
        return [r for r in self.runs if r["status"] in ("FAILED", "TIMED_OUT", "LOST")]

    @property
    def markdown(self) -> str:
        def local(instant: datetime) -> str:
            return (iso(instant, self.timezone) or "").replace("T", " ")[:16]

        lines = [f"### Since {local(self.since)}"]
        ok = sum(r["status"] == "SUCCEEDED" for r in self.runs)
        lines.append(f"**Scheduled runs:** {len(self.runs)} ({ok} succeeded, {len(self.failures)} failed or lost)")
        for run in (self.failures + [r for r in self.runs if r not in self.failures])[:MAX_ITEMS]:
            error = f" — {run['error']}" if run["error"] else ""
            lines.append(f"- {run['status']} `{run['job']}` at {local(run['scheduled_for'])}{error}")
        lines.append(f"\n**Coming up in the next {self.hours:g} h:** {len(self.upcoming)}")
        for job in self.upcoming[:MAX_ITEMS]:
            lines.append(f"- {local(job['next_run'])} `{job['name']}` ({job['kind']})")
        lines.append(f"\n**Agent sessions active:** {len(self.sessions)}")
        for session in self.sessions[:MAX_ITEMS]:
            lines.append(f"- `{session['name']}`: {session['messages']} new messages, state {session['state']}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from agent_kernel.display.safe import markdown_html  # run errors and names may hold model text

        return markdown_html(self.markdown)


def collect_digest(hours: float = 24, *, db_path: str | Path | None = None, now: datetime | None = None,
                   timezone: str | None = None) -> Digest:  # fmt: skip
    """The last and next ``hours`` of the agent's scheduled work and sessions."""
    from agent_kernel.paths import default_db_path
    from agent_kernel.store import Store
    from agent_kernel.scheduler.cron import local_timezone_name

    now = now or SystemClock().now()
    since, horizon = now - timedelta(hours=hours), now + timedelta(hours=hours)
    digest = Digest(since=since, hours=hours, timezone=timezone or local_timezone_name())
    with Store(db_path or default_db_path()).connect() as con:
        rows = con.execute(
            "SELECT coalesce(j.name, r.job_id), r.status, r.scheduled_for, r.error FROM runs r "
            "LEFT JOIN jobs j ON j.id = r.job_id WHERE r.scheduled_for >= ? AND r.scheduled_for <= ? "
            "AND r.status <> 'SKIPPED' ORDER BY r.scheduled_for DESC",
            [to_db(since), to_db(now)],
        ).fetchall()
        digest.runs = [
            {"job": name, "status": status, "scheduled_for": from_db(at), "error": (error or "").splitlines()[0][:160] if error else ""}
            for name, status, at, error in rows
        ]  # fmt: skip
        rows = con.execute(
            "SELECT name, kind, next_run_at FROM jobs WHERE deleted_at IS NULL AND enabled "
            "AND next_run_at > ? AND next_run_at <= ? ORDER BY next_run_at",
            [to_db(now), to_db(horizon)],
        ).fetchall()
        digest.upcoming = [{"name": name, "kind": kind, "next_run": from_db(at)} for name, kind, at in rows]
        rows = con.execute(
            "SELECT s.name, s.state, count(m.seq) FROM sessions s JOIN messages m ON m.session_id = s.id "
            "WHERE m.created_at >= ? GROUP BY s.name, s.state ORDER BY max(m.created_at) DESC",
            [to_db(since)],
        ).fetchall()
        digest.sessions = [{"name": name, "state": state, "messages": count} for name, state, count in rows]
    return digest
