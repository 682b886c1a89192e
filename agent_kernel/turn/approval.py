"""Approval modes: which tool calls may run without a person saying yes.

- ``auto``: every offered tool runs, until the session reads untrusted content (below).
- ``ask``: a tool that writes (runs code, changes data, schedules) runs only after an
  *approver* says yes. Without an approver (no front end, papermill) it is refused.
- ``read-only``: only reading tools are offered, and a writing tool is refused.

**Taint belongs to the session.** Once untrusted content entered the session
(``web_search``, ``web_fetch``, ``fetch_url`` results, MCP results, kept text written after
such content; see :mod:`agent_kernel.tools.web`), in this turn or an earlier one, or in the
session that started a sub-session, instructions hidden in it could be steering the model.
Every rule below reads the session's sources (:meth:`ToolContext.session_sources`), never
only the turn's:

- **After untrusted content, writing actions ask, in ``auto`` too.** A call that writes
  (:meth:`Tool.writes_for`) asks the approver every time, "Always for this session"
  included: in-kernel ``run_code``, creating, editing, enabling or deleting tools,
  libraries, skills, components and jobs, cell edits that run (``run: true``; a cell
  written without running carries the untrusted mark, which JupyterLab shows and a
  scheduled run honours), writing stored tools, MCP tools that
  write, the browser's clicks and typing, ``fetch_url`` with a body. Not asked in ``auto``
  are writes that stay data the next turns read as data (:data:`KEPT_AS_DATA`: memories,
  the notepad, stored instructions, ``agent_state``, ``ai_*`` tables: provenance marks them
  and later turns see them inside the untrusted envelope), ``spawn_session`` (its child
  inherits the taint and this check), and ``run_code`` with ``isolated: true`` where that
  runs in the bubblewrap sandbox (no network, files or database).
- **Egress to a host the session has not reached asks**, in every mode but read-only
  (which refuses it): ``fetch_url`` (and ``browser_navigate``) to a host the session did
  not already read from.
- With nobody to approve (no front end, papermill, a scheduled run) such a call is
  refused with a message the model can act on, unless the run's standing grants
  (:func:`agent_kernel.grants.standing`, set by the person on the job) name that tool or
  host. Grants widen nothing when a person is present, and never lift ``ask`` mode's own
  rule.

A session that read nothing untrusted asks nothing new in ``auto``: local analysis stays
prompt-free.

Agent-defined tools are model-written code: one counts as writing unless the sandbox
enforces its read-only claim or the person trusted that version as read-only (see
:class:`agent_kernel.tools.agent_tools.StoredTool`). One that another session wrote after
reading untrusted content (its provenance is tainted) asks before it runs, in every mode,
``auto`` included; *Trust* clears the taint, and with nobody to ask it is refused. Only
the session that wrote it after reading that content runs it unasked (where the rules
above allow). Trust changes made from the card (*Trust*, *Trust as read-only*) carry the
click's :class:`~agent_kernel.authority.PersonEvent`.

The check runs in the dispatcher, so it holds however a tool is called.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from agent_kernel.authority import PersonEvent, card_click
from agent_kernel.display.approval import StoredCode
from agent_kernel.display.presence import PRESENCE
from agent_kernel.grants import standing
from agent_kernel.store import provenance
from agent_kernel.store.agent_tools import AgentTools
from agent_kernel.tools.agent_tools import StoredTool
from agent_kernel.tools.data import with_connection
from agent_kernel.tools.isolation import isolation
from agent_kernel.turn.secret_hosts import check_secret_hosts

if TYPE_CHECKING:
    from agent_kernel.display.waiting import Nobody
    from agent_kernel.grants import StandingGrants
    from agent_kernel.store.provenance import Record
    from agent_kernel.tools import Tool
    from agent_kernel.tools.context import ToolContext

# Asks the person about one call (tool name, input, the turn; for an agent-defined tool
# also ``stored=`` its StoredCode) and returns their answer: "run", "skip", "always",
# "read_only" or "trust" (for a stored tool), or Nobody (with the reason) when no one can.
# The card's answers "trust" and "read_only" carry the click's event (``answer.event``).
Approver = Callable[..., Awaitable["str | Nobody"]]
# The dispatcher's check: None to allow the call, or the reason it was refused.
Check = Callable[["Tool", object, "ToolContext"], Awaitable[str | None]]

# Built-in writing tools (name, group) whose writes stay data that later turns read as
# data (provenance marks what they keep after untrusted content): not asked in ``auto``
# after untrusted content. spawn_session starts a child that inherits the session's
# sources and this check, so the child's own writing calls ask.
KEPT_AS_DATA = frozenset({
    ("memory", "memory"), ("edit_system_prompt", "memory"), ("write_notepad", "skills"),
    ("update_notepad", "skills"), ("set_state", "data"), ("delete_state", "data"), ("db_sql", "data"),
    ("spawn_session", "llm"),
})  # fmt: skip
TAINTED_ASKS = "read untrusted content: writing actions ask"
TAINTED_REFUSED = "read untrusted content: writing actions are refused: nobody can approve"


def make_check(mode: str, approver: Approver | None = None, always: dict[str, set[str]] | None = None) -> ApprovalCheck:
    """The dispatcher's check for ``mode``.

    ``always`` maps a session id to the tools the person allowed for the rest of that
    session (kept by the caller across turns).
    """
    return ApprovalCheck(mode, approver, always if always is not None else {})


class ApprovalCheck:
    """The dispatcher's check (a :data:`Check`) for one approval mode and approver."""

    def __init__(self, mode: str, approver: Approver | None, always: dict[str, set[str]]) -> None:
        self.mode = mode
        self.approver = approver
        self.allowed_for = always

    def attended(self, context: ToolContext) -> bool:
        """Whether someone may answer an approval in this turn (for the turn's header)."""
        if self.approver is None:
            return False
        return PRESENCE.nobody(context) is None

    def tainted_notice(self, context: ToolContext) -> str | None:
        """The header line of a turn whose session read untrusted content (None in
        read-only, where writing actions are not offered at all)."""
        if self.mode == "read-only":
            return None
        if self.attended(context):
            return TAINTED_ASKS
        grants = standing()
        return f"{TAINTED_REFUSED} (standing grants: {grants.describe()})" if grants else TAINTED_REFUSED

    async def __call__(self, item: Tool, tool_input: object, context: ToolContext) -> str | None:
        mode, approver = self.mode, self.approver
        refusal = await check_secret_hosts(item, tool_input, context, approver)
        if refusal is not None:
            return refusal
        read = context.session_sources()
        egress = bool(read) and sends_out(item)
        new_host = egress and not fetched_before(item, tool_input, read)
        # Whether the call writes is asked only where the mode or the taint needs it: for
        # db_sql it parses the statement, which a clean auto session has no use for.
        writes = (mode != "auto" or bool(read)) and item.writes_for(tool_input)
        if mode == "read-only" and (egress or writes):
            return (
                f"{item.name} changes things and this turn is read-only (--approve read-only). "
                "Use reading tools only, or tell the user what you would run." + web_note(read)
            )
        planted = await planted_origin(item, context)
        if planted is not None:
            return await review_planted(item, tool_input, context, planted, approver)
        if mode == "ask" and item.asks_in_notebook:
            return None  # the tool itself waits for the person's Accept on the notebook's diff
        acts = bool(read) and writes and acts_after_untrusted(item, tool_input)
        asked_by_mode = mode == "ask" and writes
        if not (asked_by_mode or acts or new_host):
            return None
        allowed = self.allowed_for.setdefault(context.session_id, set())
        if item.name in allowed and not read:
            return None
        answer: str | Nobody | None = None
        if approver is not None:
            answer = await _ask(approver, item, tool_input, context)
            if answer in ("run", "always", "skip", "read_only"):
                return await self._answered(answer, item, context, allowed, tainted=bool(read))
        if not asked_by_mode and granted(item, tool_input, acts=acts, new_host=new_host):
            return None  # nobody answered, and the person allowed it in advance (a job's grants)
        reason = getattr(answer, "reason", "")  # Nobody
        if mode == "auto":
            charts = "ui" in getattr(context.settings, "tool_groups", ())
            return untrusted_refusal(item, read, reason, new_host=new_host and not acts, charts=charts)
        return no_approval(item.name, reason) + web_note(read)

    async def _answered(
        self, answer: str, item: Tool, context: ToolContext, allowed: set[str], *, tainted: bool
    ) -> str | None:
        """What the person's answer about a call means: None to run it, or the refusal."""
        if answer == "skip":
            return declined(item.name)
        if answer == "always" and not tainted:  # "Always" is void once the session is tainted
            allowed.add(item.name)
        elif answer == "read_only":
            if not getattr(item, "claims_read_only", False):
                return no_approval(item.name, "Trust as read-only applies to a tool that says it changes nothing")
            await trust_read_only(item, context, _event(answer, item.name))
        return None


