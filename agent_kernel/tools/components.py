"""UI components the agent builds (group ``ui``): create, update, delete, list, read, and
``render_and_wait``; ``render_blocks`` shows them with a ``component`` block.

A component is HTML, CSS and JavaScript with a declared state (its keys and initial
values), the messages it may send and the tools it may call. It runs in a sandboxed
frame with no network and no way into the notebook page (see
:mod:`agent_kernel.display.components`); every change is a new stored version, with the
provenance of the turn that wrote it, which the frame shows.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from agent_kernel.display.blocks import SOURCE_CHARS
from agent_kernel.display.components import (
    STATE_BYTES,
    ComponentWidget,
    MessageError,
    checked_state,
    component_bundle,
    json_size,
    without_refresh,
)
from agent_kernel.display.view import NO_FRONT_END
from agent_kernel.display.waiting import Nobody, Pending
from agent_kernel.errors import ToolInputError
from agent_kernel.store import components as stored
from agent_kernel.store import provenance
from agent_kernel.tools import Tool, current_context
from agent_kernel.tools.agent_tools import atomic, kept_version
from agent_kernel.tools.data import with_connection

if TYPE_CHECKING:
    import duckdb


class ComponentSaved(TypedDict):
    """``create_ui_component``'s and ``update_ui_component``'s reply: the version saved."""

    name: str
    version: int


class ComponentDeleted(TypedDict):
    deleted: bool


class ComponentEntry(TypedDict):
    """One component in ``list_ui_components``'s reply."""

    name: str
    description: str
    version: int
    messages: list[str]
    tools: list[str]


class ComponentList(TypedDict):
    components: list[ComponentEntry]


class ComponentDefinition(TypedDict):
    """``read_ui_component``'s reply: one stored version whole, its texts shown as their provenance says."""

    name: str
    version: int
    description: str
    html: str
    css: str
    js: str
    state: dict[str, object]
    messages: list[str]
    tools: list[str]


class ComponentAnswer(TypedDict):
    """What the person did with a component (agent_kernel.display.components answers it)."""

    action: Literal["submit", "dismiss"]
    state: NotRequired[dict[str, Any]]  # submit: the state its script set
    reason: NotRequired[str]  # dismiss: why, when the component was removed


class NobodyAnswered(TypedDict):
    """``render_and_wait``'s reply when nobody can answer: the state it was shown with."""

    action: Literal["none"]
    user_present: bool
    state: dict[str, Any]
    note: str


GROUP = "ui"
NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
DESCRIPTION_CHARS = 2_000
SOURCE_BYTES = 65_536  # html, css and js together, as UTF-8
MAX_STATE_KEYS = 50
MAX_MESSAGES = 20
MAX_TOOLS = 10
MIN_HEIGHT, MAX_HEIGHT, HEIGHT = 40, 1_200, 320
INLINE = "inline"  # the name an inline component without one is shown under

Name = Annotated[str, Field(max_length=64, description="snake_case name")]
Description = Annotated[str, Field(max_length=DESCRIPTION_CHARS)]
Source = Annotated[str, Field(max_length=SOURCE_CHARS)]
Names = Annotated[list[Annotated[str, Field(max_length=64)]], Field(max_length=MAX_MESSAGES)]
MAX_VERSION = 1_000_000
Version = Annotated[int, Field(ge=1, le=MAX_VERSION)]
Height = Annotated[int, Field(ge=MIN_HEIGHT, le=MAX_HEIGHT)]

NO_USER = (
    "No user is present to use the component ({reason}). `state` holds its initial state, "
    "not answers. Go on without it if you can and say so in your reply; otherwise explain "
    "what you need and stop."
)


