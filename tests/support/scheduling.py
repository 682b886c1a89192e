"""Helpers for scheduler tests: jobs, a scheduler, the CLI as a process, and reading runs back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agent_kernel.scheduler.daemon import Scheduler, SchedulerSettings
from agent_kernel.scheduler.jobs import Job, Jobs, Policy, new_job
from agent_kernel.scheduler.runs import Run, Runs
from agent_kernel.store import Store

UTC = timezone.utc


def add_job(store: Store, *, now: datetime, policy: Policy | None = None, **fields: Any) -> Job:
    fields.setdefault("timezone", "UTC")
    fields.setdefault("kind", "notebook" if "notebook" in fields else "task")
    with store.connect() as con:
        return Jobs(con).add(new_job(now=now, policy=policy, **fields))


def runs_of(store: Store, job: Job | str | None = None) -> list[Run]:
    """The job's runs, oldest slot first."""
    job_id = job.id if isinstance(job, Job) else job
    with store.connect() as con:
        return sorted(Runs(con).list(job_id=job_id, limit=10_000), key=lambda r: (r.scheduled_for, r.attempt))


def get_job(store: Store, job: Job) -> Job:
    with store.connect() as con:
        found = Jobs(con).get(job.id, deleted=True)
    assert found is not None
    return found


def scheduler(store: Store, home: Path, clock: Any, **settings: Any) -> Scheduler:
    return Scheduler(store, home=home, clock=clock, settings=SchedulerSettings(**settings))


def wait_for(condition: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def pid_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def agent_kernel_cli(*args: str, log: Path | None = None) -> subprocess.Popen[str]:
    """The installed `agent-kernel` console script, started with this test's environment.

    With ``log`` its output goes to that file (a daemon's stays readable after a kill);
    without, to pipes for ``communicate()``.
    """
    script = Path(sys.executable).with_name("agent-kernel")
    if log is None:
        return subprocess.Popen([str(script), *args], env=dict(os.environ), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
    with open(log, "ab") as out:
        return subprocess.Popen([str(script), *args], env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT)
