"""Jobs: what to run, when, and the policies of its runs.

A job is one of four kinds:

- ``notebook``: an existing notebook, run with papermill ``parameters``;
- ``task``: a prompt; each firing runs a generated notebook whose cell is ``%agent TASK``
  in a fresh session (``model`` and ``token_limit`` apply);
- ``reminder``: a message that continues the session that set it;
- ``pulse``: a recurring autonomous run with continuity notes (see :mod:`.pulse`).

:func:`new_job` turns what a user or the model asked for into a valid :class:`Job` (or
a :class:`~agent_kernel.scheduler.ScheduleError` that says what to change); :class:`Jobs`
reads and writes the ``jobs`` table through an open connection.
"""

from __future__ import annotations

import builtins
import json
import math
import uuid
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kernel.grants import StandingGrants
from agent_kernel.grants import parse as parse_grants
from agent_kernel.paths import agent_home
from agent_kernel.scheduler import ScheduleError, history
from agent_kernel.scheduler.checks import KINDS, check_job
from agent_kernel.scheduler.clock import as_utc, from_db, to_db
from agent_kernel.scheduler.cron import QuietWindow, Schedule, check_cron, parse_instant, zone
from agent_kernel.scheduler.runs import Runs

if TYPE_CHECKING:
    import duckdb


CATCHUP = ("skip", "latest", "all")
OVERLAP = ("allow", "forbid", "queue")
RETRYABLE = ("FAILED", "TIMED_OUT", "LOST")
# The run policy's ranges: wide enough for any real job, narrow enough for every column.
MAX_RUN_SECONDS = 7 * 24 * 3600.0  # a run's or a cell's timeout
MAX_RETRY_DELAY_S = 24 * 3600.0
MAX_RETRIES = 100
MAX_CATCHUP = 1000

_COLUMNS = (
    "id", "name", "kind", "notebook", "task", "parameters", "session", "origin_notebook",
    "cwd", "kernel", "cron", "run_at", "timezone", "model", "token_limit", "enabled",
    "next_run_at", "catchup", "max_catchup", "overlap", "timeout_s", "cell_timeout_s",
    "max_retries", "retry_on", "retry_delay_s", "options", "created_by", "created_at",
    "updated_at", "deleted_at", "version", "grants", "granted_by",
)  # fmt: skip
_JSON = {"parameters", "options", "grants"}
_INSTANTS = {"run_at", "next_run_at", "created_at", "updated_at", "deleted_at"}


@dataclass(frozen=True)
class Policy:
    """How a job's runs behave; every field has a default a user rarely needs to change."""

    catchup: str = "latest"  # slots missed while no scheduler ran: skip | latest | all
    max_catchup: int = 10  # at most this many missed slots are run (all) or recorded
    overlap: str = "forbid"  # a slot due while a run is active: allow | forbid (skip) | queue
    timeout_s: float = 3600.0  # the whole run, enforced by killing its processes
    cell_timeout_s: float | None = None  # one cell (papermill's execution_timeout)
    max_retries: int = 1
    retry_on: tuple[str, ...] = ("LOST",)  # a crash is not the notebook's fault: retry it
    retry_delay_s: float = 30.0  # doubled for each further attempt, at most an hour

    def __post_init__(self) -> None:
        if self.catchup not in CATCHUP:
            raise ScheduleError(f"catchup must be one of {', '.join(CATCHUP)}, not {self.catchup!r}.")
        if self.overlap not in OVERLAP:
            raise ScheduleError(f"overlap must be one of {', '.join(OVERLAP)}, not {self.overlap!r}.")
        _seconds("timeout_s", self.timeout_s, MAX_RUN_SECONDS)
        if self.cell_timeout_s is not None:
            _seconds("cell_timeout_s", self.cell_timeout_s, MAX_RUN_SECONDS)
        _seconds("retry_delay_s", self.retry_delay_s, MAX_RETRY_DELAY_S, zero=True)
        _count("max_retries", self.max_retries, 0, MAX_RETRIES)
        _count("max_catchup", self.max_catchup, 1, MAX_CATCHUP)
        if not isinstance(self.retry_on, tuple) or not all(isinstance(s, str) for s in self.retry_on):
            raise ScheduleError(f"retry_on takes statuses such as LOST,FAILED, not {self.retry_on!r:.80}.")
        unknown = set(self.retry_on) - set(RETRYABLE)
        if unknown:
            raise ScheduleError(f"retry_on takes {', '.join(RETRYABLE)}, not {', '.join(sorted(unknown))}.")

    def retry_delay(self, attempt: int) -> float:
        """Seconds before attempt ``attempt + 1`` (exponential back-off, capped at 1 h)."""
        return float(min(self.retry_delay_s * 2 ** max(attempt - 1, 0), 3600.0))


