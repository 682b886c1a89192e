"""The comm channel between the kernel and a notebook front end running our extension.

Either end may open the comm (:data:`TARGET`): the extension when a notebook's kernel is
ready, the kernel when agent_kernel loads (the extension registers the target too, and
answers on a comm of its own: several front ends, collaborators on one notebook, share a
kernel, and each is attached on its own comm). The front end's first message is ``hello``
with the notebook's path (and the server's root, so the kernel knows the notebook's absolute
path); then it reports the selected cell (``focus``) as it changes, and the notebook's new
path when it is renamed, moved or saved as a copy (``moved``). The kernel tells every front
end when a turn ended (``turn_ended``), so a chat shows turns run from cells as they happen.
The kernel thereby knows whether a front end that can show and apply notebook edits is
attached, and which notebook it is. Without one (papermill, the scheduler, ``jupyter
console``, editors without the extension) nothing is attached, the
notebook tools are not offered and nothing ever waits for an answer.

Every message is untrusted (a hostile notebook can open comms too): it is checked for its
type, its size and each field's type and range before anything reads it; a refused message
changes no state, is counted, and is answered with ``{"type": "refused", "reason": ...}``.
The messages' shapes are in :mod:`agent_kernel.kernel.protocol`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast

import comm as jupyter_comm
from comm.base_comm import BaseComm
from IPython import get_ipython

from agent_kernel.kernel.protocol import (
    PROTOCOL,
    CellsMessage,
    EditedMessage,
    FocusMessage,
    FrontEndAnswer,
    FrontEndMessage,
    HelloMessage,
    KernelAnnouncement,
    KernelMessage,
    KernelRequest,
    MovedMessage,
    NotebookCell,
    RefusedMessage,
    TurnEndedMessage,
    WelcomeMessage,
    WithdrawMessage,
)

TARGET = "agent_kernel.notebook"
MAX_MESSAGE_BYTES = 64 * 1024
MAX_PATH_CHARS = 1024
MAX_ID_CHARS = 64
MAX_CELLS_BYTES = 2 * 1024 * 1024  # a notebook's cells as the front end reads them
MAX_CELLS = 2000
MAX_SOURCE_CHARS = 200_000
CELL_TYPES = ("code", "markdown", "raw")
MAX_COMMS = 16  # front ends attached at once (each open notebook view of this kernel)
MAX_MARK_BYTES = 4 * 1024  # a cell's agent_kernel mark as the front end reports it
MAX_PEOPLE = 10_000
_DOCUMENT_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_CELL_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # nbformat 4.5 cell ids


class Refused(ValueError):
    """A message the channel will not act on; the text says why (sent back to the front end)."""


@dataclass
class Attachment:
    """What the front end on one comm told the kernel about its notebook."""

    comm_id: str
    notebook: str  # the notebook's path relative to the server root
    selected_cell: str | None = None
    client: str = ""  # the front end's kernel client session (every message's header.session)
    root: str = ""  # the server's root directory ("" when the front end did not say)
    document: str = ""  # the notebook's id from its metadata ("" until a save gave it one)

    @property
    def path(self) -> str | None:
        """The notebook's absolute path, as Jupyter Server names it to a kernel it starts
        (``JPY_SESSION_NAME``); None when the front end did not say the server's root."""
        if not self.root:
            return None
        return os.path.join(os.path.expanduser(self.root), *[p for p in self.notebook.split("/") if p])


