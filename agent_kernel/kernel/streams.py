"""The kernel's output streams during a turn: a display costs one message, not three.

Every ``display`` and display update in ipykernel first flushes ``sys.stdout`` and
``sys.stderr``, so a print made before it reaches the front end first. An ipykernel
stream's ``flush`` hands the flush to the I/O thread and waits for that thread to run it,
*whether or not anything was written*: two cross-thread hand-offs and waits per display.
A turn updates its status line and tool cards several times per tool round trip, so on a
busy machine those waits were the larger part of what the loop costs per round trip.

During a turn ``sys.stdout`` and ``sys.stderr`` are these thin wrappers: writes go
straight to the kernel's stream, and ``flush`` flushes it only when it holds text not yet
sent (its pending flag, set by every write until the I/O thread sends). Order is kept: when
the flag is clear, whatever the I/O thread is sending goes out before the display, which
the same thread sends after it. A stream that is not ipykernel's (a plain IPython shell, a
capture the user set up) is left as it is.

A wrapper is made once per kernel stream and kept: CPython's ``print`` holds
``sys.stdout`` as a borrowed reference, so a thread printing while the turn puts the
streams back must never write through a freed object.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_WRAPPERS: dict[int, FlushWhenPending] = {}


class FlushWhenPending:
    """A kernel output stream whose ``flush`` does nothing when nothing waits to be sent."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    @property
    def stream(self) -> Any:
        """The kernel's stream this wraps."""
        return self._stream

    def write(self, text: str) -> int | None:
        result: int | None = self._stream.write(text)
        return result

    def flush(self) -> None:
        stream = self._stream
        if getattr(stream, "_flush_pending", True) or getattr(stream, "_subprocess_flush_pending", True):
            stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _is_kernel_stream(stream: Any) -> bool:
    return type(stream).__module__ == "ipykernel.iostream" and type(stream).__name__ == "OutStream"


def _wrapper(stream: Any) -> FlushWhenPending:
    known = _WRAPPERS.get(id(stream))
    if known is None or known.stream is not stream:
        known = _WRAPPERS[id(stream)] = FlushWhenPending(stream)
    return known


@contextmanager
def quick_flushes() -> Iterator[None]:
    """``sys.stdout``/``sys.stderr`` as :class:`FlushWhenPending` for the block (when they
    are the kernel's streams); put back after it, unless something replaced them since."""
    saved = sys.stdout, sys.stderr
    out = _wrapper(saved[0]) if _is_kernel_stream(saved[0]) else saved[0]
    err = _wrapper(saved[1]) if _is_kernel_stream(saved[1]) else saved[1]
    sys.stdout, sys.stderr = out, err
    try:
        yield
    finally:
        if sys.stdout is out:
            sys.stdout = saved[0]
        if sys.stderr is err:
            sys.stderr = saved[1]
