"""The JSON the scheduler hands out and passes along: a run as the server's API, the CLI
and the JupyterLab panel read it (instants as ISO 8601 UTC, None where not reached yet),
and how a run ended as its runner process and its executor report it.

Plain dicts, not classes: a result comes back from a Dask worker and the runner's report
is a file, and this module imports nothing a runner process would not need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from typing_extensions import Required


class RunRecord(TypedDict):
    """One row of ``runs`` as plain JSON (:meth:`~agent_kernel.scheduler.runs.Run.to_json`)."""

    id: str
    job_id: str
    scheduled_for: str | None
    attempt: int
    cause: str  # schedule | catchup | manual | retry
    status: str
    not_before: str | None
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    heartbeat_at: str | None
    worker: str | None
    executor: str | None
    executor_detail: str | None
    run_dir: str | None
    output_path: str | None
    error: str | None
    error_cell: int | None
    exit_code: int | None
    cells_done: int | None
    cells_total: int | None
    cancel_requested: bool
    job_version: int | None  # the version of its job it started with
    notified: str | None  # the notification targets told of its end
    notify_error: str | None  # why a notification was not delivered
    explanation: str | None  # why it failed (runs explain, or the job's explain option)
    explain_tokens: int | None
    explain_cost: float | None
    parameters: dict[str, Any] | None  # over its job's, by name (a run now with other values)
    seconds: float | None  # from start to finish, once both are known


class RunSpecJson(TypedDict):
    """A :class:`~agent_kernel.scheduler.spec.RunSpec` as plain data: what an executor hands
    :func:`~agent_kernel.scheduler.execute.execute_run` (to a Dask worker too) and what the
    run directory's ``spec.json`` holds."""

    run_id: str
    job_id: str
    job_name: str
    attempt: int
    run_dir: str
    input_path: str
    output_path: str
    cwd: str
    parameters: dict[str, Any]
    kernel_name: str | None
    timeout_s: float
    cell_timeout_s: float | None
    lease_s: float
    env: dict[str, str]


class RunResult(TypedDict, total=False):
    """How a run ended, as its executor hands it to the scheduler (``Done``): what
    :func:`~agent_kernel.scheduler.execute.execute_run` returns, or what the executor says
    when it could not run it. ``status`` always; the rest once known."""

    status: Required[str]  # SUCCEEDED | FAILED | TIMED_OUT | CANCELLED | LOST
    error: str | None
    error_cell: int | None  # the code cell that failed: its In [N] in a clean run
    exit_code: int | None  # the runner process's (``runner.EXIT_*``, or minus the signal)
    cells_done: int | None
    cells_total: int | None
    executor_detail: str | None  # which machine (and Dask worker) ran it


class RunnerReport(TypedDict, total=False):
    """``result.json``: how the runner process saw the end (the executor has the last word).
    The runner always writes ``status`` and ``exit_code``; a reader finds none before it has."""

    status: str  # SUCCEEDED | FAILED | TIMED_OUT | STOPPED | LOST
    exit_code: int
    error: str
    error_cell: int | None
    cells_done: int
    cells_total: int
    seconds: float  # from the runner's start to its end
    killed: list[int]  # the pids it killed when its scheduler went away


class ProgressReport(TypedDict, total=False):
    """``progress.json``, rewritten by the runner as each code cell starts and ends."""

    cells_done: int
    cells_total: int
    updated: float  # time.time() of the write
    state: str  # starting kernel | running
    cell: int  # the running code cell's ordinal
    source: str  # its first line


class JobVersionJson(TypedDict):
    """One version of a job (:meth:`~agent_kernel.scheduler.history.JobVersion.as_json`)."""

    version: int
    changed: list[str]  # the fields this version changed ([] for the first)
    changed_by: str
    changed_at: str | None
    definition: dict[str, object]  # the job's fields as this version has them


class BeforeAfterJson(TypedDict):
    """A value in the earlier run and in the later one."""

    before: object
    after: object


class SecondsJson(TypedDict):
    before: float | None
    after: float | None


class CellChangeJson(TypedDict):
    """One code cell whose outcome differs between two runs."""

    cell: int  # among the code cells, papermill's injected cell not counted, from 1
    source: str  # its first line
    kinds: list[str]  # output, new error, error gone, images, slower, faster, source
    diff: str
    error: str
    seconds: SecondsJson


class ComparisonJson(TypedDict):
    """Two runs of a job compared (:meth:`~agent_kernel.scheduler.compare.Comparison.as_json`)."""

    before: str  # the earlier run's id
    after: str
    parameters: dict[str, BeforeAfterJson]  # the parameters whose values differ
    seconds: SecondsJson
    first_error: CellChangeJson | None
    changes: list[CellChangeJson]


class NotifySetting(TypedDict):
    """A job's ``notify`` option: whom to tell of its runs' ends, and when."""

    targets: list[str]  # names in the notification targets file: never a URL
    on: str  # failure | success | always
