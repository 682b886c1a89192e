"""Who may change trust: the person, never code running inside an agent turn.

Clearing a taint, trusting a stored tool as read-only, trusting an MCP server, binding a
secret to a host and enabling a tainted job are the person's decisions. Each of them takes
a :class:`PersonEvent`: the click, magic, CLI command or server request that made it,
which the store keeps beside the change (``cleared_by``, ``granted_by``).

:func:`person` makes one and refuses while a turn runs in this process: code the model
runs through ``run_code`` would otherwise reach the person's own paths
(``get_ipython().run_line_magic('agent_tainted', '--clear-all')``, the store's Python API).
A card the person clicks during a turn is the one exception: the approval card makes its
event from the click it received (:func:`card_click`). While a turn runs, the process's
environment also holds ``AGENT_KERNEL_IN_TURN``, so a command the turn's code starts
(``!agent-kernel jobs enable ...``) refuses too.

This is defence in depth, not a wall. Code in the kernel runs as the user and can write
the DuckDB file itself; what keeps such code from running unreviewed after the session
read untrusted content is the approval check (writing actions ask, see
:mod:`agent_kernel.turn.approval`). docs/security.md says what each promises.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from agent_kernel.errors import AgentKernelError

__all__ = [
    "IN_TURN_ENV",
    "PersonEvent",
    "TrustRefused",
    "card_click",
    "inside_turn",
    "person",
    "started_by_turn",
    "turn_running",
]

# Where a person's decision came from.
Via = Literal["card", "magic", "panel", "cli", "server", "dialog"]
VIAS: tuple[str, ...] = ("card", "magic", "panel", "cli", "server", "dialog")
DETAIL_CHARS = 200
# Set in the environment while a turn runs: processes started then inherit it.
IN_TURN_ENV = "AGENT_KERNEL_IN_TURN"


class TrustRefused(AgentKernelError):
    """A trust change was asked for by code running inside an agent turn."""


@dataclass(frozen=True)
class PersonEvent:
    """One decision of the person: where it came from (``via``) and what made it
    (``detail``: the card's tool call, the magic's line, the CLI command, the request)."""

    via: Via
    detail: str = ""

    def label(self) -> str:
        """What the store keeps of it, one line (``magic: %agent_tainted --clear-all``)."""
        detail = " ".join(self.detail.split())[:DETAIL_CHARS]
        return f"{self.via}: {detail}" if detail else self.via


_turn: contextvars.ContextVar[bool] = contextvars.ContextVar("agent_kernel_turn_running", default=False)
_running = 0
_lock = threading.Lock()


@contextmanager
def turn_running() -> Iterator[None]:
    """Marks a turn as running in this process (and in its task's context) while it lasts."""
    global _running
    token = _turn.set(True)
    with _lock:
        _running += 1
        os.environ[IN_TURN_ENV] = str(os.getpid())
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            if _running == 0:
                os.environ.pop(IN_TURN_ENV, None)
        _turn.reset(token)


def inside_turn() -> bool:
    """Whether an agent turn is running in this process now."""
    return _running > 0 or _turn.get()


def started_by_turn() -> bool:
    """Whether a turn was running in the process that started this one when it did (a
    command the turn's code ran). Only the person's own paths check it: a kernel a turn
    starts runs its notebook's own settings as usual."""
    marker = os.environ.get(IN_TURN_ENV)
    return bool(marker) and marker != str(os.getpid())


def person(via: Via, detail: str = "") -> PersonEvent:
    """The person's event from a magic, the panel, the CLI, a server request or a dialog.

    Raises :class:`TrustRefused` while a turn runs: a trust change made then would come
    from code the model runs, not from the person.
    """
    if via not in VIAS or via == "card":
        raise ValueError(f"via is one of {', '.join(v for v in VIAS if v != 'card')}, not {via!r}")
    if inside_turn() or started_by_turn():
        raise TrustRefused(
            "Trust changes (clearing a taint, trusting a tool, binding a secret to a host, enabling a "
            "tainted job) come from the person, not from code running inside an agent turn. Run it in "
            "your own cell after the turn, or use the Agent panel or the agent-kernel CLI."
        )
    return PersonEvent(via, detail)


def card_click(tool: str, answer: str) -> PersonEvent:
    """The event of a click on an approval card: the person answered ``answer`` about a
    call of ``tool``. Only the approval card's click handler makes these."""
    return PersonEvent("card", f"{answer} on {tool}")
