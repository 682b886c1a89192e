"""Stopping a turn: the Stop button, a kernel interrupt (SIGINT) and code time limits.

ipykernel 7.4's own SIGINT handling does not stop an awaiting cell promptly and does not
stop synchronous code run through a nested ``run_cell_async`` at all (measured, see
DESIGN.md). So for the length of a turn this module owns SIGINT:

- while the event loop is idle (the model is streaming, code is awaiting), the signal
  cancels the task of the current phase, which wakes at once;
- while the turn's own Python is on the stack (code the model wrote is running), the
  signal raises ``KeyboardInterrupt`` there, which IPython reports as ``error_in_exec``
  of the nested run, or the turn catches.

A code time limit uses the same path: a timer thread sends SIGINT to the main thread, and
the handler raises :class:`CodeTimeout` instead, which stops only that code (code that
took SIGINT for itself gets it raised directly a moment later). After any of
these the turn looks at :attr:`TurnInterrupts.reason`, never at which exception arrived,
because IPython swallows both ``KeyboardInterrupt`` and ``CancelledError`` in user code.
"""

from __future__ import annotations

import asyncio
import ctypes
import math
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Coroutine
from types import CodeType, FrameType
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["CodeTimeout", "TurnInterrupted", "TurnInterrupts"]


class CodeTimeout(KeyboardInterrupt):
    """Raised inside code the model ran when its ``timeout_s`` has passed."""


