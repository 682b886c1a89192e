"""Is a person there to answer? Decided fast, so an unattended notebook never waits.

A waiting tool (a form, a question, an approval, Continue) must know whether anyone can
answer. The kernel cannot see which clients listen, so the answer is built from what it
can see, cheapest first:

1. No kernel (a script, terminal IPython): nobody.
2. ``--approve read-only``: the turn is declared unattended.
3. The running cell's ``execute_request`` did not allow stdin: nobody. nbclient and so
   papermill send ``allow_stdin: false``; JupyterLab, Notebook, VS Code and Colab send
   ``true``. This costs nothing, so papermill never waits.
4. ipykernel older than 7.4 (the newest for Python 3.10) handles a widget's messages
   only after the running cell ends, so an answer could never reach a waiting turn:
   nobody (with a note saying what to upgrade).
5. Otherwise a front end probably draws widgets. Every widget of ours *acknowledges*
   when a front end renders it (``js/ack.js``, which starts each widget's script). A
   waiting widget whose acknowledgement does not come within
   ``AgentKernel.presence_timeout`` means a client that draws no widgets (``jupyter
   console``, a script on ``jupyter_client``): nobody. That is remembered for the rest of
   the turn, so its later waits return at once; the next turn asks again (a person may
   have opened the notebook meanwhile).
"""

from __future__ import annotations

import asyncio
import threading
from importlib.metadata import version
from typing import Any, Protocol

import anywidget
import traitlets
from IPython import get_ipython

__all__ = ["BUSY_CELL", "PRESENCE", "AckWidget", "Attendance", "BusyCell", "Presence"]


class Attendance(Protocol):
    """What presence needs to know of the running turn (its tool context provides it)."""

    @property
    def shell(self) -> Any: ...  # the IPython shell; its kernel tells who may listen

    @property
    def session_id(self) -> str: ...

    @property
    def turn(self) -> int: ...

    @property
    def approve(self) -> str: ...  # the turn's approval mode


class Presence:
    """What this kernel knows about the person at its front end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._unrendered_in: tuple[str, int] | None = None  # (session, turn) of a missed widget

    def acknowledged(self) -> None:
        """A front end rendered one of our widgets."""
        with self._lock:
            self._unrendered_in = None

    def went_unrendered(self, context: Attendance) -> None:
        """A waiting widget was not rendered in time: no widget front end for this turn."""
        with self._lock:
            self._unrendered_in = (context.session_id, context.turn)

    def widgets_unseen(self, context: Attendance) -> str | None:
        """Why no front end will draw widgets for this cell, or ``None`` if one may."""
        kernel = getattr(context.shell, "kernel", None)
        if kernel is None:
            return "this Python has no Jupyter front end (a script or terminal IPython)"
        if not _stdin_allowed(kernel):
            return "the notebook runs unattended (papermill, nbclient or another runner)"
        if not widget_replies_during_cells():
            return (
                "this kernel (ipykernel < 7.4) delivers widget answers only after the cell "
                "ends; ipykernel >= 7.4 (Python >= 3.11) lets a person answer during a turn"
            )
        if self._unrendered_in == (context.session_id, context.turn):
            return "the kernel's client does not display widgets"
        return None

    def nobody(self, context: Attendance) -> str | None:
        """Why nobody can answer a waiting widget now, or ``None`` if someone may."""
        if context.approve == "read-only":
            return "the turn runs with --approve read-only, as for an unattended run"
        return self.widgets_unseen(context)


PRESENCE = Presence()


def widget_replies_during_cells() -> bool:
    """Whether ipykernel hands widget messages to a cell that is still awaiting (>= 7.4)."""
    major, minor = (int(part) for part in version("ipykernel").split(".")[:2])
    return (major, minor) >= (7, 4)


def stdin_allowed() -> bool:
    """Whether the running cell's client allows stdin (nbclient and papermill do not)."""
    kernel = getattr(get_ipython(), "kernel", None)
    return kernel is not None and _stdin_allowed(kernel)


def notebook_cell() -> bool:
    """Whether the running cell's client says which notebook cell it runs (``cellId`` in
    the request's metadata: JupyterLab, Notebook 7, VS Code); consoles do not."""
    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None:
        return False
    try:
        parent = kernel.get_parent("shell") or {}
    except Exception:  # noqa: BLE001 - an unusual kernel: no cell known
        return False
    return bool((parent.get("metadata") or {}).get("cellId"))


