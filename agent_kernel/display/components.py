"""A component the agent built, shown in a sandboxed frame that cannot reach the page.

The model's HTML, CSS and JavaScript never run in the Jupyter page. The widget's own
script (``js/component.js``) makes an ``<iframe sandbox="allow-scripts">`` (an opaque
origin: no cookies, storage or parent DOM) whose document starts with a strict
Content-Security-Policy (no network at all), then a small bridge of ours, then the
component. The bridge talks to the widget with ``postMessage``; the widget forwards only
messages whose source is that frame, and this module checks each again:

- ``{"kind": "state", "state": {...}}``: the declared keys only, each of its declared JSON
  type, the whole under :data:`STATE_BYTES`;
- ``{"kind": "message", "name": declared, "data": ...}``: kept, redacted and marked as the
  component's, for the session's next turn (:func:`take_notes`);
- ``{"kind": "call", "id", "tool": declared, "input": {...}}``: run through the turn's own
  dispatcher (its offered tools and approval check) while that turn runs, at most
  :data:`CALLS_PER_MINUTE` a minute; the result goes back to the frame.

The declaration only narrows what the turn allows; it never grants anything.
"""

from __future__ import annotations

import asyncio
import contextvars
import html
import json
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import traitlets

from agent_kernel.display.fallback import with_fallback_view
from agent_kernel.display.presence import ACK_JS
from agent_kernel.display.waiting import STOPPED, Bundle, Nobody, WaitingWidget
from agent_kernel.secrets import redact

_JS = Path(__file__).with_name("js")

# The policy the frame's document starts with (js/component.js holds the same text).
CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
    "font-src data:; form-action 'none'; base-uri 'none'"
)
STATE_BYTES = 16_000  # a component's state as JSON
MESSAGE_BYTES = 4_000  # one message's data as JSON
CALL_INPUT_BYTES = 16_000  # one tool call's input as JSON
CALLS_PER_MINUTE = 10  # tool calls one shown component may make
NOTES_KEPT = 20  # messages kept per session for its next turn
STATE_ROWS_SHOWN = 30  # rows of state the static record shows

JSON_TYPES = ("null", "boolean", "number", "string", "array", "object")
_REFRESH = re.compile(r"<meta\b[^>]*http-equiv\s*=\s*[\"']?\s*refresh[^>]*>", re.IGNORECASE)

# A turn's dispatcher as components use it: (tool, input) -> (result text, is_error).
CallTool = Callable[[str, dict[str, Any]], Awaitable[tuple[str, bool]]]


class ComponentVersion(Protocol):
    """What is shown of a component definition (the store's ``ComponentVersion`` has it)."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def html(self) -> str: ...
    @property
    def css(self) -> str: ...
    @property
    def js(self) -> str: ...
    @property
    def state(self) -> dict[str, Any]: ...
    @property
    def messages(self) -> tuple[str, ...]: ...
    @property
    def tools(self) -> tuple[str, ...]: ...


class ComponentHost(Protocol):
    """What a shown component needs of the turn that showed it (its tool context)."""

    session_id: str
    component_calls: CallTool | None  # None once the turn has ended


class MessageError(ValueError):
    """A message from the frame that does not fit the component's declaration."""


