"""The ``schedule`` group: scheduled tasks, reminders and the pulse.

These tools only write jobs into the store, through the scheduler service as the turn
that calls them (so a job written after untrusted content waits for the person's review);
the scheduler daemon (``agent-kernel scheduler``, its own process) fires them. A task runs a notebook with papermill, or a
generated notebook whose cell is ``%agent TASK`` in a fresh session; a reminder
continues the session that set it. Times go in as ISO 8601 (read in the job's timezone
when they carry no offset) and come back with the timezone's offset.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from agent_kernel.errors import ToolInputError
from agent_kernel.paths import agent_home
from agent_kernel.scheduler import NotFoundError, ScheduleError, leader
from agent_kernel.scheduler import notify as notifications
from agent_kernel.scheduler.clock import iso
from agent_kernel.scheduler.cron import local_timezone_name, zone
from agent_kernel.scheduler.service import JobFields, SchedulerService
from agent_kernel.store import provenance
from agent_kernel.store.sessions import Sessions
from agent_kernel.tools import Tool, current_context, strict_json

if TYPE_CHECKING:
    from datetime import datetime


PROMPT_CHARS = 20_000  # a task's prompt, a reminder's message, the pulse's instruction
PATH_CHARS = 4_096
SHORT_CHARS = 200  # names, ids, times, cron expressions, timezones, models
PARAMETERS = 100  # the most papermill parameters one task passes
LARGEST_TOKEN_LIMIT = 100_000_000
TASK_KINDS = ("notebook", "task", "pulse")  # what the task tools act on; reminders have their own

Prompt = Annotated[str, Field(max_length=PROMPT_CHARS)]
Short = Annotated[str, Field(max_length=SHORT_CHARS)]
NotebookPath = Annotated[str, Field(max_length=PATH_CHARS)]
Parameters = Annotated[dict[Short, Any], Field(max_length=PARAMETERS)]
TokenLimit = Annotated[int, Field(ge=1, le=LARGEST_TOKEN_LIMIT)]


class TaskCreated(TypedDict):
    """``create_scheduled_task``'s reply: the new task, or why it waits for the person's review."""

    id: str
    name: str
    next_run: NotRequired[str | None]
    enabled: NotRequired[bool]  # False while it waits for review
    note: NotRequired[str]  # why it waits
    warning: NotRequired[str]  # no scheduler runs to fire it


class _TaskNamed(TypedDict):
    """The first keys of a task's entry: which task, and what it runs."""

    id: str
    name: str
    task: NotRequired[str]
    waits_for_review: NotRequired[bool]
    notebook: NotRequired[str]


class TaskEntry(_TaskNamed):
    """One task in ``list_scheduled_tasks``'s reply."""

    type: str  # once or cron
    cron: str | None
    timezone: str
    next_run: str | None
    last_run: str | None
    last_status: str | None
    enabled: bool
    model: str | None


class TaskList(TypedDict):
    tasks: list[TaskEntry]


class TaskUpdated(TypedDict):
    """``update_scheduled_task``'s reply: the task's new version, when it fires next or why it waits."""

    id: str
    name: str
    version: int
    enabled: bool
    note: NotRequired[str]
    next_run: NotRequired[str | None]


class TaskEnabled(TypedDict):
    id: str
    enabled: bool


class Deleted(TypedDict):
    deleted: bool


class ReminderSet(TypedDict):
    """``set_reminder``'s reply: the reminder and when it fires, or why it waits for review."""

    id: str
    at: str | None
    enabled: NotRequired[bool]
    note: NotRequired[str]
    warning: NotRequired[str]


class ReminderEntry(TypedDict):
    """One reminder in ``list_reminders``'s reply."""

    id: str
    at: str | None
    message: str
    session: str | None
    enabled: bool
    status: str
    waits_for_review: NotRequired[bool]


class ReminderList(TypedDict):
    reminders: list[ReminderEntry]


class Notified(TypedDict):
    """``notify``'s reply: the notification targets it went to."""

    sent: bool
    to: list[str]


