"""The pulse: a recurring autonomous agent run that keeps notes for its next firing.

There is one pulse per database, set up with the ``manage_pulse`` tool. It fires
``pulses_per_day`` times a day (48, 24, 12, 6 or 2: every 30 min, 1 h, 2 h, 4 h or 12 h)
on its active days, never inside its quiet hours; each firing is a fresh ``%agent``
session whose prompt carries the pulse's status and the notes the previous firing left
(at most 2,000 characters, written with ``manage_pulse`` action ``update_notes``).

It is an ordinary job of kind ``pulse``: the schedule is a cron expression built from
the settings, the quiet hours are windows the schedule leaves out, and the prompt is
built when a run starts so it always has the latest notes.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict

from agent_kernel.scheduler import ScheduleError
from agent_kernel.scheduler.clock import from_db, iso, to_db
from agent_kernel.scheduler.cron import QuietWindow, zone
from agent_kernel.scheduler.jobs import Job, Jobs, Policy, new_job

if TYPE_CHECKING:
    import duckdb

PULSES_PER_DAY = (48, 24, 12, 6, 2)
NOTES_LIMIT = 2000
DAY_NAMES = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")
DEFAULT_INSTRUCTION = (
    "Look after the user's work: check what changed since your last pulse (your notes, "
    "the database, scheduled runs), do what is useful and safe without asking, and keep "
    "a short record of what you did."
)
_POLICY = Policy(catchup="latest", overlap="forbid", timeout_s=1800.0, max_retries=0)


def pulse_cron(pulses_per_day: int, active_days: list[int] | tuple[int, ...]) -> str:
    """The cron expression of a pulse: every 24h/N from midnight, on the active days."""
    if pulses_per_day not in PULSES_PER_DAY:
        raise ScheduleError(
            f"pulses_per_day must be one of {', '.join(map(str, PULSES_PER_DAY))}, not {pulses_per_day}."
        )
    days = sorted(set(active_days))
    if not days or any(not isinstance(d, int) or not 0 <= d <= 6 for d in days):
        raise ScheduleError("active_days takes day numbers 0-6 (0 = Sunday, 6 = Saturday), at least one.")
    minutes = 1440 // pulses_per_day
    minute_field, hour_field = ("*/30", "*") if minutes == 30 else ("0", "*" if minutes == 60 else f"*/{minutes // 60}")
    day_field = "*" if len(days) == 7 else ",".join(map(str, days))
    return f"{minute_field} {hour_field} * * {day_field}"


def get(con: duckdb.DuckDBPyConnection) -> Job | None:
    """The pulse, if one was configured."""
    jobs = Jobs(con).list(kinds=("pulse",))
    return jobs[0] if jobs else None


def configure(
    con: duckdb.DuckDBPyConnection,
    now: datetime,
    *,
    timezone: str,
    enabled: bool | None = None,
    pulses_per_day: int | None = None,
    active_days: list[int] | None = None,
    quiet_hours: list[dict[str, str]] | list[str] | None = None,
    instruction: str | None = None,
    model: str | None = None,
) -> Job:
    """Create the pulse or change its settings; the next firing follows the new ones."""
    jobs = Jobs(con)
    current = get(con)
    options: dict[str, Any] = (
        dict(current.options)
        if current
        else {"pulses_per_day": 12, "active_days": list(range(7)), "quiet_hours": [], "notes": ""}
    )
    if pulses_per_day is not None:
        options["pulses_per_day"] = pulses_per_day
    if active_days is not None:
        options["active_days"] = sorted(set(active_days))
    if quiet_hours is not None:
        options["quiet_hours"] = [QuietWindow.parse(w).to_json() for w in quiet_hours]
    cron = pulse_cron(options["pulses_per_day"], options["active_days"])
    if current is None:
        job = new_job(
            name="pulse",
            kind="pulse",
            now=now,
            timezone=timezone,
            task=instruction or DEFAULT_INSTRUCTION,
            cron=cron,
            model=model,
            policy=_POLICY,
            options=options,
            created_by="manage_pulse",
        )
        if enabled is False:
            job = replace(job, enabled=False, next_run_at=None)
        return jobs.add(job)
    job = replace(
        current,
        cron=cron,
        options=options,
        task=instruction if instruction is not None else current.task,
        model=model if model is not None else current.model,
        enabled=current.enabled if enabled is None else enabled,
    )
    job = replace(job, next_run_at=job.schedule.next_after(now) if job.enabled else None)
    if job.enabled and job.next_run_at is None:
        raise ScheduleError(f"With these settings the pulse never fires ({job.schedule.describe()}).")
    return jobs.update(job)


def update_notes(con: duckdb.DuckDBPyConnection, notes: str) -> int:
    """Keep ``notes`` for the next firing; return their length."""
    if len(notes) > NOTES_LIMIT:
        raise ScheduleError(
            f"The notes are {len(notes):,} characters; keep them to {NOTES_LIMIT:,}: "
            "shorten them to what the next pulse needs."
        )
    job = get(con)
    if job is None:
        raise ScheduleError("There is no pulse yet: create it with manage_pulse action update_config.")
    Jobs(con).update(replace(job, options={**job.options, "notes": notes}))
    return len(notes)


class PulseStatus(TypedDict):
    """The pulse's settings with what is computed from them (:func:`status`)."""

    enabled: bool
    pulses_per_day: int
    interval_minutes: int
    active_days: list[int]
    quiet_hours: list[dict[str, str]]  # {start, end} as HH:MM
    timezone: str
    instruction: str | None
    notes: str
    fired_today: int
    remaining_today: int
    last_pulse_at: str | None
    next_pulse_at: str | None


