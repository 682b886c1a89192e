"""When has a turn failed? One rule for the cell, papermill, the scheduler and scripts.

A turn *ended normally* when the model ended it: it answered, also after tools that
failed and code that raised on the way (those are results the model acted on), and also
when the answer was cut off at ``max_tokens`` (a warning says so).

A turn *failed* when it ended any other way; :data:`FAILED_ENDINGS` names those ways. The
loop records how a turn ended in ``TurnResult.ending`` and, for a failure, the one line the
user sees in ``TurnResult.error``. From that:

- an ``%agent`` cell raises :class:`~agent_kernel.errors.TurnFailedError` with that line
  (no traceback; the turn's footer above it, so the line is the cell's last), so a live notebook shows the cell as failed and papermill, nbclient and
  ``jupyter nbconvert --execute`` stop there; a turn that ended normally never fails its
  cell;
- a scheduled run is FAILED exactly when one of its cells failed, with that line as the
  run's error (see ``scheduler/runner.py``);
- ``Agent.run()`` / ``Agent.arun()`` return the :class:`~agent_kernel.turn.loop.TurnResult`
  either way: scripts look at ``result.failed`` and ``result.error``.
"""

from __future__ import annotations

from typing import Protocol

from agent_kernel.errors import TurnFailedError


class Ended(Protocol):
    """How a turn ended, as :class:`agent_kernel.turn.loop.TurnResult` records it."""

    ending: str
    error: str | None


NORMAL = "end_turn"

FAILED_ENDINGS = {
    "model_error": "the model could not be reached or refused the request (or no API key)",
    "stopped": "the Stop button",
    "interrupted": "a kernel interrupt (Ctrl-C, Interrupt in the front end)",
    "token_limit": "the session's token limit, with nobody pressing Continue",
    "call_limit": "the turn made AgentKernel.max_model_calls model calls",
    "cost_limit": "the session's cost limit (AgentKernel.cost_limit), with nobody pressing Continue",
}


def failure(result: Ended) -> str | None:
    """The line saying why ``result``'s turn failed, or ``None`` when it ended normally."""
    if result.ending not in FAILED_ENDINGS:
        return None
    return result.error or f"The agent turn did not finish ({result.ending})."


def raise_if_failed(result: Ended, *, footer: str | None = None) -> None:
    """Raise :class:`TurnFailedError` when the turn failed (what an ``%agent`` cell does).

    ``footer``: the turn's footer, which the cell then shows with the failure's line, so
    that the line ("■ Stopped.") is the cell's last.
    """
    line = failure(result)
    if line is not None:
        raise TurnFailedError(line, result.ending, footer=footer)
