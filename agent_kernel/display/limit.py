"""Continue at the token limit: the cell offers to raise the limit and go on.

When a session reaches its token limit in a live notebook, the turn shows this card and
waits (state ``token_limit_reached``). *Continue* raises the limit by the same amount
again and the same turn goes on (state ``running``); *Stop here* ends it. With nobody
there, or after Stop, the turn ends as before and says how to raise the limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .waiting import TurnWaits


async def offer_continue(context: TurnWaits, used: int, limit: int) -> int | None:
    """The raised limit if the person clicks Continue, else ``None``."""
    from .choice import ChoiceCard
    from .presence import PRESENCE
    from .waiting import Pending

    if PRESENCE.nobody(context) is not None:
        return None  # the notice above already says how to raise the limit
    step = max(limit, 1)
    raised = max(limit, used) + step
    card = ChoiceCard(
        heading="Token limit reached",
        text=f"This session has used {used:,} of its {limit:,} tokens.",
        buttons=[
            {"id": "continue", "label": f"Continue (+{step:,} tokens)", "style": "primary"},
            {"id": "stop", "label": "Stop here"},
        ],
        done={
            "continue": f"Continued: the session's limit is now {raised:,} tokens.",
            "stop": "Stopped at the token limit.",
        },
    )
    context.transcript.end_text()
    outcome = await Pending(card, context).wait(state="token_limit_reached")
    return raised if outcome == "continue" else None
