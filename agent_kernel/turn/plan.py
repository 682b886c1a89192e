"""What a session's turn runs with, made from what it starts from.

:func:`plan_turn` turns a :class:`~agent_kernel.turn.start.TurnStart` (the session and what
was read of it) and the request into the :class:`~agent_kernel.turn.assemble.TurnPlan` the
assembler builds the loop's turn from: the limits, the system prompt, the prompt with the
turn's context (the namespace, the notepad, the previous session's summary), the history,
the context budget. The session summaries due when the turn starts are made here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from agent_kernel.display.components import take_notes
from agent_kernel.kernel.cells import section_untrusted
from agent_kernel.kernel.cells import turn_section as notebook_cells
from agent_kernel.model import conversation
from agent_kernel.model.usage import InputEstimate
from agent_kernel.tools.context import UntrustedReads
from agent_kernel.turn import summaries
from agent_kernel.turn.assemble import Assembler, TurnPlan
from agent_kernel.turn.prompt import assemble, turn_context
from agent_kernel.turn.summaries import RecallStart

if TYPE_CHECKING:
    from agent_kernel.display.transcript import Transcript
    from agent_kernel.tools import Tool
    from agent_kernel.turn.budget import Observed
    from agent_kernel.turn.request import TurnRequest
    from agent_kernel.turn.start import TurnStart

__all__ = ["plan_turn", "previous_section"]


async def plan_turn(
    request: TurnRequest,
    start: TurnStart,
    builder: Assembler,
    view: Transcript | None,
    *,
    offered: list[Tool],
    mode: str,
    level: str,
    mcp_failures: list[str],
    budget_seen: dict[str, Observed],
    refresh_tools: Callable[[], list[Tool]],
) -> tuple[TurnPlan, Transcript]:
    """What the turn runs with (the approval check is the caller's) and the transcript it
    shows in (``view``, else a new one). ``offered``: the tools, in approval ``mode``;
    ``level``: the thinking level; ``mcp_failures``: the MCP servers that did not start,
    said in the cell and in the turn's context; ``budget_seen``: what the context budget
    keeps between turns."""
    parts = builder.parts
    settings = parts.settings
    current = start.session
    groups = {t.group for t in offered}
    limits = builder.limits(request, current, thinking=level)
    written = await _write_summaries(start.recall, builder)
    transcript = view if view is not None else builder.transcript(request)
    context_block = turn_context(
        start.conversation.known,
        settings=settings,
        shell=parts.shell,
        groups=groups,
        notepad=start.notepad,
        notes=[*mcp_failures, *take_notes(current.id)],
        previous_session=previous_section(start.recall, written),
        cells=notebook_cells(parts.shell) if groups else "",
    )
    for line in mcp_failures:
        transcript.notice(line, kind="error")
    if start.resolved.kept_as:
        transcript.notice(
            f"New session {current.name!r}; the earlier one is kept as {start.resolved.kept_as!r} "
            f"(%agent --session {start.resolved.kept_as} continues it).",
            kind="muted",
        )
    spent = start.usage
    budget = builder.budget(limits, current, list(start.compactions), budget_seen)
    secrets = parts.secrets.names() if parts.secrets is not None else ()
    plan = TurnPlan(
        session_id=current.id,
        session_name=current.name,
        number=start.last_turn + 1,
        tools=offered,
        system=assemble(start.sections, groups=groups, secrets=secrets, search=settings.tool_search),
        approve=mode,
        limits=limits,
        prompt_blocks=[context_block, *conversation.as_blocks(request.prompt), *request.attachments],
        history=start.history(),
        refresh_tools=refresh_tools,
        reads=UntrustedReads(
            earlier=current.untrusted_sources, this_turn=section_untrusted(parts.shell) if groups else []
        ),
        session_tokens=current.tokens_used,
        session_cost=spent.cost,
        estimate=InputEstimate(spent.last_prompt_tokens, spent.last_request_chars or 0),
        budget=budget,
        side_calls=[(w.message, w.duration_ms) for w in written if w.message is not None],
        ask_to_continue=parts.live,
    )
    return plan, transcript


async def _write_summaries(found: RecallStart, builder: Assembler) -> list[summaries.Written]:
    """Make the session summaries due as this turn starts (see summaries.py)."""
    if not found.due:
        return []
    parts = builder.parts
    return await summaries.write(
        found.due, store=parts.store, model_client=parts.model_client, small_model=parts.settings.small_model
    )


def previous_section(found: RecallStart, written: list[summaries.Written]) -> str:
    """The turn context's summary of the previous session (made just now, else as stored)."""
    if found.previous is None:
        return ""
    fresh = [w.summary for w in written if w.session_id == found.previous.id]
    return summaries.turn_section(found.previous, fresh[-1] if fresh else found.previous.summary)
