"""``TurnRequest``: what one turn is asked to do, as its caller said it.

Every way into a turn builds one: the ``%agent`` parser (:func:`agent_kernel.magics.agent.
parse_agent_call`), :meth:`Agent.run <agent_kernel.turn.agent.Agent.run>` and ``arun`` from
their keyword arguments, and a session starting a sub-session. The turn reads it as given;
whatever it leaves out (``None``) comes from the session and the settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_kernel.model.shapes import ContentBlock

__all__ = ["TurnRequest", "run_request"]


@dataclass(frozen=True)
class TurnRequest:
    """One turn's prompt and the options its caller chose for it."""

    prompt: str
    # Start a fresh session (called ``new`` when a string; an earlier one of that name is
    # kept as NAME~1), or continue the session called ``session``; neither: the current one.
    new: str | bool | None = None
    session: str | None = None
    model: str | None = None  # over the session's model and AgentKernel.model
    token_limit: int | None = None  # the session's token limit from this turn on
    approve: str | None = None  # an approval mode (config.APPROVE_MODES) over AgentKernel.approve
    # Thinking for this turn: True (adaptive, or the setting's level), a level, False/"off".
    thinking: str | bool | None = None
    # Raise TurnFailedError when the turn does not end normally (as an %agent cell fails).
    check: bool = False
    # The kernel variable that gets the final text (or the JSON it holds) once the turn ended
    # normally (``%agent -o VAR``).
    output: str | None = None
    # Content blocks sent after the prompt in the same user message (text and image blocks
    # the Agent panel attaches: a cell, an output, a file); scrubbed with the prompt.
    attachments: tuple[ContentBlock, ...] = ()


def run_request(prompt: str, **options: Any) -> TurnRequest:
    """The request :meth:`Agent.run <agent_kernel.turn.agent.Agent.run>` makes of its keyword
    arguments (those of ``Agent.arun``)."""
    known = {"new", "session", "model", "token_limit", "approve", "check", "thinking"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(f"Agent.run() got an unexpected keyword argument {unknown[0]!r}")
    return TurnRequest(prompt, **options)
