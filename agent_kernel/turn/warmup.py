"""The first turn's preparation, done off the main thread while the user types.

``%load_ext`` imports nothing heavy. When the cell that loaded the extension has
finished, a daemon thread imports what a turn needs (``duckdb``, ``anthropic``, the
tools, the display), has the SDK parse a response once and opens the store once, so a
turn started a moment later finds all of it ready instead of paying ~1.5 s.

The thread is polite: it works in small steps (one package each), waits between them
while a cell runs (``pre_run_cell`` / ``post_run_cell``), and shortens the interpreter's
switch interval meanwhile, so the kernel's own threads get the interpreter lock back
quickly. Within a step it also waits before each module it imports while a cell runs
(at the interpreter's ``import`` audit event, raised before the import takes any lock
of its own): importing ``anthropic`` is one step of a second and more, hundreds of
modules, and a cell run meanwhile would otherwise share the interpreter lock with it,
half as fast. It waits in short slices, and not at all while the cell's thread is
itself importing: the cell may need a module this thread is in the middle of (this
thread holds the locks of the modules it is executing).

db_sql's share (:mod:`agent_kernel.sql.warmup`) is mostly DuckDB's own work, done without
the interpreter lock: it runs in a second thread beside the imports, once the modules it
uses are imported, so on a machine with a free core it costs the first turn no time.

Two threads importing modules of one package tree at once, each entering it elsewhere
(the turn imports ``agent_kernel.turn.loop``, which imports the store, while this thread
imports the store), can each hold a module the other needs; Python then hands one of
them a half-initialized module (an ImportError). So a turn that starts before the
warm-up is done waits for the step in progress, stops the warm-up, and does the rest on
its normal path, as without a warm-up. A failure here is dropped: the turn meets it
again on its normal path and reports it there.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from agent_kernel.sql.warmup import prepare_db_sql

if TYPE_CHECKING:
    import duckdb
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.config import AgentKernel

__all__ = ["WarmUp", "start_after_cell"]

# In dependency order, so each step is short; a cell waits for one step at most. What a
# turn shows first (its Stop button and status line) comes first.
_MODULES = (
    "ipywidgets",
    "anywidget",
    "agent_kernel.display.stop",
    "agent_kernel.display.transcript",
    "duckdb",
    "filelock",
    "pydantic",
    "anyio",
    "httpx2",
    "jiter",
    "anthropic",
    "anthropic.types",
    "anthropic.lib.streaming",
    "agent_kernel.store",
    "agent_kernel.store.sessions",
    "agent_kernel.store.writer",
    "agent_kernel.store.audit",
    "agent_kernel.store.catalog",
    "agent_kernel.store.memories",
    "agent_kernel.store.prompts",
    "agent_kernel.model.client",
    "agent_kernel.model.conversation",
    "agent_kernel.turn.prompt",
    "agent_kernel.kernel.namespace",
    "agent_kernel.kernel.interrupts",
    "agent_kernel.turn.approval",
    "agent_kernel.turn.outcome",
    "agent_kernel.turn.loop",
    "agent_kernel.store.compactions",
    "agent_kernel.turn.budget",
    "agent_kernel.turn.loaded",
    "agent_kernel.turn.summaries",
    "agent_kernel.turn.assemble",
    "agent_kernel.turn.subsessions",
    "anyio._backends._asyncio",  # the SDK's event loop backend, found on its first request
    "opentelemetry.propagate",  # the SDK's tracing reads it on its first request
    "agent_kernel.display.safe",
    "agent_kernel.display.limit",
    "agent_kernel.display.approval",
    "agent_kernel.tools",
    "agent_kernel.tools.context",
    "agent_kernel.tools.builtin",
    "agent_kernel.turn.start",
    "agent_kernel.turn.plan",
    "agent_kernel.turn.finish",
    "agent_kernel.turn.agent",
)

# What db_sql's share imports (see WarmUp._start_db_sql).
_SQL_MODULES = (
    "psutil",
    "agent_kernel.paths",
    "agent_kernel.store",
    "agent_kernel.sql.guard",
    "agent_kernel.sql.sandbox",
)

_SWITCH_INTERVAL = 0.0005  # seconds; see WarmUp._run
_PAUSE_SLICE = 0.05  # seconds between looks at a running cell, while paused before a module
# Seconds after a cell during which the warm-up still waits: cells run one after another
# (a notebook's Run All, a client's queue) come within it, and the kernel's handling of
# each (the request, the reply) is not slowed either.
_CELL_GRACE = 0.1

# A streamed reply as the SDK receives it: parsing one builds the SDK's validators.
_SAMPLE_EVENTS: tuple[dict[str, object], ...] = (
    {
        "type": "message_start",
        "message": {
            "id": "msg_warm_up",
            "type": "message",
            "role": "assistant",
            "model": "warm-up",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "toolu_warm_up", "name": "run_code", "input": {}},
    },
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
    {"type": "content_block_stop", "index": 1},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 2},
    },
    {"type": "message_stop"},
)


class WarmUp:
    """One warm-up thread for a shell: started once, paused while cells run."""

    def __init__(self, shell: InteractiveShell, settings: AgentKernel) -> None:
        self.shell = shell
        self.settings = settings
        self.done = threading.Event()  # set when the thread has finished (however it went)
        self.steps_done: list[str] = []  # what it did, in order (for tests and benchmarks)
        # Each step's wall-clock and CPU seconds (its thread's), for benchmarks.
        self.step_seconds: dict[str, float] = {}
        self.step_cpu_seconds: dict[str, float] = {}
        self._cells = threading.Condition()
        self._running_cells = 0  # nested: a turn's run_code runs cells inside the %agent cell
        self._stepping = False  # a step is in progress
        self._exiting = False  # the interpreter exits, or a turn started: no more steps
        self._thread: threading.Thread | None = None
        self._sql_thread: threading.Thread | None = None  # db_sql's share, beside the imports
        self._cell_thread: int | None = None  # the thread that runs the cells
        self._last_cell_end = 0.0  # time.monotonic() when the last cell finished
        self._interval = sys.getswitchinterval()  # the interpreter's own switch interval

    # -- events ----------------------------------------------------------------------------

    def start(self, *_: object) -> None:
        """Start the thread (a ``post_run_cell`` callback: after the loading cell)."""
        self.shell.events.unregister("post_run_cell", self.start)
        if self._thread is not None:
            return
        self.shell.events.register("pre_run_cell", self._cell_started)
        self.shell.events.register("post_run_cell", self._cell_finished)
        self._thread = threading.Thread(target=self._run, name="agent-kernel-warm-up", daemon=True)
        atexit.register(self._at_exit)
        self._thread.start()

    def _cell_started(self, *_: object) -> None:
        with self._cells:
            self._running_cells += 1
            self._cell_thread = threading.get_ident()

    def _cell_finished(self, *_: object) -> None:
        with self._cells:
            self._running_cells = max(self._running_cells - 1, 0)
            self._last_cell_end = time.monotonic()
            self._cells.notify_all()

    def _at_exit(self) -> None:
        """Let the step in progress finish: a daemon thread stopped inside DuckDB or an
        extension module's initialisation can abort the process at exit."""
        self.wait_for_step(timeout=10.0)

    def wait_for_step(self, timeout: float | None = 60.0) -> None:
        """Wait until the step in progress (if any) and db_sql's share have finished; no
        further step starts (a turn does the rest itself, on its normal path)."""
        with self._cells:
            self._exiting = True
            self._cells.notify_all()
            self._cells.wait_for(lambda: not self._stepping, timeout)
        if self._sql_thread is not None and self._sql_thread is not threading.current_thread():
            self._sql_thread.join(timeout)

    def stop_listening(self) -> None:
        """Stop following the shell's cells (the thread is done, or the extension unloaded)."""
        for event, callback in (
            ("post_run_cell", self.start),
            ("pre_run_cell", self._cell_started),
            ("post_run_cell", self._cell_finished),
        ):
            try:
                self.shell.events.unregister(event, callback)
            except ValueError:
                pass

    # -- the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        # While two threads want the interpreter lock, each holds it up to the switch
        # interval (5 ms by default) before the other gets it; a short one lets the
        # kernel's own threads (the cells, the messages) get it back quickly while a step
        # runs. Only then: the kernel's threads take turns with each other at it too, and
        # a cell run with a short one meanwhile is a fifth slower.
        self._interval = sys.getswitchinterval()
        _before_each_import(self)
        try:
            for name, step in self._steps():
                with self._cells:  # a running cell keeps the interpreter lock
                    self._wait_for_cells()
                    if self._exiting:
                        break
                    self._stepping = True
                started, cpu = time.perf_counter(), time.thread_time()
                sys.setswitchinterval(min(self._interval, _SWITCH_INTERVAL))
                try:
                    step()
                except Exception:  # noqa: BLE001 - the turn's own path meets it again
                    continue
                else:
                    self.steps_done.append(name)
                finally:
                    sys.setswitchinterval(self._interval)
                    self.step_seconds[name] = time.perf_counter() - started
                    self.step_cpu_seconds[name] = time.thread_time() - cpu
                    with self._cells:
                        self._stepping = False
                        self._cells.notify_all()
        finally:
            _before_each_import(None)
            self.done.set()
            self.stop_listening()

    def yield_to_cells(self) -> None:
        """Wait while a cell runs, or ran a moment ago (this thread, before a module of its
        step), unless the turn wants the step done or the cell's thread is importing."""
        with self._cells:
            if self._exiting or not (self._running_cells or time.monotonic() < self._last_cell_end + _CELL_GRACE):
                return
            sys.setswitchinterval(self._interval)  # the kernel's own while this thread waits
            try:
                self._wait_for_cells(in_step=True)
            finally:
                sys.setswitchinterval(min(self._interval, _SWITCH_INTERVAL))

    def _wait_for_cells(self, *, in_step: bool = False) -> None:
        """Wait (holding ``_cells``) until no cell runs or ran within the grace time, or
        the warm-up is told to finish. In a step, wait in slices and not while the cell's
        thread imports."""
        while not self._exiting:
            if in_step and self._cell_importing():
                return
            if self._running_cells:
                self._cells.wait(_PAUSE_SLICE if in_step else None)
                continue
            left = self._last_cell_end + _CELL_GRACE - time.monotonic()
            if left <= 0:
                return
            self._cells.wait(min(left, _PAUSE_SLICE) if in_step else left)

    def _cell_importing(self) -> bool:
        """Whether the cell's thread is inside the import machinery (perhaps waiting for a
        module this thread holds)."""
        frame = sys._current_frames().get(self._cell_thread) if self._cell_thread is not None else None
        while frame is not None:
            if frame.f_code.co_filename.startswith("<frozen importlib"):
                return True
            frame = frame.f_back
        return False

    def _steps(self) -> list[tuple[str, Callable[[], None]]]:
        steps: list[tuple[str, Callable[[], None]]] = [(name, functools.partial(_import, name)) for name in _MODULES]
        names = [name for name, _ in steps]
        steps.insert(names.index("duckdb") + 1, ("start preparing db_sql", self._start_db_sql))  # beside the imports
        steps.insert(names.index("agent_kernel.display.stop") + 1, ("prepare the Stop button", _prepare_stop))
        steps.append(("render a paragraph", _render_sample_text))
        steps.append(("compile the untrusted-content patterns", _compile_untrusted_patterns))
        steps.append(("describe the tools", lambda: _describe_tools(self.settings)))
        steps.append(("make a model client", _make_sample_client))
        steps.append(("parse a streamed reply", _parse_sample_reply))
        steps.append(("read the credential formats", _read_credential_formats))
        steps.append(("read as a turn starts", self._read_store))
        steps.append(("wait for db_sql", self._wait_for_db_sql))
        return steps

    def _start_db_sql(self) -> None:
        """Import what db_sql's share uses, then run it in a thread of its own (its imports
        here, so the two threads never import the same modules at once)."""
        for name in _SQL_MODULES:
            _import(name)
        self._sql_thread = threading.Thread(target=self._prepare_db_sql, name="agent-kernel-warm-up-sql", daemon=True)
        self._sql_thread.start()

    def _prepare_db_sql(self) -> None:
        with self._cells:  # it is one step: it starts when no cell runs, as the others do
            self._wait_for_cells()
            if self._exiting:
                return
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            prepare_db_sql(self.settings)
        except Exception:  # noqa: BLE001 - the first db_sql call meets it again
            return
        finally:
            self.step_seconds["prepare db_sql"] = time.perf_counter() - started
            self.step_cpu_seconds["prepare db_sql"] = time.thread_time() - cpu
        self.steps_done.append("prepare db_sql")

    def _wait_for_db_sql(self) -> None:
        if self._sql_thread is not None:
            self._sql_thread.join()

    def _read_store(self) -> None:
        """Read an existing store as the first turn will (DuckDB's first open in a process
        costs most, then its first use of JSON and time zones, then each first query); a
        missing store is left for the first turn to create."""
        from agent_kernel.paths import default_db_path
        from agent_kernel.store import Store

        path = Path(self.settings.db_path).expanduser() if self.settings.db_path else default_db_path()
        if not path.exists():
            return
        with Store(path).connect(read_only=True) as con:
            _read_turn_start(con, self.settings)


