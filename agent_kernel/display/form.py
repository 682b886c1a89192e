"""The form block: fields the person fills in, typed values back to the model.

The browser checks required fields as the person types; the kernel checks again
(:func:`coerce`) and turns each value into its type: numbers become ``int``/``float``,
checkboxes ``bool``, dates ISO ``YYYY-MM-DD`` strings, selects one of their options. A
value that does not fit is sent back to the form as an error next to its field.
"""

from __future__ import annotations

import html
import json
import math
from datetime import date
from pathlib import Path
from typing import Any

import traitlets

from agent_kernel.display.fallback import with_fallback_view
from agent_kernel.display.scripts import widget_script
from agent_kernel.display.waiting import STOPPED, Bundle, Nobody, WaitingWidget

_JS = Path(__file__).with_name("js")


class FieldError(ValueError):
    """A value that does not fit its field."""


def coerce(field: dict[str, Any], raw: Any) -> Any:
    """``raw`` (from the browser or a default) as the field's type; ``None`` when empty."""
    kind = field["type"]
    if kind == "checkbox":
        if isinstance(raw, bool):
            return raw
        if raw in (None, ""):
            return False
        raise FieldError("must be true or false")
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        if field.get("required"):
            raise FieldError("is required")
        return None
    if kind == "number":
        if isinstance(raw, bool):
            raise FieldError("must be a number")
        if isinstance(raw, (int, float)):
            return raw
        text = str(raw).strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            value = float(text)
        except ValueError:
            raise FieldError(f"must be a number, not {text!r}") from None
        if not math.isfinite(value):
            raise FieldError("must be a finite number")
        return value
    if kind == "date":
        text = str(raw).strip()
        try:
            return date.fromisoformat(text[:10]).isoformat()
        except ValueError:
            raise FieldError(f"must be a date as YYYY-MM-DD, not {text!r}") from None
    if kind == "select":
        text = str(raw)
        if text not in field["options"]:
            raise FieldError(f"must be one of {', '.join(field['options'])}")
        return text
    if not isinstance(raw, str):
        raise FieldError("must be text")
    return raw


def defaults(fields: list[dict[str, Any]]) -> dict[str, Any]:
    """Each field's default, typed (``None`` where there is none; ``False`` for checkboxes)."""
    values = {}
    for field in fields:
        try:
            values[field["name"]] = coerce({**field, "required": False}, field.get("default"))
        except FieldError:
            values[field["name"]] = None
    return values


def typed_values(fields: list[dict[str, Any]], raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The submitted values typed, and an error message per field that does not fit."""
    values, errors = {}, {}
    for field in fields:
        try:
            values[field["name"]] = coerce(field, raw.get(field["name"]))
        except FieldError as exc:
            errors[field["name"]] = f"{field.get('label') or field['name']} {exc}."
    return values, errors


class FormWidget(WaitingWidget):
    """A form in the running cell; its answer is ``{"action": "submit", "data"}`` or dismiss."""

    _esm = widget_script("form.js", "attention.js")
    _css = (_JS / "widgets.css").read_text(encoding="utf-8")

    title = traitlets.Unicode("").tag(sync=True)
    fields: traitlets.List[dict[str, Any]] = traitlets.List().tag(sync=True)
    submit_label = traitlets.Unicode("Submit").tag(sync=True)

    def on_message(self, content: dict[str, Any]) -> None:
        kind = content.get("type")
        if kind == "dismiss":
            self.answer({"action": "dismiss"})
        elif kind == "submit":
            data = content.get("data")
            raw: dict[str, Any] = data if isinstance(data, dict) else {}
            values, errors = typed_values(self.fields, raw)
            if errors:
                self.reply({"type": "errors", "errors": errors})
            else:
                self.answer({"action": "submit", "data": values})

    def static(self, outcome: Any) -> Bundle:
        return form_bundle(self.title, self.fields, self.submit_label, outcome)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # A notebook saved while the form waits shows its static record when reopened.
        data, metadata = super()._repr_mimebundle_(**kwargs)
        return with_fallback_view(data), metadata


def form_bundle(title: str, fields: list[dict[str, Any]], submit_label: str, outcome: Any) -> Bundle:
    """The form as it stands: waiting, submitted, dismissed, stopped, or with no one there."""
    values: dict[str, Any] = {}
    if isinstance(outcome, dict) and outcome.get("action") == "submit":
        values, state = outcome["data"], "Submitted"
    elif isinstance(outcome, Nobody):
        values, state = defaults(fields), f"No user present ({outcome.reason}): the defaults were used"
    elif isinstance(outcome, dict):
        state = "Dismissed"
    elif outcome is STOPPED:
        state = "Stopped before it was answered"
    else:
        values, state = defaults(fields), "Waiting for an answer"
    rows, lines = [], []
    for field in fields:
        label = field.get("label") or field["name"]
        shown = _shown(values.get(field["name"]))
        star = " *" if field.get("required") else ""
        rows.append(
            f"<tr><th scope='row' style='text-align:left;padding-right:1em'>{html.escape(label)}{star}</th>"
            f"<td style='text-align:left'>{html.escape(shown)}</td></tr>"
        )
        lines.append(f"  {label}{star}: {shown}")
    heading = html.escape(title) if title else "Form"
    markup = (
        f'<div class="agent-kernel-form-static" style="border:1px solid #d0d7de;border-radius:6px;padding:6px 12px;margin:4px 0">'
        f"<strong>{heading}</strong> <span style='color:#57606a'>· {html.escape(state)}</span>"
        f"<table>{''.join(rows)}</table></div>"
    )
    text = f"{title or 'Form'} · {state}\n" + "\n".join(lines)
    return {"text/html": markup, "text/plain": text}


def _shown(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return value if isinstance(value, str) else json.dumps(value)