def create_scheduled_task(
    name: Short,
    task: Prompt | None = None,
    notebook: NotebookPath | None = None,
    parameters: Parameters | None = None,
    at: Short | None = None,
    cron: Short | None = None,
    timezone: Short | None = None,
    model: Short | None = None,
    token_limit: TokenLimit | None = None,
    secrets: Annotated[list[Short], Field(max_length=50)] | None = None,
) -> TaskCreated:
    """Schedule a job that runs later, once (`at`) or repeatedly (`cron`), unattended.

    Give either `task`, a prompt that each firing runs as a fresh agent session in a new
    notebook (no memory of this conversation: put everything it needs in the prompt, or
    have it read the database), or `notebook`, the path of an existing .ipynb file to run
    with papermill, with `parameters` injected after its cell tagged "parameters". Each
    run keeps its executed notebook. Give exactly one of `at` or `cron`.

    Args:
        name: Short human-readable label.
        task: The prompt each firing runs (a fresh session). `{param}` in it is replaced by a parameter's value.
        notebook: Path of a notebook to run, relative to the kernel's working directory or absolute.
        parameters: Papermill parameters (name: value) injected into the notebook.
        at: For one run: ISO 8601 time, e.g. 2026-02-25T09:00:00Z; without an offset it is read in `timezone`.
        cron: For recurring runs: 5-field cron expression, e.g. '0 9 * * MON-FRI' (9:00 on weekdays).
        timezone: IANA timezone the cron expression (or an `at` without offset) is read in; default the user's.
        model: Model for the task's agent turns; defaults to the configured one. Use a cheaper model for simple jobs.
        token_limit: Most tokens one firing may use.
        secrets: Names of environment variables the job needs as secrets (values are never stored).
    """
    ctx = current_context()
    bad = [n for n in secrets or () if not n.isidentifier()]
    if bad:
        raise ToolInputError(f"secrets takes environment variable names; {bad[0]!r} is not one.")
    if parameters is not None:
        strict_json(parameters, "parameters")
    fields = JobFields(
        name=name,
        kind="notebook" if notebook else "task",
        timezone=_timezone(timezone),
        notebook=notebook,
        task=task,
        parameters=parameters,
        at=at,
        cron=cron,
        cwd=os.getcwd(),
        model=model,
        token_limit=token_limit,
        options={"secrets": list(secrets)} if secrets else None,
    )
    with _errors():
        state = _service().create(fields, by=ctx.provenance(), created_by=ctx.session_name)
    job = state.job
    if state.held:
        return {"id": job.id, "name": job.name, "enabled": False, "note": state.held}
    created: TaskCreated = {"id": job.id, "name": job.name, "next_run": _iso(job.next_run_at, job.timezone)}
    warning = _no_scheduler_warning()
    if warning:
        created["warning"] = warning
    return created


def list_scheduled_tasks(include_disabled: bool = False) -> TaskList:
    """List scheduled tasks with their next run and how their last run went.

    Args:
        include_disabled: Also list paused tasks.
    """
    ctx = current_context()
    tasks: list[TaskEntry] = []
    for state in _service().jobs(include_disabled=include_disabled, kinds=("notebook", "task")):
        job, last = state.job, state.last
        named: _TaskNamed = {"id": job.id, "name": job.name}
        if job.task:
            named["task"] = provenance.shown(job.task, state.taint, f"task of job {job.id}")
            if state.taint is not None:
                ctx.note_untrusted([f"task of job {job.id}"])
                named["waits_for_review"] = True
        if job.notebook:
            named["notebook"] = job.notebook
        entry: TaskEntry = {
            **named,
            "type": job.type,
            "cron": job.cron,
            "timezone": job.timezone,
            "next_run": _iso(job.next_run_at, job.timezone),
            "last_run": _iso(last.started_at or last.scheduled_for, job.timezone) if last else None,
            "last_status": last.status if last else None,
            "enabled": job.enabled,
            "model": job.model,
        }
        tasks.append(entry)
    return {"tasks": tasks}


