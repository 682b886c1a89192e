"""Continue at a session's limit: the cell offers to raise the limit and go on.

When a session reaches its token limit (or its next model call would pass it), or its
cost limit, in a live notebook, the turn shows this card and waits (state
``token_limit_reached`` / ``cost_limit_reached``). *Continue* raises the limit by the
same amount again (and past what the next call needs) and the same turn goes on (state
``running``); *Stop here* ends it. With nobody there, or after Stop, the turn ends as
before and says how to raise the limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_kernel.display.choice import ChoiceCard
from agent_kernel.display.footer import usd
from agent_kernel.display.presence import PRESENCE
from agent_kernel.display.waiting import Pending

if TYPE_CHECKING:
    from agent_kernel.display.waiting import TurnWaits


async def offer_continue(context: TurnWaits, used: int, limit: int, needed: int = 0) -> int | None:
    """The raised token limit if the person clicks Continue, else ``None``.

    ``needed`` is the next model call's estimated input: the raised limit leaves room for it.
    """
    step = max(limit, 1)
    raised = max(limit, used + needed) + step
    text = f"This session has used {used:,} of its {limit:,} tokens."
    if used < limit:
        text += f" The next model call needs about {needed:,} more."
    outcome = await _offer(
        context,
        "Token limit reached",
        text,
        f"Continue (+{raised - limit:,} tokens)",
        f"Continued: the session's limit is now {raised:,} tokens.",
        "Stopped at the token limit.",
        "token_limit_reached",
    )
    return raised if outcome else None


async def offer_cost_continue(context: TurnWaits, spent: float, limit: float) -> float | None:
    """The raised cost limit (USD) if the person clicks Continue, else ``None``."""
    raised = max(limit, spent) + limit
    outcome = await _offer(
        context,
        "Cost limit reached",
        f"This session has cost {usd(spent)} of its {usd(limit)} limit.",
        f"Continue (+{usd(raised - limit)})",
        f"Continued: the session's cost limit is now {usd(raised)}.",
        "Stopped at the cost limit.",
        "cost_limit_reached",
    )
    return raised if outcome else None


async def _offer(
    context: TurnWaits, heading: str, text: str, label: str, continued: str, stopped: str, state: str
) -> bool:
    """Show the card and wait; True when the person clicked Continue."""
    if PRESENCE.nobody(context) is not None:
        return False  # the notice above already says how to raise the limit
    card = ChoiceCard(
        heading=heading,
        text=text,
        buttons=[
            {"id": "continue", "label": label, "style": "primary"},
            {"id": "stop", "label": "Stop here"},
        ],
        done={"continue": continued, "stop": stopped},
    )
    context.transcript.end_text()
    outcome = await Pending(card, context).wait(state=state)
    return bool(outcome == "continue")
