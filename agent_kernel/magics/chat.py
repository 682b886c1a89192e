"""Turns from the Agent panel's chat, run in the notebook's kernel as an ``%agent`` cell's are.

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
from dataclasses import dataclass
from typing import Any

from IPython.core.error import UsageError

from agent_kernel.magics import agent as magics
from agent_kernel.turn.request import TurnRequest

__all__ = [
    "ATTACHMENT_KINDS",
    "MAX_ATTACHMENTS",
    "MAX_IMAGE_BYTES",
    "MAX_PAYLOAD_CHARS",
    "MAX_PROMPT_CHARS",
    "MAX_TEXT_CHARS",
    "ChatTurn",
    "attachment_blocks",
    "chat_turn",
    "encode",
    "run_chat_turn",
    "run_session_action",
    "session_action",
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


def encode(payload: dict[str, Any]) -> str:
    """The base64 text the panel sends for ``payload`` (tests and benchmarks use it)."""
    return base64.b64encode(json.dumps(payload).encode("utf-8")).decode("ascii")


def chat_turn(encoded: Any) -> ChatTurn:
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


def _settings(payload: dict[str, Any]) -> dict[str, Any]:
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


def attachment_blocks(item: Any) -> list[dict[str, Any]]:
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


def _image(data: Any, media_type: Any) -> dict[str, Any]:
    from agent_kernel.model.images import MEDIA_TYPES, ImageError, image_block

    if media_type not in MEDIA_TYPES:
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
    if magics._ACTIVE is None:
        from IPython.core.getipython import get_ipython

        shell = get_ipython()
        if shell is None or shell.extension_manager is None:
            raise UsageError("The Agent panel's chat needs an IPython kernel.")
        shell.extension_manager.load_extension("agent_kernel")
    active = magics._ACTIVE
    if active is None:
        raise UsageError("agent_kernel could not be loaded in this kernel.")
    await active.run_request(turn.request)


SESSION_ACTIONS = ("rename", "archive")


def session_action(encoded: Any) -> tuple[str, str, str | None]:
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
