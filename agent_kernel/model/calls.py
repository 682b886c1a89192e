"""Where a model call made from Python goes (:mod:`agent_kernel.llm`), handed down explicitly.

Two places say it, from above; ``agent_kernel.llm`` reads only this module:

- a turn, around each tool call it dispatches (:func:`calls_through`): its model client,
  its settings, and what records a call in the turn's usage and says when its limits
  allow no more calls;
- the notebook, when the extension loads (:func:`set_kernel_default`): the kernel agent's
  model client and settings, made when first asked for.

Elsewhere (a script) nothing is set and the caller uses its own client.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anthropic.types import Message

    from agent_kernel.model.client import ModelClient

__all__ = [
    "Caller", "calls_through", "kernel_default", "reset_turn_caller", "set_kernel_default", "set_turn_caller",
    "turn_caller",
]  # fmt: skip


@dataclass(frozen=True)
class Caller:
    """The model client and settings calls use; ``record`` and ``limit_reached`` come from a turn.

    ``record(message, duration_ms)`` adds a call's usage to the turn; ``limit_reached()``
    says why no more calls may be made (a limit of the session), or returns None.
    """

    client: ModelClient
    settings: Any  # the AgentKernel settings (config.py, a layer above this one)
    record: Callable[[Message, float | None], None] | None = None
    limit_reached: Callable[[], str | None] | None = None


# The running tool call's turn; None inside a turn whose calls go to the kernel default.
_TURN: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("agent_kernel_model_caller", default=None)
_KERNEL: list[Callable[[], Caller]] = []  # the notebook's default, while the extension is loaded


@contextmanager
def calls_through(caller: Caller | None) -> Iterator[None]:
    """Model calls made inside the block go through ``caller`` (``None``: the kernel default)."""
    token = set_turn_caller(caller)
    try:
        yield
    finally:
        reset_turn_caller(token)


def set_turn_caller(caller: Caller | None) -> contextvars.Token[Caller | None]:
    """:func:`calls_through` for a hot path: set ``caller``; pass the token to :func:`reset_turn_caller`."""
    return _TURN.set(caller)


def reset_turn_caller(token: contextvars.Token[Caller | None]) -> None:
    """Back to the caller before :func:`set_turn_caller` returned ``token``."""
    _TURN.reset(token)


def turn_caller() -> Caller | None:
    """The caller the running turn set for its tool calls, or None."""
    return _TURN.get()


def set_kernel_default(make: Callable[[], Caller] | None) -> None:
    """Make ``make()`` the caller outside a turn (the notebook's agent); ``None`` removes it."""
    _KERNEL[:] = [make] if make is not None else []


def kernel_default() -> Caller | None:
    """The notebook's caller when the extension is loaded, else None."""
    return _KERNEL[0]() if _KERNEL else None