def _read_turn_start(con: duckdb.DuckDBPyConnection, settings: AgentKernel) -> None:
    """The reads a turn starts with (turn/start.py ``Starts.read``), on a read-only
    connection, for a session that does not exist (the queries, not the rows, cost)."""
    from agent_kernel.store import compactions
    from agent_kernel.store.schema import UTC_NOW
    from agent_kernel.store.sessions import Sessions
    from agent_kernel.store.usage import session_usage
    from agent_kernel.tools.builtin import builtin_registry
    from agent_kernel.turn.prompt import stored_sections

    groups = settings.tool_groups if settings.tools_enabled else []
    offered = {item.group for item in builtin_registry().offered(groups)}
    sessions = Sessions(con)
    session_id = "warm-up"
    sessions.get(session_id)
    sessions.messages(session_id)
    sessions.last_turn(session_id)
    con.execute(f"SELECT {UTC_NOW}, CAST('{{}}' AS JSON)").fetchall()  # DuckDB's time zones and JSON
    stored_sections(con, settings.instruction, offered, settings.skills_dir)
    compactions.load(con, session_id)
    session_usage(con, session_id)


# The warm-up whose thread waits before each module it imports (see _on_audit), and that
# thread; None when no warm-up runs.
_YIELDING: tuple[WarmUp, int] | None = None
_HOOKED = False  # an audit hook cannot be removed: it is added once, and idle after