def sends_out(item: Tool) -> bool:
    """Whether ``item`` sends requests from the kernel to a host the call names."""
    return item.group == "web" or (item.name, item.group) == ("browser_navigate", "browser")


def acts_after_untrusted(item: Tool, tool_input: object) -> bool:
    """Whether a writing call asks once the session read untrusted content: all but the
    writes that stay data (:data:`KEPT_AS_DATA`), cell edits that do not run, and
    ``run_code`` isolated in the sandbox."""
    if (item.name, item.group) in KEPT_AS_DATA:
        return False
    if item.asks_in_notebook and not (isinstance(tool_input, dict) and tool_input.get("run") is True):
        return False  # a cell edit that does not run: the cell carries the untrusted mark
    return not sandboxed_run(item, tool_input)


def sandboxed_run(item: Tool, tool_input: object) -> bool:
    """Whether the call is ``run_code`` with ``isolated: true`` and that runs in the
    bubblewrap sandbox (a plain separate process can read the user's files: it writes)."""
    if (item.name, item.group) != ("run_code", "code") or not isinstance(tool_input, dict):
        return False
    if tool_input.get("isolated") is not True:
        return False
    return isolation().sandboxed


def granted(item: Tool, tool_input: object, *, acts: bool, new_host: bool) -> bool:
    """Whether this run's standing grants allow the call with nobody present: the writing
    tool (when it asks for being one) and the host (when it is a new one) are both named."""
    grants = standing()
    if not grants:
        return False
    if acts and not grants.allows_tool(item.name):
        return False
    return not new_host or _granted_host(grants, tool_input)


