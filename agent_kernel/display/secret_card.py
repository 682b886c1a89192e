"""The card that asks whether a secret bound to no host may go to one: *Send* or *Skip*.

The policy (when to ask, what an answer binds, what a refusal says) stays in
:mod:`agent_kernel.turn.secret_hosts`; this is only the person's side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_kernel.display.choice import ChoiceCard
from agent_kernel.display.waiting import Pending

if TYPE_CHECKING:
    from agent_kernel.display.waiting import Nobody, TurnWaits


async def ask_to_send(
    names: list[str], target: str, call: str, untrusted: list[str], context: TurnWaits
) -> str | Nobody:
    """The person's answer about sending the secrets ``names`` to the host ``target``
    (``call``: what the agent asked, in a line): ``"run"``, ``"skip"``, or Nobody."""
    which = " and ".join(names)
    text = (
        f"The agent wants to send your secret {which} to {target}: {call}\n\n"
        f"{which} {'is' if len(names) == 1 else 'are'} bound to no host yet. Send binds "
        f"{'it' if len(names) == 1 else 'them'} to {target} until this kernel restarts; to bind for good, "
        f"%agent_secret {names[0]} --host HOST or AgentKernel.secret_hosts."
    )
    if untrusted:
        shown = "; ".join(s[:100] for s in untrusted[:3]) + (
            f"; +{len(untrusted) - 3} more" if len(untrusted) > 3 else ""
        )
        text += (
            f"\n\n⚠ This session read untrusted content ({shown}). Instructions hidden in it may be "
            "steering the agent: send it only if this host is where you meant it to go."
        )
    card = ChoiceCard(
        heading=f"Send {which} to {target}?",
        text=text,
        buttons=[
            {"id": "run", "label": f"Send to {target}", "style": "primary"},
            {"id": "skip", "label": "Skip", "style": "danger"},
        ],
        done={
            "run": f"Sent: {which} may go to {target} until the kernel restarts.",
            "skip": "Skipped: the agent was told you declined.",
        },
    )
    context.transcript.end_text()
    answer: str | Nobody = await Pending(card, context).wait()
    return answer