def _before_each_import(warm_up: WarmUp | None) -> None:
    """Have the calling thread (``warm_up``'s) yield to cells before each module it
    imports from now on (``None``: no longer)."""
    global _YIELDING, _HOOKED
    _YIELDING = (warm_up, threading.get_ident()) if warm_up is not None else None
    if warm_up is not None and not _HOOKED:
        _HOOKED = True
        sys.addaudithook(_on_audit)


def _on_audit(event: str, _args: tuple[object, ...]) -> None:
    yielding = _YIELDING
    if yielding is not None and event == "import" and threading.get_ident() == yielding[1]:
        yielding[0].yield_to_cells()


def _import(name: str) -> None:
    try:
        importlib.import_module(name)
    except ImportError:
        pass  # the turn reports a missing dependency


def _prepare_stop() -> None:
    from agent_kernel.display.stop import prepare

    prepare()


def _render_sample_text() -> None:
    from agent_kernel.display.safe import markdown_bundle

    markdown_bundle("Warm-up: **bold**, `code`, a [link](https://example.com).\n\n- a list")


def _describe_tools(settings: AgentKernel) -> None:
    """Build the definitions (and validators) of the tools a turn offers with these settings.

    They come from the functions' signatures through the SDK and pydantic, and the built-in
    tools are shared by every registry, so the first turn finds its own ready. Tools of
    groups it does not offer are left for the turn that does (about half of them)."""
    from agent_kernel.tools.builtin import builtin_registry

    groups = settings.tool_groups if settings.tools_enabled else []
    for item in builtin_registry().offered(groups):
        item.definition(settings)


