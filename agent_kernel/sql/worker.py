"""Where the model's SQL runs: a process the kernel can stop, never the kernel itself.

DuckDB looks for an interrupt, and at its own ``max_execution_time``, only between chunks
of work: one expensive scalar call (``damerau_levenshtein`` of two long strings) or one
vector of huge values (``repeat('x', 10000000) FROM range(1000)``) runs to its end, can
allocate far past ``memory_limit``, and meanwhile holds the database file. A busy DuckDB
connection cannot be closed and a thread cannot be stopped; a process can. So each call
runs in another process: the kernel watches the clock and that process's memory,
interrupts it at the limit or on Stop, and kills it if it has not answered soon after.
The OS then releases the store's lock and DuckDB's own file lock; the open transaction is
lost (it never committed), the file stays as it was.

Two kinds of process, by what the call reads:

- A read of kernel frames alone (:func:`~agent_kernel.sql.guard.reads_only_frames`,
  frames of pandas, pyarrow or polars.DataFrame) runs in a **fork of the kernel**
  (:func:`run_forked`). The child shares the kernel's pages copy-on-write, so it scans
  the frames in place, with no copy. It runs on an in-memory database the kernel
  prepared (see :func:`~agent_kernel.sql.sandbox.ready_to_fork`), takes calls and sends
  answers over pipes, and leaves with ``os._exit``: no kernel handler, atexit hook, ZMQ
  socket or output stream of the kernel is used there (signals reset, its own process
  group, fds 0-2 on /dev/null, every other inherited fd closed, no GC). Its memory cap
  bounds its growth over its size at the fork (the RSS of a fork includes the kernel's
  shared pages; USS would be exact but costs ~5 ms a reading, RSS 0.1 ms). A fork costs
  20-100 ms before its query starts (the fork, registering the frames, the child's
  first writes copying pages, each hand-off waiting for a core), so it is kept for the
  next calls while the frames they name are exactly what it sees
  (:mod:`agent_kernel.sql.pages`), and let go at the next cell.
- Anything else, a call that reads or writes the file, runs in a **worker process**
  (:func:`run`), started with ``python -m`` and kept for the next call (only the first
  pays for starting one). The frames such a call names are sent to it pickled; a frame
  that cannot be pickled is refused there.

Both answer with the same length-prefixed pickles, and the kernel watches both the same
way (:class:`_Watched`). An ``into=`` result comes back as Arrow record batches, streamed
as they are read.
"""

from __future__ import annotations

import _thread
import atexit
import gc
import os
import pickle
import queue
import resource  # here, not in a fork: an import there would touch (copy) many of the kernel's pages
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, NoReturn

import psutil

from agent_kernel.errors import ToolInputError
from agent_kernel.secrets import redact_frame
from agent_kernel.sql import pages
from agent_kernel.sql.sandbox import SqlRun, _config_key, ready_to_fork, timeout_message
from agent_kernel.store import Store

if TYPE_CHECKING:
    from agent_kernel.sql.guard import Statement
    from agent_kernel.sql.pages import Layout
    from agent_kernel.sql.sandbox import ForkReady, Limits, SqlResult

__all__ = ["retire_kept", "run", "run_forked", "run_sql"]

KEEP_S = 30.0  # how long a kept fork waits for its next call before it leaves
GRACE_S = 0.5  # after an interrupt, how long the worker may take to answer before it is killed
_POLL_S = 0.02  # how often the clock and the worker's memory are checked
_IDLE_WORKERS = 2
_HEADER = struct.Struct("<Q")
_STOP_SIGNAL = signal.SIGUSR1
_PIPE_BYTES = 65536  # what an empty pipe holds (Linux's default)
_KEPT_GROWTH = 256 * 1024 * 1024  # a fork grown by more than this since it was made takes no further call


def run_sql(
    sql_run: SqlRun,
    statements: Sequence[Statement],
    *,
    params: Sequence[Any] | None = None,
    frames: Mapping[str, Any] | None = None,
    into: bool = False,
) -> SqlResult:
    """Run ``statements`` in one transaction, in a fork or a worker; every refusal is a :class:`ToolInputError`."""
    if sql_run.interrupted:  # stopped before it started: no process is taken for it
        raise ToolInputError("The query was stopped.")
    named, forked = sql_run.placement(statements, dict(frames or {}))
    if forked:
        return run_forked(sql_run, statements, params=params, frames=named, into=into, kernel_frames=frames)
    result = run(sql_run, statements, params=params, frames=named, into=into)
    sql_run.remember(result)
    return result


