"""The scheduler service: what a person or the model may do with jobs and runs.

Create, update (each change a new version), enable, disable, delete, run now, cancel a
run, list and read: the
``agent-kernel`` command, the server's REST API, the agent's schedule tools and
``%agent_jobs`` all call :class:`SchedulerService`, so each rule is kept here once:

- a job is validated by :func:`~agent_kernel.scheduler.jobs.new_job` and the checks of
  :mod:`.checks`, whether it is being created or changed;
- **who wrote it** decides whether it may run unattended. Every write records its writer's
  :class:`~agent_kernel.store.provenance.Provenance`; a job written (or changed) by a turn
  that had read untrusted content is kept disabled, and only the person enables it again:
  their enabling is their review, so it clears the taint, and it is a trust change: it
  takes the person's event (:func:`agent_kernel.authority.person`, whose label the taint's
  record keeps) and is refused while a turn runs in this process. The model is refused.
  Callers pass ``Provenance.person()`` for the person (the CLI, the server) and the turn's
  provenance for the model (the tools); nothing the model sends can say it is the person;
- **standing grants** (:mod:`agent_kernel.grants`: the hosts a job's unattended runs may
  reach and the writing tools they may run after untrusted content) are set by the person
  only, with their event, when creating, changing or enabling a job. A job the model
  creates carries none, and a change the model makes (or code run inside a turn makes)
  drops them: what the person granted was granted to the job they reviewed;
- "run now" queues a manual run, and with ``wait`` also runs it in this process.

Failures are :class:`~agent_kernel.scheduler.ScheduleError` with a message that says what
to change, or its subclass :class:`~agent_kernel.scheduler.NotFoundError` when no job or
run answers to the key. Callers translate them: the CLI prints one line (exit status 2),
the server answers 400 or 404, the tools return an ``is_error`` result, the magic raises
a ``UsageError``.

Each call uses one short connection of the store, as every other reader of it does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kernel import authority
from agent_kernel.grants import StandingGrants
from agent_kernel.scheduler import NotFoundError, ScheduleError, history, leader, pulse
from agent_kernel.scheduler.checks import KINDS, check_parameters
from agent_kernel.scheduler.clock import Clock, SystemClock
from agent_kernel.scheduler.compare import runs_compared
from agent_kernel.scheduler.cron import local_timezone_name
from agent_kernel.scheduler.explain import explain_failed_run
from agent_kernel.scheduler.history import JobVersion
from agent_kernel.scheduler.jobs import Job, Jobs, Policy, new_job
from agent_kernel.scheduler.pulse import PulseStatus
from agent_kernel.scheduler.runs import Run, Runs
from agent_kernel.store import provenance
from agent_kernel.store.provenance import Provenance, Record

if TYPE_CHECKING:
    import duckdb

    from agent_kernel.authority import PersonEvent
    from agent_kernel.scheduler.compare import Comparison
    from agent_kernel.scheduler.daemon import Scheduler
    from agent_kernel.store import Store

__all__ = ["UPDATABLE", "JobFields", "JobState", "RunState", "SchedulerService"]

PERSON_ONLY = (
    "{what} is the person's decision: it takes their own command ({how}, or the Agent panel's "
    "jobs manager) and is refused from code running inside an agent turn."
)
WAITS_FOR_REVIEW = (
    "It was written after this session read untrusted content ({sources}), so it stays "
    "disabled until the user reviews and enables it (`agent-kernel jobs enable {id}`); you "
    "cannot enable it. Tell the user it is waiting for their review."
)


@dataclass(frozen=True)
class JobFields:
    """What creating a job takes; :func:`~agent_kernel.scheduler.jobs.new_job` checks it.

    ``timezone`` None is the machine's. Give exactly one of ``at`` and ``cron``.
    """

    name: str
    kind: str = "task"
    notebook: str | None = None
    task: str | None = None
    parameters: dict[str, Any] | None = None
    at: str | datetime | None = None
    cron: str | None = None
    timezone: str | None = None
    cwd: str | None = None
    model: str | None = None
    token_limit: int | None = None
    kernel: str | None = None
    session: str | None = None
    origin_notebook: str | None = None
    policy: Policy | None = None
    options: dict[str, Any] | None = None


_POLICY_FIELDS = frozenset(f.name for f in fields(Policy))
# What ``update`` changes: what creation takes (not the kind, the session that set a
# reminder or the options a pulse keeps) and the run policy's fields one by one.
UPDATABLE = frozenset(
    {
        "name",
        "notebook",
        "task",
        "parameters",
        "at",
        "cron",
        "timezone",
        "cwd",
        "model",
        "token_limit",
        "kernel",
        "notify",
        "explain",
    }
    | _POLICY_FIELDS
)


@dataclass(frozen=True)
class JobState:
    """A job with its latest run and, when it waits for the person's review, the taint."""

    job: Job
    last: Run | None = None
    taint: Record | None = None

    @property
    def held(self) -> str:
        """What the model is told about a job kept disabled for review ("" when it is not)."""
        if self.taint is None:
            return ""
        sources = "; ".join(s[:80] for s in self.taint.sources[:2])
        return WAITS_FOR_REVIEW.format(sources=sources, id=self.job.id)


