"""Approval modes: which tool calls may run without a person saying yes.

- ``auto``: every offered tool runs.
- ``ask``: a tool that writes (runs code, changes data, schedules) runs only after an
  *approver* says yes. Without an approver (no front end, papermill) it is refused.
- ``read-only``: only reading tools are offered, and a writing tool is refused.

Once untrusted web content entered the turn (``web_search``, ``web_fetch``, ``fetch_url``
results; see :mod:`agent_kernel.tools.web`), instructions hidden in it could be steering
the model. From then on, in ``ask`` mode a writing tool asks every time, whatever
"Always for this session" said, and the web group's tools (which send requests out)
count as writing too, except ``fetch_url`` to a host the turn already fetched from (and
so does ``browser_navigate``, except to a host the browser already showed this turn);
without an approver they are refused.

Agent-defined tools are model-written code: one counts as writing unless the sandbox
enforces its read-only claim or the person trusted that version as read-only (see
:class:`agent_kernel.tools.agent_tools.StoredTool`). One that another session wrote after
reading untrusted content (its provenance is tainted) asks before it runs, in every mode,
``auto`` included; *Trust* clears the taint, and with nobody to ask it is refused. Only
the session that wrote it after reading that content runs it unasked.

The check runs in the dispatcher, so it holds however a tool is called.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agent_kernel.authority import card_click

if TYPE_CHECKING:
    from agent_kernel.display.waiting import Nobody
    from agent_kernel.store.provenance import Record
    from agent_kernel.tools import Tool
    from agent_kernel.tools.context import ToolContext

# Asks the person about one call (tool name, input, the turn; for an agent-defined tool
# also ``stored=`` its StoredCode) and returns their answer: "run", "skip", "always",
# "read_only" or "trust" (for a stored tool), or Nobody (with the reason) when no one can.
Approver = Callable[..., Awaitable["str | Nobody"]]
# The dispatcher's check: None to allow the call, or the reason it was refused.
Check = Callable[["Tool", Any, "ToolContext"], Awaitable[str | None]]


def make_check(
    mode: str, approver: Approver | None = None, always: dict[str, set[str]] | None = None
) -> Check:
    """The dispatcher's check for ``mode``.

    ``always`` maps a session id to the tools the person allowed for the rest of that
    session (kept by the caller across turns).
    """
    allowed_for = always if always is not None else {}

    async def check(item: Tool, tool_input: Any, context: ToolContext) -> str | None:
        web_read = context.turn_sources()
        sends_out = bool(web_read) and (item.group == "web" or item.name == "browser_navigate")
        # Whether the call writes is asked only where the mode needs it: for db_sql it
        # parses the statement, which an auto turn has no use for.
        writes = mode != "auto" and item.writes_for(tool_input)
        if mode == "read-only" and (sends_out or writes):
            return (
                f"{item.name} changes things and this turn is read-only (--approve read-only). "
                "Use reading tools only, or tell the user what you would run." + web_note(web_read)
            )
        planted = await planted_origin(item, context)
        if planted is not None:
            return await review_planted(item, tool_input, context, planted, approver)
        if mode == "ask" and item.asks_in_notebook:
            return None  # the tool itself waits for the person's Accept on the notebook's diff
        if mode == "auto" or not (writes or (sends_out and not fetched_before(item, tool_input, web_read))):
            return None
        if approver is None:
            return no_approval(item.name) + web_note(web_read)
        allowed = allowed_for.setdefault(context.session_id, set())
        if item.name in allowed and not web_read:
            return None
        answer = await _ask(approver, item, tool_input, context)
        if answer == "skip":
            return declined(item.name)
        if answer == "always":
            allowed.add(item.name)
        elif answer == "read_only" and getattr(item, "claims_read_only", False):
            await trust_read_only(item, context)
        elif answer != "run":
            return no_approval(item.name, getattr(answer, "reason", ""))  # Nobody
        return None

    return check


async def _ask(approver: Approver, item: Tool, tool_input: Any, context: ToolContext, origin: str | None = None) -> Any:
    """The person's answer about one call; an agent-defined tool's card shows its code."""
    from agent_kernel.display.approval import StoredCode
    from agent_kernel.tools.agent_tools import StoredTool

    if not isinstance(item, StoredTool):
        return await approver(item.name, tool_input, context)
    shown = StoredCode(item.stored.version, item.stored.code, origin, item.claims_read_only and origin is None)
    return await approver(item.name, tool_input, context, stored=shown)


def fetched_before(item: Tool, tool_input: Any, sources: list[str]) -> bool:
    """Whether ``item`` is ``fetch_url`` (or ``browser_navigate``) to a host this turn
    already read from (its successful reads are among the turn's untrusted ``sources``)."""
    prefixes = {("fetch_url", "web"): "fetch_url ", ("browser_navigate", "browser"): "browser "}
    prefix = prefixes.get((item.name, item.group))
    if prefix is None or not isinstance(tool_input, dict):
        return False
    wanted = _host(tool_input.get("url"))
    return wanted is not None and any(
        _host(s[len(prefix):]) == wanted for s in sources if s.startswith(prefix)
    )


def _host(url: Any) -> tuple[str, int] | None:
    """An http(s) URL's host and port (the scheme's default when none is given)."""
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    return parts.hostname.lower().rstrip("."), port or (443 if parts.scheme.lower() == "https" else 80)


async def planted_origin(item: Tool, context: ToolContext) -> Record | None:
    """The provenance of ``item`` when it is an agent-defined tool another session wrote
    after reading untrusted content, not yet cleared by the person; else None."""
    from agent_kernel.store import provenance
    from agent_kernel.tools.agent_tools import StoredTool
    from agent_kernel.tools.data import with_connection

    if not isinstance(item, StoredTool):
        return None
    found = await with_connection(context.store, lambda con: provenance.latest(con, "tool", [item.name]).get(item.name))
    if found is None or not found.tainted or steered_writer(found, context):
        return None
    return found


def steered_writer(origin: Record, context: Any) -> bool:
    """Whether ``context``'s session wrote the tainted item ``origin`` and has itself read
    untrusted content: what could have steered the writing can steer it anyway, so running
    the item adds nothing. A session that only edited an item tainted before it has not
    read that content, so it is asked like any other."""
    return origin.session_id == context.session_id and bool(context.session_sources())


async def review_planted(
    item: Tool, tool_input: Any, context: ToolContext, origin: Record, approver: Approver | None
) -> str | None:
    """Ask the person to trust a planted tool before its first run here (None: it may run)."""
    from agent_kernel.store import provenance
    from agent_kernel.tools.data import with_connection

    label = origin.provenance().label()
    if approver is None:
        return planted_refusal(item.name, label)
    answer = await _ask(approver, item, tool_input, context, origin=label)
    if answer == "trust":
        by = card_click(item.name, "trust")
        await with_connection(context.store, lambda con: provenance.clear(con, "tool", item.name, by=by))
        return None
    if answer == "skip":
        return declined(item.name)
    return planted_refusal(item.name, label, getattr(answer, "reason", ""))


async def trust_read_only(item: Tool, context: ToolContext) -> None:
    """The person trusted this version of a stored tool as read-only: keep their grant."""
    from agent_kernel.store.agent_tools import AgentTools
    from agent_kernel.tools.data import with_connection

    version = item.stored.version  # type: ignore[attr-defined]
    by = card_click(item.name, "read_only")
    await with_connection(context.store, lambda con: AgentTools(con).trust_read_only(item.name, version, by=by))
    context.report.changed_tools()  # offered as reading from the next call on


def planted_refusal(name: str, label: str, reason: str = "") -> str:
    """The refusal of a tainted tool nobody reviewed."""
    why = f" ({reason})" if reason else ""
    return (
        f"{name} was {label}; it runs in another session only after the user reviews and trusts it, "
        f"and no user is present to do that{why}. Do not retry; do the work with other tools, or tell "
        f"the user to review it (%agent_tainted) and clear it with `%agent_tainted --clear tool {name}`."
    )


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
        f" Untrusted content (web, MCP, kept text) was read in this turn ({describe_sources(sources)}); after that, writing "
        "tools, and fetch_url to a host not yet fetched in this turn, need the user's approval each time."
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
