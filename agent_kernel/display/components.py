"""A component the agent built, shown in frames that can reach neither the page nor the network.

The model's HTML, CSS and JavaScript never run in the Jupyter page. The widget's own
script (``js/component.js``) makes an ``<iframe sandbox="allow-scripts">`` (an opaque
origin: no cookies, storage or parent DOM) holding :func:`frame_document`: our frame,
whose only script (``js/component_frame.js``) makes a second ``sandbox="allow-scripts"``
frame for the component's own document (:func:`component_document`). Both documents
start with :func:`policy`: no network at all, ``frame-src 'none'`` (the inner frame's
``srcdoc`` loads, every navigation of it is refused before a request leaves, and a
second document it loads anyway gets it removed), and scripts only by hash: the
component's document runs exactly one script, ``js/component_bridge.js``, which takes
the WebRTC interfaces (``RTCPeerConnection`` and friends, which no policy governs) off
the window before it runs the component's scripts with ``eval``. Any frame the component
makes inherits the policy, so the only script that can run there is that bridge again.

The bridge talks to our frame with ``postMessage``, our frame to the widget, each
forwarding only messages from the frame it made, and this module checks each again:

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
import base64
import contextvars
import hashlib
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
from agent_kernel.display.scripts import widget_script
from agent_kernel.display.waiting import STOPPED, Bundle, Nobody, WaitingWidget
from agent_kernel.secrets import redact

_JS = Path(__file__).with_name("js")

# The policy both frames' documents start with; a document inherits its parent's, so the
# component's document and any frame it makes are under both. Scripts run only by hash.
POLICY = (
    "default-src 'none'; script-src {scripts} 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:; "
    "font-src data:; frame-src 'none'; child-src 'none'; worker-src 'none'; form-action 'none'; base-uri 'none'"
)
_BRIDGE = (_JS / "component_bridge.js").read_text(encoding="utf-8").strip()
_FRAME = (_JS / "component_frame.js").read_text(encoding="utf-8").strip()
_SLOT = re.compile(r"__AK_(STATE|CODE|DOCUMENT)__")
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


def json_type(value: object) -> str:
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


def json_size(value: object) -> int:
    try:
        return len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    except (TypeError, ValueError):
        raise MessageError("is not plain JSON") from None


def checked_state(declared: dict[str, Any], state: object) -> dict[str, Any]:
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


def policy(*scripts: str) -> str:
    """The frames' Content-Security-Policy, allowing exactly the inline ``scripts``."""
    return POLICY.format(scripts=" ".join(script_hash(script) for script in scripts))


def script_hash(script: str) -> str:
    """The policy's source expression for one inline script's text."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii") + "'"


def script_literal(value: object) -> str:
    """``value`` as a JavaScript literal that is safe inside ``<script>``: ASCII only (so
    the text the browser hashes is this text), without ``<`` or ``>``, and without a
    carriage return (which the HTML parser would change)."""
    text = json.dumps(value, ensure_ascii=True, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e")


def _filled(template: str, **slots: str) -> str:
    # One pass, so what one slot's value holds is never taken for another slot.
    return _SLOT.sub(lambda found: slots[found.group(1).lower()], template)


def bridge_script(state: dict[str, Any], code: str) -> str:
    """The component document's one script: the bridge, with its state and the component's code."""
    return _filled(_BRIDGE, state=script_literal(state), code=script_literal(code))


def component_document(definition: ComponentVersion, state: dict[str, Any]) -> str:
    """The component's own document: the policy, the model's CSS and HTML, then the bridge."""
    return _component_document(definition, bridge_script(state, definition.js))


def _component_document(definition: ComponentVersion, bridge: str) -> str:
    css = f"<style>{definition.css}</style>" if definition.css else ""
    return (
        f'<!doctype html><html><head><meta http-equiv="Content-Security-Policy" content="{policy(bridge)}">'
        f'<meta http-equiv="x-dns-prefetch-control" content="off"><meta charset="utf-8">{css}</head>'
        f"<body>{without_refresh(definition.html)}<script data-ak-bridge>{bridge}</script></body></html>"
    )


def frame_document(definition: ComponentVersion, state: dict[str, Any]) -> str:
    """Our frame's document, which makes the component's frame: the document the widget shows.
    Its policy allows its own script and the bridge (the component's document inherits it)."""
    bridge = bridge_script(state, definition.js)
    script = _filled(_FRAME, document=script_literal(_component_document(definition, bridge)))
    return (
        f'<!doctype html><html><head><meta http-equiv="Content-Security-Policy" content="{policy(script, bridge)}">'
        '<meta http-equiv="x-dns-prefetch-control" content="off"><meta charset="utf-8">'
        "<style>html, body { margin: 0; height: 100%; overflow: hidden }</style></head>"
        f"<body><script>{script}</script></body></html>"
    )


# -- messages for the session's next turn ---------------------------------------------------

_NOTES: dict[str, list[str]] = {}


def keep_note(session_id: str, component: str, name: str, data: object) -> None:
    shown = redact(json.dumps(data, ensure_ascii=False))
    line = f"[A message from the UI component {component!r} (sent by its page, not typed by the user)] {name}: {shown}"
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

    _esm = widget_script("component.js")
    _css = (_JS / "widgets.css").read_text(encoding="utf-8")

    heading = traitlets.Unicode("").tag(sync=True)
    origin = traitlets.Unicode("").tag(sync=True)  # who made it, shown above the frame
    document = traitlets.Unicode("").tag(sync=True)  # frame_document(): our frame's srcdoc
    height = traitlets.Int(320).tag(sync=True)

    def __init__(
        self, definition: ComponentVersion, state: dict[str, Any], origin: str, host: ComponentHost | None,
        *, waiting: bool = False, height: int = 320,
    ) -> None:  # fmt: skip
        super().__init__(
            heading=title_of(definition), origin=origin,
            document=frame_document(definition, state), height=height,
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

    def _dispatch_message(self, _widget: object, content: object, _buffers: object) -> None:
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

    def receive(self, msg: object) -> None:
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

    def _message(self, name: object, data: object) -> None:
        if name not in self.definition.messages:
            raise MessageError(
                f"message {name!r} is not declared (declared: {', '.join(self.definition.messages) or 'none'})"
            )
        if json_size(data) > MESSAGE_BYTES:
            raise MessageError(f"the message's data is over {MESSAGE_BYTES:,} bytes as JSON")
        if self.host is None:
            raise MessageError("no session is listening")
        keep_note(self.host.session_id, self.definition.name, str(name), data)
        self.reply({"kind": "sent", "name": name})

    def _call(self, call_id: int | None, tool: object, tool_input: object) -> None:
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
        task = self._turn_context.copy().run(asyncio.ensure_future, self._run(run, call_id, str(tool), tool_input))
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