async def create_ui_component(
    name: Name,
    description: Description,
    html: Source,
    css: Source = "",
    js: Source = "",
    state: dict[str, Any] | None = None,
    messages: Names | None = None,
    tools: Names | None = None,
) -> ComponentSaved:
    """Build an interactive component (HTML/CSS/JS), kept and versioned; show it with
    render_blocks ({"type": "component", "name": ...}) or render_and_wait.

    It runs in a sandboxed frame: no network, no access to the notebook. Its script uses
    `ak`: ak.state, ak.setState({...}) (declared keys only), ak.onState(fn),
    ak.send(message, data) (a note your next turn sees), ak.call(tool, input) -> Promise
    of the result (declared tools only, and only what this turn's approval mode allows).

    Args:
        name: snake_case name.
        description: What it shows and does.
        html: Body markup.
        css: Styles.
        js: Script (runs after the markup).
        state: Initial state; its keys and value types are the only ones ak.setState accepts.
        messages: Message names it may send.
        tools: Tools it may call.
    """
    definition = _definition(name, description, html, css, js, state, messages, tools)
    context = current_context()

    def save(con: duckdb.DuckDBPyConnection) -> int:
        kept = stored.Components(con)
        if kept.exists(name):
            raise ToolInputError(f"A component named {name!r} exists; change it with update_ui_component.")
        version = kept.save(definition, context.session_id)
        provenance.record(con, "component", name, context.provenance(), version=version)
        return version

    return {"name": name, "version": await with_connection(context.store, atomic(save))}


async def update_ui_component(
    name: Name,
    description: Description | None = None,
    html: Source | None = None,
    css: Source | None = None,
    js: Source | None = None,
    state: dict[str, Any] | None = None,
    messages: Names | None = None,
    tools: Names | None = None,
) -> ComponentSaved:
    """Change your component (only the fields given): a new version; earlier ones stay readable.

    Args:
        name: The component.
        description: New description.
        html: New markup.
        css: New styles.
        js: New script.
        state: New initial state (declares the keys).
        messages: New message names.
        tools: New tool names.
    """
    context = current_context()

    def save(con: duckdb.DuckDBPyConnection) -> int:
        kept = stored.Components(con)
        base = kept.get(name)
        if base is None:
            raise ToolInputError(_unknown(con, name))
        changed = _definition(
            name,
            description if description is not None else base.description,
            html if html is not None else base.html,
            css if css is not None else base.css,
            js if js is not None else base.js,
            state if state is not None else base.state,
            messages if messages is not None else list(base.messages),
            tools if tools is not None else list(base.tools),
        )
        version = kept.save(changed, context.session_id)
        provenance.record(con, "component", name, context.provenance(), version=version, inherit=True)
        return version

    return {"name": name, "version": await with_connection(context.store, atomic(save))}


async def delete_ui_component(name: Name) -> ComponentDeleted:
    """Delete your component (its stored versions stay readable with read_ui_component).

    Args:
        name: The component.
    """
    deleted = await with_connection(current_context().store, lambda con: stored.Components(con).delete(name))
    return {"deleted": deleted}


async def list_ui_components() -> ComponentList:
    """Your components: name, description, current version, declared messages and tools."""
    found = await with_connection(current_context().store, lambda con: stored.Components(con).list())
    return {
        "components": [
            {"name": c.name, "description": c.description, "version": c.version,
             "messages": list(c.messages), "tools": list(c.tools)}
            for c in found
        ]
    }  # fmt: skip


async def read_ui_component(name: Name, version: Version | None = None) -> ComponentDefinition:
    """Your component's whole definition (html, css, js, state, messages, tools), any version.

    Args:
        name: The component.
        version: An earlier version (default: the current one).
    """

    def read(con: duckdb.DuckDBPyConnection) -> ComponentDefinition:
        found: stored.ComponentVersion = kept_version(
            stored.Components(con), name, version, lambda: _unknown(con, name)
        )
        record = provenance.of_version(con, "component", name, found.version)

        def shown(key: str, text: str) -> str:
            return provenance.shown(text, record, f"component {name} {key}") if text else ""

        return {
            "name": found.name,
            "version": found.version,
            "description": shown("description", found.description),
            "html": shown("html", found.html),
            "css": shown("css", found.css),
            "js": shown("js", found.js),
            "state": found.state,
            "messages": list(found.messages),
            "tools": list(found.tools),
        }

    return await with_connection(current_context().store, read)


