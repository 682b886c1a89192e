"""The approval card: in ``--approve ask`` a writing tool waits for Run / Skip / Always.

The card shows what would run (the code, the SQL statement, or the tool's input) with
three buttons (two once the session read untrusted content: then it says so, and
*Always* is not offered). *Skip* refuses the call, which the model receives as an ``is_error``
result saying the user declined; *Always for this session* lets that tool run without
asking for the rest of the session. The policy (which calls need approval, what a
refusal says) stays in :mod:`agent_kernel.turn.approval`, which the dispatcher runs; this is
only the person's side.

For an agent-defined tool the card shows the tool's stored code. One that says it changes
nothing (``writes: false``) but runs where nothing enforces that gets a fourth button,
*Trust as read-only*: that version then runs without asking, in read-only turns too. A
tool another session wrote after reading untrusted content asks first, in every mode,
with where it came from: *Trust* (the person reviewed it: its taint is cleared and it
runs) or *Skip*. The answers that change trust (*Trust*, *Trust as read-only*) carry the
click's event (:func:`agent_kernel.authority.card_click`), made here where the click is
received.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_kernel.authority import PersonEvent, card_click
from agent_kernel.display.choice import ChoiceCard
from agent_kernel.display.waiting import Pending
from agent_kernel.secrets import scrub

if TYPE_CHECKING:
    from agent_kernel.display.waiting import Nobody, TurnWaits

BUTTONS = [
    {"id": "run", "label": "Run", "style": "primary"},
    {"id": "skip", "label": "Skip", "style": "danger"},
    {"id": "always", "label": "Always for this session"},
]
READ_ONLY_BUTTON = {"id": "read_only", "label": "Trust as read-only"}
TRUST_BUTTONS = [
    {"id": "trust", "label": "Trust", "style": "primary"},
    {"id": "skip", "label": "Skip", "style": "danger"},
]


# The answers that change trust: they carry the person's event.
TRUST_ANSWERS = ("trust", "read_only")


class CardAnswer(str):
    """A card's answer that changes trust, with the event of the click that gave it."""

    event: PersonEvent

    def __new__(cls, answer: str, event: PersonEvent) -> CardAnswer:
        made = super().__new__(cls, answer)
        made.event = event
        return made


@dataclass(frozen=True)
class StoredCode:
    """An agent-defined tool the card asks about: its stored code, and what it may offer.

    ``origin``: where a tainted tool came from (its provenance label); the card then asks
    the person to trust it. ``claims_read_only``: it declares it changes nothing and
    nothing enforces that; the card offers *Trust as read-only*.
    """

    version: int
    code: str
    origin: str | None = None
    claims_read_only: bool = False


class CardApprover:
    """An :data:`~agent_kernel.turn.approval.Approver` that asks with a card in the running cell.

    It returns the person's answer only: ``"run"``, ``"skip"``, ``"always"``, or
    :class:`~agent_kernel.display.waiting.Nobody` when no one can answer (or ``STOPPED``).
    """

    async def __call__(
        self, name: str, tool_input: Any, context: TurnWaits, stored: StoredCode | None = None
    ) -> str | Nobody:
        web_read = list(getattr(context, "session_sources", list)())  # a ToolContext's view
        tool_input, hidden = for_view(tool_input)  # the call runs it as sent; the card shows it redacted
        if stored is not None and stored.origin is not None:
            card = ChoiceCard(heading=f"Trust {name}?", **_trust_card(name, tool_input, stored))
        else:
            what, shown = describe(name, tool_input, stored)
            text = f"The agent wants to {what}."
            if stored is not None and stored.claims_read_only:
                text += "\n\n" + read_only_note(name, stored.version)
            if web_read:
                text += "\n\n" + web_warning(web_read)
            # "Always" would not hold: after web content every writing call asks.
            buttons = BUTTONS if not web_read else BUTTONS[:2]
            if stored is not None and stored.claims_read_only:
                buttons = [*buttons, READ_ONLY_BUTTON]
            card = ChoiceCard(
                heading=f"Allow {name}?",
                text=text,
                code=shown,
                buttons=buttons,
                done={
                    "run": "Approved: it ran.",
                    "skip": "Skipped: the agent was told you declined.",
                    "always": f"Approved, and {name} runs without asking for the rest of this session.",
                    "read_only": f"Trusted as read-only: version {stored.version if stored else ''} of {name} runs without asking.",
                },
            )
        if hidden:
            card.text += "\n\n" + redacted_note(hidden)
        context.transcript.end_text()
        answer: str | Nobody = await Pending(card, context).wait()
        if isinstance(answer, str) and answer in TRUST_ANSWERS:
            return CardAnswer(answer, card_click(name, answer))
        return answer


