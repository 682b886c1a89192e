"""The Jupyter Server extension: the REST API and, unless turned off, the scheduler.

Settings (``jupyter_server_config.py`` or the command line)::

    c.AgentKernelServer.scheduler = False        # do not run the scheduler in the server
    c.AgentKernelServer.max_concurrent_runs = 2  # runs at once when it does
    c.AgentKernelServer.db_path = "/path/agent.duckdb"  # default: AGENT_KERNEL_DB or the data dir
    c.AgentKernelServer.completion = False       # no inline completion in the editor
    c.AgentKernelServer.completion_model = "claude-haiku-4-5"  # default: AgentKernel.small_model

The scheduler is the same loop as ``agent-kernel scheduler``, in a thread of the server
process. Its leader lease keeps one scheduler firing per database: with a separate
``agent-kernel scheduler`` (or a second server) on the same file, one leads and the
others stand by. The server never holds the DuckDB file open between requests.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Float, Int, TraitError, Unicode, validate

from agent_kernel.server.completion import handlers as completion_handlers
from agent_kernel.server.handlers import handlers
from agent_kernel.server.provenance import handlers as provenance_handlers

if TYPE_CHECKING:
    from agent_kernel.scheduler.daemon import Scheduler
    from agent_kernel.scheduler.jobs import Job
    from agent_kernel.scheduler.runs import Run
    from agent_kernel.server.completion import Completion
    from agent_kernel.store import Store


class ServerState:
    """What the handlers share: the store, the server's root, the scheduler thread."""

    def __init__(
        self,
        store: Store,
        root_dir: str,
        log: logging.Logger | logging.LoggerAdapter[Any],
        completion: Completion | None = None,
    ) -> None:
        from agent_kernel.scheduler.clock import SystemClock
        from agent_kernel.scheduler.service import SchedulerService
        from agent_kernel.store.writer import WriteBehind

        self.store = store
        self.completion = completion  # inline completion's settings and model client
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
        from agent_kernel.config import AgentKernel

        return str(AgentKernel().small_model)

    @property
    def scheduler_in_server(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def now(self) -> datetime:
        return self.clock.now()

    def start_scheduler(self, *, max_concurrent: int, poll_s: float) -> None:
        from agent_kernel.scheduler.daemon import Scheduler, SchedulerSettings

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
        from agent_kernel.server.views import relative_path

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


class AgentKernelServer(ExtensionApp):
    """agent-kernel's Jupyter Server extension."""

    name = "agent_kernel"
    load_other_extensions = True

    scheduler = Bool(True, help="Run the scheduler in the server, so scheduled jobs fire while it runs.").tag(
        config=True
    )
    max_concurrent_runs = Int(2, help="Scheduled runs at once (the server's scheduler).").tag(config=True)
    scheduler_poll_s = Float(5.0, help="Longest pause between the scheduler's passes, in seconds.").tag(config=True)
    db_path = Unicode("", help="The agent's DuckDB file; default AGENT_KERNEL_DB or the user's data directory.").tag(
        config=True
    )

    completion = Bool(
        True,
        help="Inline completion in JupyterLab's editor (ghost text, Tab accepts), served by this "
        "server with completion_model; it is off anyway while the server's environment has no "
        "ANTHROPIC_API_KEY. Each person can also turn it off in JupyterLab's Settings, Inline "
        "Completer, agent-kernel provider. Its calls count in %agent_stats as source completion.",
    ).tag(config=True)
    completion_model = Unicode(
        "",
        help="Claude model for inline completion; empty: AgentKernel.small_model (as this server's "
        "config sets it, else its default).",
    ).tag(config=True)
    completion_max_tokens = Int(
        256, help="max_tokens of each inline completion: the longest suggestion, in tokens."
    ).tag(config=True)

    @validate("completion_max_tokens")
    def _valid_completion_max_tokens(self, proposal: dict[str, Any]) -> int:
        if not 1 <= proposal["value"] <= 4096:
            raise TraitError(f"completion_max_tokens is from 1 to 4,096 tokens, not {proposal['value']}.")
        return int(proposal["value"])

    def initialize_settings(self) -> None:
        from agent_kernel.config import AgentKernel
        from agent_kernel.paths import default_db_path
        from agent_kernel.server.completion import Completion
        from agent_kernel.store import Store

        store = Store(Path(self.db_path).expanduser() if self.db_path else default_db_path())
        root = self.serverapp.root_dir if self.serverapp is not None else "."
        model = self.completion_model or AgentKernel(config=self.config).small_model
        completion = Completion(enabled=self.completion, model=model, max_tokens=self.completion_max_tokens)
        self.state = ServerState(store, str(Path(root).expanduser().resolve()), self.log, completion)
        self.settings.update({"agent_kernel_state": self.state})

    def initialize_handlers(self) -> None:
        self.handlers.extend(handlers() + provenance_handlers() + completion_handlers())

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        if self.scheduler:
            self.state.start_scheduler(max_concurrent=self.max_concurrent_runs, poll_s=self.scheduler_poll_s)
        else:
            self.log.info("agent-kernel: the scheduler is off in this server (AgentKernelServer.scheduler)")

    async def stop_extension(self) -> None:
        state = getattr(self, "state", None)
        if state is not None:
            await _in_thread(state.stop_scheduler)
            await _in_thread(state.flush_usage)


async def _in_thread(work: Callable[[], None]) -> None:
    import asyncio

    await asyncio.get_running_loop().run_in_executor(None, work)