async def render_and_wait(
    component: Annotated[str | None, Field(max_length=64, description="A stored component's name")] = None,
    version: Version | None = None,
    state: dict[str, Any] | None = None,
    html: Source | None = None,
    css: Source = "",
    js: Source = "",
    messages: Names | None = None,
    tools: Names | None = None,
    height: Height = HEIGHT,
) -> ComponentAnswer | NobodyAnswered:
    """Show a component and wait until the person presses Submit (or Dismiss).

    Returns {"action": "submit", "state": {...}} (the state its script set) or
    {"action": "dismiss"}. Give `component` (stored) or `html`/`css`/`js` (inline).

    Args:
        component: A stored component.
        version: Its version (default: current).
        state: Initial state (over the declared one).
        html: Inline markup.
        css: Inline styles.
        js: Inline script.
        messages: Inline: message names it may send.
        tools: Inline: tools it may call.
        height: Frame height in px.
    """
    spec: dict[str, Any] = {"state": state, "height": height}
    if component is not None:
        spec.update(name=component, version=version)
    else:
        spec.update(html=html, css=css, js=js, messages=messages, tools=tools)
    ctx = current_context()
    widget = await component_widget(spec, waiting=True)
    if not ctx.transcript.live:
        print(component_bundle(widget.definition, widget.origin, widget.state, None)["text/plain"])
        return _nobody(widget.state, NO_FRONT_END)
    ctx.transcript.end_text()
    outcome = await Pending(widget, ctx).wait()
    if isinstance(outcome, Nobody):
        return _nobody(widget.state, outcome.reason)
    answer: ComponentAnswer = outcome
    return answer


def _nobody(state: dict[str, Any], reason: str) -> NobodyAnswered:
    return {"action": "none", "user_present": False, "state": state, "note": NO_USER.format(reason=reason)}


# -- showing one ---------------------------------------------------------------------------


async def component_widget(spec: dict[str, Any], *, waiting: bool = False) -> Any:
    """The :class:`~agent_kernel.display.components.ComponentWidget` of a ``component``
    block or ``render_and_wait`` call: a stored component (``name``, ``version``) or an
    inline one (``html``, ...), with ``state`` over its declared state."""
    ctx = current_context()
    name = spec.get("name")
    if isinstance(spec.get("html"), str):
        definition = _definition(
            name if isinstance(name, str) else INLINE, "inline", spec["html"], spec.get("css") or "",
            spec.get("js") or "", spec.get("state"), spec.get("messages"), spec.get("tools"),
        )  # fmt: skip
        origin = _origin(ctx.session_id, ctx.turn, bool(ctx.session_sources()), inline=True)
    else:
        if not isinstance(name, str):
            raise ToolInputError("Give a stored component's `name`, or inline `html`.")
        definition, record = await with_connection(ctx.store, lambda con: _stored(con, name, spec.get("version")))
        origin = (
            _origin(record.session_id, record.turn, record.untrusted) if record is not None
            else "Made by the user or before provenance was kept"
        )  # fmt: skip
    state = dict(definition.state)
    given = spec.get("state")
    if given is not None:
        try:
            state.update(checked_state(definition.state, given))
        except MessageError as exc:
            raise ToolInputError(f"state: {exc}.") from None
    height = spec.get("height") or HEIGHT
    if not isinstance(height, int) or not MIN_HEIGHT <= height <= MAX_HEIGHT:
        raise ToolInputError(f"height must be a whole number of pixels from {MIN_HEIGHT} to {MAX_HEIGHT}.")
    return ComponentWidget(definition, state, origin, ctx, waiting=waiting, height=height)


def _stored(
    con: duckdb.DuckDBPyConnection, name: str, version: Any
) -> tuple[stored.ComponentVersion, provenance.Record | None]:
    if version is not None and (
        not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= MAX_VERSION
    ):
        raise ToolInputError(f"version must be a whole number from 1 to {MAX_VERSION:,}.")
    found: stored.ComponentVersion = kept_version(stored.Components(con), name, version, lambda: _unknown(con, name))
    return found, provenance.of_version(con, "component", name, found.version)


