"""The approval card: in ``--approve ask`` a writing tool waits for Run / Skip / Always.

The card shows what would run (the code, the SQL statement, or the tool's input) with
three buttons (two after web content was read in the turn: then it says so, and
*Always* is not offered). *Skip* refuses the call, which the model receives as an ``is_error``
result saying the user declined; *Always for this session* lets that tool run without
asking for the rest of the session. The policy (which calls need approval, what a
refusal says) stays in :mod:`agent_kernel.approval`, which the dispatcher runs; this is
only the person's side.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .waiting import Nobody, TurnWaits

BUTTONS = [
    {"id": "run", "label": "Run", "style": "primary"},
    {"id": "skip", "label": "Skip", "style": "danger"},
    {"id": "always", "label": "Always for this session"},
]


class CardApprover:
    """An :data:`~agent_kernel.approval.Approver` that asks with a card in the running cell.

    It returns the person's answer only: ``"run"``, ``"skip"``, ``"always"``, or
    :class:`~agent_kernel.display.waiting.Nobody` when no one can answer (or ``STOPPED``).
    """

    async def __call__(self, name: str, tool_input: Any, context: TurnWaits) -> str | Nobody:
        from .choice import ChoiceCard
        from .waiting import Pending

        what, shown = describe(name, tool_input)
        web_read = list(getattr(context, "untrusted", ()))
        text = f"The agent wants to {what}."
        if web_read:
            text += "\n\n" + web_warning(web_read)
        card = ChoiceCard(
            heading=f"Allow {name}?",
            text=text,
            code=shown,
            # "Always" would not hold: after web content every writing call asks.
            buttons=BUTTONS if not web_read else BUTTONS[:2],
            done={
                "run": "Approved: it ran.",
                "skip": "Skipped: the agent was told you declined.",
                "always": f"Approved, and {name} runs without asking for the rest of this session.",
            },
        )
        context.transcript.end_text()
        return await Pending(card, context).wait()


def web_warning(sources: list[str]) -> str:
    """The card's line when untrusted web content entered the turn."""
    shown = "; ".join(s[:100] for s in sources[:3]) + (f"; +{len(sources) - 3} more" if len(sources) > 3 else "")
    return (
        f"⚠ Web content was read in this turn ({shown}). Instructions hidden in it may be "
        "steering the agent: run this only if it is what you asked for. Until the turn ends, "
        "every such call asks."
    )


def describe(name: str, tool_input: Any) -> tuple[str, str]:
    """What the call would do, in words, and the text to show (code, SQL or input)."""
    if isinstance(tool_input, dict):
        if isinstance(tool_input.get("code"), str):
            where = "a fresh Python process" if tool_input.get("isolated") else "your kernel"
            return f"run this code in {where}", tool_input["code"]
        if isinstance(tool_input.get("sql"), str):
            params = tool_input.get("params")
            shown = tool_input["sql"] + (f"\n-- params: {json.dumps(params, default=str)}" if params else "")
            return "run this SQL statement", shown
    return f"call {name} with this input", json.dumps(tool_input, indent=2, ensure_ascii=False, default=str)
