"""Scheduling notebooks: jobs, their runs, and the daemon that fires them.

A *job* says what to run (a notebook with papermill parameters, or a ``task`` prompt that
becomes a generated notebook running ``%agent``) and when (one instant, or a cron
expression in an IANA timezone). A *run* is one firing of one slot of a job: a row with
``UNIQUE(job_id, scheduled_for, attempt)``, so a slot is fired once however many
schedulers look at it, and each retry is a row of its own.

The modules, in the order data flows::

    clock     now() (a controllable clock in tests), UTC <-> database conversions
    cron      Schedule: cron or one instant, timezone, quiet hours -> slots (cronsim)
    checks    what a job may hold: checked when it is created and before each run
    jobs      Job and the jobs table; validating what a user or the model asks for
    runs      Run, statuses and the runs table
    leader    the scheduler lease: one leader at a time
    rundir    a run's directory: spec, notebooks, logs, progress, result, heartbeat
    spec      RunSpec (plain data) and the notebooks generated for tasks and reminders
    runner    the process that executes one notebook with papermill (per-cell progress)
    execute   execute_run(spec): start the runner, enforce the timeout, classify the end
    executors local threads or Dask distributed, both running execute_run
    daemon    Scheduler: reconcile, fire, dispatch, heartbeat, record
    pulse     the pulse: a recurring autonomous run with continuity notes
    digest    what the daily digest notebook summarises
    service   SchedulerService: create, update, enable, disable, delete, run now, cancel;
              what the CLI, the server API, the schedule tools and %agent_jobs call

Nothing here imports the magics or the agent: the scheduler is its own process that
shares the store with kernels.
"""

from __future__ import annotations

from agent_kernel.errors import AgentKernelError

__all__ = ["NotFoundError", "ScheduleError"]


class ScheduleError(AgentKernelError):
    """A job or reminder cannot be created or changed as asked; the message says what to change."""


class NotFoundError(ScheduleError):
    """No job (or run) answers to the id or name given.

    ``kind`` is the kind of the job that does answer to it when that job is not of the
    kinds the caller asked for (a reminder given to a tool for tasks), else None.
    """

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