@dataclass
class Channel:
    """The kernel's end: the attached front end (if any) and counts of refused messages."""

    attachments: dict[str, Attachment] = field(default_factory=dict)
    refused: int = 0
    announced: str | None = None  # the comm the kernel opened, until a turn settled it
    announced_at: float = 0.0  # when (time.monotonic())
    on_document: Callable[[Attachment], None] | None = None  # told when a front end names its notebook's id
    collaborators: int = 0  # other people in the shared document, as the last read said
    _comms: dict[str, BaseComm] = field(default_factory=dict)
    _pending: dict[int, tuple[str, asyncio.Future[FrontEndAnswer]]] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def attached(self) -> Attachment | None:
        """The front end that sent the running cell, else the one that said hello most
        recently and is still connected. Several are attached when people collaborate on
        one notebook (each browser has its own client): the one running the turn applies
        its edits (the shared document carries them to the others) and runs its cells."""
        client = _request_client()
        with self._lock:
            attachments = list(self.attachments.values())
        sender = [a for a in attachments if client and a.client == client]
        return (sender or attachments)[-1] if attachments else None

    # -- comm callbacks ----------------------------------------------------------------

    def open(self, comm: BaseComm, message: Mapping[str, object]) -> None:
        """The comm target: a front end opens the channel with its ``hello``."""
        if len(self._comms) >= MAX_COMMS:
            self._refuse(comm, Refused(f"at most {MAX_COMMS} front ends at once"))
            comm.close()
            return
        self._listen(comm)
        if not self._greet(comm, _content(message).get("data"), _client(message)):
            comm.close()
            self._forget(str(comm.comm_id))

    def announce(self) -> None:
        """Open a comm to the front end: one that has the extension answers ``hello`` on it
        (how a notebook learns the kernel loaded agent_kernel after it connected)."""
        announcement: KernelAnnouncement = {"type": "kernel", "protocol": PROTOCOL}
        # Looked up at the call: ipykernel sets comm's create_comm and get_comm_manager when it starts.
        comm = jupyter_comm.create_comm(target_name=TARGET, data=announcement)
        self._listen(comm)
        self.announced = str(comm.comm_id)
        self.announced_at = time.monotonic()

    async def settle(self, timeout: float) -> None:
        """Give a notebook front end that has not answered the kernel's announcement yet
        until ``timeout`` seconds after it to say hello (cells queued with ``%load_ext`` run
        before its answer arrives). Only in a notebook cell (``cellId``: not papermill, not
        consoles) and only once: a front end without the extension costs at most one short
        wait, and none for a turn that starts later than that."""
        announced, self.announced = self.announced, None
        if announced is None or self.attached is not None or running_cell() is None:
            return
        left = self.announced_at + timeout - time.monotonic()
        deadline = asyncio.get_running_loop().time() + left
        while self.attached is None and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)

    def _listen(self, comm: BaseComm) -> None:
        with self._lock:
            self._comms[str(comm.comm_id)] = comm
        comm.on_msg(self.receive)
        comm.on_close(self.closed)

    def _greet(self, comm: BaseComm, data: object, client: str) -> bool:
        """Attach the front end whose first message ``data`` is a valid hello."""
        try:
            hello = check(data)
            if hello["type"] != "hello":
                raise Refused("the first message must be hello")
        except Refused as refusal:
            self._refuse(comm, refusal)
            return False
        with self._lock:
            attachment = Attachment(
                str(comm.comm_id),
                hello["notebook"],
                client=client,
                root=hello.get("root", ""),
                document=hello.get("document", ""),
            )
            self.attachments[str(comm.comm_id)] = attachment
        welcome: WelcomeMessage = {"type": "welcome", "protocol": PROTOCOL}
        _send(comm, welcome)
        self._document_named(attachment)
        return True

    def _document_named(self, attachment: Attachment) -> None:
        """Tell :attr:`on_document` where the notebook with this id is now, so sessions follow
        it even when it is next moved while no kernel runs."""
        listener = self.on_document
        if listener is not None and attachment.document and attachment.path:
            listener(attachment)

    def receive(self, message: Mapping[str, object]) -> None:
        """A message on an open channel (the first on an announced one must be hello)."""
        content = _content(message)
        comm_id = str(content.get("comm_id", ""))
        with self._lock:
            comm, attachment = self._comms.get(comm_id), self.attachments.get(comm_id)
        if comm is None:
            return
        if attachment is None:
            self._greet(comm, content.get("data"), _client(message))
            return
        try:
            data = check(content.get("data"))
            if data["type"] == "focus":
                attachment.selected_cell = data.get("cell")
            elif data["type"] == "cells" or data["type"] == "edited":
                self._answer(comm_id, data)
            elif data["type"] == "moved":
                attachment.notebook = data["notebook"]  # the next turn files its session here
                attachment.document = data.get("document", attachment.document)
                self._document_named(attachment)
            else:  # hello: only a comm's first message
                raise Refused(f"{data['type']} is not expected now")
        except Refused as refusal:
            self._refuse(comm, refusal)

    async def request(self, data: Mapping[str, object], timeout: float) -> FrontEndAnswer:
        """Send ``data``, a :data:`~agent_kernel.kernel.protocol.KernelRequest` without its
        ``id``, to the attached front end and await its answer (``TimeoutError`` after
        ``timeout`` seconds, ``LookupError`` when none is attached). The running cell
        awaits, so ipykernel delivers the answer meanwhile."""
        attachment = self.attached
        comm = self._comms.get(attachment.comm_id) if attachment else None
        if attachment is None or comm is None:
            raise LookupError("no notebook front end with the agent-kernel extension is attached")
        request_id = next(self._ids)
        future: asyncio.Future[FrontEndAnswer] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._pending[request_id] = (attachment.comm_id, future)
        try:
            _send(comm, cast(KernelRequest, {**data, "id": request_id}))
            return await asyncio.wait_for(future, timeout)
        except BaseException:
            withdraw: WithdrawMessage = {"type": "withdraw", "id": request_id}
            _send(comm, withdraw)  # e.g. a diff nobody answered
            raise
        finally:
            with self._lock:
                self._pending.pop(request_id, None)

    def turn_ended(self, session_id: str) -> None:
        """Tell every attached front end that a turn of ``session_id`` ended (and is stored)."""
        with self._lock:
            comms = [self._comms.get(comm_id) for comm_id in self.attachments]
        message: TurnEndedMessage = {"type": "turn_ended", "session": session_id}
        for comm in comms:
            if comm is not None:
                _send(comm, message)

    def _answer(self, comm_id: str, data: FrontEndAnswer) -> None:
        """Resolve the request ``data`` answers; an answer nobody asked this comm for is refused."""
        with self._lock:
            pending = self._pending.get(data["id"])
        if pending is None or pending[0] != comm_id or pending[1].done():
            raise Refused(f"no open request {data['id']} on this channel")
        future = pending[1]
        future.get_loop().call_soon_threadsafe(lambda: None if future.done() else future.set_result(data))

    def closed(self, message: Mapping[str, object]) -> None:
        """The front end went away (notebook closed, page reloaded, kernel changed)."""
        self._forget(str(_content(message).get("comm_id", "")))

    def _forget(self, comm_id: str) -> None:
        with self._lock:
            self.attachments.pop(comm_id, None)
            self._comms.pop(comm_id, None)

    def _refuse(self, comm: BaseComm, refusal: Refused) -> None:
        with self._lock:
            self.refused += 1
        refused: RefusedMessage = {"type": "refused", "reason": str(refusal)[:200]}
        _send(comm, refused)