@dataclass(frozen=True)
class RunState:
    """A run with its job (None when the job's row is gone; a deleted job is still found)."""

    run: Run
    job: Job | None


class SchedulerService:
    """Jobs and runs of one store, as people and the model change them.

    ``by_name``: a key is a job's id, a unique prefix of it, or its name (and a run's id
    or a unique prefix), as a person types them in a terminal; otherwise an exact id, as
    an API or the model sends it. ``listing`` ends the message of an unknown job with
    where to look (``"`agent-kernel jobs list` shows them"``). ``on_change`` is called
    after a write that a scheduler in this process should see at once (its wake-up).
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        home: str | Path | None = None,
        by_name: bool = False,
        listing: str = "",
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock or SystemClock()
        self.home = home
        self.by_name = by_name
        self.listing = listing
        self.on_change = on_change

    # -- reading ---------------------------------------------------------------------------

    def jobs(self, *, include_disabled: bool = True, kinds: tuple[str, ...] = KINDS) -> list[JobState]:
        """The jobs (oldest first), each with its latest run and its taint."""
        with self._connect() as con:
            jobs = Jobs(con).list(include_disabled=include_disabled, kinds=kinds)
            latest = Runs(con).latest_by_job()
            tainted = provenance.tainted_names(con, "job")
        return [JobState(job, latest.get(job.id), tainted.get(job.id)) for job in jobs]

    def get(self, key: str, *, kinds: tuple[str, ...] = KINDS) -> JobState:
        with self._connect() as con:
            return self._state(con, self._job(con, key, kinds))

    def runs(self, *, job: str | None = None, limit: int = 50, statuses: Sequence[str] = ()) -> list[RunState]:
        """Recent runs, newest slot first; ``job`` narrows them to one job's.

        Runs outlive their job: an exact id finds a deleted job's runs too (none for an
        id no job ever had); a key looked up ``by_name`` names a job that is not deleted.
        """
        with self._connect() as con:
            job_id = job
            if job is not None and self.by_name:
                job_id = self._job(con, job, KINDS).id
            found = Runs(con).list(job_id=job_id, limit=limit, statuses=tuple(statuses))
            jobs = Jobs(con).all_by_id({run.job_id for run in found})
        return [RunState(run, jobs.get(run.job_id)) for run in found]

    def run(self, key: str) -> RunState:
        with self._connect() as con:
            return self._run(con, key)

    def compare_runs(self, key: str, other: str | None = None) -> Comparison:
        """What changed between run ``key`` and ``other`` (default: its job's last
        successful run before it, else the run before it)."""
        with self._connect() as con:
            run = self._run(con, key).run
            before = self._run(con, other).run if other is not None else None
            return runs_compared(con, run, before)

    def explain_run(self, key: str, *, model: str, client: Any = None) -> RunState:
        """Why run ``key`` failed, by one bounded call to ``model``; kept on the run."""
        with self._connect() as con:
            run_id = self._run(con, key).run.id
        explain_failed_run(self.store, run_id, model=model, client=client)
        with self._connect() as con:
            return self._run(con, run_id)

    def scheduler(self) -> leader.Lease | None:
        """The lease of the scheduler that fires jobs now; None when none runs."""
        with self._connect() as con:
            return leader.running(con, self.clock.now())

    def pulse_status(self) -> tuple[JobState, PulseStatus] | None:
        """The pulse and its status (settings, today's counts, next firing), if there is one."""
        with self._connect() as con:
            job = pulse.get(con)
            if job is None:
                return None
            return self._state(con, job), pulse.status(con, job, self.clock.now())

    # -- writing ---------------------------------------------------------------------------

    def create(
        self,
        fields: JobFields,
        *,
        by: Provenance,
        created_by: str | None = None,
        person: PersonEvent | None = None,
        grants: StandingGrants | None = None,
    ) -> JobState:
        """Store a new job written by ``by`` (disabled when ``by`` had read untrusted content).

        ``grants``: its standing grants, set by the person's event ``person`` only.
        """
        now = self.clock.now()
        granted_by = _person_granting(by, person, grants) if grants else None
        job = new_job(**_arguments(fields), now=now, created_by=created_by, grants=grants, granted_by=granted_by)
        with self._connect() as con:
            stored = _keep_written(con, Jobs(con).add(job, changed_by=history.writer(by, created_by)), by, now)
            state = self._state(con, stored)
        self._changed()
        return state

    def update(
        self,
        key: str,
        changes: Mapping[str, Any],
        *,
        by: Provenance,
        kinds: tuple[str, ...] = KINDS,
        created_by: str | None = None,
        person: PersonEvent | None = None,
        grants: StandingGrants | None = None,
    ) -> JobState:
        """Change the fields :data:`UPDATABLE` names; the job is checked again as a new one is.

        A change that changes the definition is a new version (see history.py;
        ``created_by`` says through what the person changed it: cli, server, magic).

        Giving ``cron`` drops ``at`` and the other way round. A one-off job whose time has
        passed needs a new ``at``. The job stays enabled or disabled as it was, unless
        ``by`` had read untrusted content: a tainted change disables it.

        ``grants`` replaces the job's standing grants (the person's, with their event
        ``person``); without, the person's change keeps them and any other drops them.
        """
        unknown = set(changes) - UPDATABLE
        if unknown:
            raise ScheduleError(
                f"Cannot change {', '.join(sorted(unknown))}; a job's {', '.join(sorted(UPDATABLE))} can be changed."
            )
        now = self.clock.now()
        with self._connect() as con:
            job = self._job(con, key, kinds)
            kept, granted_by = _grants_after_change(job, by, person, grants)
            checked = new_job(
                **_changed_arguments(job, changes), now=now, created_by=job.created_by, grants=kept,
                granted_by=granted_by,
            )  # fmt: skip
            edited = replace(checked, id=job.id, enabled=job.enabled, created_at=job.created_at, version=job.version)
            if history.definition(edited) != history.definition(job):
                edited = replace(edited, version=job.version + 1)
            stored = _keep_written(con, Jobs(con).update(edited), by, now, changed=True)
            if stored.version != job.version:
                history.record(con, stored, history.writer(by, created_by), before=job)
            state = self._state(con, stored)
        self._changed()
        return state

    def versions(self, key: str, *, kinds: tuple[str, ...] = KINDS) -> tuple[Job, list[JobVersion]]:
        """The job and its versions, newest first."""
        with self._connect() as con:
            job = self._job(con, key, kinds)
            return job, history.versions(con, job.id)

    def enable(
        self,
        key: str,
        *,
        by: Provenance,
        kinds: tuple[str, ...] = KINDS,
        person: PersonEvent | None = None,
        grants: StandingGrants | None = None,
    ) -> JobState:
        """Resume a job from its next slot (missed slots are not run).

        A job waiting for review is enabled by the person only, with their event
        ``person`` (see the module docstring). ``grants`` replaces its standing grants
        (a new version), the person's too.
        """
        now = self.clock.now()
        with self._connect() as con:
            job = self._job(con, key, kinds)
            _allow_enabling(con, job, by, person)
            if grants is not None:
                granted_by = _person_granting(by, person, grants)
                job = _regrant(con, job, grants, granted_by, history.writer(by, person.via if person else None))
            state = self._state(con, Jobs(con).set_enabled(job, True, now))
        self._changed()
        return state

    def disable(self, key: str, *, kinds: tuple[str, ...] = KINDS) -> JobState:
        """Pause a job; anyone may."""
        now = self.clock.now()
        with self._connect() as con:
            job = self._job(con, key, kinds)
            state = self._state(con, Jobs(con).set_enabled(job, False, now))
        self._changed()
        return state

    def delete(self, key: str, *, kinds: tuple[str, ...] = KINDS) -> Job:
        """Soft-delete a job: it stops firing, its queued runs are cancelled and its running
        ones asked to stop; its runs stay as history. Returns the job as it was."""
        with self._connect() as con:
            job = self._job(con, key, kinds)
            Jobs(con).delete(job.id, self.clock.now())
        return job

    def run_now(
        self,
        key: str,
        *,
        wait: bool = False,
        on_progress: Callable[[Run, dict[str, Any]], None] | None = None,
        parameters: Mapping[str, Any] | None = None,
    ) -> RunState:
        """Queue a manual run of the job now; a scheduler starts it within a moment.

        With ``wait``, this process runs it (leader or not) and returns it once it has
        ended; ``on_progress(run, progress)`` sees its cells as they execute.
        ``parameters``: values this run uses over the job's (checked as a job's are); the
        job keeps its own.
        """
        if parameters is not None:
            parameters = dict(parameters)
            check_parameters(parameters)
            if not parameters:
                parameters = None
        now = self.clock.now()
        here = self._scheduler_here() if wait else None
        try:
            with self._connect() as con:
                job = self._job(con, key, KINDS)
                run = Runs(con).insert(job.id, now, cause="manual", now=now, parameters=parameters)
                assert run is not None  # a manual run's slot is this instant: it is new
                start = here.claim_here(con, run, job) if here is not None else None
            if here is None or start is None:
                self._changed()
                return RunState(run, job)
            return RunState(here.run_in_foreground(start, on_progress=on_progress), job)
        finally:
            if here is not None:
                here.close()

    def cancel(self, key: str, *, reason: str = "cancelled") -> tuple[RunState, str]:
        """Cancel a queued run at once, or ask the scheduler running it to stop it.

        Returns the run and its status after the request: CANCELLED, RUNNING (its
        scheduler stops it within a heartbeat) or how it had already ended.
        """
        with self._connect() as con:
            found = self._run(con, key)
            state = Runs(con).request_cancel(found.run.id, self.clock.now(), reason)
        return found, state or found.run.status

    def configure_pulse(
        self,
        *,
        by: Provenance,
        timezone: str | None = None,
        enabled: bool | None = None,
        pulses_per_day: int | None = None,
        active_days: list[int] | None = None,
        quiet_hours: list[dict[str, str]] | list[str] | None = None,
        instruction: str | None = None,
    ) -> tuple[JobState, PulseStatus]:
        """Create the pulse or change its settings (:func:`.pulse.configure`); returns it
        with its status. Turning on a pulse that waits for review is the person's alone."""
        now = self.clock.now()
        with self._connect() as con:
            current = pulse.get(con)
            if enabled and current is not None:
                _allow_enabling(con, current, by)
            if current is not None and current.grants and not _person_acting(by):
                current = _regrant(con, current, StandingGrants(), None, history.writer(by))
            job = pulse.configure(
                con, now, timezone=timezone or local_timezone_name(), enabled=enabled,
                pulses_per_day=pulses_per_day, active_days=active_days, quiet_hours=quiet_hours,
                instruction=instruction,
            )  # fmt: skip
            job = _keep_written(con, job, by, now, changed=current is not None)
            answer = self._state(con, job), pulse.status(con, job, now)
        self._changed()
        return answer

    def keep_pulse_notes(self, notes: str, *, by: Provenance) -> tuple[int, JobState]:
        """Keep ``notes`` for the pulse's next firing; returns their length and the pulse."""
        now = self.clock.now()
        with self._connect() as con:
            length = pulse.update_notes(con, notes)
            job = pulse.get(con)
            assert job is not None  # update_notes refuses when there is no pulse
            return length, self._state(con, _keep_written(con, job, by, now, changed=True))

    # -- helpers -----------------------------------------------------------------------------

    @contextmanager
    def _connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self.store.connect() as con:
            yield con

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def _scheduler_here(self) -> Scheduler:
        """A scheduler of this process for one run in the foreground.

        Imported here: the notebook's readers of jobs (``%agent_jobs``, the tools) never
        run one, so they do not load the executors' machinery."""
        from agent_kernel.scheduler.daemon import Scheduler  # noqa: PLC0415 - see the docstring

        return Scheduler(self.store, home=self.home, clock=self.clock)

    def _job(self, con: duckdb.DuckDBPyConnection, key: str, kinds: tuple[str, ...]) -> Job:
        jobs = Jobs(con)
        job = jobs.find(key) if self.by_name else jobs.get(key)
        if job is None:
            ambiguous = " (or more than one matches)" if self.by_name else ""
            where = f": {self.listing}." if self.listing else "."
            raise NotFoundError(f"No job {key!r}{ambiguous}{where}")
        if job.kind not in kinds:
            raise NotFoundError(f"{key!r} is a {job.kind} job, not one of {', '.join(kinds)}.", kind=job.kind)
        return job

    def _run(self, con: duckdb.DuckDBPyConnection, key: str) -> RunState:
        runs = Runs(con)
        run = runs.find(key) if self.by_name else runs.get(key)
        if run is None:
            raise NotFoundError(f"No run {key!r}.")
        return RunState(run, Jobs(con).get(run.job_id, deleted=True))

    @staticmethod
    def _state(con: duckdb.DuckDBPyConnection, job: Job) -> JobState:
        last = Runs(con).latest_by_job(job_ids=[job.id]).get(job.id)
        return JobState(job, last, _taint(con, job.id))


# -- who wrote a job ------------------------------------------------------------------------


def _is_person(writer: Provenance) -> bool:
    return writer == Provenance.person()


def _keep_written(
    con: duckdb.DuckDBPyConnection, job: Job, writer: Provenance, now: datetime, *, changed: bool = False
) -> Job:
    """Record who wrote ``job`` (``changed``: an edit of a stored job, whose taint carries
    over). A job written after untrusted content is disabled: it runs unattended, so only
    the person turns it on, after reviewing it."""
    written = provenance.record(con, "job", job.id, writer, inherit=changed)
    if written.tainted and job.enabled:
        return Jobs(con).set_enabled(job, False, now)
    return job


def _taint(con: duckdb.DuckDBPyConnection, job_id: str) -> Record | None:
    """The job's provenance when it was written after untrusted content and not cleared."""
    found = provenance.latest(con, "job", [job_id]).get(job_id)
    return found if found is not None and found.tainted else None


def _allow_enabling(
    con: duckdb.DuckDBPyConnection, job: Job, writer: Provenance, person: PersonEvent | None = None
) -> None:
    """Enabling a job that waits for review is a trust change: the person's enabling, with
    their event ``person``, is their review and clears the job's taint (the record keeps
    the event's label). The model may not enable such a job, nor may code inside a turn."""
    record = _taint(con, job.id)
    if record is None:
        return
    if not _is_person(writer):
        held = JobState(job, taint=record).held
        raise ScheduleError(f"{job.name!r} ({job.id}) cannot be enabled by you. {held}")
    if person is None or authority.inside_turn():
        what = f"Enabling {job.name!r} ({job.id}), which waits for review,"
        raise ScheduleError(PERSON_ONLY.format(what=what, how=f"`agent-kernel jobs enable {job.id}`"))
    provenance.clear(con, "job", job.id, by=person)


def _person_acting(writer: Provenance) -> bool:
    """Whether the person themselves makes this change: their own path (not a turn's tool),
    and no turn running in this process (code the model runs could call that path)."""
    return _is_person(writer) and not authority.inside_turn()


def _person_granting(writer: Provenance, person: PersonEvent | None, grants: StandingGrants) -> str | None:
    """The label that ``grants`` keep of the person's event, or a ``ScheduleError`` when
    the person is not the one setting them (None for no grants: nothing to keep)."""
    if not grants:
        return None
    if person is None or not _person_acting(writer):
        how = "`agent-kernel jobs add|enable ... --allow-host HOST --allow-after-untrusted TOOL`"
        raise ScheduleError(PERSON_ONLY.format(what="Setting a job's standing grants", how=how))
    return person.label()


def _grants_after_change(
    job: Job, writer: Provenance, person: PersonEvent | None, grants: StandingGrants | None
) -> tuple[StandingGrants | None, str | None]:
    """The grants a changed job keeps (with their label): the new ones the person gave,
    the job's own when the person changes it, none when anyone else does."""
    if grants is not None:
        return grants, _person_granting(writer, person, grants)
    if job.grants and _person_acting(writer):
        try:
            return job.standing_grants, job.granted_by
        except ValueError:  # malformed as stored: kept by nobody
            return None, None
    return None, None


def _regrant(
    con: duckdb.DuckDBPyConnection, job: Job, grants: StandingGrants, granted_by: str | None, changed_by: str
) -> Job:
    """``job`` with ``grants`` in place of its own, stored as a new version when they differ."""
    stored = dict(grants.as_json()) if grants else {}
    if (job.grants or {}) == stored:
        return job
    changed = Jobs(con).update(
        replace(job, grants=stored, granted_by=granted_by if grants else None, version=job.version + 1)
    )
    history.record(con, changed, changed_by, before=job)
    return changed


# -- fields ---------------------------------------------------------------------------------


def _arguments(job_fields: JobFields) -> dict[str, Any]:
    """``new_job``'s keyword arguments (the timezone defaults to the machine's)."""
    values = {f.name: getattr(job_fields, f.name) for f in fields(job_fields)}
    values["timezone"] = values["timezone"] or local_timezone_name()
    return values


def _changed_arguments(job: Job, changes: Mapping[str, Any]) -> dict[str, Any]:
    """``new_job``'s keyword arguments for ``job`` with ``changes`` made."""
    policy = {name: getattr(job.policy, name) for name in _POLICY_FIELDS}
    for name in _POLICY_FIELDS & set(changes):
        value = changes[name]
        if name == "retry_on":
            value = _statuses(value)
        policy[name] = value
    current = JobFields(
        name=job.name, kind=job.kind, notebook=job.notebook, task=job.task, parameters=job.parameters,
        at=job.run_at, cron=job.cron, timezone=job.timezone, cwd=job.cwd, model=job.model,
        token_limit=job.token_limit, kernel=job.kernel, session=job.session,
        origin_notebook=job.origin_notebook, options=job.options,
    )  # fmt: skip
    edits = {name: value for name, value in changes.items() if name not in _POLICY_FIELDS}
    options = dict(job.options)
    for name in ("notify", "explain"):  # kept in the job's options (notify.py, explain.py)
        if name in edits:
            value = edits.pop(name)
            if value:
                options[name] = value
            else:
                options.pop(name, None)
            edits["options"] = options
    if edits.get("cron"):
        edits.setdefault("at", None)
    if edits.get("at"):
        edits.setdefault("cron", None)
    return _arguments(replace(current, **edits, policy=Policy(**policy)))


def _statuses(value: Any) -> tuple[str, ...]:
    """``retry_on`` as a tuple, given as one also or as "LOST,FAILED"."""
    if isinstance(value, str):
        return tuple(s.strip().upper() for s in value.split(",") if s.strip())
    if isinstance(value, (list, tuple)) and all(isinstance(s, str) for s in value):
        return tuple(value)
    raise ScheduleError(f"retry_on takes statuses such as LOST,FAILED, not {value!r}.")