def json_type(value: Any) -> str:
    """The JSON type name of ``value``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    return "object"


def json_size(value: Any) -> int:
    try:
        return len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    except (TypeError, ValueError):
        raise MessageError("is not plain JSON") from None


def checked_state(declared: dict[str, Any], state: Any) -> dict[str, Any]:
    """``state`` when it fits ``declared`` (the component's initial state): only its keys,
    each value of the same JSON type (a key declared null takes any type); else an error."""
    if not isinstance(state, dict):
        raise MessageError("state must be an object")
    for key, value in state.items():
        if key not in declared:
            raise MessageError(f"state key {key!r} is not declared (declared: {', '.join(declared) or 'none'})")
        want = json_type(declared[key])
        if want != "null" and value is not None and json_type(value) != want:
            raise MessageError(f"state key {key!r} must be {want}, not {json_type(value)}")
    if json_size(state) > STATE_BYTES:
        raise MessageError(f"state is over {STATE_BYTES:,} bytes as JSON")
    return dict(state)


def without_refresh(markup: str) -> str:
    """``markup`` without ``<meta http-equiv="refresh">`` (which would navigate the frame)."""
    return _REFRESH.sub("", markup)


def component_body(definition: ComponentVersion) -> str:
    """The component's part of the frame's document (the widget adds the policy and bridge)."""
    css = f"<style>{definition.css}</style>" if definition.css else ""
    script = f"<script>{definition.js}</script>" if definition.js else ""
    return css + without_refresh(definition.html) + script


# -- messages for the session's next turn ---------------------------------------------------

_NOTES: dict[str, list[str]] = {}


def keep_note(session_id: str, component: str, name: str, data: Any) -> None:
    shown = redact(json.dumps(data, ensure_ascii=False))
    line = (
        f"[A message from the UI component {component!r} (sent by its page, not typed by the user)] "
        f"{name}: {shown}"
    )
    notes = _NOTES.setdefault(session_id, [])
    notes.append(line)
    del notes[:-NOTES_KEPT]


def take_notes(session_id: str) -> list[str]:
    """The component messages kept for ``session_id`` since its last turn (and forget them)."""
    return _NOTES.pop(session_id, [])


# -- the widget --------------------------------------------------------------------------------


class ComponentWidget(WaitingWidget):
    """A component in its sandboxed frame. Live (``status`` "live") when shown by
    ``render_blocks``; waiting for Submit or Dismiss when shown by ``render_and_wait``,
    whose answer is ``{"action": "submit", "state": {...}}`` or ``{"action": "dismiss"}``."""

    _esm = ACK_JS + (_JS / "component.js").read_text(encoding="utf-8")
    _css = (_JS / "widgets.css").read_text(encoding="utf-8")

    heading = traitlets.Unicode("").tag(sync=True)
    origin = traitlets.Unicode("").tag(sync=True)  # who made it, shown above the frame
    body = traitlets.Unicode("").tag(sync=True)
    initial_state: traitlets.Dict[str, Any] = traitlets.Dict().tag(sync=True)
    height = traitlets.Int(320).tag(sync=True)

    def __init__(
        self, definition: ComponentVersion, state: dict[str, Any], origin: str, host: ComponentHost | None,
        *, waiting: bool = False, height: int = 320,
    ) -> None:  # fmt: skip
        super().__init__(
            heading=title_of(definition), origin=origin,
            body=component_body(definition), initial_state=state, height=height,
            status="waiting" if waiting else "live",
        )  # fmt: skip
        self.definition = definition
        self.state = dict(state)
        self.host = host
        self.navigated = False
        self._calls: deque[float] = deque()
        self._tasks: set[asyncio.Task[None]] = set()
        # The showing turn's context: a call runs in it, so what it displays (an approval
        # card, its output) lands in the turn's cell, not in the comm message's.
        self._turn_context = contextvars.copy_context()

    def _dispatch_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and self.status in ("waiting", "live"):
            self._call_soon(self.on_message, content)

    def on_message(self, content: dict[str, Any]) -> None:
        kind = content.get("type")
        if kind == "component":
            self.receive(content.get("msg"))
        elif kind == "navigated":
            self.navigated = True
            if self.status == "waiting":
                self.answer({"action": "dismiss", "reason": "the component tried to navigate and was removed"})
        elif kind == "submit" and self.status == "waiting":
            self.answer({"action": "submit", "state": self.state})
        elif kind == "dismiss" and self.status == "waiting":
            self.answer({"action": "dismiss"})

    def receive(self, msg: Any) -> None:
        """One message the frame sent: checked against the declaration, then acted on."""
        call_id = msg.get("id") if isinstance(msg, dict) else None
        call_id = call_id if isinstance(call_id, int) and not isinstance(call_id, bool) else None
        try:
            if not isinstance(msg, dict):
                raise MessageError("a message must be an object")
            kind = msg.get("kind")
            if kind == "state":
                self.state = checked_state(self.definition.state, msg.get("state"))
            elif kind == "message":
                self._message(msg.get("name"), msg.get("data"))
            elif kind == "call":
                self._call(call_id, msg.get("tool"), msg.get("input"))
            else:
                raise MessageError(f"unknown kind {kind!r}: use state, message or call")
        except MessageError as exc:
            if call_id is not None and isinstance(msg, dict) and msg.get("kind") == "call":
                self.reply({"kind": "result", "id": call_id, "ok": False, "content": f"Refused: {exc}."})
            else:
                self.reply({"kind": "error", "message": f"Refused: {exc}."})

    def _message(self, name: Any, data: Any) -> None:
        if name not in self.definition.messages:
            raise MessageError(f"message {name!r} is not declared (declared: {', '.join(self.definition.messages) or 'none'})")
        if json_size(data) > MESSAGE_BYTES:
            raise MessageError(f"the message's data is over {MESSAGE_BYTES:,} bytes as JSON")
        if self.host is None:
            raise MessageError("no session is listening")
        keep_note(self.host.session_id, self.definition.name, name, data)
        self.reply({"kind": "sent", "name": name})

    def _call(self, call_id: int | None, tool: Any, tool_input: Any) -> None:
        if call_id is None:
            raise MessageError("a call needs a numeric id")
        if tool not in self.definition.tools:
            raise MessageError(
                f"tool {tool!r} is not declared by this component (declared: {', '.join(self.definition.tools) or 'none'})"
            )
        if not isinstance(tool_input, dict):
            raise MessageError("a call's input must be an object")
        if json_size(tool_input) > CALL_INPUT_BYTES:
            raise MessageError(f"the call's input is over {CALL_INPUT_BYTES:,} bytes as JSON")
        now = time.monotonic()
        while self._calls and now - self._calls[0] > 60:
            self._calls.popleft()
        if len(self._calls) >= CALLS_PER_MINUTE:
            raise MessageError(f"more than {CALLS_PER_MINUTE} tool calls a minute; wait a little")
        run = self.host.component_calls if self.host is not None else None
        if run is None:
            raise MessageError("the turn that showed this component has ended; its tools run only while that turn runs")
        self._calls.append(now)
        # A task copies the context it is made in.
        task = self._turn_context.copy().run(asyncio.ensure_future, self._run(run, call_id, tool, tool_input))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, run: CallTool, call_id: int, tool: str, tool_input: dict[str, Any]) -> None:
        try:
            content, is_error = await run(tool, tool_input)
        except asyncio.CancelledError:
            content, is_error = "Stopped before it finished.", True
        except Exception as exc:  # noqa: BLE001 - the frame gets a refusal, never a crash
            content, is_error = f"{tool} failed: {type(exc).__name__}", True
        self.reply({"kind": "result", "id": call_id, "ok": not is_error, "content": redact(content)})

    def static(self, outcome: Any) -> Bundle:
        return component_bundle(self.definition, self.origin, self.state, outcome, self.navigated)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        data, metadata = super()._repr_mimebundle_(**kwargs)
        return with_fallback_view(data), metadata


def title_of(definition: ComponentVersion) -> str:
    """The component's title line: its name and stored version (an inline one has none)."""
    if definition.version == 0:
        return f"{definition.name} (inline component)"
    return f"{definition.name} · version {definition.version}"


def component_bundle(
    definition: ComponentVersion, origin: str, state: dict[str, Any], outcome: Any, navigated: bool = False
) -> Bundle:
    """The static record of a component (no script): its name, who made it, its state."""
    if isinstance(outcome, dict) and outcome.get("action") == "submit":
        status, state = "Submitted", outcome.get("state", state)
    elif isinstance(outcome, Nobody):
        status = f"No user present ({outcome.reason})"
    elif isinstance(outcome, dict):
        status = "Dismissed"
    elif outcome is STOPPED:
        status = "Stopped before it was answered"
    else:
        status = "Interactive component (shown live while its kernel runs)"
    if navigated:
        status += "; the component tried to navigate and was removed"
    rows, lines = [], []
    for key, value in list(state.items())[:STATE_ROWS_SHOWN]:
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        shown = shown[:300]
        rows.append(
            f"<tr><th style='text-align:left;padding-right:1em'>{html.escape(key)}</th>"
            f"<td style='text-align:left'>{html.escape(shown)}</td></tr>"
        )
        lines.append(f"  {key}: {shown}")
    title = title_of(definition)
    markup = (
        '<div class="agent-kernel-component-static" style="border:1px solid #d0d7de;border-radius:6px;'
        'padding:6px 12px;margin:4px 0">'
        f"<strong>{html.escape(title)}</strong> <span style='color:#57606a'>· {html.escape(status)}</span>"
        f"<div style='color:#57606a;font-size:0.9em'>{html.escape(origin)}</div>"
        f"<table>{''.join(rows)}</table></div>"
    )
    text = f"{title} · {status}\n{origin}\n" + "\n".join(lines)
    return {"text/html": markup, "text/plain": text}