def _send(comm: BaseComm, message: KernelMessage) -> None:
    """Send one of the kernel's messages on ``comm``."""
    comm.send(dict(message))


def _content(message: Mapping[str, object]) -> Mapping[str, object]:
    """A Jupyter message's ``content`` ({} when it has none or it is not an object)."""
    content = message.get("content")
    return content if isinstance(content, dict) else {}


# -- validation ---------------------------------------------------------------------------


def check(data: object) -> FrontEndMessage:
    """``data`` as a valid message from the front end, or :class:`Refused` saying why."""
    if not isinstance(data, dict):
        raise Refused("a message is a JSON object")
    try:
        size = len(json.dumps(data))
    except (TypeError, ValueError):
        raise Refused("a message is plain JSON") from None
    kind = data.get("type")
    limit = MAX_CELLS_BYTES if kind == "cells" else MAX_MESSAGE_BYTES
    if size > limit:
        raise Refused(f"a {str(kind)[:40]} message is at most {limit} bytes")
    checker = _CHECKS.get(kind) if isinstance(kind, str) else None
    if checker is None:
        raise Refused(f"unknown message type {str(kind)[:40]!r}")
    return checker(data)


def _hello(data: Mapping[str, object]) -> HelloMessage:
    if data.get("protocol") != PROTOCOL:
        raise Refused(f"protocol {PROTOCOL} only")
    _notebook_path(data, "notebook")
    _document(data)
    if "root" in data:
        root = _text(data, "root", MAX_PATH_CHARS)
        if "\x00" in root or not os.path.isabs(os.path.expanduser(root)):
            raise Refused("root is the server's root directory, an absolute path")
    return cast(HelloMessage, data)


def _moved(data: Mapping[str, object]) -> MovedMessage:
    """The notebook's path changed: ``notebook`` now, ``old`` before."""
    _notebook_path(data, "notebook")
    _notebook_path(data, "old")
    _document(data)
    return cast(MovedMessage, data)


def _document(data: Mapping[str, object]) -> None:
    """An optional ``document``: the notebook's id, a uuid the front end wrote on a save."""
    document = data.get("document", "")
    if "document" in data and not (isinstance(document, str) and _DOCUMENT_ID.match(document)):
        raise Refused("document is the notebook's id, a uuid")


def _notebook_path(data: Mapping[str, object], key: str) -> str:
    value = _text(data, key, MAX_PATH_CHARS)
    if not value.endswith(".ipynb") or "\x00" in value:
        raise Refused(f"{key} is the path of an .ipynb file")
    return value


