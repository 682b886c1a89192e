"""The process that executes one run: ``python -m agent_kernel.scheduler.runner RUN_DIR``.

It runs papermill on the spec in ``RUN_DIR/spec.json`` with an engine that writes
``progress.json`` as each cell starts and ends, streams the cells' stdout/stderr to
log files, and writes ``result.json``. Its exit code says how it ended (see ``EXIT_*``).

It never touches the database: the scheduler that started it records the run. Two
ways out besides the end of the notebook:

- SIGTERM (the scheduler's timeout or a cancel): papermill stops, saves the output
  notebook as far as it got, and the kernel is shut down;
- the parent process disappears (the scheduler was killed): the runner kills its
  kernel and exits, so a run whose owner died leaves nothing running.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from types import FrameType
from typing import TYPE_CHECKING, Any

import psutil

from agent_kernel.errors import TurnFailedError
from agent_kernel.scheduler.checks import InvalidJob, check_kernel, check_parameter_cell, check_spec
from agent_kernel.scheduler.lean_imports import refuse_unused_slow_imports
from agent_kernel.scheduler.rundir import RunDir
from agent_kernel.scheduler.spec import RunSpec

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from agent_kernel.scheduler.records import RunnerReport

EXIT_SUCCEEDED = 0
EXIT_FAILED = 10  # a cell raised
EXIT_CELL_TIMEOUT = 11  # a cell ran past cell_timeout_s
EXIT_STOPPED = 12  # SIGTERM: the scheduler stopped it (timeout, cancel)
EXIT_ORPHANED = 13  # the scheduler that started it is gone
EXIT_ERROR = 14  # anything else (kernel did not start, notebook unreadable, ...)

ENGINE = "agent_kernel"


class Stopped(Exception):
    """Raised in the main thread on SIGTERM."""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m agent_kernel.scheduler.runner RUN_DIR", file=sys.stderr)
        return 2
    run_dir = RunDir(args[0])
    spec = RunSpec.load(run_dir)
    _watch_parent(os.getppid(), run_dir)
    signal.signal(signal.SIGTERM, _on_sigterm)
    started = time.time()
    progress = Progress(run_dir)
    result: RunnerReport
    try:
        result = _execute(spec, run_dir, progress)
    except Stopped:
        progress.interrupted()
        result = {"status": "STOPPED", "exit_code": EXIT_STOPPED, "error": "stopped by SIGTERM"}
    result["cells_done"], result["cells_total"] = progress.done, progress.total
    result["seconds"] = round(time.time() - started, 3)
    run_dir.write_json(run_dir.result, result)
    return result["exit_code"]


def _execute(spec: RunSpec, run_dir: RunDir, progress: Progress) -> RunnerReport:
    refuse_unused_slow_imports()
    import papermill  # noqa: PLC0415 - after refuse_unused_slow_imports (see lean_imports)
    from nbclient.exceptions import CellTimeoutError, DeadKernelError  # noqa: PLC0415 - see papermill above
    from papermill.engines import papermill_engines  # noqa: PLC0415 - see papermill above
    from papermill.exceptions import PapermillExecutionError  # noqa: PLC0415 - see papermill above

    # zmq and traitlets: the scheduler imports this module for its exit codes, never starts a kernel
    from agent_kernel.scheduler.kernels import kernel_manager_config  # noqa: PLC0415

    try:
        kernel_name = _checked(spec)
    except InvalidJob as exc:
        return {"status": "FAILED", "exit_code": EXIT_ERROR, "error": f"Not run: its spec is invalid: {exc}"}
    papermill_engines.register(ENGINE, _progress_engine())
    with open(run_dir.stdout, "w", encoding="utf-8") as out, open(run_dir.stderr, "w", encoding="utf-8") as err:
        try:
            papermill.execute_notebook(
                spec.input_path,
                spec.output_path,
                parameters=spec.parameters or None,
                engine_name=ENGINE,
                kernel_name=kernel_name,
                cwd=spec.cwd,
                progress_bar=False,
                stdout_file=out,
                stderr_file=err,
                execution_timeout=spec.cell_timeout_s,
                progress=progress,
                config=kernel_manager_config(),
            )
        except PapermillExecutionError as exc:
            return {
                "status": "FAILED",
                "exit_code": EXIT_FAILED,
                "error": _cell_error(exc.ename, exc.evalue),
                "error_cell": exc.exec_count or progress.ordinal(exc.cell_index),
            }
        except CellTimeoutError as exc:
            progress.interrupted()
            return {
                "status": "TIMED_OUT",
                "exit_code": EXIT_CELL_TIMEOUT,
                "error": f"A cell ran longer than cell_timeout_s ({spec.cell_timeout_s:g} s): {_first_line(exc)}",
                "error_cell": progress.ordinal(progress.current_index),
            }
        except DeadKernelError as exc:
            progress.interrupted()
            return {
                "status": "FAILED",
                "exit_code": EXIT_FAILED,
                "error": f"The kernel died: {_first_line(exc)}",
                "error_cell": progress.ordinal(progress.current_index),
            }
        except Stopped:
            raise
        except Exception as exc:  # noqa: BLE001 - anything else ends the run as FAILED
            traceback.print_exc()
            return {"status": "FAILED", "exit_code": EXIT_ERROR, "error": f"{type(exc).__name__}: {_first_line(exc)}"}
    return {"status": "SUCCEEDED", "exit_code": EXIT_SUCCEEDED}


def _checked(spec: RunSpec) -> str:
    """The kernel to run ``spec`` in, once the spec and the code papermill injects pass the checks."""
    from papermill.translators import PythonTranslator  # noqa: PLC0415 - papermill loads in _execute, after lean_imports

    check_spec(spec)
    kernel_name = spec.kernel_name or _kernel_of(spec.input_path)
    check_kernel(kernel_name)
    if spec.parameters:
        check_parameter_cell(PythonTranslator.codify(spec.parameters))
    return kernel_name


def _cell_error(ename: str, evalue: str) -> str:
    """The run's error for a failed cell: an %agent turn's own line, else ``ename: evalue``.

    A notebook fails exactly when one of its cells failed; an %agent cell fails when its
    turn did not end normally (see agent_kernel/turn/outcome.py), with one line that says why.
    """
    evalue = str(evalue).strip()
    if ename == TurnFailedError.__name__ and evalue:
        return evalue
    return f"{ename}: {evalue}" if evalue else ename


def _kernel_of(path: str) -> str:
    """The notebook's kernel, or python3 for a notebook that names none."""
    import nbformat  # noqa: PLC0415 - heavy (jsonschema, ~1.5 s): only reading or writing a notebook needs it

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - papermill reports an unreadable notebook itself
        return "python3"
    return (nb.metadata.get("kernelspec") or {}).get("name") or "python3"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Stopped()


