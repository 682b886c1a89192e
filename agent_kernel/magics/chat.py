"""Turns from the Agent chat, run in the notebook's kernel as an ``%agent`` cell's are.

The panel sends an ``execute_request`` whose code is one call,
``await ...run_chat_turn('<base64>')``: the prompt, the settings row's choices and the
attachments travel as base64 of UTF-8 JSON, an alphabet that cannot end the string
literal, so nothing the person typed is ever read as Python. Here the payload is decoded
and checked (types, sizes, ranges) before anything runs; a bad one is a ``UsageError``.

The settings are the ``%agent`` flags' fields (``model``, ``approve``, ``thinking``,
``session``, ``new``), validated by the same function the flag parser uses, and the turn
runs through :meth:`AgentMagics.run_request`, so a panel turn is an ``%agent`` turn of the
notebook's current session: same tools, approvals, Stop, transcript and store.

Attachments become content blocks after the prompt in the same user message, which the
turn scrubs with the prompt (the one redaction boundary): text as a labelled text block,
an image (an output's PNG or JPEG) through :func:`agent_kernel.model.images.image_block`,
downscaled as the image path does for the agent's own images.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from IPython.core.error import UsageError

from agent_kernel.magics import agent as magics
from agent_kernel.turn.request import TurnRequest

if TYPE_CHECKING:
    from agent_kernel.config import AgentKernel
    from agent_kernel.model.shapes import ContentBlock

__all__ = [
    "ATTACHMENT_KINDS",
    "MAX_ATTACHMENTS",
    "MAX_IMAGE_BYTES",
    "MAX_PAYLOAD_CHARS",
    "MAX_PROMPT_CHARS",
    "MAX_TEXT_CHARS",
    "ChatTurn",
    "ContextMeterJson",
    "PanelDefaultsJson",
    "PanelStateJson",
    "attachment_blocks",
    "chat_turn",
    "configured_models",
    "context_meter",
    "encode",
    "panel_defaults",
    "panel_state",
    "run_chat_turn",
    "run_session_action",
    "session_action",
    "set_panel_defaults",
]

MAX_PAYLOAD_CHARS = 16_000_000  # base64 text of the whole payload
MAX_PROMPT_CHARS = 100_000
MAX_TEXT_CHARS = 200_000  # one text attachment (a cell, a selection, an output, a file)
MAX_IMAGE_BYTES = 5_000_000  # one image attachment, decoded
MAX_ATTACHMENTS = 20
MAX_NAME_CHARS = 200  # a session or model name, an attachment's label
ATTACHMENT_KINDS = ("cell", "selection", "output", "error", "file")
_SETTINGS = ("model", "approve", "thinking", "session", "new")
_KEYS = frozenset({"prompt", "attachments", *_SETTINGS})


@dataclass(frozen=True)
class ChatTurn:
    """A checked panel payload: the turn to run."""

    request: TurnRequest


def encode(payload: Mapping[str, object]) -> str:
    """The base64 text the panel sends for ``payload`` (tests and benchmarks use it)."""
    return base64.b64encode(json.dumps(payload).encode("utf-8")).decode("ascii")


def chat_turn(encoded: object) -> ChatTurn:
    """Decode and check the panel's payload; every problem is a ``UsageError`` saying which."""
    if not isinstance(encoded, str):
        raise UsageError("The panel's message must be base64 text.")
    if len(encoded) > MAX_PAYLOAD_CHARS:
        raise UsageError(f"The panel's message is over {MAX_PAYLOAD_CHARS:,} characters: attach less.")
    try:
        payload = json.loads(base64.b64decode(encoded, validate=True).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise UsageError("The panel's message is not base64 of UTF-8 JSON.") from None
    if not isinstance(payload, dict):
        raise UsageError("The panel's message must be a JSON object.")
    unknown = sorted(set(payload) - _KEYS)
    if unknown:
        raise UsageError(f"Unknown field(s) {', '.join(map(repr, unknown))} in the panel's message.")
    prompt = payload.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise UsageError("Give the agent a prompt.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise UsageError(f"The prompt is over {MAX_PROMPT_CHARS:,} characters.")
    call = _settings(payload)
    magics._validate(call)  # the %agent flags' own checks and conversions
    attachments = payload.get("attachments", [])
    if not isinstance(attachments, list):
        raise UsageError("attachments must be a list.")
    if len(attachments) > MAX_ATTACHMENTS:
        raise UsageError(f"At most {MAX_ATTACHMENTS} attachments a turn, not {len(attachments)}.")
    blocks = tuple(block for item in attachments for block in attachment_blocks(item))
    return ChatTurn(TurnRequest(prompt.strip(), attachments=blocks, **call))


def _settings(payload: Mapping[str, object]) -> dict[str, Any]:
    """The settings row's choices as ``%agent`` flag fields (absent or null: the default)."""
    call: dict[str, Any] = {}
    for field in _SETTINGS:
        value = payload.get(field)
        if value is None:
            continue
        if field == "new" and value is True:
            call[field] = True
            continue
        if not isinstance(value, str) or not value.strip():
            raise UsageError(f"{field} must be a non-empty string.")
        if len(value) > MAX_NAME_CHARS:
            raise UsageError(f"{field} is over {MAX_NAME_CHARS} characters.")
        call[field] = value.strip()
    return call


def attachment_blocks(item: object) -> list[ContentBlock]:
    """One attachment as content blocks: a label and its text, or a label and an image."""
    if not isinstance(item, dict):
        raise UsageError("Each attachment must be a JSON object.")
    unknown = sorted(set(item) - {"kind", "label", "text", "image", "media_type"})
    if unknown:
        raise UsageError(f"Unknown attachment field(s) {', '.join(map(repr, unknown))}.")
    kind, label = item.get("kind"), item.get("label", "")
    if kind not in ATTACHMENT_KINDS:
        raise UsageError(f"An attachment's kind is one of {', '.join(ATTACHMENT_KINDS)}, not {kind!r}.")
    if not isinstance(label, str) or len(label) > MAX_NAME_CHARS:
        raise UsageError(f"An attachment's label is text of at most {MAX_NAME_CHARS} characters.")
    text, image = item.get("text"), item.get("image")
    if (text is None) == (image is None):
        raise UsageError("An attachment has either text or an image.")
    heading = f"Attached by the person ({kind}{': ' + label if label else ''}):"
    if text is not None:
        if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS:
            raise UsageError(f"An attachment's text is at most {MAX_TEXT_CHARS:,} characters.")
        return [{"type": "text", "text": f"{heading}\n{text}"}]
    return [{"type": "text", "text": heading}, _image(image, item.get("media_type", "image/png"))]


def _image(data: object, media_type: object) -> ContentBlock:
    from agent_kernel.model.images import MEDIA_TYPES, ImageError, image_block

    if not isinstance(media_type, str) or media_type not in MEDIA_TYPES:
        raise UsageError(f"An attached image is one of {', '.join(MEDIA_TYPES)}, not {media_type!r}.")
    if not isinstance(data, str) or len(data) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        raise UsageError(f"An attached image is base64 of at most {MAX_IMAGE_BYTES:,} bytes.")
    try:
        raw = base64.b64decode(data, validate=True)
    except binascii.Error:
        raise UsageError("An attached image is not valid base64.") from None
    try:
        return image_block(raw, media_type)
    except ImageError as exc:
        raise UsageError(f"The attached image is {exc}.") from None


async def run_chat_turn(encoded: str) -> None:
    """What the panel's ``execute_request`` awaits: check the payload, then run the turn.

    The extension is loaded first when the notebook has not loaded it (the panel is a way
    into the agent, as ``%load_ext agent_kernel`` then ``%agent`` is).
    """
    turn = chat_turn(encoded)
    await active_magics().run_request(turn.request)


SESSION_ACTIONS = ("rename", "archive")


def session_action(encoded: object) -> tuple[str, str, str | None]:
    """The panel's session action, checked: (action, session name, new name or None)."""
    if not isinstance(encoded, str) or len(encoded) > 4 * MAX_NAME_CHARS * 3:
        raise UsageError("The panel's session action must be short base64 text.")
    try:
        payload = json.loads(base64.b64decode(encoded, validate=True).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise UsageError("The panel's session action is not base64 of UTF-8 JSON.") from None
    if not isinstance(payload, dict) or set(payload) - {"action", "name", "new_name"}:
        raise UsageError("A session action is a JSON object of action, name and new_name.")
    action, name, new_name = payload.get("action"), payload.get("name"), payload.get("new_name")
    if action not in SESSION_ACTIONS:
        raise UsageError(f"A session action is one of {', '.join(SESSION_ACTIONS)}, not {action!r}.")
    for field, value in (("name", name), ("new_name", new_name if action == "rename" else "-")):
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_CHARS:
            raise UsageError(f"{field} must be text of 1 to {MAX_NAME_CHARS} characters.")
    if action == "archive" and new_name is not None:
        raise UsageError("Archiving takes no new_name.")
    assert isinstance(name, str)  # checked above
    return action, name.strip(), new_name.strip() if isinstance(new_name, str) else None


def run_session_action(encoded: str) -> None:
    """Rename or archive a session from the panel, as ``%agent_sessions --rename/--archive``."""
    action, name, new_name = session_action(encoded)
    active = magics._ACTIVE
    if active is None:
        raise UsageError("agent_kernel is not loaded in this kernel: run a turn first.")
    if action == "rename" and new_name is not None:
        active._rename_session(name, new_name)
    else:
        active._archive_session(name)


# ---------------------------------------------------------------------------------------
# The settings row: the notebook's defaults in this kernel, for the next turn from anywhere

# Stay until the row changes them: the model, the approval mode, thinking.
DEFAULT_FIELDS = ("model", "approve", "thinking")
# Apply to the next turn only (from the panel or a cell), then the session is the current one.
NEXT_TURN_FIELDS = ("session", "new")
COMPACTION_STEPS = (
    "images in older tool results become a one-line placeholder",
    "older tool results are shortened to their head and tail",
    "the oldest turns are summarised by the small model",
)


class PanelDefaultsJson(TypedDict):
    """What the row chose (``None``: no choice; the setting or the session decides)."""

    model: str | None
    approve: str | None
    thinking: str | None
    session: str | None  # for the next turn only
    new: bool  # the next turn starts a new session


class ContextMeterJson(TypedDict):
    """How full the session's context window is, what it cost, and when it is compacted."""

    session: str
    model: str
    window: int  # the model's context window, tokens
    used: int | None  # prompt tokens of the session's last request; None: no request yet
    compact_at: int  # tokens past which a request is compacted (compact_at x window)
    compaction: str  # "client": the steps below, here; "server": the API compacts
    steps: list[str]  # what a compaction drops first, in order
    summary_model: str
    cost: float | None  # USD so far, sub-sessions included; None: no priced call
    unpriced_calls: int
    tokens: int  # counted against the session's token limit
    token_limit: int


class PanelStateJson(TypedDict):
    """What the panel's settings row shows for the notebook's kernel."""

    models: list[str]  # the configured ones, AgentKernel.model first
    default_model: str
    default_approve: str
    default_thinking: str
    defaults: PanelDefaultsJson
    meter: ContextMeterJson | None  # None: a new session, or the extension is not loaded


class JsonValue:
    """A value the front end reads as ``application/json`` (an ``execute_request``'s
    ``user_expressions`` are formatted by the display formatter)."""

    def __init__(self, value: object) -> None:
        self.value = value

    def _repr_json_(self) -> object:
        return self.value

    def __repr__(self) -> str:
        return json.dumps(self.value)


def configured_models(settings: AgentKernel) -> list[str]:
    """The models the person configured: AgentKernel.model, small, medium and large."""
    named = [settings.model, settings.small_model, settings.medium_model, settings.large_model]
    return list(dict.fromkeys(m for m in named if m))


def decode_payload(encoded: object, what: str, limit: int) -> dict[str, object]:
    if not isinstance(encoded, str) or len(encoded) > limit:
        raise UsageError(f"The panel's {what} must be base64 text of at most {limit:,} characters.")
    try:
        payload = json.loads(base64.b64decode(encoded, validate=True).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise UsageError(f"The panel's {what} is not base64 of UTF-8 JSON.") from None
    if not isinstance(payload, dict):
        raise UsageError(f"The panel's {what} must be a JSON object.")
    return payload


def panel_defaults(encoded: object, settings: AgentKernel) -> dict[str, Any]:
    """The row's choices, checked as the ``%agent`` flags are; a model must be a configured one."""
    payload = decode_payload(encoded, "settings", 8 * MAX_NAME_CHARS * 4)
    unknown = sorted(set(payload) - set(_SETTINGS))
    if unknown:
        raise UsageError(f"Unknown setting(s) {', '.join(map(repr, unknown))} from the panel.")
    if payload.get("new") not in (None, False, True):
        raise UsageError("new must be true or false.")
    payload = {k: v for k, v in payload.items() if v is not None and v is not False}
    call = _settings(payload)
    magics._validate(call)
    if "approve" in call:
        call["approve"] = call["approve"].lower()
    models = configured_models(settings)
    if "model" in call and call["model"] not in models:
        raise UsageError(
            f"{call['model']!r} is not a configured model; choose one of {', '.join(models)} "
            "(AgentKernel.model, small_model, medium_model, large_model)."
        )
    return call


def active_magics() -> magics.AgentMagics:
    """The kernel's ``AgentMagics``, loading the extension first when the notebook has not."""
    if magics._ACTIVE is None:
        from IPython.core.getipython import get_ipython

        shell = get_ipython()
        if shell is None or shell.extension_manager is None:
            raise UsageError("The Agent chat needs an IPython kernel.")
        shell.extension_manager.load_extension("agent_kernel")
    if magics._ACTIVE is None:
        raise UsageError("agent_kernel could not be loaded in this kernel.")
    return magics._ACTIVE


def set_panel_defaults(encoded: str) -> None:
    """Make the row's choices the notebook's defaults in this kernel (a cell's flags win)."""
    active = active_magics()
    call = panel_defaults(encoded, active.settings)
    active.panel_defaults = {f: call[f] for f in DEFAULT_FIELDS if f in call}
    active.panel_next = {f: call[f] for f in NEXT_TURN_FIELDS if f in call}


def panel_state(encoded_session: str | None = None) -> JsonValue:
    """The row's state for the front end: configured models, the defaults, the meter.

    ``encoded_session``: base64 of the JSON name of the session the row shows (absent:
    the notebook's current one). A kernel that has not loaded the extension is not made
    to (nor to open the store): its row shows the settings and no meter.
    """
    from agent_kernel.config import AgentKernel

    name = None
    if encoded_session is not None:
        found = decode_payload(encoded_session, "session", 4 * MAX_NAME_CHARS * 3).get("name")
        if found is not None:
            if not isinstance(found, str) or len(found) > MAX_NAME_CHARS:
                raise UsageError(f"A session name is text of at most {MAX_NAME_CHARS} characters.")
            name = found
    active = magics._ACTIVE
    settings = active.settings if active is not None else AgentKernel()
    chosen: dict[str, Any] = {**(active.panel_defaults if active else {}), **(active.panel_next if active else {})}
    state: PanelStateJson = {
        "models": configured_models(settings),
        "default_model": settings.model,
        "default_approve": settings.approve.lower(),
        "default_thinking": settings.thinking.lower() or "off",
        "defaults": {
            "model": chosen.get("model"), "approve": chosen.get("approve"), "thinking": chosen.get("thinking"),
            "session": chosen.get("session"), "new": bool(chosen.get("new")),
        },
        "meter": None if active is None or chosen.get("new") else context_meter(active, name or chosen.get("session")),
    }  # fmt: skip
    return JsonValue(state)


def context_meter(active: magics.AgentMagics, name: str | None) -> ContextMeterJson | None:
    """The meter of the session called ``name`` (else the notebook's current one), or None."""
    from agent_kernel.store.sessions import Sessions
    from agent_kernel.store.usage import session_usage
    from agent_kernel.turn.budget import context_window_for

    agent, settings = active.kernel_agent, active.settings
    if name is None:
        session = agent.session(create=False)
    else:
        with agent.store.connect() as con:
            session = Sessions(con).by_name(name)
    if session is None:
        return None
    with agent.store.connect() as con:
        usage = session_usage(con, session.id)
    model = active.panel_defaults.get("model") or session.model or settings.model
    window = context_window_for(model, settings.context_window)
    priced = usage.cost > 0 or (usage.last_prompt_tokens is not None and not usage.unpriced)
    return {
        "session": session.name, "model": model, "window": window, "used": usage.last_prompt_tokens,
        "compact_at": int(window * settings.compact_at), "compaction": settings.compaction,
        "steps": list(COMPACTION_STEPS), "summary_model": settings.small_model,
        "cost": usage.cost if priced else None, "unpriced_calls": usage.unpriced,
        "tokens": session.tokens_used, "token_limit": session.token_limit or settings.token_limit,
    }  # fmt: skip