def status(con: duckdb.DuckDBPyConnection, job: Job, now: datetime) -> PulseStatus:
    """The pulse's settings with what is computed from them (today's counts, next firing)."""
    tz = zone(job.timezone)
    local_now = now.astimezone(tz)
    midnight = local_now.replace(hour=0, minute=0, second=0, microsecond=0)
    next_midnight = (midnight + timedelta(days=1, hours=2)).replace(hour=0)  # DST-safe
    row = con.execute(
        "SELECT count(*) FILTER (WHERE scheduled_for >= ?), max(scheduled_for) FROM runs "
        "WHERE job_id = ? AND status <> 'SKIPPED' AND attempt = 1",
        [to_db(midnight), job.id],
    ).fetchone()
    fired_today, last = (row[0], row[1]) if row else (0, None)
    schedule = job.schedule
    remaining, cursor = 0, now
    while job.enabled:
        following = schedule.next_after(cursor)
        if following is None or following >= next_midnight:
            break
        cursor = following
        remaining += 1
    options = job.options
    return {
        "enabled": job.enabled,
        "pulses_per_day": options["pulses_per_day"],
        "interval_minutes": 1440 // options["pulses_per_day"],
        "active_days": options["active_days"],
        "quiet_hours": options.get("quiet_hours", []),
        "timezone": job.timezone,
        "instruction": job.task,
        "notes": options.get("notes", ""),
        "fired_today": int(fired_today or 0),
        "remaining_today": remaining,
        "last_pulse_at": iso(from_db(last), job.timezone),
        "next_pulse_at": iso(job.next_run_at, job.timezone),
    }


def prompt(con: duckdb.DuckDBPyConnection, job: Job, now: datetime) -> str:
    """The prompt of the firing that starts now."""
    state = status(con, job, now)
    days = ", ".join(DAY_NAMES[d] for d in state["active_days"])
    quiet = "; ".join(f"{w['start']}-{w['end']}" for w in state["quiet_hours"]) or "none"
    return (
        f"This is an autonomous pulse (number {state['fired_today']} today, every "
        f"{state['interval_minutes']} minutes on {days}, quiet hours {quiet}, timezone "
        f"{state['timezone']}). No one is watching this run: work on your own and do not "
        "ask questions.\n\n"
        f"## What to do\n{state['instruction']}\n\n"
        f"## Your notes from the last pulse\n{state['notes'] or '(none yet: this is the first pulse)'}\n\n"
        f'## Before you finish\nCall manage_pulse with action "update_notes" to leave notes '
        f"for the next pulse (at most {NOTES_LIMIT:,} characters): what you did and what to "
        f"look at next. Pulses left today after this one: {state['remaining_today']}; next "
        f"pulse: {state['next_pulse_at'] or 'none scheduled'}."
    )
