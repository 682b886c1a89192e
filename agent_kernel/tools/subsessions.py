"""Sub-sessions (group ``llm``): ``spawn_session``, ``wait_for_sessions``, ``report_result``.

A tool cannot start a turn (the loop sits above the tools), so the turn hands its tool
context a :class:`~.context.SubSessionHost` that does: the agent implements it (see
:mod:`agent_kernel.turn.subsessions`). These functions check the input and say what went
wrong in words the model can act on.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from typing_extensions import TypedDict

from agent_kernel.errors import ToolInputError
from agent_kernel.store.subsessions import ChildOutcome
from agent_kernel.tools import Tool, current_context
from agent_kernel.tools.context import SubSessionHost

__all__ = ["TASK_CHARS", "TOOLS"]

TASK_CHARS = 100_000
RESULT_CHARS = 100_000
MAX_IDS = 50
ID_CHARS = 64  # a sub-session id is 32 hex digits
MODEL_CHARS = 200


class SessionResults(TypedDict):
    """``wait_for_sessions``'s reply: each sub-session's outcome, in the order asked."""

    results: list[ChildOutcome]


class Reported(TypedDict):
    """``report_result``'s reply."""

    ok: bool


async def spawn_session(
    task: Annotated[str, Field(min_length=1, max_length=TASK_CHARS)],
    model: Annotated[str, Field(min_length=1, max_length=MODEL_CHARS)] | None = None,
    token_limit: Annotated[int, Field(gt=0)] | None = None,
) -> dict[str, object]:
    """Start a sub-session that works on `task` alongside you; returns at once with its id,
    model and the token limit it got.

    The sub-session is a full agent with your system prompt, tools, kernel, state and
    database; it ends by calling report_result. Run several for independent pieces of work,
    then collect their results with wait_for_sessions. Live run_code calls of all sessions
    take turns (one at a time); isolated ones run side by side. Its tokens and cost count
    against your own limits.

    Args:
        task: The complete instruction: the sub-session sees only this, not your conversation.
        model: One of the configured models; default: yours.
        token_limit: Tokens it may use (input + output) before it stops; capped at the
            configured sub-session limit and at what you have left.
    """
    ctx = current_context()
    host = _host(ctx)
    return host.spawn(task, model, token_limit)


async def wait_for_sessions(
    ids: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=ID_CHARS)]], Field(min_length=1, max_length=MAX_IDS)
    ],
) -> SessionResults:
    """Wait until the given sub-sessions have finished and return their results.

    status is completed (result: what it reported), error (error says why, e.g. timed out)
    or token_limit_reached (result: its last text, partial; error: whose limit stopped it).

    Args:
        ids: Ids that spawn_session returned.
    """
    ctx = current_context()
    host = _host(ctx)
    return {"results": await host.wait(list(dict.fromkeys(ids)))}


async def report_result(result: Annotated[str, Field(max_length=RESULT_CHARS)]) -> Reported:
    """Only in a sub-session: hand your result to the session that started you and end.

    Nothing runs after this call; put everything the parent needs in `result`.

    Args:
        result: Your findings, complete.
    """
    ctx = current_context()
    host = ctx.sessions
    if host is None or host.depth == 0:
        raise ToolInputError(
            "report_result is only for sub-sessions (started with spawn_session); this is a "
            "top-level session: answer the user directly instead."
        )
    ctx.report.end_session(result)
    return {"ok": True}


def _host(ctx: Any) -> SubSessionHost:
    host: SubSessionHost | None = ctx.sessions
    if host is None:
        raise ToolInputError("Sub-sessions are not available here (no agent turn is running them).")
    return host


TOOLS = [
    Tool(spawn_session, name="spawn_session", group="llm", writes=True),
    Tool(wait_for_sessions, name="wait_for_sessions", group="llm"),
    Tool(report_result, name="report_result", group="llm"),
]