def run(
    sql_run: SqlRun,
    statements: Sequence[Statement],
    *,
    params: Sequence[Any] | None,
    frames: Mapping[str, Any],
    into: bool,
) -> SqlResult:
    """Run the call in a worker process, within ``sql_run.limits``; refusals raise.

    A call that may write gets the frames it names redacted (their text and column names
    lose every known secret), since what DuckDB reads from a frame never passes through a
    statement's parameters on its way into the file.
    """
    if not sql_run.read_only and frames:
        frames = _redacted_frames(frames)
    request = (str(sql_run.store.path), sql_run.limits, sql_run.read_only, list(statements), params, dict(frames), into)
    try:
        payload = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - a frame type that cannot leave the process
        raise ToolInputError(
            f"A DataFrame this query names cannot be read by db_sql ({type(exc).__name__}: {exc}). "
            "Turn it into a pandas DataFrame first (run_code)."
        ) from None
    worker = _take()
    try:
        return worker.call(sql_run, payload)
    finally:
        _give_back(worker)


def _redacted_frames(frames: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return {name: redact_frame(frame) for name, frame in frames.items()}
    except Exception as exc:  # noqa: BLE001 - a frame that cannot be read as pandas
        raise ToolInputError(
            f"A DataFrame this write reads could not be checked for secrets ({type(exc).__name__}: "
            f"{exc}). Turn it into a pandas DataFrame first (run_code)."
        ) from None


# -- the kernel's side --------------------------------------------------------------------


class _Watched:
    """A process running one call, watched from the kernel: clock, Stop, memory, kill.

    Messages come back as length-prefixed pickles: ``("started", None)``, ``("batch",
    record_batch)`` for ``into=`` rows, then ``("result", SqlResult)`` or ``("error", exc)``.
    """

    pid: int
    answers: IO[bytes]  # the pipe the answers come on

    def alive(self) -> bool:
        raise NotImplementedError

    def kill(self) -> None:
        raise NotImplementedError

    def memory_cap(self, limits: Limits) -> int:
        """The resident size over which the process is killed."""
        return limits.worker_memory_bytes()

    def watched_process(self) -> psutil.Process | None:
        """The process as ``psutil`` sees it (to read its memory), or None when it is gone."""
        try:
            return psutil.Process(self.pid)
        except psutil.Error:
            return None

    def watch(self, sql_run: SqlRun, started: float | None = None) -> SqlResult:
        """Wait for the answer; interrupt, then kill, at the time limit, on Stop, over the memory cap.

        ``started``: when the clock started (by default, once the process says the
        database is open: waiting for the file's lock is not the query's time).
        """
        limits = sql_run.limits
        watched = self.watched_process()
        memory_cap = self.memory_cap(limits)
        batches: list[Any] = []
        while True:
            if sql_run.interrupted:
                return self._stop(batches, "The query was stopped.", limits.max_rows)
            if started is not None and time.monotonic() - started > limits.timeout_s:
                return self._stop(batches, timeout_message(limits.timeout_s), limits.max_rows)
            try:
                rss = watched.memory_info().rss if watched is not None else 0
            except psutil.Error:
                rss = 0
            if rss > memory_cap:
                self.kill()
                raise ToolInputError(
                    f"The statement needed more than {limits.worker_memory_bytes() / 2**20:,.0f} MB of memory "
                    "and was stopped (nothing was changed): a result with huge values (long strings, big "
                    "lists) or too many rows. Select shorter values (left(text, 200)), fewer rows "
                    "(LIMIT), or aggregate in SQL."
                )
            if not self._readable(_POLL_S):
                continue
            kind, body = self._receive()
            if kind == "started":
                self.on_started()
                if started is None:
                    started = time.monotonic()
            elif kind == "batch":
                batches.append(body)
            else:
                return _finish(kind, body, batches, limits.max_rows)

    def on_started(self) -> None:
        pass

    def _stop(self, batches: list[Any], message: str, max_rows: int) -> SqlResult:
        """Interrupt the process; kill it when it does not answer within :data:`GRACE_S`.

        A call that finished meanwhile returns its result (a write may have committed).
        """
        try:
            os.kill(self.pid, _STOP_SIGNAL)
        except OSError:
            pass
        deadline = time.monotonic() + GRACE_S
        try:
            while time.monotonic() < deadline:
                if not self._readable(_POLL_S):
                    continue
                kind, body = self._receive()
                if kind == "batch":
                    batches.append(body)
                elif kind == "result":
                    return _finish(kind, body, batches, max_rows)
                elif kind != "started":  # it stopped in time and can take the next call
                    raise ToolInputError(message)
        except ToolInputError as exc:
            if str(exc) == message:
                raise
        self.kill()  # busy in one call DuckDB cannot interrupt, or gone
        raise ToolInputError(message)

    def _readable(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.answers], [], [], timeout)
        return bool(ready)

    def _receive(self) -> tuple[str, Any]:
        message = _read(self.answers)
        if message is None:
            self.kill()
            raise ToolInputError("The SQL worker stopped unexpectedly; the query did not finish. Try again.")
        answer: tuple[str, Any] = pickle.loads(message)
        return answer


