"""What the extension's handlers share: the store, the server's root, the scheduler thread.

Its own module, below the handlers: they read it (``_Handler.agent``) and the app makes it.
"""

from __future__ import annotations

import logging
import shutil
import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kernel.config import AgentKernel
from agent_kernel.scheduler.clock import SystemClock
from agent_kernel.scheduler.daemon import Scheduler, SchedulerSettings
from agent_kernel.scheduler.service import SchedulerService
from agent_kernel.server.views import relative_path
from agent_kernel.store.writer import WriteBehind

if TYPE_CHECKING:
    from agent_kernel.scheduler.jobs import Job
    from agent_kernel.scheduler.runs import Run
    from agent_kernel.store import Store

__all__ = ["ServerState"]


class ServerState:
    """What the handlers share: the store, the server's root, the scheduler thread."""

    def __init__(
        self,
        store: Store,
        root_dir: str,
        log: logging.Logger | logging.LoggerAdapter[Any],
        completion: Any = None,
    ) -> None:
        self.store = store
        # Inline completion's settings and model client (a completion.Completion): the
        # completion module builds on the handlers, which read this state.
        self.completion = completion
        self.usage_writes = WriteBehind(store)  # inline completions' usage rows, written in batches
        self.root_dir = root_dir
        self.log = log
        self.clock = SystemClock()
        self.jobs = SchedulerService(store, clock=self.clock, on_change=self.wake_scheduler)
        self.scheduler: Scheduler | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._drain = threading.Event()

    @property
    def small_model(self) -> str:
        """The model that explains failed runs (``AgentKernel.small_model``'s default)."""
        return str(AgentKernel().small_model)

    @property
    def scheduler_in_server(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def now(self) -> datetime:
        return self.clock.now()

    def start_scheduler(self, *, max_concurrent: int, poll_s: float) -> None:
        settings = SchedulerSettings(max_concurrent=max_concurrent, poll_s=poll_s)
        scheduler = self.scheduler = Scheduler(self.store, settings=settings)
        self._thread = threading.Thread(
            target=self._serve, args=(scheduler,), name="agent-kernel-scheduler", daemon=True
        )
        self._thread.start()
        self.log.info("agent-kernel: scheduler %s running in the server on %s", scheduler.worker, self.store.path)

    def _serve(self, scheduler: Scheduler) -> None:
        try:
            scheduler.serve(self._stop, drain=self._drain)
        except Exception:
            self.log.exception("agent-kernel: the scheduler stopped")
        finally:
            scheduler.close()

    def wake_scheduler(self) -> None:
        if self.scheduler is not None:
            self.scheduler.wake()

    def stop_scheduler(self, timeout: float = 10.0) -> None:
        """Stop firing; cancel runs still going (their records say so) and give up the lease."""
        if self._thread is None or self.scheduler is None:
            return
        self._stop.set()
        self._drain.set()
        self.scheduler.wake()
        self._thread.join(timeout)
        self._thread = None

    def flush_usage(self) -> None:
        """Write the usage rows still queued (when the server stops)."""
        try:
            self.usage_writes.flush(timeout=10.0)
        except Exception:
            self.log.warning("agent-kernel: inline completions' usage was not all saved", exc_info=True)

    def output_in_root(self, run: Run, job: Job | None) -> str | None:
        """The run's output notebook as a path JupyterLab can open (relative to the root)."""
        if not run.output_path or not Path(run.output_path).is_file():
            return None
        inside = relative_path(run.output_path, Path(self.root_dir))
        if inside is not None:
            return inside
        name = "".join(c if c.isalnum() or c in "-_" else "-" for c in (job.name if job else run.job_id))
        target = Path(self.root_dir) / "agent-kernel-runs" / f"{name}-{run.id}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            shutil.copyfile(run.output_path, target)
        return target.relative_to(self.root_dir).as_posix()
