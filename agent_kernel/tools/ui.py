"""The ``ui`` group: ``render_blocks``, ``ask_user`` and ``send_message``.

Blocks and messages appear in the running cell. ``ask_user`` and a ``render_blocks``
call with a form wait for the person (the turn awaits the widget's answer; Stop cancels
it). When nobody can answer (papermill, nbclient, a client that shows no widgets,
``--approve read-only``) they return at once and say so, and what to do instead.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from IPython.display import display
from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from agent_kernel.display import blocks as B
from agent_kernel.display.blocks import BLOCK_SCHEMA, LABEL_CHARS, MAX_BLOCKS, ChartBlock
from agent_kernel.display.charts import chart_bundle, chart_png, chart_spec, chart_text
from agent_kernel.display.choice import ChoiceCard, Typed
from agent_kernel.display.form import FormWidget, defaults
from agent_kernel.display.presence import PRESENCE
from agent_kernel.display.safe import clean_text, clean_value, markdown_bundle
from agent_kernel.display.table_widget import TableSource, TableWidget
from agent_kernel.display.view import NO_FRONT_END
from agent_kernel.display.waiting import Nobody, Pending
from agent_kernel.errors import ToolInputError
from agent_kernel.paths import agent_home
from agent_kernel.tools import Tool, current_context
from agent_kernel.tools.components import component_widget
from agent_kernel.tools.images import attach_png

if TYPE_CHECKING:
    from agent_kernel.tools.context import ToolContext

NO_USER_FORM = (
    "No user is present to fill in the form ({reason}). `data` holds the form's defaults, "
    "not answers. Go on with them if they are sensible and say so in your reply; otherwise "
    "explain what you need and stop."
)
NO_USER_QUESTION = (
    "No user is present to answer ({reason}). Do not wait for an answer and do not ask "
    "again in this turn: choose a sensible default yourself and say which in your reply, "
    "or explain what you need and stop."
)

QUESTION_CHARS = 2_000
MESSAGE_CHARS = 10_000
MAX_OPTIONS = 20

Title = Annotated[str, Field(max_length=LABEL_CHARS)]
Question = Annotated[str, Field(min_length=1, max_length=QUESTION_CHARS)]
Option = Annotated[str, Field(max_length=LABEL_CHARS)]
Message = Annotated[str, Field(max_length=MESSAGE_CHARS)]


class Shown(TypedDict):
    """The reply of a call that shows something and does not wait."""

    ok: bool
    images: NotRequired[str]  # how many charts went back to the model as images


class FormAnswer(TypedDict):
    """What the person did with a form (agent_kernel.display.form.FormWidget answers it)."""

    action: Literal["submit", "dismiss"]
    data: NotRequired[dict[str, Any]]  # the fields' values by name, as the form typed them


class FormDefaults(TypedDict):
    """A form's reply when nobody can fill it in: its defaults, and what to do about that."""

    action: Literal["submit"]
    data: dict[str, Any]  # the fields' defaults by name (agent_kernel.display.form.defaults)
    defaults_only: bool
    user_present: bool
    note: str
    required_without_default: NotRequired[list[str]]


class Answer(TypedDict):
    """``ask_user``'s reply: the person's answer, or None and what to do when nobody can answer."""

    answer: str | None
    user_present: NotRequired[bool]
    note: NotRequired[str]


async def render_blocks(
    blocks: Annotated[list[dict[str, Any]], Field(min_length=1, max_length=MAX_BLOCKS)],
    title: Title | None = None,
) -> Shown | FormAnswer | FormDefaults:
    """Show blocks in the user's cell: markdown, table, chart, form, code, image, alert, json.

    A DataFrame `variable` shows a table or chart without copying rows. With a form (at
    most one) the call waits: {"action": "submit", "data": {...}} or {"action": "dismiss"};
    else {"ok": true}.

    Args:
        blocks: Blocks in order.
        title: Heading.
    """
    ctx = current_context()
    checked = [clean_value(block) for block in B.check_blocks(blocks)]
    title = clean_text(title) if title else title
    form_block = next((b for b in checked if b["type"] == "form"), None)
    if not ctx.transcript.live:
        for block in checked:
            if block["type"] == "chart":
                print(await _chart_as_text(block, ctx), flush=True)
            else:
                print(block.get("content") or block.get("title") or f"[{block['type']}]")
        return _no_user_form(form_block["fields"], NO_FRONT_END) if form_block else {"ok": True}
    widgets = PRESENCE.widgets_unseen(ctx) is None
    cwd = Path(os.getcwd())
    # Build every output before showing any, so a block that fails shows nothing half-done.
    outputs: list[Any] = [B.title_bundle(title)] if title else []
    pending: Pending | None = None
    charts_seen = 0  # charts attached to the result as images (agent_kernel.tools.images)
    for block in checked:
        kind = block["type"]
        if kind == "table":
            outputs.append(_table(block, ctx.namespace, ctx.settings.table_page_size, widgets))
        elif kind == "chart":
            if getattr(ctx.transcript, "prints", False):  # a terminal: the chart as text
                outputs.append({"text/plain": await _chart_as_text(block, ctx)})
                continue
            spec = chart_spec(block, ctx.namespace)
            png = await asyncio.to_thread(chart_png, spec)
            outputs.append(chart_bundle(spec, png))
            charts_seen += attach_png(ctx, png)
        elif kind == "form":
            pending = Pending(
                FormWidget(
                    title=block.get("title") or "",
                    fields=block["fields"],
                    submit_label=block.get("submitLabel") or "Submit",
                ),
                ctx,
            )
            outputs.append(pending)
        elif kind == "image":
            outputs.append(B.image_bundle(block, cwd))
        elif kind == "markdown":
            outputs.append(B.markdown_bundle(block["content"]))
        elif kind == "component":
            outputs.append(await _component(block, widgets))
        elif kind == "code":
            outputs.append(B.code_bundle(block))
        elif kind == "alert":
            outputs.append(B.alert_bundle(block))
        else:
            outputs.append(B.json_bundle(block))
    ctx.transcript.end_text()
    for output in outputs:
        _show(output)
    if pending is None:
        return (
            {"ok": True, "images": f"{charts_seen} chart(s) attached below as images."} if charts_seen else {"ok": True}
        )
    outcome = await pending.wait()
    if isinstance(outcome, Nobody):
        return _no_user_form(pending.widget.fields, outcome.reason)
    answer: FormAnswer = outcome
    return answer