def _watch_parent(parent: int, run_dir: RunDir) -> None:
    """Kill the kernel and exit as soon as the scheduler that started us is gone."""

    def watch() -> None:
        while True:
            time.sleep(0.25)
            if os.getppid() != parent:
                killed = kill_children()
                run_dir.write_json(run_dir.result, {
                    "status": "LOST", "exit_code": EXIT_ORPHANED, "killed": killed,
                    "error": "The scheduler that started this run is gone; the run stopped itself.",
                })  # fmt: skip
                os._exit(EXIT_ORPHANED)

    threading.Thread(target=watch, name="agent-kernel-parent-watch", daemon=True).start()


def kill_children(grace_s: float = 0.0) -> list[int]:
    """Kill every process this one started (the kernel); return their pids."""
    children = psutil.Process().children(recursive=True)
    return kill_processes(children, grace_s)


def kill_processes(processes: list[psutil.Process], grace_s: float) -> list[int]:
    """SIGTERM, wait up to ``grace_s``, SIGKILL what is left; return the pids."""
    for process in processes:
        try:
            process.send_signal(signal.SIGTERM if grace_s else signal.SIGKILL)
        except psutil.Error:
            pass
    if grace_s:
        _, alive = psutil.wait_procs(processes, timeout=grace_s)
        for process in alive:
            try:
                process.kill()
            except psutil.Error:
                pass
    psutil.wait_procs(processes, timeout=2)
    return [p.pid for p in processes]


class Progress:
    """Writes ``progress.json``: which code cell is running, how many are done."""

    def __init__(self, run_dir: RunDir) -> None:
        self.run_dir = run_dir
        self.total = 0
        self.done = 0
        self.current_index: int | None = None
        self._code_indexes: list[int] = []
        self._write(state="starting kernel")

    def start(self, nb: NotebookNode) -> None:
        self._code_indexes = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
        self.total = len(self._code_indexes)
        self._write(state="running")

    def cell_start(self, cell: NotebookNode, index: int) -> None:
        self.current_index = index
        if cell.cell_type == "code":
            self._write(state="running", cell=self._ordinal(index), source=_head(cell.source))

    def cell_complete(self, cell: NotebookNode, index: int) -> None:
        failed = cell.get("metadata", {}).get("papermill", {}).get("status") == "failed"
        if cell.cell_type == "code" and not failed:
            self.done = self._ordinal(index)
            self._write(state="running", cell=self.done, source=_head(cell.source))

    def interrupted(self) -> None:
        """The running cell was stopped: papermill still calls it complete; it is not."""
        if self.current_index is not None and self.current_index in self._code_indexes:
            self.done = self._ordinal(self.current_index) - 1

    def ordinal(self, index: int | None) -> int | None:
        """The 1-based number of the code cell at notebook ``index`` (its In [N] in a clean run)."""
        if index is None or index not in self._code_indexes:
            return None
        return self._code_indexes.index(index) + 1

    def _ordinal(self, index: int) -> int:
        return self.ordinal(index) or self.done

    def _write(self, **fields: str | int) -> None:
        self.run_dir.write_json(
            self.run_dir.progress,
            {"cells_done": self.done, "cells_total": self.total, "updated": time.time(), **fields},
        )


def _head(source: str) -> str:
    for line in source.splitlines():
        if line.strip():
            return line.strip()[:80]
    return ""


def _progress_engine() -> type:
    from papermill.engines import NBClientEngine  # noqa: PLC0415 - papermill loads in _execute, after lean_imports

    class _ProgressEngine(NBClientEngine):
        """papermill's nbclient engine, reporting each cell's start and end."""

        @classmethod
        def execute_managed_notebook(
            cls, nb_man: Any, kernel_name: str, progress: Progress | None = None, **kwargs: Any
        ) -> Any:
            if progress is not None:
                progress.start(nb_man.nb)
                start, complete = nb_man.cell_start, nb_man.cell_complete

                def cell_start(cell: Any, cell_index: Any = None, **kw: Any) -> Any:
                    outcome = start(cell, cell_index, **kw)
                    progress.cell_start(cell, cell_index)
                    return outcome

                def cell_complete(cell: Any, cell_index: Any = None, **kw: Any) -> Any:
                    outcome = complete(cell, cell_index, **kw)
                    progress.cell_complete(cell, cell_index)
                    return outcome

                nb_man.cell_start, nb_man.cell_complete = cell_start, cell_complete
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)

    return _ProgressEngine


if __name__ == "__main__":
    sys.exit(main())
