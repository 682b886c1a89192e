"""A card that asks one thing: ``ask_user``, approvals of writing tools, Continue.

The answer is the ``id`` of the button clicked, or :class:`Typed` text when the card
has a text box. Once answered the card is replaced by a static line that says what was
asked and what came back.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import traitlets

from agent_kernel.display.scripts import widget_script
from agent_kernel.display.waiting import STOPPED, Bundle, Nobody, WaitingWidget

_JS = Path(__file__).with_name("js")


@dataclass(frozen=True)
class Typed:
    """Text the person typed into the card."""

    text: str


class ChoiceCard(WaitingWidget):
    """Buttons to choose from (``buttons``: ``{id, label, style?}``), or a text box."""

    _esm = widget_script("choice.js", "attention.js")
    _css = (_JS / "widgets.css").read_text(encoding="utf-8")

    heading = traitlets.Unicode("").tag(sync=True)
    text = traitlets.Unicode("").tag(sync=True)
    code = traitlets.Unicode("").tag(sync=True)
    buttons: traitlets.List[dict[str, Any]] = traitlets.List().tag(sync=True)
    free_text = traitlets.Bool(False).tag(sync=True)
    placeholder = traitlets.Unicode("").tag(sync=True)

    def __init__(self, *, done: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # What the static rendering says after each choice (default: the button's label).
        self._done = done or {}

    def on_message(self, content: dict[str, Any]) -> None:
        if content.get("type") == "choice" and content.get("choice") in {b["id"] for b in self.buttons}:
            self.answer(content["choice"])
        elif content.get("type") == "text" and self.free_text and isinstance(content.get("text"), str):
            self.answer(Typed(content["text"]))

    def outcome_text(self, outcome: Any) -> str:
        if isinstance(outcome, Typed):
            return f"Answer: {outcome.text}"
        if isinstance(outcome, Nobody):
            return f"No user present: {outcome.reason}."
        if outcome is STOPPED:
            return "Stopped before it was answered."
        if outcome is None:
            return "Waiting for an answer."
        labels = {b["id"]: b["label"] for b in self.buttons}
        return self._done.get(outcome, f"Chosen: {labels.get(outcome, outcome)}")

    def static(self, outcome: Any) -> Bundle:
        said = self.outcome_text(outcome)
        parts = [f"<strong>{html.escape(self.heading)}</strong>" if self.heading else ""]
        if self.text:
            parts.append(f"<div style='white-space:pre-wrap'>{html.escape(self.text)}</div>")
        if self.code:
            parts.append(f"<pre style='white-space:pre-wrap;margin:4px 0'>{html.escape(self.code)}</pre>")
        parts.append(f"<div style='color:#57606a'>{html.escape(said)}</div>")
        markup = (
            '<div class="agent-kernel-choice" style="border:1px solid #d0d7de;border-radius:6px;'
            f'padding:6px 12px;margin:4px 0">{"".join(p for p in parts if p)}</div>'
        )
        plain = "\n".join(p for p in (self.heading, self.text, self.code, said) if p)
        return {"text/html": markup, "text/plain": plain}