def _seconds(name: str, value: object, most: float, *, zero: bool = False) -> None:
    """``value`` must be a number of seconds above 0 (or at 0 with ``zero``) and at most ``most``."""
    low = "0" if zero else "more than 0"
    if (
        isinstance(value, bool) or not isinstance(value, (int, float))
        or (isinstance(value, float) and not math.isfinite(value))
        or value < 0 or (value == 0 and not zero) or value > most
    ):  # fmt: skip
        raise ScheduleError(f"{name} must be a number of seconds, {low} and at most {most:,.0f}, not {value!r:.40}.")


def _count(name: str, value: object, low: int, most: int) -> None:
    """``value`` must be a whole number from ``low`` to ``most``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= most:
        raise ScheduleError(f"{name} must be a whole number from {low} to {most}, not {value!r:.40}.")


_POLICY_FIELDS = [f.name for f in fields(Policy)]


@dataclass(frozen=True)
class Job:
    """One row of ``jobs``."""

    id: str
    name: str
    kind: str
    timezone: str
    notebook: str | None = None
    task: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    session: str | None = None
    origin_notebook: str | None = None
    cwd: str | None = None
    kernel: str | None = None
    cron: str | None = None
    run_at: datetime | None = None
    model: str | None = None
    token_limit: int | None = None
    enabled: bool = True
    next_run_at: datetime | None = None
    catchup: str = "latest"
    max_catchup: int = 10
    overlap: str = "forbid"
    timeout_s: float = 3600.0
    cell_timeout_s: float | None = None
    max_retries: int = 1
    retry_on: str = "LOST"
    retry_delay_s: float = 30.0
    options: dict[str, Any] = field(default_factory=dict)
    created_by: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    deleted_at: datetime | None = None
    version: int = 1  # counted up by each edit (see history.py)
    grants: dict[str, Any] = field(default_factory=dict)  # the person's standing grants, as stored
    granted_by: str | None = None  # the person's event that set them

    @property
    def schedule(self) -> Schedule:
        quiet = tuple(QuietWindow.parse(w) for w in self.options.get("quiet_hours", ()))
        return Schedule(cron=self.cron, at=self.run_at, timezone=self.timezone, quiet=quiet)

    @property
    def policy(self) -> Policy:
        values = {name: getattr(self, name) for name in _POLICY_FIELDS}
        values["retry_on"] = tuple(s for s in self.retry_on.split(",") if s)
        return Policy(**values)

    @property
    def standing_grants(self) -> StandingGrants:
        """What its unattended runs may do after untrusted content; ``ValueError`` when the
        stored grants are malformed (the checks refuse to run such a job)."""
        return parse_grants(self.grants or None)

    @property
    def type(self) -> str:
        """``once`` or ``cron`` (the ``type`` the tools report)."""
        return "cron" if self.cron else "once"

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> Job:
        values = dict(zip(_COLUMNS, row))
        for name in _JSON:
            values[name] = _json_column(values[name])
        for name in _INSTANTS:
            values[name] = from_db(values[name])
        return cls(**values)

    def to_row(self) -> list[Any]:
        values = []
        for name in _COLUMNS:
            value = getattr(self, name)
            if name == "grants" and not value:
                value = None  # none: NULL, as rows stored before grants existed
            elif name in _JSON:
                value = json.dumps(value or {})
            elif name in _INSTANTS:
                value = to_db(value)
            values.append(value)
        return values


def new_job(
    *,
    name: str,
    kind: str,
    now: datetime,
    timezone: str,
    notebook: str | None = None,
    task: str | None = None,
    parameters: dict[str, Any] | None = None,
    at: str | datetime | None = None,
    cron: str | None = None,
    cwd: str | None = None,
    model: str | None = None,
    token_limit: int | None = None,
    session: str | None = None,
    origin_notebook: str | None = None,
    kernel: str | None = None,
    policy: Policy | None = None,
    options: dict[str, Any] | None = None,
    created_by: str | None = None,
    grants: StandingGrants | None = None,
    granted_by: str | None = None,
) -> Job:
    """A validated job with its first slot computed, or :class:`ScheduleError`.

    ``grants``: the standing grants the person set, with ``granted_by`` (the label of
    their event); only the scheduler service passes them, after checking who asks.
    """
    name = (name or "").strip()
    if not name:
        raise ScheduleError("Give the job a short `name`.")
    if kind not in KINDS:
        raise ScheduleError(f"Unknown job kind {kind!r}.")
    zone(timezone)
    if (at is None or at == "") == (cron is None or cron == ""):
        raise ScheduleError("Give exactly one of `at` (an ISO 8601 time, for one run) or `cron` (recurring).")
    if kind == "notebook":
        if task:
            raise ScheduleError("Give either `task` (a prompt) or `notebook` (a path), not both.")
        notebook = _notebook_path(notebook, cwd)
        cwd = str(Path(notebook).parent)
    elif kind in ("task", "reminder") and not (task or "").strip():
        what = "`message`" if kind == "reminder" else "`task` (a prompt) or `notebook` (a path)"
        raise ScheduleError(f"Give {what}.")
    if kind == "notebook":
        task = task or None
    if parameters is not None and not isinstance(parameters, dict):
        raise ScheduleError("`parameters` must be an object of name: value pairs.")
    run_at = None
    if cron:
        cron = " ".join(cron.split())
        check_cron(cron)
    else:
        run_at = at if isinstance(at, datetime) else parse_instant(str(at), timezone)
        run_at = as_utc(run_at).replace(microsecond=0)
        if run_at <= now:
            raise ScheduleError(
                f"`at` {run_at:%Y-%m-%d %H:%M:%S} UTC is in the past (it is now "
                f"{now:%Y-%m-%d %H:%M:%S} UTC); give a future time."
            )
    job = Job(
        id=uuid.uuid4().hex[:12],
        name=name,
        kind=kind,
        timezone=timezone,
        notebook=notebook,
        task=task,
        parameters=dict(parameters or {}),
        session=session,
        origin_notebook=origin_notebook,
        cwd=cwd,
        kernel=kernel,
        cron=cron or None,
        run_at=run_at,
        model=model,
        token_limit=token_limit,
        **_policy_columns(policy or Policy()),
        options=dict(options or {}),
        created_by=created_by,
        grants=dict(grants.as_json()) if grants else {},
        granted_by=granted_by if grants else None,
    )
    check_job(job, home=agent_home())
    first = job.schedule.next_after(now)
    if first is None:
        raise ScheduleError(f"This schedule never fires ({job.schedule.describe()}).")
    return replace(job, next_run_at=first)


def _json_column(text: Any) -> Any:
    """A JSON column's value; text that is not JSON is kept as it is (the checks refuse it)."""
    if not text:
        return {}
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def _policy_columns(policy: Policy) -> dict[str, Any]:
    """A policy as the job's columns store it (``retry_on`` as "LOST,FAILED")."""
    values = asdict(policy)
    values["retry_on"] = ",".join(policy.retry_on)
    return values