def update_scheduled_task(
    id: Short,
    name: Short | None = None,
    task: Prompt | None = None,
    notebook: NotebookPath | None = None,
    parameters: Parameters | None = None,
    at: Short | None = None,
    cron: Short | None = None,
    timezone: Short | None = None,
    model: Short | None = None,
    token_limit: TokenLimit | None = None,
    timeout_s: Annotated[float, Field(gt=0, le=7 * 86_400)] | None = None,
) -> TaskUpdated:
    """Change a scheduled task: only the fields given (`cron` replaces `at` and the other way
    round; `parameters` replaces all of them). Each change is a new version of the task.

    Args:
        id: The task's id.
        name: New label.
        task: New prompt.
        notebook: New notebook path.
        parameters: New papermill parameters (all of them).
        at: New one-off time, ISO 8601.
        cron: New 5-field cron expression.
        timezone: New IANA timezone.
        model: New model.
        token_limit: New most tokens per firing.
        timeout_s: New most seconds per run.
    """
    ctx = current_context()
    given = {
        "name": name, "task": task, "notebook": notebook, "parameters": parameters, "at": at, "cron": cron,
        "timezone": timezone, "model": model, "token_limit": token_limit, "timeout_s": timeout_s,
    }  # fmt: skip
    changes = {key: value for key, value in given.items() if value is not None}
    if not changes:
        raise ToolInputError("Give at least one field to change (e.g. cron, parameters, task).")
    if parameters is not None:
        strict_json(parameters, "parameters")
    with _errors():
        state = _service().update(id, changes, by=ctx.provenance(), kinds=("notebook", "task"))
    job = state.job
    answer: TaskUpdated = {"id": job.id, "name": job.name, "version": job.version, "enabled": job.enabled}
    if state.held:
        answer["note"] = state.held
    else:
        answer["next_run"] = _iso(job.next_run_at, job.timezone)
    return answer


def cancel_scheduled_task(id: Short) -> Deleted:
    """Delete a scheduled task: it stops firing, and a run in progress is cancelled.

    Args:
        id: The task's id (from create_scheduled_task or list_scheduled_tasks).
    """
    return {"deleted": _delete(id, kinds=TASK_KINDS, other="a reminder: use cancel_reminder")}


def enable_scheduled_task(id: Short) -> TaskEnabled:
    """Resume a paused task; it fires from its next slot on (missed slots are not run).

    Args:
        id: The task's id.
    """
    return _set_enabled(id, True)


def disable_scheduled_task(id: Short) -> TaskEnabled:
    """Pause a task without deleting it.

    Args:
        id: The task's id.
    """
    return _set_enabled(id, False)


def set_reminder(at: Short, message: Prompt) -> ReminderSet:
    """Continue this conversation later: at `at`, `message` arrives in this session as a
    new turn (run unattended), so you can pick the work up again. One-shot; for
    recurring work create a scheduled task.

    Args:
        at: ISO 8601 time to fire, e.g. 2026-02-25T09:00:00Z; without an offset it is read in the user's timezone.
        message: What to tell yourself when the reminder fires.
    """
    ctx = current_context()
    with ctx.store.connect() as con:
        session = Sessions(con).get(ctx.session_id)
    preview = " ".join(message.split())
    fields = JobFields(
        name="reminder: " + (preview[:50] + ("..." if len(preview) > 50 else "")),
        kind="reminder",
        timezone=_timezone(None),
        task=f"(A reminder you set earlier in this session.) {message}",
        at=at,
        cwd=os.getcwd(),
        session=ctx.session_name,
        origin_notebook=session.notebook if session else None,
    )
    with _errors():
        state = _service().create(fields, by=ctx.provenance(), created_by=ctx.session_name)
    job = state.job
    if state.held:
        return {"id": job.id, "at": _iso(job.run_at, job.timezone), "enabled": False, "note": state.held}
    reminder: ReminderSet = {"id": job.id, "at": _iso(job.run_at, job.timezone)}
    warning = _no_scheduler_warning()
    if warning:
        reminder["warning"] = warning
    return reminder