async def ask_user(
    question: Question,
    options: Annotated[list[Option], Field(max_length=MAX_OPTIONS)] | None = None,
) -> Answer:
    """Ask the user and wait for the answer (when you cannot go on well without it).

    Args:
        question: One or two sentences.
        options: Buttons to choose from; omit for a typed answer.
    """
    if options is not None and (not options or not all(o.strip() for o in options)):
        raise ToolInputError("options must be a non-empty list of non-empty strings, or omitted for free text.")
    ctx = current_context()
    if not ctx.transcript.live:
        return _no_user_answer(NO_FRONT_END)
    ctx.transcript.end_text()
    question = clean_text(question)
    if options:
        card = ChoiceCard(
            heading="Question",
            text=question,
            buttons=[{"id": str(i), "label": clean_text(option)} for i, option in enumerate(options)],
        )
    else:
        card = ChoiceCard(
            heading="Question",
            text=question,
            free_text=True,
            placeholder="Your answer",
            buttons=[{"id": "send", "label": "Send", "style": "primary"}],
        )
    outcome = await Pending(card, ctx).wait()
    if isinstance(outcome, Nobody):
        return _no_user_answer(outcome.reason)
    if isinstance(outcome, Typed):
        return {"answer": outcome.text}
    assert options is not None
    return {"answer": options[int(outcome)]}


async def send_message(text: Message) -> Shown:
    """Show a short progress note (markdown) in the cell during long work; does not wait."""
    ctx = current_context()
    if not ctx.transcript.live:
        print(text, flush=True)
        return {"ok": True}
    ctx.transcript.end_text()
    quoted = "\n".join(f"> {line}" for line in text.splitlines()) or ">"
    _show(markdown_bundle(quoted, plain=text))
    return {"ok": True}


# -- helpers ----------------------------------------------------------------------------------


async def _component(block: dict[str, Any], widgets: bool) -> Any:
    """A live component, or its static record where no front end shows widgets."""
    widget = await component_widget(block)
    if widgets:
        return widget
    widget.close()
    return widget.static(None)


async def _chart_as_text(block: ChartBlock, ctx: ToolContext) -> str:
    """A chart as a terminal shows it: its text rendering, and the path of its PNG, saved
    under the agent's home (``charts/<session>/``) for the person to open."""
    spec = chart_spec(block, ctx.namespace)
    png = await asyncio.to_thread(chart_png, spec)
    folder = agent_home() / "charts" / (re.sub(r"[^\w.-]+", "-", ctx.session_name).strip(".-") or "session")
    slug = re.sub(r"[^\w-]+", "-", str(spec.get("title") or "chart")).strip("-")[:40].lower() or "chart"
    stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{slug}"
    path, count = folder / f"{stem}.png", 1
    while path.exists():  # two charts in one second keep both
        count += 1
        path = folder / f"{stem}-{count}.png"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    return chart_text(spec, image=str(path))


def _show(output: Any) -> None:
    """Display a bundle, a widget (its bundle carries a static fallback) or a pending form."""
    if isinstance(output, dict):
        display(output, raw=True)
    elif isinstance(output, Pending):
        output.show()
    else:
        display(output)


def _table(block: dict[str, Any], namespace: Mapping[str, Any], page_size: int, widgets: bool) -> Any:
    source = TableSource(block, namespace)
    title = block.get("title") or ""
    if widgets:
        return TableWidget(source, title=title, page_size=page_size)
    return source.static(title, page_size)


def _no_user_form(fields: list[dict[str, Any]], reason: str) -> FormDefaults:
    values = defaults(fields)
    result: FormDefaults = {
        "action": "submit",
        "data": values,
        "defaults_only": True,
        "user_present": False,
        "note": NO_USER_FORM.format(reason=reason),
    }
    unfilled = [f["name"] for f in fields if f.get("required") and values[f["name"]] is None]
    if unfilled:
        result["required_without_default"] = unfilled
    return result


def _no_user_answer(reason: str) -> Answer:
    return {"answer": None, "user_present": False, "note": NO_USER_QUESTION.format(reason=reason)}


RENDER_BLOCKS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "blocks": {
            "type": "array",
            "items": BLOCK_SCHEMA,
            "minItems": 1,
            "maxItems": MAX_BLOCKS,
            "description": "Blocks in order.",
        },
        "title": {"type": "string", "maxLength": LABEL_CHARS, "description": "Heading."},
    },
    "required": ["blocks"],
}

TOOLS = [
    Tool(render_blocks, name="render_blocks", group="ui", input_schema=RENDER_BLOCKS_SCHEMA),
    Tool(ask_user, name="ask_user", group="ui"),
    Tool(send_message, name="send_message", group="ui"),
]