def _trust_card(name: str, tool_input: Any, stored: StoredCode) -> dict[str, Any]:
    """The card for a tool another session wrote after reading untrusted content."""
    text = (
        f"⚠ The agent's own tool {name} (version {stored.version}) was {stored.origin}. "
        "Instructions hidden in that content may have shaped its code: read it before trusting it. "
        f"Trust clears its mark and runs it now with this input: {_input_line(tool_input)}"
    )
    return {
        "text": text,
        "code": stored.code,
        "buttons": TRUST_BUTTONS,
        "done": {
            "trust": f"Trusted: {name} is no longer marked, and it ran.",
            "skip": "Skipped: the agent was told you declined.",
        },
    }


def read_only_note(name: str, version: int) -> str:
    """The card's line for a tool that says it changes nothing, unenforced."""
    return (
        f"{name} says it changes nothing, but it runs in your kernel where nothing holds it to that. "
        f"Trust as read-only: version {version} then runs without asking, in read-only turns too "
        "(a new version asks again)."
    )


def _input_line(tool_input: Any, limit: int = 300) -> str:
    text = json.dumps(tool_input, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + " …"


def web_warning(sources: list[str]) -> str:
    """The card's line once untrusted content entered the session."""
    shown = "; ".join(s[:100] for s in sources[:3]) + (f"; +{len(sources) - 3} more" if len(sources) > 3 else "")
    return (
        f"⚠ Untrusted content (web, MCP, kept text) was read in this session ({shown}). Instructions hidden in it may be "
        "steering the agent: run this only if it is what you asked for. For the rest of this session, "
        "every such call asks."
    )


def describe(name: str, tool_input: Any, stored: StoredCode | None = None) -> tuple[str, str]:
    """What the call would do, in words, and the text to show (code, SQL or input)."""
    if stored is not None:
        return (
            f"call its own tool {name} (version {stored.version}, code below) with {_input_line(tool_input)}",
            stored.code,
        )
    if isinstance(tool_input, dict):
        if isinstance(tool_input.get("code"), str):
            where = "a fresh Python process" if tool_input.get("isolated") else "your kernel"
            return f"run this code in {where}", tool_input["code"]
        if isinstance(tool_input.get("sql"), str):
            params = tool_input.get("params")
            shown = tool_input["sql"] + (f"\n-- params: {json.dumps(params, default=str)}" if params else "")
            return "run this SQL statement", shown
    return f"call {name} with this input", json.dumps(tool_input, indent=2, ensure_ascii=False, default=str)


_REDACTED = re.compile(r"\[secret ([^\]\n]{1,100})\]")


def for_view(tool_input: Any) -> tuple[Any, list[str]]:
    """``tool_input`` as a card shows it, redacted like all the agent shows, and what kind
    of value each replacement hid (the call itself gets the input as the model sent it)."""
    shown = scrub(tool_input)
    if shown == tool_input:
        return tool_input, []
    before = Counter(_REDACTED.findall(json.dumps(tool_input, ensure_ascii=False, default=str)))
    after = Counter(_REDACTED.findall(json.dumps(shown, ensure_ascii=False)))
    return shown, sorted((after - before).elements())


def redacted_note(hidden: list[str]) -> str:
    """The card's line saying what it shows redacted."""
    count = f"{len(hidden)} value{'s' if len(hidden) != 1 else ''}"
    return (
        f"{count} shown redacted here ({', '.join(dict.fromkeys(hidden))}): it runs with them as the agent wrote them."
    )
