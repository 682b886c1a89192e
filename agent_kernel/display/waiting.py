"""Showing a widget in the running cell and waiting for the person's answer.

The turn *awaits* a future that the widget's message handler resolves; ipykernel 7.4
delivers widget messages to a cell that awaits, so the kernel stays responsive and no
loop polls. The wait runs inside the turn's current phase (a tool call or the token
limit), so the Stop button or a kernel interrupt cancels it at once.

While it waits the session is ``waiting_for_input``. When it ends, however it ends
(answered, stopped, nobody there), the widget is replaced by a static rendering of the
outcome, so the saved notebook shows what was asked and what came back.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

import traitlets
from IPython.display import display

from agent_kernel.display.presence import PRESENCE, AckWidget, Attendance, notebook_cell, stdin_allowed

if TYPE_CHECKING:
    from agent_kernel.display.view import TurnView

Bundle = dict[str, object]


class TurnWaits(Attendance, Protocol):
    """What a waiting widget needs of the running turn; the turn's tool context provides it."""

    @property
    def transcript(self) -> TurnView: ...

    @property
    def presence_timeout(self) -> float: ...  # seconds a front end has to draw the widget

    def waiting(self, state: str) -> None:
        """The turn now waits for the person, the session in ``state``."""

    def done_waiting(self) -> None:
        """The wait is over (answered, stopped or nobody there); the turn runs on."""


class Nobody:
    """The outcome of a wait when no one can answer."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"Nobody({self.reason!r})"


class WaitingWidget(AckWidget):
    """A widget that produces one answer.

    Subclasses handle their front end's custom messages in :meth:`on_message` and call
    :meth:`answer` (or :meth:`reply` to send something back, e.g. validation errors).
    ``static(outcome)`` gives the bundle that stands for the widget once it is done.
    """

    # waiting, answered, stopped, nobody: the front end disables itself when not waiting
    status = traitlets.Unicode("waiting").tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._answer: asyncio.Future[Any] | None = None
        if self._loop is not None:
            self._answer = self._loop.create_future()
        self.on_msg(self._dispatch_message)

    def _dispatch_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and self.status == "waiting":
            self._call_soon(self.on_message, content)

    def on_message(self, content: dict[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def answer(self, value: Any) -> None:
        """Resolve the wait with ``value`` (on the widget's loop)."""
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(value)

    def reply(self, content: dict[str, Any]) -> None:
        self.send(content)

    async def answered(self) -> Any:
        if self._answer is None:
            raise RuntimeError("a waiting widget must be made on the running event loop")
        return await self._answer

    def static(self, outcome: Any) -> Bundle:  # pragma: no cover - abstract
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # The widget plus a static fallback (text/html) for viewers without its state.
        bundle = super()._repr_mimebundle_(**kwargs)
        assert bundle is not None, "a widget with a view has a bundle"
        data, metadata = bundle
        fallback = self.static(None)
        data = {**fallback, **data, "text/plain": fallback.get("text/plain", data["text/plain"])}
        return data, metadata


class Pending:
    """One waiting widget in the running cell: :meth:`show` it, then :meth:`wait`.

    When nobody can answer (see :mod:`.presence`) the widget is never shown: its static
    rendering of the :class:`Nobody` outcome is, and :meth:`wait` returns that at once.
    """

    def __init__(self, widget: WaitingWidget, context: TurnWaits) -> None:
        self.widget = widget
        self.context = context
        self._handle: Any = None
        self._nobody: Nobody | None = None

    def show(self) -> None:
        reason = PRESENCE.nobody(self.context)
        if reason is not None:
            self._nobody = Nobody(reason)
            self.widget.status = "nobody"
            self._handle = display(self.widget.static(self._nobody), raw=True, display_id=True)
            self.widget.close()
            return
        if _prints_outputs_once():
            # Its text would be printed now and never updated: the settled outcome is
            # printed instead, once (see wait).
            data, metadata = self.widget._repr_mimebundle_()
            data.pop("text/plain", None)
            self._handle = display(data, metadata=metadata, raw=True, display_id=True)
            return
        self._handle = display(self.widget, display_id=True)

    async def wait(self, *, state: str = "waiting_for_input") -> Any:
        """The widget's answer, or :class:`Nobody` when no one can give it.

        The session is in ``state`` while it waits, ``running`` after.
        """
        if self._handle is None:
            self.show()
        if self._nobody is not None:
            return self._nobody
        widget, context = self.widget, self.context
        context.waiting(state)
        outcome: Any = STOPPED
        try:
            timeout = context.presence_timeout
            if not await widget.wait_rendered(timeout):
                PRESENCE.went_unrendered(context)
                outcome = Nobody(f"no front end displayed the question within {timeout:g} s")
            else:
                outcome = await widget.answered()
            return outcome
        finally:
            widget.status = "stopped" if outcome is STOPPED else "nobody" if isinstance(outcome, Nobody) else "answered"
            context.done_waiting()
            settled = widget.static(outcome)
            self._handle.update(settled, raw=True)
            if not widget.rendered:
                # A client that never drew the widget may ignore updates too (jupyter console).
                display(settled, raw=True)
            widget.close()


def _prints_outputs_once() -> bool:
    """Whether the running cell's client may be one that prints each output once, as it
    arrives (jupyter console): not a notebook front end, not an unattended runner."""
    return not notebook_cell() and stdin_allowed()


class _Stopped:
    def __repr__(self) -> str:
        return "STOPPED"


# The outcome static() receives when the turn was stopped while the widget waited.
STOPPED: Any = _Stopped()