def _running_cell() -> tuple[Any, dict[str, Any]] | None:
    """The kernel and the request of the cell running now (None outside a kernel's cell)."""
    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None:
        return None
    try:
        parent = kernel.get_parent("shell")
    except Exception:  # noqa: BLE001 - an unusual kernel
        return None
    if not parent or (parent.get("header") or {}).get("msg_type") != "execute_request":
        return None
    return kernel, parent


def _stdin_allowed(kernel: Any) -> bool:
    try:
        parent = kernel.get_parent("shell") or {}
    except Exception:  # noqa: BLE001 - an unusual kernel: assume a person may be there
        return True
    content = parent.get("content") or {}
    return bool(content.get("allow_stdin", True))


# After a widget's message, when the turn's cell is said busy again (seconds): after the
# subshell that handled the message has said idle.
_BUSY_AGAIN_S = (0.05, 0.3)


class BusyCell:
    """The cell a turn runs in, said busy again after each of our widgets' messages.

    JupyterLab sends widget messages on a kernel subshell, which reports each one busy,
    then idle; its status bar shows the last status it saw, so while a turn waited for a
    form it said Idle. While a turn holds its cell (:meth:`hold`, from its Stop button
    until the turn ends), every message to one of our widgets is followed by a busy
    status for that cell.
    """

    def __init__(self) -> None:
        self._cell: tuple[Any, dict[str, Any]] | None = None

    def hold(self) -> bool:
        """The running cell runs a turn; False when a turn holds it already (a second
        ``%agent`` started inside the first, which refuses it)."""
        running = _running_cell()
        if self._cell is not None and running is not None and _msg_id(self._cell) == _msg_id(running):
            return False
        self._cell = running  # (one held for another cell was left by a turn that crashed)
        return True

    def release(self) -> None:
        self._cell = None

    def say_busy(self) -> None:
        cell = self._cell
        if cell is None:
            return
        kernel, parent = cell
        try:
            kernel._publish_status("busy", "shell", parent)
        except Exception:  # noqa: BLE001 - a kernel without it: its status stays as it was
            self._cell = None


BUSY_CELL = BusyCell()


def _msg_id(cell: tuple[Any, dict[str, Any]]) -> Any:
    return (cell[1].get("header") or {}).get("msg_id")


class AckWidget(anywidget.AnyWidget):
    """A widget that tells the kernel when a front end has rendered it (and, while a turn
    runs, has its cell said busy again after each message: see :class:`BusyCell`)."""

    rendered = traitlets.Bool(False)  # not synced: set by the front end's message

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._loop: asyncio.AbstractEventLoop | None = None
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            pass
        self._rendered_waiters: list[asyncio.Future[None]] = []
        self.on_msg(self._on_rendered_message)

    def adopt(self) -> None:
        """Belong to the running loop (a widget made ahead, on another thread)."""
        self._loop = asyncio.get_running_loop()

    def _on_rendered_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            for delay in _BUSY_AGAIN_S:
                loop.call_soon_threadsafe(loop.call_later, delay, BUSY_CELL.say_busy)
        if isinstance(content, dict) and content.get("type") == "rendered":
            PRESENCE.acknowledged()
            self._call_soon(self._mark_rendered)

    def _mark_rendered(self) -> None:
        self.rendered = True
        self._wake_rendered()

    def _wake_rendered(self) -> None:
        for waiter in self._rendered_waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._rendered_waiters.clear()

    def _call_soon(self, callback: Any, *args: Any) -> None:
        """Run ``callback`` on the widget's event loop.

        Comm messages may be handled on another thread (JupyterLab can send widget
        messages on a kernel subshell), and futures may only be touched on their loop.
        """
        loop = self._loop
        if loop is None or loop.is_closed():
            callback(*args)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            callback(*args)
        else:
            loop.call_soon_threadsafe(callback, *args)

    async def wait_rendered(self, timeout: float) -> bool:
        """Whether a front end renders this widget within ``timeout`` seconds."""
        if self.rendered:
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._rendered_waiters.append(waiter)
        try:
            # Not asyncio.wait_for: on Python 3.11 it swallows a cancellation (Stop) that
            # arrives just as the waiter completes, and the turn would then wait on.
            await asyncio.wait({waiter}, timeout=timeout)
        finally:
            waiter.cancel()
        return self.rendered