def _focus(data: Mapping[str, object]) -> FocusMessage:
    if data.get("cell") is not None:
        cell_id(data, "cell")
    return cast(FocusMessage, data)


def _cells(data: Mapping[str, object]) -> CellsMessage:
    """The answer to ``read``: the notebook's cells in order, each checked."""
    _request_id(data)
    cells = data.get("cells")
    if not isinstance(cells, list) or len(cells) > MAX_CELLS:
        raise Refused(f"cells is a list of at most {MAX_CELLS} cells")
    seen: set[str] = set()
    for cell in cells:
        if not isinstance(cell, dict):
            raise Refused("each cell is an object")
        seen.add(cell_id(cell, "id"))
        if cell.get("cell_type") not in CELL_TYPES:
            raise Refused(f"cell_type is one of {', '.join(CELL_TYPES)}")
        source = cell.get("source")
        if not isinstance(source, str) or len(source) > MAX_SOURCE_CHARS:
            raise Refused(f"source is a string of at most {MAX_SOURCE_CHARS} characters")
        count = cell.get("execution_count")
        if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 0):
            raise Refused("execution_count is a count or null")
        if not isinstance(cell.get("outputs", []), list):
            raise Refused("outputs is a list")
        if "agent_kernel" in cell and len(json.dumps(cell["agent_kernel"])) > MAX_MARK_BYTES:
            raise Refused(f"a cell's agent_kernel mark is at most {MAX_MARK_BYTES} bytes")
    people = data.get("collaborators", 0)
    if not isinstance(people, int) or isinstance(people, bool) or not 0 <= people <= MAX_PEOPLE:
        raise Refused(f"collaborators is a count from 0 to {MAX_PEOPLE}")
    if len(seen) != len(cells):
        raise Refused("cell ids are unique")
    return cast(CellsMessage, data)


def _edited(data: Mapping[str, object]) -> EditedMessage:
    """The answer to ``edit``: the cell it made or changed, or why the front end did not
    (``rejected``: the person rejected the diff in ``ask`` mode)."""
    _request_id(data)
    if not isinstance(data.get("rejected", False), bool):
        raise Refused("rejected is true or false")
    if "error" in data:
        _text(data, "error", 500)
    else:
        cell_id(data, "cell")
    return cast(EditedMessage, data)


def _request_id(data: Mapping[str, object]) -> int:
    value = data.get("id")
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 2**31:
        raise Refused("id is the number of the request answered")
    return value


def _text(data: Mapping[str, object], key: str, limit: int) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not 0 < len(value) <= limit:
        raise Refused(f"{key} is a string of 1 to {limit} characters")
    return value


def cell_id(data: Mapping[str, object], key: str) -> str:
    """``data[key]`` as a cell id, or :class:`Refused`."""
    value = data.get(key)
    if not isinstance(value, str) or not _CELL_ID.match(value):
        raise Refused(f"{key} is a cell id (letters, digits, - and _, at most {MAX_ID_CHARS})")
    return value


# Each checker returns the message it checked, typed.
_CHECKS: dict[str, Callable[[Mapping[str, object]], FrontEndMessage]] = {
    "hello": _hello,
    "focus": _focus,
    "cells": _cells,
    "edited": _edited,
    "moved": _moved,
}


# -- the kernel's channel ---------------------------------------------------------------

_CHANNEL: Channel | None = None
_ON_DOCUMENT: Callable[[Attachment], None] | None = None


def install() -> Channel:
    """Register the comm target in this kernel (once); the channel it feeds."""
    global _CHANNEL
    if _CHANNEL is None:
        channel = Channel(on_document=_ON_DOCUMENT)
        jupyter_comm.get_comm_manager().register_target(TARGET, channel.open)
        _CHANNEL = channel
        if _from_notebook_view():
            channel.announce()
    return _CHANNEL


def _from_notebook_view() -> bool:
    """Whether the running request came from a notebook view that may have the extension:
    JupyterLab's and Notebook 7's cell executor sends ``deletedCells`` and ``recordTiming``
    with each cell; papermill, nbconvert and the scheduler (nbclient) do not, and would log
    "No handler found" for a comm nobody there answers."""
    metadata = _request_metadata()
    return "deletedCells" in metadata or "recordTiming" in metadata


def _request_metadata() -> Mapping[str, object]:
    """The metadata of the running execute request ({} outside a kernel or an unusual one)."""
    metadata = _running_request().get("metadata") or {}
    return metadata if isinstance(metadata, dict) else {}


