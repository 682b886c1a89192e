"""Stopping a turn in a real kernel at a chosen moment: an interrupt or a Stop sent when an
iopub message matches, and the time from it to the end of the cell."""

from __future__ import annotations

import time

from tests.support.frontend import FrontEnd


class Clock:
    """Remembers when the test asked for the stop."""

    def __init__(self) -> None:
        self.at: float | None = None

    def hook(self, predicate, action):
        def on_message(message, kernel):
            if self.at is None and predicate(message):
                self.at = time.perf_counter()
                action(kernel)  # hooks run on the test's main thread, between iopub messages

        return on_message


def interrupt(kernel) -> None:
    kernel.manager.interrupt_kernel()


def stopped_turn(kernel, prompt, when, action):
    """Run ``prompt``; do ``action`` once an iopub message matches ``when``.

    Returns the execution and the seconds from the action to the end of the cell.
    """
    clock = Clock()
    front = FrontEnd(kernel)  # draws the widgets, as JupyterLab does
    stop = clock.hook(when, action)

    def on_message(message, kernel):
        front.hook(message)
        stop(message, kernel)

    started = time.perf_counter()
    result = kernel.execute(prompt, on_message=on_message)
    assert clock.at is not None, "the turn ended before the stop was sent"
    return result, started + result.seconds - clock.at
