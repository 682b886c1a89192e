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

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Float, Instance, Int, TraitError, Unicode, validate

from agent_kernel.config import AgentKernel
from agent_kernel.paths import default_db_path
from agent_kernel.server.completion import Completion
from agent_kernel.server.completion import handlers as completion_handlers
from agent_kernel.server.handlers import handlers
from agent_kernel.server.moves import listen
from agent_kernel.server.offline import handlers as offline_handlers
from agent_kernel.server.provenance import handlers as provenance_handlers
from agent_kernel.server.state import ServerState
from agent_kernel.store import Store
from agent_kernel.store.retention import tidy_daily

__all__ = ["AgentKernelServer", "ServerState"]


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

    _tidy_stop = Instance(threading.Event, args=())  # ends the daily prune's thread

    def initialize_settings(self) -> None:
        store = Store(Path(self.db_path).expanduser() if self.db_path else default_db_path())
        root = self.serverapp.root_dir if self.serverapp is not None else "."
        model = self.completion_model or AgentKernel(config=self.config).small_model
        completion = Completion(enabled=self.completion, model=model, max_tokens=self.completion_max_tokens)
        self.state = ServerState(store, str(Path(root).expanduser().resolve()), self.log, completion)
        self.settings.update({"agent_kernel_state": self.state})

    def initialize_handlers(self) -> None:
        self.handlers.extend(handlers() + provenance_handlers() + completion_handlers() + offline_handlers())

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        listen(serverapp.event_logger, self.state, serverapp.root_dir)  # sessions follow renames
        if self.scheduler:
            self.state.start_scheduler(max_concurrent=self.max_concurrent_runs, poll_s=self.scheduler_poll_s)
        else:
            self.log.info("agent-kernel: the scheduler is off in this server (AgentKernelServer.scheduler)")
        # The store is pruned once a day while the server runs (AgentKernel.retention_full_days).
        days = AgentKernel(config=self.config).retention_full_days
        tidy = threading.Thread(
            target=tidy_daily, args=(self.state.store, days, self._tidy_stop), kwargs={"log": self.log}, daemon=True
        )
        tidy.start()

    async def stop_extension(self) -> None:
        self._tidy_stop.set()
        state = getattr(self, "state", None)
        if state is not None:
            await _in_thread(state.stop_scheduler)
            await _in_thread(state.flush_usage)


async def _in_thread(work: Callable[[], None]) -> None:
    await asyncio.get_running_loop().run_in_executor(None, work)