def _granted_host(grants: StandingGrants, tool_input: object) -> bool:
    wanted = _host(tool_input.get("url")) if isinstance(tool_input, dict) else None
    return wanted is not None and grants.allows_host(wanted[0])


def _event(answer: object, tool: str) -> PersonEvent:
    """The person's event of a card's answer: the one the card made where the click was
    received, or (an approver of the Python API) one made now from the answer."""
    event = getattr(answer, "event", None)
    return event if isinstance(event, PersonEvent) else card_click(tool, str(answer))


async def _ask(
    approver: Approver, item: Tool, tool_input: object, context: ToolContext, origin: str | None = None
) -> str | Nobody:
    """The person's answer about one call; an agent-defined tool's card shows its code."""
    if not isinstance(item, StoredTool):
        return await approver(item.name, tool_input, context)
    shown = StoredCode(item.stored.version, item.stored.code, origin, item.claims_read_only and origin is None)
    return await approver(item.name, tool_input, context, stored=shown)


def fetched_before(item: Tool, tool_input: object, sources: list[str]) -> bool:
    """Whether ``item`` is ``fetch_url`` (or ``browser_navigate``) to a host this session
    already read from (its successful reads are among the session's untrusted ``sources``)."""
    prefixes = {("fetch_url", "web"): "fetch_url ", ("browser_navigate", "browser"): "browser "}
    prefix = prefixes.get((item.name, item.group))
    if prefix is None or not isinstance(tool_input, dict):
        return False
    wanted = _host(tool_input.get("url"))
    return wanted is not None and any(_host(s[len(prefix) :]) == wanted for s in sources if s.startswith(prefix))