class TurnInterrupted(Exception):
    """The user stopped the turn (Stop button or kernel interrupt)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# The longest the watchdog sleeps at once: a far deadline is reached by waking again, so no
# deadline (however large) overflows a wait.
_LONGEST_WAIT_S = 60.0
# How long code past its time limit may go on after SIGINT before CodeTimeout is raised
# in it directly (it ignored or replaced the signal's handler).
_STOP_GRACE_S = 2.0

# Code objects whose frames mark "the turn is executing Python": set by the loop module.
TURN_FRAMES: set[CodeType] = set()
# Those whose frames mark "code the model wrote is running" (a subset of TURN_FRAMES): a time
# limit raises only there, never in the turn's own bookkeeping around the code.
CODE_FRAMES: set[CodeType] = set()


class TurnInterrupts:
    """SIGINT, Stop and time limits for one turn, while it is installed."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._phase: asyncio.Future[Any] | None = None
        self._code: asyncio.Future[Any] | None = None
        self._saved_handler: Any = None
        self._installed = False
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._watchdog: threading.Thread | None = None
        self._closed = False
        self._code_active = False
        self._timeout_pending = False
        self.timeout_s: float | None = None
        self.timed_out = False
        self._followers: list[TurnInterrupts] = []  # sub-sessions' turns, stopped with this one
        self._leader: TurnInterrupts | None = None
        self._timing_out: TurnInterrupts | None = None  # a follower whose time limit sent SIGINT

    # -- lifetime ------------------------------------------------------------------------

    def install(self, *, signals: bool = True) -> None:
        """Take over SIGINT (only possible on the main thread; elsewhere Stop still works).

        ``signals=False`` leaves SIGINT to the turn that owns it (a sub-session's turn
        follows its parent's, see :meth:`follow`); a time limit then cancels the code.
        """
        self._loop = asyncio.get_running_loop()
        if self._installed:
            return  # installed by whoever showed the turn's Stop button first (%agent)
        if signals and threading.current_thread() is threading.main_thread():
            self._saved_handler = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True

    def uninstall(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._installed:
            signal.signal(signal.SIGINT, self._saved_handler)
            self._installed = False

    def __enter__(self) -> TurnInterrupts:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    # -- requests ------------------------------------------------------------------------

    def request(self, reason: str = "stop") -> None:
        """Stop the turn (from the event loop's thread, e.g. a Stop button callback), and
        every turn that follows it."""
        if self.reason is None:
            self.reason = reason
        self._cancel(self._code if self._code is not None else self._phase)
        self._stop_followers()

    def follow(self, leader: TurnInterrupts) -> None:
        """Stop when ``leader`` stops (Stop, a kernel interrupt): a sub-session follows its parent."""
        self._leader = leader
        leader._followers.append(self)
        if leader.reason is not None:
            self.request(leader.reason)

    def _stop_followers(self) -> None:
        followers, self._followers = self._followers, []
        for follower in followers:
            follower.request(self.reason or "stop")

    def check(self) -> None:
        """Raise :class:`TurnInterrupted` if a stop was requested."""
        if self.reason is not None:
            raise TurnInterrupted(self.reason)

    async def phase(self, coro: Awaitable[T]) -> T:
        """Run one phase (a model call, a tool) so that a stop can cancel it at once."""
        if self.reason is not None:
            close = getattr(coro, "close", None)
            if close is not None:
                close()  # a coroutine never started: no "never awaited" warning
            raise TurnInterrupted(self.reason)
        task = asyncio.ensure_future(coro)
        self._phase = task
        if self.reason is not None:  # a SIGINT handled while the task was made found no phase
            task.cancel()
        try:
            return await task
        except asyncio.CancelledError:
            if self.reason is None:
                raise
            raise TurnInterrupted(self.reason) from None
        finally:
            self._phase = None

    async def run_code(self, coro: Coroutine[Any, Any, T], timeout_s: float | None) -> T:
        """Run code the model wrote; after ``timeout_s`` it is stopped with :class:`CodeTimeout`.

        Returns whatever ``coro`` returns; check :attr:`timed_out` and :attr:`reason`
        afterwards, since IPython turns both kinds of stop into an ``error_in_exec``.
        ``timeout_s`` must be a positive finite number (or None for no limit).
        """
        if timeout_s is not None and not (math.isfinite(timeout_s) and timeout_s > 0):
            coro.close()
            raise ValueError(f"timeout_s must be a positive finite number of seconds, not {timeout_s!r}.")
        self.timed_out = False
        self.timeout_s = timeout_s
        task = asyncio.ensure_future(coro)
        self._code = task
        with self._cond:
            self._code_active = True
            self._deadline = time.monotonic() + timeout_s if timeout_s is not None else None
            self._cond.notify_all()
        if timeout_s is not None and (self._watchdog is None or not self._watchdog.is_alive()):
            self._watchdog = threading.Thread(target=self._watch, name="agent-kernel-timeout", daemon=True)
            self._watchdog.start()
        try:
            return await task
        finally:
            with self._cond:
                self._code_active = False
                self._deadline = None
                self._cond.notify_all()
            self._code = None
            if self._installed and signal.getsignal(signal.SIGINT) != self._on_sigint:
                signal.signal(signal.SIGINT, self._on_sigint)  # the code replaced the turn's handler

    # -- internals -----------------------------------------------------------------------

    def _watch(self) -> None:
        """One thread per turn: stops code whose deadline passed (see :meth:`run_code`)."""
        while True:
            with self._cond:
                while not self._closed and (self._deadline is None or self._deadline > time.monotonic()):
                    wait = _LONGEST_WAIT_S
                    if self._deadline is not None:
                        wait = min(wait, self._deadline - time.monotonic())
                    self._cond.wait(max(wait, 0.0))
                if self._closed:
                    return
                self._deadline = None
                if not self._code_active:
                    continue
                self._timeout_pending = True
                self.timed_out = True
            self._time_out()
            self._insist()

    def _time_out(self) -> None:
        owner = self._signal_owner()
        if owner is not None:
            # A follower's code (live code runs one at a time) is stopped through the
            # handler that owns SIGINT, which can reach synchronous code too.
            if owner is not self:
                owner._timing_out = self
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        elif self._loop is not None:
            self._loop.call_soon_threadsafe(self._cancel, self._code)

    def _insist(self) -> None:
        """Stop code still running after SIGINT when it replaced the handler (to ignore it).

        Raises :class:`CodeTimeout` in the main thread directly, which lands at the code's
        next Python instruction (a blocking call in C still finishes first). Only while the
        code's frames are on the main thread's stack; should the code end at that very
        moment, the exception stops the turn (as an interrupt would), never the kernel.
        """
        owner = self._signal_owner()
        if owner is None:
            return  # the code was cancelled, not signalled
        main = threading.main_thread().ident
        with self._cond:
            ends = time.monotonic() + _STOP_GRACE_S
            while self._code_active and not self._closed and time.monotonic() < ends:
                self._cond.wait(ends - time.monotonic())
            if not self._code_active or self._closed or main is None:
                return
            if signal.getsignal(signal.SIGINT) == owner._on_sigint:
                return  # still ours: the code is in a long call in C, the signal waits for it
            if _on_stack(sys._current_frames().get(main), CODE_FRAMES):
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(main), ctypes.py_object(CodeTimeout))

    def _signal_owner(self) -> TurnInterrupts | None:
        """This turn or the one it follows (up the tree) whose handler owns SIGINT."""
        at: TurnInterrupts | None = self
        while at is not None:
            if at._installed:
                return at
            at = at._leader
        return None

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        follower, self._timing_out = self._timing_out, None
        if follower is not None and follower._timeout_pending:
            follower._on_sigint(signum, frame)
            return
        timeout = self._timeout_pending
        self._timeout_pending = False
        if timeout:
            if not self._code_active:
                return
        elif self.reason is None:
            self.reason = "interrupt"
        if not timeout and self._loop is not None and self._followers:
            self._loop.call_soon_threadsafe(self._stop_followers)
        if timeout and _on_stack(frame, CODE_FRAMES):
            raise CodeTimeout(f"stopped after its time limit of {self.timeout_s:g} s")
        if not timeout and _on_stack(frame, TURN_FRAMES):
            raise KeyboardInterrupt()
        target = self._code if (timeout or self._code is not None) else self._phase
        if self._loop is not None and target is not None:
            self._loop.call_soon_threadsafe(self._cancel, target)

    @staticmethod
    def _cancel(target: asyncio.Future[Any] | None) -> None:
        if target is not None and not target.done():
            target.cancel()


def _on_stack(frame: FrameType | None, codes: set[CodeType]) -> bool:
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False