def list_reminders(include_fired: bool = False) -> ReminderList:
    """List the reminders set with set_reminder: when each fires, its message, its session.

    Args:
        include_fired: Also list reminders that have fired or were paused.
    """
    ctx = current_context()
    reminders: list[ReminderEntry] = []
    for state in _service().jobs(include_disabled=include_fired, kinds=("reminder",)):
        job, last = state.job, state.last
        if not include_fired and job.next_run_at is None:
            continue  # fired already: nothing more to come
        message = (job.task or "").removeprefix("(A reminder you set earlier in this session.) ")
        entry: ReminderEntry = {
            "id": job.id,
            "at": _iso(job.run_at, job.timezone),
            "message": provenance.shown(message, state.taint, f"reminder {job.id}"),
            "session": job.session,
            "enabled": job.enabled,
            "status": last.status if last else "waiting",
        }
        if state.taint is not None:
            ctx.note_untrusted([f"reminder {job.id}"])
            entry["waits_for_review"] = True
        reminders.append(entry)
    return {"reminders": reminders}


NOTIFY_CHARS = 2_000
NOTIFICATIONS_PER_TURN = 3
NOTIFICATIONS_PER_HOUR = 10  # from the agent, all sessions together


def notify(
    message: Annotated[str, Field(min_length=1, max_length=NOTIFY_CHARS)], title: Short | None = None
) -> Notified:
    """Send the user a notification (their phone, e-mail or chat, as they set it up) when
    they need to know now: a long task finished, something needs their decision. Rarely.

    Args:
        message: What to tell them, in a sentence or two.
        title: A short title.
    """
    ctx = current_context()
    sent = _NOTIFIED.setdefault((ctx.session_id, ctx.turn), 0)
    if sent >= NOTIFICATIONS_PER_TURN:
        raise ToolInputError(f"At most {NOTIFICATIONS_PER_TURN} notifications per turn; put the rest in one.")
    with ctx.store.connect() as con:
        [(recent,)] = con.execute(
            "SELECT count(*) FROM tool_calls WHERE tool = 'notify' AND NOT is_error "
            "AND created_at > (now() AT TIME ZONE 'UTC') - INTERVAL 1 HOUR"
        ).fetchall()
    if recent + sent >= NOTIFICATIONS_PER_HOUR:
        raise ToolInputError(
            f"The agent sent {NOTIFICATIONS_PER_HOUR} notifications in the last hour; wait before sending more."
        )
    with _errors():
        targets = [t for t in notifications.Targets(agent_home()).all() if t.default]
    if not targets:
        raise ToolInputError(
            "The user has no default notification target; tell them in your answer instead "
            "(they can add one with `agent-kernel notify add URL --default`)."
        )
    _NOTIFIED[(ctx.session_id, ctx.turn)] = sent + 1
    problem = notifications.deliver(targets, title or "agent-kernel", message, failed=False)
    if problem:
        raise ToolInputError(f"The notification was not delivered: {problem}")
    return {"sent": True, "to": [t.name for t in targets]}


_NOTIFIED: dict[tuple[str, int], int] = {}  # notifications sent per (session, turn)


def cancel_reminder(id: Short) -> Deleted:
    """Cancel a reminder set with set_reminder.

    Args:
        id: The reminder's id.
    """
    return {"deleted": _delete(id, kinds=("reminder",), other="a scheduled task: use cancel_scheduled_task")}