def _request_client() -> str:
    """The client session that sent the running execute request ("" when none is known)."""
    return _client(_running_request())


def _client(message: Mapping[str, object]) -> str:
    """A message's client session (its header's ``session``), bounded like a cell id."""
    header = message.get("header")
    session = header.get("session") if isinstance(header, dict) else None
    return session if isinstance(session, str) and len(session) <= MAX_ID_CHARS else ""


def _running_request() -> Mapping[str, object]:
    """The running shell request ({} outside a kernel or with an unusual one)."""
    get_parent = getattr(getattr(get_ipython(), "kernel", None), "get_parent", None)
    if not callable(get_parent):
        return {}
    try:
        parent = get_parent("shell") or {}
    except Exception:  # noqa: BLE001 - an unusual kernel: nothing known
        return {}
    return parent if isinstance(parent, dict) else {}


def attached() -> Attachment | None:
    """The notebook front end attached to this kernel, if the channel is installed and one is."""
    return _CHANNEL.attached if _CHANNEL is not None else None


def on_document(listener: Callable[[Attachment], None]) -> None:
    """Call ``listener`` whenever a front end names its notebook's id (its hello, a move, the
    save that gave it the id): the agent records where that notebook is."""
    global _ON_DOCUMENT
    _ON_DOCUMENT = listener
    if _CHANNEL is not None:
        _CHANNEL.on_document = listener


def turn_ended(session_id: str) -> None:
    """See :meth:`Channel.turn_ended` (nothing to do when the channel is not installed)."""
    if _CHANNEL is not None:
        _CHANNEL.turn_ended(session_id)


def running_cell() -> str | None:
    """The notebook cell id of the running execute request (JupyterLab sends ``cellId``)."""
    value = _request_metadata().get("cellId")
    return value if isinstance(value, str) and _CELL_ID.match(value) else None


async def read_cells(timeout: float = 10.0) -> list[NotebookCell]:
    """The attached notebook's cells, in order, as its front end holds them now (checked:
    ids, types, sources, execution counts, outputs as the extension summarises them)."""
    if _CHANNEL is None:
        raise LookupError("no notebook front end with the agent-kernel extension is attached")
    answer = await _CHANNEL.request({"type": "read"}, timeout)
    if answer["type"] != "cells":  # LookupError: the answer holds no cells
        raise LookupError(f"the front end answered a read with {answer['type']}")
    _CHANNEL.collaborators = answer.get("collaborators", 0)
    return answer["cells"]


def other_people() -> int:
    """How many other people may be writing the notebook: the other people its front end
    saw in the shared document at the last read, or the other clients attached to this
    kernel, whichever is more. JupyterLab does not record who wrote a cell; this is what
    can be known."""
    if _CHANNEL is None:
        return 0
    with _CHANNEL._lock:
        clients = {a.client or a.comm_id for a in _CHANNEL.attachments.values()}
    return max(_CHANNEL.collaborators, len(clients) - 1)


class Rejected(RuntimeError):
    """The person rejected the edit's diff (``ask`` mode); the notebook is unchanged."""


async def edit(change: Mapping[str, object], timeout: float = 10.0) -> str:
    """Ask the attached front end to apply ``change``; the id of the cell it made or
    changed, or ``RuntimeError`` with the front end's reason (:class:`Rejected` when the
    person rejected it).

    ``op`` is ``insert`` (``after``, ``cell_type``, ``source``), ``replace`` (``cell``,
    ``source``), ``delete`` (``cell``) or ``move`` (``cell``, ``after``); ``metadata``
    marks the cell, ``ask`` shows a diff and waits for Accept, ``run`` (insert, replace) runs
    the cell once the running cell (or the panel turn) has finished."""
    if _CHANNEL is None:
        raise LookupError("no notebook front end with the agent-kernel extension is attached")
    answer = await _CHANNEL.request({"type": "edit", **change}, timeout)
    if answer["type"] != "edited":  # LookupError: the answer names no edit's outcome
        raise LookupError(f"the front end answered an edit with {answer['type']}")
    if answer.get("rejected"):
        raise Rejected(answer.get("error", "rejected"))
    if "error" in answer:
        raise RuntimeError(answer["error"])
    return answer["cell"]  # checked: an answer without an error names its cell


async def settle(timeout: float = 5.0) -> None:
    """See :meth:`Channel.settle` (nothing to do when the channel is not installed)."""
    if _CHANNEL is not None:
        await _CHANNEL.settle(timeout)
