"""Approval modes: which tool calls may run without a person saying yes.

- ``auto``: every offered tool runs.
- ``ask``: a tool that writes (runs code, changes data, schedules) runs only after an
  *approver* says yes. Without an approver (no front end, papermill) it is refused.
- ``read-only``: only reading tools are offered, and a writing tool is refused.

Once untrusted web content entered the turn (``web_search``, ``web_fetch``, ``fetch_url``
results; see :mod:`agent_kernel.tools.web`), instructions hidden in it could be steering
the model. From then on, in ``ask`` mode a writing tool asks every time, whatever
"Always for this session" said, and the web group's own ``fetch_url`` (which sends
requests out) counts as writing too; without an approver both are refused.

The check runs in the dispatcher, so it holds however a tool is called.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .display.waiting import Nobody, TurnWaits
    from .tools import Tool
    from .tools.context import ToolContext

# Asks the person about one call (tool name, input, the turn) and returns their answer:
# "run", "skip", "always", or Nobody (with the reason) when no one can answer.
Approver = Callable[[str, Any, "TurnWaits"], Awaitable["str | Nobody"]]
# The dispatcher's check: None to allow the call, or the reason it was refused.
Check = Callable[["Tool", Any, "ToolContext"], Awaitable[str | None]]


def make_check(
    mode: str, approver: Approver | None = None, always: dict[str, set[str]] | None = None
) -> Check | None:
    """The dispatcher's check for ``mode``; ``None`` when every call may run.

    ``always`` maps a session id to the tools the person allowed for the rest of that
    session (kept by the caller across turns).
    """
    if mode == "auto":
        return None
    allowed_for = always if always is not None else {}

    async def check(item: Tool, tool_input: Any, context: ToolContext) -> str | None:
        web_read = list(getattr(context, "untrusted", ()))
        sends_out = bool(web_read) and item.group == "web"
        if not (sends_out or item.writes_for(tool_input)):
            return None
        if mode == "read-only":
            return (
                f"{item.name} changes things and this turn is read-only (--approve read-only). "
                "Use reading tools only, or tell the user what you would run." + web_note(web_read)
            )
        if approver is None:
            return no_approval(item.name) + web_note(web_read)
        allowed = allowed_for.setdefault(context.session_id, set())
        if item.name in allowed and not web_read:
            return None
        answer = await approver(item.name, tool_input, context)
        if answer == "skip":
            return declined(item.name)
        if answer == "always":
            allowed.add(item.name)
        elif answer != "run":
            return no_approval(item.name, getattr(answer, "reason", ""))  # Nobody
        return None

    return check


def no_approval(name: str, reason: str = "") -> str:
    """The refusal of a writing tool when nobody can approve it."""
    why = f" ({reason})" if reason else ""
    return (
        f"{name} needs the user's approval (--approve ask) and no user is present "
        f"to approve it{why}. Do not retry; explain what you would run instead."
    )


def web_note(sources: list[str]) -> str:
    """What a refusal adds when web content was read in the turn (empty when none was)."""
    if not sources:
        return ""
    return (
        f" Web content was read in this turn ({describe_sources(sources)}); after that, writing "
        "tools and fetch_url need the user's approval each time."
    )


def describe_sources(sources: list[str], limit: int = 3) -> str:
    """The first few sources of untrusted content, for a card or a refusal."""
    shown = "; ".join(s[:100] for s in sources[:limit])
    return shown + (f"; and {len(sources) - limit} more" if len(sources) > limit else "")


def declined(name: str) -> str:
    """The refusal of a writing tool the person chose to skip."""
    return (
        f"The user declined to run {name} (they clicked Skip). Do not run it again unchanged; "
        "ask what they want instead, or go on without it."
    )
