"""``execute_run(spec)``: run one notebook in its own process and say how it ended.

This is what every executor calls — in a thread of the scheduler (local) or on a Dask
worker — so timeouts, cancellation and classification are the same everywhere:

- the runner process starts in a session of its own; the whole run is bounded by
  ``timeout_s``: past it the runner is stopped (SIGTERM: it saves the notebook and shuts
  its kernel down) and after a grace period it and every process it started are killed;
- a ``cancel`` file in the run directory stops it the same way (CANCELLED);
- a heartbeat file the owning scheduler stops touching (it died while a Dask worker runs
  on) stops it too (LOST), so an orphaned run does not go on next to its retry;
- the status comes from the runner's exit code and who stopped it, never from the
  output notebook's metadata (papermill leaves a timed-out notebook looking completed).

Returns a :class:`~agent_kernel.scheduler.records.RunResult`, a plain dict (it crosses
process boundaries): ``status``, ``error``, ``error_cell``, ``exit_code``, ``cells_done``,
``cells_total``, ``executor_detail``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING

import psutil

from agent_kernel.scheduler import runner
from agent_kernel.scheduler.rundir import RunDir
from agent_kernel.scheduler.runs import CANCELLED, FAILED, LOST, SUCCEEDED, TIMED_OUT
from agent_kernel.scheduler.spec import RunSpec

if TYPE_CHECKING:
    from agent_kernel.scheduler.records import RunResult, RunSpecJson

STOP_GRACE_S = 5.0
_WATCH_S = 0.25  # how often the timeout, the cancel file and the heartbeat are checked

_EXIT_STATUS = {
    runner.EXIT_SUCCEEDED: SUCCEEDED,
    runner.EXIT_FAILED: FAILED,
    runner.EXIT_CELL_TIMEOUT: TIMED_OUT,
    runner.EXIT_ERROR: FAILED,
    runner.EXIT_STOPPED: FAILED,  # someone else sent SIGTERM
    runner.EXIT_ORPHANED: LOST,
}


def execute_run(spec_data: RunSpecJson) -> RunResult:
    """Execute the run described by ``spec_data`` (a :class:`RunSpec` as a dict)."""
    spec = RunSpec.from_dict(spec_data)
    run_dir = spec.dir.create()
    if not run_dir.spec.exists():
        spec.save()
    if not run_dir.heartbeat.exists():
        run_dir.touch_heartbeat()
    env = {**os.environ, **spec.env}
    deadline = time.monotonic() + spec.timeout_s
    with open(run_dir.runner_log, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "agent_kernel.scheduler.runner", str(run_dir.path)],
            cwd=spec.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    exited = threading.Event()

    def wait_then_set() -> None:
        process.wait()
        exited.set()

    threading.Thread(target=wait_then_set, daemon=True).start()
    stopped: tuple[str, str] | None = None
    while not exited.wait(timeout=min(_WATCH_S, max(deadline - time.monotonic(), 0.0))):
        if time.monotonic() >= deadline:
            stopped = (TIMED_OUT, f"The run took longer than its timeout of {spec.timeout_s:g} s and was stopped.")
        elif (reason := run_dir.cancel_reason()) is not None:
            stopped = (CANCELLED, f"Cancelled: {reason}.")
        elif run_dir.heartbeat_age() > spec.lease_s:
            stopped = (LOST, "The scheduler that owned this run stopped heartbeating; the run was stopped.")
        if stopped is not None:
            stop(process)
            break
    code = process.wait()
    result = _classify(code, stopped, run_dir)
    if stopped is not None:
        mark_notebook(run_dir, stopped[0], stopped[1])
    result["executor_detail"] = _where()
    return result


def stop(process: subprocess.Popen[bytes]) -> int:
    """Stop the runner and everything it started; return its exit code."""
    try:
        started = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        started = []
    try:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        code = process.wait()
    # The kernel runs in a session of its own: make sure it went with its runner.
    runner.kill_processes([p for p in started if _alive(p)], grace_s=0)
    return code


def _alive(process: psutil.Process) -> bool:
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _classify(code: int, stopped: tuple[str, str] | None, run_dir: RunDir) -> RunResult:
    reported = run_dir.runner_report() or {}
    progress = run_dir.progress_report() or {}
    result: RunResult = {
        "status": FAILED,  # until the exit code says otherwise
        "exit_code": code,
        "cells_done": reported.get("cells_done", progress.get("cells_done")),
        "cells_total": reported.get("cells_total", progress.get("cells_total")),
        "error_cell": reported.get("error_cell"),
    }
    if stopped is not None:
        result["status"], result["error"] = stopped
        return result
    status = _EXIT_STATUS.get(code)
    if status is None:
        tail = run_dir.log_tail(run_dir.runner_log, 600).strip()
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        result["error"] = f"The runner process {how}." + (f" Its last output:\n{tail}" if tail else "")
        return result
    result["status"] = status
    result["error"] = reported.get("error") if status != SUCCEEDED else None
    if status == FAILED and not result["error"]:
        result["error"] = run_dir.log_tail(run_dir.runner_log, 600).strip() or f"exit code {code}"
    return result


def mark_notebook(run_dir: RunDir, status: str, message: str) -> None:
    """Put a note at the top of a stopped run's (partial) output notebook."""
    import nbformat  # noqa: PLC0415 - heavy (jsonschema, ~1.5 s): only reading or writing a notebook needs it

    try:
        nb = nbformat.read(run_dir.output, as_version=4)
    except Exception:  # noqa: BLE001 - no output yet (stopped before the kernel started)
        return
    cell = nbformat.v4.new_markdown_cell(
        f'<span style="color:red; font-size:1.2em">**{status}**</span>: {message} '
        "The cells below show what ran before that; their papermill metadata does not."
    )
    cell.metadata["tags"] = ["agent-kernel-status"]
    nb.cells.insert(0, cell)
    partial = run_dir.output.with_name(".output.ipynb.tmp")
    nbformat.write(nb, partial)
    os.replace(partial, run_dir.output)


def _where() -> str:
    """Which machine (and Dask worker) ran it."""
    if "distributed" in sys.modules:
        try:
            from distributed import get_worker  # noqa: PLC0415 - optional extra (agent-kernel[dask])

            return f"dask worker {get_worker().address}"
        except (ValueError, ImportError):
            pass
    return f"{socket.gethostname()} pid {os.getpid()}"
