"""The messages on the notebook channel (:mod:`agent_kernel.kernel.channel`), one TypedDict each.

The extension's ``labextension/src/protocol.ts`` declares the same messages as TypeScript
interfaces; ``tests/kernel/test_protocol.py`` fails when the two disagree on a message's
``type``, its keys or which keys may be left out. Every message is a JSON object whose
``type`` says which it is. :data:`FrontEndMessage` is what the front end sends (the
channel checks each one before it reads it: a key left out here is one the check accepts
missing); :data:`KernelMessage` is what the kernel sends.

The annotations are evaluated (no ``from __future__ import annotations``): a TypedDict's
``__required_keys__`` only sees ``NotRequired`` in evaluated annotations, and the agreement
test reads them.
"""

import sys
from typing import Any, Literal, TypedDict

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # typing_extensions comes with the SDK (anthropic depends on it)
    from typing_extensions import NotRequired

PROTOCOL = 1
"""The protocol version both ends say in ``hello`` and ``welcome`` (and the announcement)."""

CellType = Literal["code", "markdown", "raw"]
EditOp = Literal["insert", "replace", "delete", "move"]


# -- the front end's messages -----------------------------------------------------------


class HelloMessage(TypedDict):
    """The front end's first message on a comm: which notebook it shows."""

    type: Literal["hello"]
    protocol: int
    notebook: str  # the notebook's path relative to the server root
    root: NotRequired[str]  # the server's root directory: the notebook's absolute path is root/notebook
    document: NotRequired[str]  # the notebook's id (a uuid in metadata.agent_kernel.document), once saved


class MovedMessage(TypedDict):
    """The notebook's path changed (renamed, moved, or saved as a copy the view now shows)."""

    type: Literal["moved"]
    notebook: str  # the path now, relative to the server root
    old: str  # the path before (the same when a save just gave the notebook its id)
    document: NotRequired[str]  # the notebook's id, when it has one


class FocusMessage(TypedDict):
    """The selected cell changed (``None`` or missing: no cell is selected)."""

    type: Literal["focus"]
    cell: NotRequired[str | None]


class CellOutput(TypedDict):
    """One output of a cell as the front end summarises it (the channel checks only that a
    cell's outputs are a list: readers take these keys with ``.get``)."""

    output_type: str
    text: str  # its text, truncated
    images: list[str]  # the image MIME types it holds


class NotebookCell(TypedDict):
    """One cell of a ``cells`` answer."""

    id: str
    cell_type: CellType
    source: str
    execution_count: NotRequired[int | None]
    outputs: NotRequired[list[CellOutput]]
    agent_kernel: NotRequired[dict[str, Any]]  # the cell's mark, as cellmark.ts reports it
    truncated: NotRequired[bool]  # source and outputs left out: the answer's size limit


class CellsMessage(TypedDict):
    """The answer to ``read``: the notebook's cells in order."""

    type: Literal["cells"]
    id: int
    cells: list[NotebookCell]
    collaborators: NotRequired[int]  # other people in the shared document (0 when missing)


class EditedMessage(TypedDict):
    """The answer to ``edit``: the cell made or changed, or ``error`` saying why not
    (``rejected``: the person rejected the diff)."""

    type: Literal["edited"]
    id: int
    cell: NotRequired[str]
    error: NotRequired[str]
    rejected: NotRequired[bool]


FrontEndMessage = HelloMessage | FocusMessage | CellsMessage | EditedMessage | MovedMessage
"""Every message the front end sends."""

FrontEndAnswer = CellsMessage | EditedMessage
"""The front end's answers to the kernel's requests (they carry the request's ``id``)."""


# -- the kernel's messages --------------------------------------------------------------


class KernelAnnouncement(TypedDict):
    """The data of a comm the kernel opens: a front end with the extension answers ``hello``."""

    type: Literal["kernel"]
    protocol: int


class WelcomeMessage(TypedDict):
    """The kernel accepted the front end's ``hello``: the front end is attached."""

    type: Literal["welcome"]
    protocol: int


class ReadRequest(TypedDict):
    """Ask for the notebook's cells (answered with ``cells``)."""

    type: Literal["read"]
    id: int


class EditRequest(TypedDict):
    """Ask for one edit of the notebook (answered with ``edited``).

    ``base`` is the :func:`source_version` of the cell's source as the model read it: the
    front end applies a ``replace`` or ``delete`` only while the cell still reads so, and
    otherwise answers with the error :data:`CELL_CHANGED` (what the person or a
    collaborator typed since is never overwritten unseen)."""

    type: Literal["edit"]
    id: int
    op: EditOp
    cell: NotRequired[str]  # replace, delete, move
    after: NotRequired[str]  # insert, move
    cell_type: NotRequired[Literal["code", "markdown"]]  # insert
    source: NotRequired[str]  # insert, replace
    metadata: NotRequired[dict[str, Any]]  # {"agent_kernel": the cell's mark}
    ask: NotRequired[bool]  # show a diff and wait for the person
    run: NotRequired[bool]  # run the cell once the turn has finished
    turn_cell: NotRequired[str]  # the running cell to wait for
    base: NotRequired[str]  # replace, delete: source_version() of the source the model read


class WithdrawMessage(TypedDict):
    """The request ``id`` is no longer awaited (a diff nobody answered is taken down)."""

    type: Literal["withdraw"]
    id: int


class TurnEndedMessage(TypedDict):
    """A turn of the session ``session`` (its id) ended and what it said is stored: a chat
    showing that session reloads its history, whether the turn ran in a cell or the chat."""

    type: Literal["turn_ended"]
    session: str


class RefusedMessage(TypedDict):
    """The front end's last message was refused, and why."""

    type: Literal["refused"]
    reason: str


KernelMessage = (
    KernelAnnouncement
    | WelcomeMessage
    | ReadRequest
    | EditRequest
    | WithdrawMessage
    | RefusedMessage
    | TurnEndedMessage
)
"""Every message the kernel sends."""

KernelRequest = ReadRequest | EditRequest
"""The kernel's requests, each answered by the front end with the same ``id``."""


# -- what an edit was made against ------------------------------------------------------

CELL_CHANGED = "the cell changed since it was read"
"""The ``edited`` error when an edit's ``base`` no longer matches the cell's source."""


def source_version(source: str) -> str:
    """A short version of a cell's source, the same as ``sourceVersion`` in protocol.ts:
    cyrb53 (a 53-bit hash of two 32-bit lanes) over the source's UTF-16 code units, which is
    what a JavaScript string is made of, in hex, and the source's length in those units.

    Not a cryptographic hash: it tells whether the person's cell still reads as the model
    read it, in a message of fixed size however long the cell is."""
    data = source.encode("utf-16-le")
    units = [data[i] | (data[i + 1] << 8) for i in range(0, len(data), 2)]
    h1, h2 = 0xDEADBEEF, 0x41C6CE57
    for unit in units:
        h1 = ((h1 ^ unit) * 2654435761) & 0xFFFFFFFF
        h2 = ((h2 ^ unit) * 1597334677) & 0xFFFFFFFF
    h1 = ((h1 ^ (h1 >> 16)) * 2246822507) & 0xFFFFFFFF
    h1 ^= ((h2 ^ (h2 >> 13)) * 3266489909) & 0xFFFFFFFF
    h2 = ((h2 ^ (h2 >> 16)) * 2246822507) & 0xFFFFFFFF
    h2 ^= ((h1 ^ (h1 >> 13)) * 3266489909) & 0xFFFFFFFF
    return f"{(h2 & 0x1FFFFF) * 4294967296 + h1:x}:{len(units)}"