def _origin(session_id: str | None, turn: int | None, untrusted: bool, *, inline: bool = False) -> str:
    what = "Written inline by the agent" if inline else "Made by the agent"
    where = f" in session {session_id[:8]}, turn {turn}" if session_id else ""
    after = " after the session read untrusted web content" if untrusted else " (no untrusted content read before)"
    return what + where + after


# -- checks -----------------------------------------------------------------------------------


def _definition(
    name: str, description: str, html: str, css: str, js: str, state: Any, messages: Any, tools: Any
) -> stored.ComponentVersion:
    """A component definition with every limit checked (a ToolInputError names the first problem)."""
    _check_name(name, "name")
    if not description.strip():
        raise ToolInputError("description is empty: say what the component shows and does.")
    if len(description) > DESCRIPTION_CHARS:
        raise ToolInputError(f"description is over {DESCRIPTION_CHARS:,} characters; shorten it.")
    sources = {"html": html, "css": css, "js": js}
    for key, value in sources.items():
        if not isinstance(value, str):
            raise ToolInputError(f"{key} must be a string.")
    if not html.strip():
        raise ToolInputError("html is empty: give the component's markup.")
    size = sum(len(v.encode("utf-8", "surrogatepass")) for v in sources.values())
    if size > SOURCE_BYTES:
        raise ToolInputError(f"html, css and js are {size:,} bytes together; the limit is {SOURCE_BYTES:,}. Simplify.")
    state = {} if state is None else state
    if not isinstance(state, dict):
        raise ToolInputError("state must be an object: its keys are the state the component may set.")
    if len(state) > MAX_STATE_KEYS:
        raise ToolInputError(f"state has {len(state)} keys; the limit is {MAX_STATE_KEYS}.")
    for key in state:
        if not isinstance(key, str) or not 0 < len(key) <= 64:
            raise ToolInputError("state keys must be strings of 1 to 64 characters.")
    try:
        if json_size(state) > STATE_BYTES:
            raise ToolInputError(f"state is over {STATE_BYTES:,} bytes as JSON; keep data out of it.")
    except MessageError:
        raise ToolInputError("state must be plain JSON (no NaN or infinities).") from None
    return stored.ComponentVersion(
        name, 0, description.strip(), without_refresh(html), css, js, state,
        _names(messages, "messages", MAX_MESSAGES), _names(tools, "tools", MAX_TOOLS),
    )  # fmt: skip


def _names(values: Any, what: str, limit: int) -> tuple[str, ...]:
    values = [] if values is None else values
    if not isinstance(values, list):
        raise ToolInputError(f"{what} must be a list of names.")
    if len(values) > limit:
        raise ToolInputError(f"{what} has {len(values)} names; the limit is {limit}.")
    for value in values:
        _check_name(value, what)
    return tuple(dict.fromkeys(values))


def _check_name(name: Any, what: str) -> None:
    if not isinstance(name, str) or not NAME.match(name) or "__" in name:
        raise ToolInputError(f"{name!r} in {what} is not a name: use snake_case (a-z, 0-9, _; starting with a letter).")


def _unknown(con: duckdb.DuckDBPyConnection, name: str) -> str:
    names = [c.name for c in stored.Components(con).list()]
    known = ", ".join(names) if names else "none yet (create_ui_component makes one)"
    return f"No component of yours is named {name!r}; yours are: {known}."


TOOLS = [
    Tool(create_ui_component, name="create_ui_component", group=GROUP, writes=True),
    Tool(update_ui_component, name="update_ui_component", group=GROUP, writes=True),
    Tool(delete_ui_component, name="delete_ui_component", group=GROUP, writes=True),
    Tool(list_ui_components, name="list_ui_components", group=GROUP),
    Tool(read_ui_component, name="read_ui_component", group=GROUP),
    Tool(render_and_wait, name="render_and_wait", group=GROUP),
]