class _Worker(_Watched):
    """A worker process that takes calls one after another, until the kernel closes its pipe."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
        )
        assert self.process.stdin is not None and self.process.stdout is not None  # both piped
        self.pid = self.process.pid
        self.requests: IO[bytes] = self.process.stdin
        self.answers = self.process.stdout
        self._sending: threading.Thread | None = None

    def alive(self) -> bool:
        return self.process.poll() is None

    def call(self, sql_run: SqlRun, payload: bytes) -> SqlResult:
        """Send the request and watch the call.

        The request goes on a thread of its own: one bigger than the pipe holds (the frames
        a call names) fills it until the worker reads, which a worker still starting does
        only once its imports are done, seconds later on a busy machine. Meanwhile the call
        is watched like any other, so a stop or the time limit never waits for that read.
        """
        self._sending = threading.Thread(
            target=self._send, args=(payload,), name="agent-kernel-sql-request", daemon=True
        )
        self._sending.start()
        return self.watch(sql_run)

    def _send(self, payload: bytes) -> None:
        try:
            _write(self.requests, payload)
        except (OSError, ValueError):  # it left (killed at a stop): the watch reports that
            pass

    def _readable(self, timeout: float) -> bool:
        if not self.alive():
            raise ToolInputError("The SQL worker stopped unexpectedly; the query did not finish. Try again.")
        return super()._readable(timeout)

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
        self.close()

    def close(self) -> None:
        """Close its pipe (it leaves when the pipe closes) and reap it; kill it if it lingers.

        One still reading a request is killed first: it would run a call nobody waits for.
        """
        if self._sending is not None and self._sending.is_alive():
            self.process.kill()
            self._sending.join()  # the write fails at once: the pipe has no reader any more
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


class _Forked(_Watched):
    """A fork of the kernel answering reads of kernel frames, which it sees in place.

    After the fork the two processes share every page until one writes it, so the
    frames are not copied. The child's resident size starts at the kernel's (its pages
    are mapped, shared): the memory cap bounds what it adds to that.

    A fork made with a ``snapshot`` (the kernel's frames it may read, by weak reference)
    is kept after its call: once it has answered, it sends the layouts of those frames as
    it sees them (:mod:`agent_kernel.sql.pages`), and takes the next calls for as long as
    :meth:`unusable` finds nothing against it. One made without answers one call. The
    child leaves on its own after :data:`KEEP_S` without a call.
    """

    def __init__(
        self,
        sql_run: SqlRun,
        frames: Mapping[str, Any],
        snapshot: Mapping[str, weakref.ref[Any]] | None,
    ) -> None:
        self.started = False
        self.stopped = False  # stopped, killed or gone: it takes no further call
        self.busy = False  # taken by a call (its checks included)
        self.retired = False  # let go while busy: it leaves once its call ends
        self._status: int | None = None
        self._released = False
        self.snapshot = snapshot
        self.layouts: dict[str, Layout | None] | None = None  # as the child sees the snapshot's frames
        self.config = _config_key(sql_run.limits)
        answers_read, answers_write = os.pipe()
        requests_read, requests_write = os.pipe()
        readable = {**{name: ref() for name, ref in (snapshot or {}).items()}, **frames}
        with ready_to_fork(sql_run.limits, frames) as ready, warnings.catch_warnings():
            # Python 3.12+ warns that a fork of a multi-threaded process may deadlock in the
            # child on a lock another thread held. The child takes no lock the kernel's
            # threads use: new SqlRuns, a database only this block touches, no logging, no
            # ZMQ; and it is killed like any call (at the limit, on Stop) should one of the
            # runtimes' own locks stall it.
            warnings.simplefilter("ignore", DeprecationWarning)
            forks = _forks
            try:
                pid = _fork_with_signals_blocked()
            except OSError:
                for fd in (answers_read, answers_write, requests_read, requests_write):
                    os.close(fd)
                raise
            if pid == 0:  # the child, with the first call's frames registered: never returns
                os.close(answers_read)
                os.close(requests_write)
                laid_out = list(snapshot) if snapshot is not None else None
                _serve_in_child(sql_run, ready, readable, set(frames), laid_out, requests_read, answers_write)
        self.forks_at = _forks
        if self.forks_at != forks + 1:  # another thread forked meanwhile: it shares these pages too
            self.snapshot = None
        self._ready = ready
        os.close(answers_write)
        os.close(requests_read)
        self.pid = pid
        self.answers = os.fdopen(answers_read, "rb", buffering=0)
        self.requests = os.fdopen(requests_write, "wb", buffering=0)
        self.last_used = time.monotonic()
        try:
            self._process: psutil.Process | None = psutil.Process(pid)
            self._start_rss = self._process.memory_info().rss
        except psutil.Error:  # gone already (its answer is in the pipe): about the kernel's size
            self._process = None
            self._start_rss = psutil.Process().memory_info().rss

    def call(
        self, sql_run: SqlRun, statements: Sequence[Statement], params: Any, into: bool, names: Sequence[str]
    ) -> SqlResult:
        """Send one call, which reads the frames ``names``, and watch it; the clock starts
        now (nothing is waited for)."""
        self.started = False
        request = pickle.dumps(
            (sql_run.limits, list(statements), params, into, names), protocol=pickle.HIGHEST_PROTOCOL
        )
        started = time.monotonic()
        if len(request) + _HEADER.size <= _PIPE_BYTES:  # an empty pipe takes it whole, at once
            _write(self.requests, request)
        else:  # the child reads it when it is ready; meanwhile the call is watched
            threading.Thread(target=self._send, args=(request,), name="agent-kernel-sql-request", daemon=True).start()
        try:
            return self.watch(sql_run, started=started)
        finally:
            self.last_used = time.monotonic()

    def _send(self, request: bytes) -> None:
        try:
            _write(self.requests, request)
        except (OSError, ValueError):  # it left (killed at a stop): the watch reports that
            pass

    def unusable(self, limits: Limits, frames: Mapping[str, Any]) -> str:
        """Why this kept fork cannot take a call that reads ``frames`` ("" when it can)."""
        if self.snapshot is None or self.stopped:
            return "it takes no further call"
        if time.monotonic() - self.last_used > KEEP_S - 1:
            return "it is about to leave"
        if _forks != self.forks_at:
            return "the kernel forked since"
        if _config_key(limits) != self.config:
            return "the settings changed"
        if not self.alive():
            return "it left"
        if self.layouts is None:
            self.layouts = self._receive_layouts()
        for name, frame in frames.items():
            kept = self.snapshot.get(name)
            if kept is None or kept() is not frame:
                return f"{name} is another frame"
            seen = self.layouts.get(name)
            if seen is None:
                return f"{name} has no known layout"
            if not pages.unchanged(frame, seen):
                return f"{name} changed"
        return ""

    def _receive_layouts(self) -> dict[str, Layout | None]:
        """The layouts the child sent after its first answer (a few ms after it, at most)."""
        try:
            if self._readable(1.0):
                kind, body = self._receive()
                if kind == "layouts":
                    return dict(body)
        except ToolInputError:
            pass
        return {}

    def grown(self) -> bool:
        """Whether it holds much more memory than at the fork (DuckDB keeps some between calls)."""
        try:
            return self._process is None or self._process.memory_info().rss - self._start_rss > _KEPT_GROWTH
        except psutil.Error:
            return True

    def watched_process(self) -> psutil.Process | None:
        return self._process

    def memory_cap(self, limits: Limits) -> int:
        return self._start_rss + limits.worker_memory_bytes()

    def on_started(self) -> None:
        self.started = True

    def alive(self) -> bool:
        return self._reap(os.WNOHANG) is None

    def _stop(self, batches: list[Any], message: str, max_rows: int) -> SqlResult:
        self.stopped = True
        return super()._stop(batches, message, max_rows)

    def kill(self) -> None:
        """SIGKILL it; :meth:`done` reaps it (a process the kernel's size takes a while to
        leave, longer on a busy machine: the stop does not wait for that)."""
        self.stopped = True
        if self._status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
        self.answers.close()

    def done(self) -> None:
        """Let it go: close its pipes (it leaves); once it has left, reap it and let go of
        its frames (on the reaper thread when it is still exiting: a big process takes a while)."""
        self.stopped = True
        self.requests.close()
        self.answers.close()
        if self._reap(os.WNOHANG) is None:
            _reap_later(self)
        else:
            self.release()

    def let_go(self) -> None:
        """End it now (it is idle, or its call is over) and reap it in the background."""
        self.kill()
        self.done()

    def release(self) -> None:
        """Let go of the fork's connection and frames, once (the child has left)."""
        if not self._released:
            self._released = True
            self._ready.release()

    def _reap(self, options: int) -> int | None:
        if self._status is None:
            try:
                pid, status = os.waitpid(self.pid, options)
            except ChildProcessError:  # reaped by someone else
                pid, status = self.pid, 0
            if pid:
                self._status = status
        return self._status


def run_forked(
    sql_run: SqlRun,
    statements: Sequence[Statement],
    *,
    params: Sequence[Any] | None,
    frames: Mapping[str, Any],
    into: bool,
    kernel_frames: Mapping[str, Any] | None = None,
) -> SqlResult:
    """Run a read of kernel frames alone in a fork of the kernel, within ``sql_run.limits``.

    The fork kept from an earlier call takes it when the frames it names are as that fork
    sees them; otherwise a new fork does, kept in turn when every frame it names has a
    known layout (it may then read any of ``kernel_frames`` that has one too). The clock
    starts when the call is sent: nothing is waited for. A child that never got as far as
    starting the query (stalled on a lock held at the fork) is killed at the limit, and
    the call runs in a worker process instead.
    """
    if sql_run.interrupted:  # stopped while the call was placed: no fork for it
        raise ToolInputError("The query was stopped.")
    child = _take_kept(sql_run.limits, frames)
    if child is None:
        try:
            child = _Forked(sql_run, frames, _snapshot(frames, kernel_frames or frames))
        except (OSError, AttributeError):  # no fork here (no os.fork, or out of processes or memory)
            return run(sql_run, statements, params=params, frames=frames, into=into)
        child.busy = True
    try:
        return child.call(sql_run, statements, params, into, list(frames))
    except ToolInputError:
        child.stopped = True  # a failed call takes its fork along: what failed may be its database
        if child.started or sql_run.interrupted:
            raise
    finally:
        _keep_or_let_go(child)
    return run(sql_run, statements, params=params, frames=frames, into=into)


def retire_kept() -> None:
    """Let the kept fork go, at once (at each cell, ``run_code``'s included: while it lives,
    the kernel's first write to each of its pages costs a copy, and the copy is memory the
    fork holds on to)."""
    global _kept
    with _kept_lock:
        child, _kept = _kept, None
    if child is None:
        return
    if child.busy:  # its call goes on; it is let go once that ends
        child.retired = True
    else:
        child.let_go()


def _snapshot(named: Mapping[str, Any], kernel_frames: Mapping[str, Any]) -> dict[str, weakref.ref[Any]] | None:
    """The frames a kept fork may read (those whose layout it may find); None when it
    cannot be kept. Held by weak reference: the kernel keeps no frame alive for the fork."""
    if not pages.tracks_writes():
        return None
    snapshot = {name: weakref.ref(frame) for name, frame in {**kernel_frames, **named}.items() if _laid_out(frame)}
    return snapshot if all(name in snapshot for name in named) else None


def _laid_out(frame: Any) -> bool:
    """Whether ``frame`` is of a kind :func:`agent_kernel.sql.pages.layout` knows."""
    kind = type(frame)
    return (kind.__module__.split(".")[0], kind.__name__) in {
        ("pandas", "DataFrame"), ("pyarrow", "Table"), ("pyarrow", "RecordBatch"),
    }  # fmt: skip


def _take_kept(limits: Limits, frames: Mapping[str, Any]) -> _Forked | None:
    """The kept fork, marked busy, when it can take a call reading ``frames``.

    It is checked once taken, outside the lock: a cell's :func:`retire_kept` never waits
    for the check (which may wait for the fork's layouts).
    """
    global _kept
    with _kept_lock:
        child = _kept
        if child is None or child.busy:
            return None
        child.busy = True
    if not child.unusable(limits, frames):
        return child
    with _kept_lock:
        child.busy = False
        if _kept is child:
            _kept = None
    child.let_go()
    return None


def _keep_or_let_go(child: _Forked) -> None:
    """After a call: keep ``child`` for the next (in place of the kept one), or let it go."""
    global _kept
    let_go = []
    keep = child.snapshot is not None and not child.stopped and not child.grown()
    with _kept_lock:
        child.busy = False
        keep = keep and not child.retired and _forks == child.forks_at
        if keep and _kept is not child:
            if _kept is not None and not _kept.busy:
                let_go.append(_kept)
            _kept = child
        elif not keep:
            if _kept is child:
                _kept = None
            let_go.append(child)
    if keep:
        # The child has its own copy of everything it reads now: the kernel's connection
        # can let go of the frames (the few pages that writes are copied once).
        child.release()
    for leaving in let_go:
        leaving.let_go()


_kept: _Forked | None = None
_kept_lock = threading.Lock()
_forks = 0  # forks of this process so far: a kept fork trusts its shared pages only while none was made since


def _count_fork() -> None:
    global _forks
    _forks += 1


os.register_at_fork(before=_count_fork)


@atexit.register
def _let_kept_go() -> None:
    """At exit, the kept fork leaves too, reaped here (not on the reaper thread, which the
    interpreter's end may stop in the middle of it)."""
    global _kept
    with _kept_lock:
        child, _kept = _kept, None
    if child is not None:
        child.kill()
        child._reap(0)


_leaving: queue.SimpleQueue[_Forked] = queue.SimpleQueue()
_reaper: threading.Thread | None = None
_reaper_lock = threading.Lock()


def _reap_later(child: _Forked) -> None:
    """Have the reaper thread reap ``child`` and release its frames once it has left."""
    global _reaper
    _leaving.put(child)
    with _reaper_lock:
        if _reaper is None or not _reaper.is_alive():
            _reaper = threading.Thread(target=_reap_forks, name="agent-kernel-sql-reaper", daemon=True)
            _reaper.start()


def _reap_forks() -> None:
    """One thread for every fork's exit, rather than a thread started for each."""
    while True:
        child = _leaving.get()
        try:
            child._reap(0)
        finally:
            child.release()


def _serve_in_child(
    sql_run: SqlRun,
    ready: ForkReady,
    frames: Mapping[str, Any],
    registered: set[str],
    laid_out: list[str] | None,
    requests_fd: int,
    answers_fd: int,
) -> NoReturn:
    """The forked child: answer calls, then leave without running the kernel's exit code."""
    code = 0
    try:
        gc.disable()  # a collection would touch, and so copy, every page of the kernel's heap
        # Born with SIGINT and the stop signal blocked (see _fork_with_signals_blocked). The
        # stop signal is taken by one thread (as in the worker); SIGINT is the kernel's: the
        # kernel stops this call with the stop signal, then SIGKILL.
        signal.set_wakeup_fd(-1)  # the kernel's event loop listens on that one
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
            signal.signal(number, signal.SIG_DFL)
        os.setpgid(0, 0)  # an interrupt of the kernel's process group reaches the kernel, which stops this
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # the kernel's streams (ipykernel captures fds 1 and 2) are not ours
            os.dup2(devnull, fd)
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - until os._exit
        low, high = sorted((requests_fd, answers_fd))
        os.closerange(3, low)  # the kernel's sockets, pipes and files
        os.closerange(low + 1, high)
        os.closerange(high + 1, _max_fd())
        requests = os.fdopen(requests_fd, "rb", buffering=0)
        answers = os.fdopen(answers_fd, "wb", buffering=0)
        _answer_calls(requests, answers, sql_run.store, ready, frames, registered, laid_out)
    except BaseException:  # noqa: BLE001 - nothing may escape into the kernel's code
        code = 1
    finally:
        os._exit(code)


def _fork_with_signals_blocked() -> int:
    """``os.fork()``, the child starting with SIGINT and the stop signal blocked.

    A kernel interrupt goes to the kernel's process group, which a fork is in until it
    leaves it: unblocked, SIGINT would run the kernel's handler there, or end the child
    (the call failing, or running again in a worker) once its handler is reset. A stop
    signal sent right after the fork would end it the same way. Blocked in the forking
    thread, both are blocked in the child from its first instruction on.
    """
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, _STOP_SIGNAL})
    pid = -1
    try:
        pid = os.fork()
        return pid
    finally:
        if pid != 0:  # this thread of the kernel, forked or not
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _answer_calls(
    requests: IO[bytes],
    answers: IO[bytes],
    store: Store,
    ready: ForkReady,
    frames: Mapping[str, Any],
    registered: set[str],
    laid_out: list[str] | None,
) -> None:
    """Take calls until the kernel closes the pipe, or none came for :data:`KEEP_S`.

    Each call runs on a new SqlRun (locks the kernel's threads may have held stay behind).
    After the first, the layouts of the frames ``laid_out`` go to the kernel.
    """
    kernel = os.getppid()
    current: list[SqlRun] = []

    def stop_on_signal() -> None:  # and leave when the kernel dies, even mid-statement
        while True:
            if signal.sigtimedwait({_STOP_SIGNAL}, 0.5) is None:
                if os.getppid() != kernel:
                    os._exit(0)
                continue
            for call in list(current):
                call.interrupt()

    # Not threading.Thread: its start() waits until the new thread has run, a few ms on a
    # busy machine, on the way to the first call's first row.
    _thread.start_new_thread(stop_on_signal, ())

    def answer(kind: str, body: Any = None) -> None:
        _write(answers, pickle.dumps((kind, body), protocol=pickle.HIGHEST_PROTOCOL))

    locked = False
    while select.select([requests], [], [], KEEP_S)[0]:
        message = _read(requests)
        if message is None:
            return
        limits, statements, params, into, names = pickle.loads(message)
        sql_run = SqlRun(store, limits, read_only=True)
        sql_run.on_start = lambda: answer("started")
        if into:
            sql_run.emit_batch = lambda batch: answer("batch", batch)
        current.append(sql_run)
        try:
            if not locked:
                ready.lock(limits)
                locked = True
            for name in names:
                if name not in registered:
                    ready.register(name, frames[name])
                    registered.add(name)
            answer("result", sql_run.run_in_memory(ready, statements, params=params, into=into))
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the kernel
            answer("error", _portable(exc))
        finally:
            current.remove(sql_run)
        if laid_out is not None:
            answer("layouts", _layouts(frames, laid_out))
            laid_out = None


