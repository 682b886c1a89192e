"""Where runs execute: threads of the scheduler (local) or a Dask cluster.

Both run :func:`~agent_kernel.scheduler.execute.execute_run` on the same plain-data
spec and hand its :class:`~agent_kernel.scheduler.records.RunResult` to a callback; the
scheduler records it. Nothing an executor does touches the database.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from agent_kernel.extras import install_command
from agent_kernel.scheduler import ScheduleError
from agent_kernel.scheduler.execute import execute_run
from agent_kernel.scheduler.records import RunResult
from agent_kernel.scheduler.runs import FAILED, LOST
from agent_kernel.scheduler.spec import RunSpec

if TYPE_CHECKING:
    from distributed import Client, Future, LocalCluster

Done = Callable[[str, RunResult], None]


class Executor(Protocol):
    name: str

    def submit(self, spec: RunSpec, done: Done) -> None:
        """Start the run; call ``done(run_id, result)`` when it ends, from any thread."""

    def close(self) -> None: ...


class LocalExecutor:
    """Each run in a thread of this process, its notebook in a process of its own."""

    name = "local"

    def __init__(self) -> None:
        self._threads: set[threading.Thread] = set()

    def submit(self, spec: RunSpec, done: Done) -> None:
        def work() -> None:
            result: RunResult
            try:
                result = execute_run(spec.to_dict())
            except Exception as exc:  # noqa: BLE001 - the run failed to start at all
                result = {"status": FAILED, "error": f"Could not start the run: {type(exc).__name__}: {exc}"}
            finally:
                self._threads.discard(threading.current_thread())
            done(spec.run_id, result)

        thread = threading.Thread(target=work, name=f"agent-kernel-run-{spec.run_id}", daemon=True)
        self._threads.add(thread)
        thread.start()

    def close(self) -> None:
        for thread in list(self._threads):
            thread.join(timeout=1)


class DaskExecutor:
    """Runs on a Dask cluster: ``address`` of a running scheduler, or a LocalCluster.

    The run directory must be on a file system the workers share with this process
    (outputs, logs and the heartbeat live there), and the workers need agent-kernel
    installed and the environment the notebooks expect (``ANTHROPIC_API_KEY`` ...).
    """

    name = "dask"

    def __init__(self, address: str | None = None, *, n_workers: int = 2, client: Client | None = None) -> None:
        from distributed import Client  # noqa: PLC0415 - optional extra (agent-kernel[dask])

        self._cluster: LocalCluster | None = None
        self.client: Client
        if client is not None:
            self.client = client
        elif address:
            self.client = Client(address)
        else:
            from distributed import LocalCluster  # noqa: PLC0415 - optional extra (agent-kernel[dask])

            # The dashboard on a free port: None means distributed's default, 8787, which a
            # second cluster on the machine (another daemon, a parallel test) finds taken.
            self._cluster = LocalCluster(
                n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0"
            )
            self.client = Client(self._cluster)
        self._futures: dict[str, Future[RunResult]] = {}

    @property
    def address(self) -> str:
        scheduler = self.client.scheduler
        if scheduler is None:  # a client that has not connected (never so once constructed)
            raise RuntimeError("The Dask client is not connected to a scheduler.")
        return str(scheduler.address)

    def submit(self, spec: RunSpec, done: Done) -> None:
        future = self.client.submit(
            execute_run, spec.to_dict(), key=f"agent-kernel-run-{spec.run_id}", pure=False, retries=0
        )
        self._futures[spec.run_id] = future

        def finished(fut: Future[RunResult]) -> None:
            self._futures.pop(spec.run_id, None)
            done(spec.run_id, _dask_result(fut))

        future.add_done_callback(finished)

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


def _dask_result(future: Future[RunResult]) -> RunResult:
    if future.status == "finished":
        return future.result()
    if future.status == "cancelled":
        return {"status": LOST, "error": "The Dask future was cancelled (the cluster went away?)."}
    exc = future.exception()
    if type(exc).__name__ == "KilledWorker":
        return {"status": LOST, "error": f"The Dask worker running it died: {exc}"}
    return {"status": FAILED, "error": f"Dask could not run it: {type(exc).__name__}: {exc}"}


def make_executor(kind: str = "local", *, address: str | None = None, n_workers: int = 2) -> Executor:
    """The executor the CLI's ``--executor`` names."""
    if kind == "local":
        return LocalExecutor()
    if kind == "dask":
        try:
            return DaskExecutor(address, n_workers=n_workers)
        except ImportError:
            raise ScheduleError(
                f"The Dask executor needs distributed: {install_command('dask', ['distributed>=2024.1'])}."
            ) from None

    raise ScheduleError(f"Unknown executor {kind!r}: use local or dask.")