def _notebook_path(notebook: str | None, cwd: str | None) -> str:
    if not notebook:
        raise ScheduleError("Give `task` (a prompt) or `notebook` (a path to an .ipynb file).")
    path = Path(notebook).expanduser()
    if not path.is_absolute():
        path = Path(cwd or ".").resolve() / path
    if path.suffix != ".ipynb":
        raise ScheduleError(f"{notebook!r} is not a notebook: give the path of an .ipynb file.")
    if not path.is_file():
        raise ScheduleError(f"No notebook at {str(path)!r}; give a path relative to {cwd or '.'} or an absolute one.")
    return str(path.resolve())


class Jobs:
    """The ``jobs`` table through one open connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add(self, job: Job, *, changed_by: str | None = None) -> Job:
        """Store a new job, and its definition as version 1 (``changed_by``: who wrote it)."""
        row = job.to_row()
        columns = list(_COLUMNS)
        for stamp in ("created_at", "updated_at"):  # let the database stamp them
            at = columns.index(stamp)
            del columns[at], row[at]
        marks = ", ".join("?" * len(columns))
        self.con.execute(f"INSERT INTO jobs ({', '.join(columns)}) VALUES ({marks})", row)
        added = self.get(job.id)
        assert added is not None
        history.record(self.con, added, changed_by or (f"the user ({job.created_by})" if job.created_by else "unknown"))
        return added

    def get(self, job_id: str, *, deleted: bool = False) -> Job | None:
        where = "" if deleted else " AND deleted_at IS NULL"
        row = self.con.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE id = ?{where}", [job_id]).fetchone()
        return Job.from_row(row) if row else None

    def find(self, key: str) -> Job | None:
        """A job by id, unique id prefix, or name."""
        job = self.get(key)
        if job is not None:
            return job
        rows = self.con.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE deleted_at IS NULL AND (id LIKE ? OR name = ?)",
            [key.replace("%", "") + "%", key],
        ).fetchall()
        return Job.from_row(rows[0]) if len(rows) == 1 else None

    def list(self, *, include_disabled: bool = True, kinds: tuple[str, ...] = KINDS) -> list[Job]:
        marks = ", ".join("?" * len(kinds))
        enabled = "" if include_disabled else " AND enabled"
        rows = self.con.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE deleted_at IS NULL AND kind IN ({marks}){enabled} "
            "ORDER BY created_at, id",
            list(kinds),
        ).fetchall()
        return [Job.from_row(row) for row in rows]

    def all_by_id(self, ids: set[str]) -> dict[str, Job]:
        """Jobs by id, deleted ones included (runs outlive their job)."""
        if not ids:
            return {}
        marks = ", ".join("?" * len(ids))
        rows = self.con.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE id IN ({marks})", list(ids)).fetchall()
        return {job.id: job for job in map(Job.from_row, rows)}

    def due(self, now: datetime) -> builtins.list[Job]:
        rows = self.con.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE deleted_at IS NULL AND enabled "
            "AND next_run_at IS NOT NULL AND next_run_at <= ? ORDER BY next_run_at",
            [to_db(now)],
        ).fetchall()
        return [Job.from_row(row) for row in rows]

    def set_next_run(self, job_id: str, next_run_at: datetime | None) -> None:
        self.con.execute(
            "UPDATE jobs SET next_run_at = ?, updated_at = (now() AT TIME ZONE 'UTC') WHERE id = ?",
            [to_db(next_run_at), job_id],
        )

    def set_enabled(self, job: Job, enabled: bool, now: datetime) -> Job:
        """Pause or resume; resuming starts from the next slot after ``now`` (no catch-up)."""
        next_run = job.next_run_at
        if enabled and not job.enabled:
            next_run = (
                job.schedule.next_after(now) if job.cron else (job.run_at if job.run_at and job.run_at > now else None)
            )
        self.con.execute(
            "UPDATE jobs SET enabled = ?, next_run_at = ?, updated_at = (now() AT TIME ZONE 'UTC') WHERE id = ?",
            [enabled, to_db(next_run), job.id],
        )
        updated = self.get(job.id)
        assert updated is not None
        return updated

    def update(self, job: Job) -> Job:
        """Store every field of ``job`` (an edited copy of a stored one)."""
        columns = [c for c in _COLUMNS if c not in ("id", "created_at", "updated_at")]
        row = dict(zip(_COLUMNS, job.to_row()))
        sets = ", ".join(f"{c} = ?" for c in columns)
        self.con.execute(
            f"UPDATE jobs SET {sets}, updated_at = (now() AT TIME ZONE 'UTC') WHERE id = ?",
            [row[c] for c in columns] + [job.id],
        )
        updated = self.get(job.id)
        assert updated is not None
        return updated

    def delete(self, job_id: str, now: datetime) -> bool:
        """Soft delete: the job stops firing and leaves the lists; its runs stay as history.

        Its queued runs are cancelled and its running ones asked to stop.
        """
        found = self.get(job_id)
        if found is None:
            return False
        runs = Runs(self.con)
        for run in runs.active(job_id):
            runs.request_cancel(run.id, now, "the job was deleted")
        self.con.execute(
            "UPDATE jobs SET deleted_at = ?, enabled = false, next_run_at = NULL WHERE id = ?",
            [to_db(now), job_id],
        )
        return True