def _layouts(frames: Mapping[str, Any], names: list[str]) -> dict[str, Layout | None]:
    layouts = {name: pages.layout(frames[name]) for name in names}
    try:
        pickle.dumps(layouts)
    except Exception:  # noqa: BLE001 - column names that cannot be pickled
        return {}
    return layouts


def _max_fd() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 65536


def _finish(kind: str, body: Any, batches: list[Any], max_rows: int) -> SqlResult:
    if kind == "error":
        raise body
    result: SqlResult = body
    if result.schema is not None:  # an into= result: the rows came as Arrow batches
        import pyarrow as pa  # noqa: PLC0415 - heavy: see _preload

        table = pa.Table.from_batches(batches, schema=result.schema)
        batches.clear()
        result.frame = table.to_pandas(self_destruct=True)
        del table
        result.rows = list(result.frame.head(max_rows).itertuples(index=False, name=None))
    return result


_idle: list[_Worker] = []
_idle_lock = threading.Lock()


_successors: list[threading.Thread] = []


def _take() -> _Worker:
    for successor in list(_successors):  # one being started is ready sooner than a new one
        successor.join()
    with _idle_lock:
        while _idle:
            worker = _idle.pop()
            if worker.alive():
                return worker
    return _Worker()


def _give_back(worker: _Worker) -> None:
    if not worker.alive():  # killed at the limit: start its successor now, not on the next call
        successor = threading.Thread(target=_start_successor, daemon=True)
        _successors.append(successor)
        successor.start()
        return
    with _idle_lock:
        if len(_idle) < _IDLE_WORKERS:
            _idle.append(worker)
            return
    worker.kill()