def manage_pulse(
    action: Literal["get_config", "update_config", "update_notes"],
    notes: str | None = None,
    enabled: bool | None = None,
    active_days: Annotated[list[Annotated[int, Field(ge=0, le=6)]], Field(max_length=7)] | None = None,
    pulses_per_day: Literal[48, 24, 12, 6, 2] | None = None,
    quiet_hours: Annotated[list[dict[Short, Short]], Field(max_length=24)] | None = None,
    instruction: Prompt | None = None,
) -> dict[str, object]:
    """Your pulse: an autonomous run that fires regularly (a fresh session each time)
    and keeps notes for the next one. `get_config` shows it; `update_config` creates or
    changes it; `update_notes` leaves notes (at most 2,000 characters) for the next pulse.

    Args:
        action: get_config, update_config or update_notes.
        notes: update_notes: what the next pulse should know (replaces the previous notes).
        enabled: update_config: turn the pulse on or off.
        active_days: update_config: days it fires, 0 = Sunday ... 6 = Saturday.
        pulses_per_day: update_config: 48, 24, 12, 6 or 2 (every 30 min, 1 h, 2 h, 4 h, 12 h).
        quiet_hours: update_config: local time windows with no pulse, e.g. [{"start": "22:00", "end": "07:00"}].
        instruction: update_config: what each pulse should do.
    """
    ctx = current_context()
    service = _service()
    with _errors():
        if action == "update_notes":
            if notes is None:
                raise ToolInputError("update_notes needs `notes`.")
            length, state = service.keep_pulse_notes(notes, by=ctx.provenance())
            answer = {"success": True, "action": "notes_updated", "length": length}
            return {**answer, "enabled": False, "note": state.held} if state.held else answer
        if action == "update_config":
            state, status = service.configure_pulse(
                by=ctx.provenance(),
                timezone=_timezone(None),
                enabled=enabled,
                pulses_per_day=pulses_per_day,
                active_days=active_days,
                quiet_hours=quiet_hours,
                instruction=instruction,
            )
            answer = {"success": True, "action": "config_updated", "pulse": status}
            return {**answer, "note": state.held} if state.held else answer
        found = service.pulse_status()
    if found is None:
        return {"success": True, "configured": False, "note": "No pulse yet: update_config creates one."}
    return {"success": True, "configured": True, **found[1]}


TOOLS = [
    Tool(create_scheduled_task, name="create_scheduled_task", group="schedule", writes=True),
    Tool(list_scheduled_tasks, name="list_scheduled_tasks", group="schedule"),
    Tool(update_scheduled_task, name="update_scheduled_task", group="schedule", writes=True),
    Tool(cancel_scheduled_task, name="cancel_scheduled_task", group="schedule", writes=True),
    Tool(enable_scheduled_task, name="enable_scheduled_task", group="schedule", writes=True),
    Tool(disable_scheduled_task, name="disable_scheduled_task", group="schedule", writes=True),
    Tool(set_reminder, name="set_reminder", group="schedule", writes=True),
    Tool(list_reminders, name="list_reminders", group="schedule"),
    Tool(notify, name="notify", group="schedule", writes=True),
    Tool(cancel_reminder, name="cancel_reminder", group="schedule", writes=True),
    Tool(
        manage_pulse,
        name="manage_pulse",
        group="schedule",
        writes=lambda tool_input: tool_input.get("action") != "get_config",
    ),
]


# -- helpers --------------------------------------------------------------------------------


@contextmanager
def _errors() -> Iterator[None]:
    """Turn a ScheduleError into the is_error result the model reads."""
    try:
        yield
    except ScheduleError as exc:
        raise ToolInputError(str(exc)) from None


def _service() -> SchedulerService:
    """The scheduler service of this turn's store (jobs named by their exact id)."""
    return SchedulerService(current_context().store)


def _no_scheduler_warning() -> str | None:
    """How the model gets the job fired when no scheduler runs (None while one runs)."""
    if _service().scheduler() is not None:
        return None
    return f"No scheduler is running, so this will not fire until one starts. Tell the user to {leader.HOW_TO_START}."


def _timezone(name: str | None) -> str:
    chosen = name or current_context().settings.timezone or local_timezone_name()
    with _errors():
        zone(chosen)
    return chosen


def _iso(instant: datetime | None, timezone: str) -> str | None:
    return iso(instant, timezone)


def _set_enabled(job_id: str, enabled: bool) -> TaskEnabled:
    service = _service()
    with _errors():
        try:
            if enabled:
                state = service.enable(job_id, by=current_context().provenance(), kinds=TASK_KINDS)
            else:
                state = service.disable(job_id, kinds=TASK_KINDS)
        except NotFoundError:
            raise ToolInputError(f"No scheduled task with id {job_id!r}; list_scheduled_tasks shows them.") from None
    return {"id": state.job.id, "enabled": state.job.enabled}


def _delete(job_id: str, *, kinds: tuple[str, ...], other: str) -> bool:
    try:
        _service().delete(job_id, kinds=kinds)
    except NotFoundError as exc:
        if exc.kind is None:
            return False
        raise ToolInputError(f"{job_id!r} is {other}.") from None
    return True