def _make_sample_client() -> None:
    """Make a client as a turn does; the SSL context it loads is the one the turn's uses."""
    import anthropic

    from agent_kernel.model.client import ssl_context

    http_client = anthropic.DefaultAsyncHttpxClient(verify=ssl_context())
    anthropic.AsyncAnthropic(api_key="warm-up", base_url="http://127.0.0.1:9", max_retries=0, http_client=http_client)


def _read_credential_formats() -> None:
    from agent_kernel.credentials import credential_formats

    credential_formats()  # detect-secrets' patterns, which every redaction uses


def _compile_untrusted_patterns() -> None:
    from agent_kernel.untrusted import neutralise

    neutralise("<b>a sample</b>")  # compiles the look-alike patterns (tens of ms) once


def _parse_sample_reply() -> None:
    from anthropic._models import construct_type
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import RawMessageStreamEvent

    snapshot = None
    buffers: dict[int, bytes] = {}
    for raw in _SAMPLE_EVENTS:
        event = cast(RawMessageStreamEvent, construct_type(type_=RawMessageStreamEvent, value=raw))
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=buffers)
    if snapshot is not None:
        [b.model_dump(mode="json", exclude_none=True) for b in snapshot.content]


_CURRENT: WarmUp | None = None  # the loaded extension's warm-up


def start_after_cell(shell: InteractiveShell, settings: AgentKernel) -> WarmUp | None:
    """Warm up once the running cell has finished (no thread starts during ``%load_ext``).

    ``AGENT_KERNEL_WARM_UP=0`` in the environment switches it off.
    """
    global _CURRENT
    stop()
    events = getattr(shell, "events", None)
    if events is None or os.environ.get("AGENT_KERNEL_WARM_UP", "1").strip() in {"0", "false", "no"}:
        return None
    _CURRENT = WarmUp(shell, settings)
    events.register("post_run_cell", _CURRENT.start)
    return _CURRENT


async def wait_for_step() -> None:
    """What a turn awaits before its imports: the warm-up step in progress, if any."""
    warm_up = _CURRENT
    if warm_up is not None and not warm_up.done.is_set():
        import asyncio

        await asyncio.to_thread(warm_up.wait_for_step)


def stop() -> None:
    """Stop listening to cells (``%unload_ext``); a running step finishes on its own."""
    global _CURRENT
    if _CURRENT is not None:
        _CURRENT.stop_listening()
        _CURRENT = None
