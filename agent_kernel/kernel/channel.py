"""The comm channel between the kernel and a notebook front end running our extension.

The JupyterLab / Notebook 7 extension opens a comm to :data:`TARGET` when a notebook's
kernel is ready and says ``hello`` with the notebook's path; then it reports the selected
cell (``focus``) as it changes. The kernel thereby knows whether a front end that can show
and apply notebook edits is attached, and which notebook it is. Without one (papermill, the
scheduler, ``jupyter console``, editors without the extension) nothing is attached, the
notebook tools are not offered and nothing ever waits for an answer.

Every message is untrusted (a hostile notebook can open comms too): it is checked for its
type, its size and each field's type and range before anything reads it; a refused message
changes no state, is counted, and is answered with ``{"type": "refused", "reason": ...}``.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

TARGET = "agent_kernel.notebook"
PROTOCOL = 1
MAX_MESSAGE_BYTES = 64 * 1024
MAX_PATH_CHARS = 1024
MAX_ID_CHARS = 64
_CELL_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # nbformat 4.5 cell ids


class Refused(ValueError):
    """A message the channel will not act on; the text says why (sent back to the front end)."""


@dataclass
class Attachment:
    """What the front end on one comm told the kernel about its notebook."""

    comm_id: str
    notebook: str  # the notebook's path relative to the server root
    selected_cell: str | None = None


@dataclass
class Channel:
    """The kernel's end: the attached front end (if any) and counts of refused messages."""

    attachments: dict[str, Attachment] = field(default_factory=dict)
    refused: int = 0
    _comms: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def attached(self) -> Attachment | None:
        """The front end that said hello most recently and is still connected."""
        with self._lock:
            return next(reversed(self.attachments.values()), None)

    # -- comm callbacks ----------------------------------------------------------------

    def open(self, comm: Any, message: dict[str, Any]) -> None:
        """The comm target: a front end opens the channel with its ``hello``."""
        comm_id = str(comm.comm_id)
        try:
            hello = check(message["content"].get("data"))
            if hello["type"] != "hello":
                raise Refused("the first message must be hello")
            attachment = Attachment(comm_id, hello["notebook"])
        except Refused as refusal:
            self._refuse(comm, refusal)
            comm.close()
            return
        with self._lock:
            self._comms[comm_id] = comm
            self.attachments[comm_id] = attachment
        comm.on_msg(self.receive)
        comm.on_close(self.closed)
        comm.send({"type": "welcome", "protocol": PROTOCOL})

    def receive(self, message: dict[str, Any]) -> None:
        """A message on an open channel."""
        comm_id = str(message["content"].get("comm_id", ""))
        with self._lock:
            comm, attachment = self._comms.get(comm_id), self.attachments.get(comm_id)
        if comm is None or attachment is None:
            return
        try:
            data = check(message["content"].get("data"))
            if data["type"] != "focus":
                raise Refused(f"{data['type']} is not expected now")
            attachment.selected_cell = data["cell"]
        except Refused as refusal:
            self._refuse(comm, refusal)

    def closed(self, message: dict[str, Any]) -> None:
        """The front end went away (notebook closed, page reloaded, kernel changed)."""
        comm_id = str(message["content"].get("comm_id", ""))
        with self._lock:
            self.attachments.pop(comm_id, None)
            self._comms.pop(comm_id, None)

    def _refuse(self, comm: Any, refusal: Refused) -> None:
        with self._lock:
            self.refused += 1
        comm.send({"type": "refused", "reason": str(refusal)[:200]})


# -- validation ---------------------------------------------------------------------------


def check(data: Any) -> dict[str, Any]:
    """``data`` as a valid message from the front end, or :class:`Refused` saying why."""
    if not isinstance(data, dict):
        raise Refused("a message is a JSON object")
    try:
        size = len(json.dumps(data))
    except (TypeError, ValueError):
        raise Refused("a message is plain JSON") from None
    if size > MAX_MESSAGE_BYTES:
        raise Refused(f"a message is at most {MAX_MESSAGE_BYTES} bytes")
    kind = data.get("type")
    checker = _CHECKS.get(kind) if isinstance(kind, str) else None
    if checker is None:
        raise Refused(f"unknown message type {str(kind)[:40]!r}")
    checker(data)
    return data


def _hello(data: dict[str, Any]) -> None:
    if data.get("protocol") != PROTOCOL:
        raise Refused(f"protocol {PROTOCOL} only")
    _text(data, "notebook", MAX_PATH_CHARS)
    if not data["notebook"].endswith(".ipynb") or "\x00" in data["notebook"]:
        raise Refused("notebook is the path of an .ipynb file")


def _focus(data: dict[str, Any]) -> None:
    if data.get("cell") is not None:
        cell_id(data, "cell")


def _text(data: dict[str, Any], key: str, limit: int) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not 0 < len(value) <= limit:
        raise Refused(f"{key} is a string of 1 to {limit} characters")
    return value


def cell_id(data: dict[str, Any], key: str) -> str:
    """``data[key]`` as a cell id, or :class:`Refused`."""
    value = data.get(key)
    if not isinstance(value, str) or not _CELL_ID.match(value):
        raise Refused(f"{key} is a cell id (letters, digits, - and _, at most {MAX_ID_CHARS})")
    return value


_CHECKS = {"hello": _hello, "focus": _focus}


# -- the kernel's channel ---------------------------------------------------------------

_CHANNEL: Channel | None = None


def install() -> Channel:
    """Register the comm target in this kernel (once); the channel it feeds."""
    global _CHANNEL
    if _CHANNEL is None:
        from comm import get_comm_manager

        channel = Channel()
        get_comm_manager().register_target(TARGET, channel.open)
        _CHANNEL = channel
    return _CHANNEL


def attached() -> Attachment | None:
    """The notebook front end attached to this kernel, if the channel is installed and one is."""
    return _CHANNEL.attached if _CHANNEL is not None else None


def running_cell() -> str | None:
    """The notebook cell id of the running execute request (JupyterLab sends ``cellId``)."""
    from IPython import get_ipython

    kernel: Any = getattr(get_ipython(), "kernel", None)
    if kernel is None:
        return None
    try:
        parent = kernel.get_parent("shell") or {}
    except Exception:  # noqa: BLE001 - an unusual kernel: no cell known
        return None
    value = (parent.get("metadata") or {}).get("cellId")
    return value if isinstance(value, str) and _CELL_ID.match(value) else None
