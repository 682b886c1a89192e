"""The JSON the scheduler hands out: a run as the server's API, the CLI and the
JupyterLab panel read it (instants as ISO 8601 UTC, None where not reached yet)."""

from __future__ import annotations

from typing import Any, TypedDict


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