@atexit.register
def _close_idle() -> None:
    """At exit, the idle workers leave too (rather than outliving their kernel unreaped)."""
    with _idle_lock:
        workers, _idle[:] = list(_idle), []
    for worker in workers:
        worker.close()


def _start_successor() -> None:
    try:
        _give_back(_Worker())
    finally:
        _successors.remove(threading.current_thread())


def _write(pipe: IO[bytes], payload: bytes) -> None:
    pipe.write(_HEADER.pack(len(payload)))
    view = memoryview(payload)
    while view:
        written = pipe.write(view)
        view = view[written:]


def _read(pipe: IO[bytes]) -> bytes | None:
    header = _read_exactly(pipe, _HEADER.size)
    if header is None:
        return None
    return _read_exactly(pipe, _HEADER.unpack(header)[0])


def _read_exactly(pipe: IO[bytes], size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = pipe.read(min(size - len(data), 1 << 24))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


# -- the worker's side --------------------------------------------------------------------


def _serve() -> None:
    """Answer calls until the kernel closes the pipe."""
    # The stop signal is taken by one thread, never delivered to another (every thread
    # started later, DuckDB's and Arrow's included, inherits the blocked mask).
    signal.pthread_sigmask(signal.SIG_BLOCK, {_STOP_SIGNAL})
    # A kernel interrupt goes to the kernel's whole process group, this worker included;
    # the kernel stops a call here with the stop signal, so SIGINT must not end the worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_the_kernel()
    _preload()
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    answers = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # nothing else may write into the answers' pipe
    current: list[SqlRun] = []

    def take_stops() -> None:
        while True:
            signal.sigwait({_STOP_SIGNAL})
            for sql_run in list(current):
                sql_run.interrupt()

    threading.Thread(target=take_stops, daemon=True).start()

    def answer(kind: str, body: Any = None) -> None:
        _write(answers, pickle.dumps((kind, body), protocol=pickle.HIGHEST_PROTOCOL))

    stores: dict[str, Store] = {}
    while True:
        message = _read(requests)
        if message is None:
            return
        path, limits, read_only, statements, params, frames, into = pickle.loads(message)
        store = stores.setdefault(path, Store(path))
        sql_run = SqlRun(store, limits, read_only=read_only)
        sql_run.on_start = lambda: answer("started")
        if into:
            sql_run.emit_batch = lambda batch: answer("batch", batch)
        current.append(sql_run)
        try:
            answer("result", sql_run.run_here(statements, params=params, frames=frames, into=into))
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the kernel
            answer("error", _portable(exc))
        finally:
            current.remove(sql_run)


def _die_with_the_kernel() -> None:
    """Exit when the kernel dies, even in the middle of a long statement."""
    kernel = os.getppid()

    def watch() -> None:
        while os.getppid() == kernel:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def _preload() -> None:
    """Import what calls need (frames arrive as pandas, into= leaves as Arrow) before the first."""
    import duckdb  # noqa: F401, PLC0415 - a preload, as pandas and pyarrow below

    for name in ("pandas", "pyarrow"):
        try:
            __import__(name)
        except ImportError:
            pass


def _portable(exc: Exception) -> Exception:
    """``exc`` itself when it survives pickling (the project's errors do), else a summary."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    _serve()