def _host(url: object) -> tuple[str, int] | None:
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
    if not isinstance(item, StoredTool):
        return None
    found = await with_connection(context.store, lambda con: provenance.latest(con, "tool", [item.name]).get(item.name))
    if found is None or not found.tainted or steered_writer(found, context):
        return None
    return found


def steered_writer(origin: Record, context: ToolContext) -> bool:
    """Whether ``context``'s session wrote the tainted item ``origin`` and has itself read
    untrusted content: what could have steered the writing can steer it anyway, so running
    the item adds nothing. A session that only edited an item tainted before it has not
    read that content, so it is asked like any other."""
    return origin.session_id == context.session_id and bool(context.session_sources())


async def review_planted(
    item: Tool, tool_input: object, context: ToolContext, origin: Record, approver: Approver | None
) -> str | None:
    """Ask the person to trust a planted tool before its first run here (None: it may run)."""
    label = origin.provenance().label()
    if approver is None:
        return planted_refusal(item.name, label)
    answer = await _ask(approver, item, tool_input, context, origin=label)
    if answer == "trust":
        by = _event(answer, item.name)
        await with_connection(context.store, lambda con: provenance.clear(con, "tool", item.name, by=by))
        return None
    if answer == "skip":
        return declined(item.name)
    return planted_refusal(item.name, label, getattr(answer, "reason", ""))


async def trust_read_only(item: Tool, context: ToolContext, by: PersonEvent) -> None:
    """The person trusted this version of a stored tool as read-only (``by``: their click):
    keep their grant."""
    version = item.stored.version  # type: ignore[attr-defined]
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


def untrusted_refusal(item: Tool, sources: list[str], reason: str = "", *, new_host: bool, charts: bool = False) -> str:
    """The refusal, in ``auto`` with nobody to approve, of a writing action (or a request to a
    new host) after the session read untrusted content: what the model may do instead
    (``charts``: render_blocks is offered)."""
    why = f" ({reason})" if reason else ""
    if new_host:
        what = f"{item.name} to a host this session has not read from"
        instead = "Work with what you already fetched, or tell the user which URL you need."
    else:
        what = f"{item.name} changes things"
        instead = "Do not retry; tell the user what you would run, or use reading tools."
        if (item.name, item.group) == ("run_code", "code"):
            instead = "Do not retry; " + _without_kernel_code(charts)
    return (
        f"{what}, and this session read untrusted content ({describe_sources(sources)}): after that, "
        f"writing actions need the user's approval, and no user is present to give it{why}. {instead} "
        "(A scheduled job's owner can allow a tool or host in advance: agent-kernel jobs enable ID "
        "--allow-after-untrusted TOOL --allow-host HOST.)"
    )


def _without_kernel_code(charts: bool) -> str:
    """What a refused in-kernel run_code can do instead, on this machine."""
    ways = "show a chart or table of what you read with render_blocks (no approval needed), " if charts else ""
    if isolation().sandboxed:
        ways += (
            "compute on it with run_code and `isolated: true` (a sandbox with no network, files, database "
            "or kernel variables; no approval needed), "
        )
    return ways + "or tell the user what you would run."


def web_note(sources: list[str]) -> str:
    """What a refusal adds when untrusted content was read in the session (empty when none was)."""
    if not sources:
        return ""
    return (
        f" Untrusted content (web, MCP, kept text) was read in this session ({describe_sources(sources)}); after that, "
        "writing tools, and fetch_url to a host not yet fetched in this session, need the user's approval each time."
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
