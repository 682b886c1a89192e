"""The live notebook, through the extension's channel (agent_kernel.kernel.channel).

Offered only while a notebook front end with the extension is attached (the turn leaves
tools that ``needs_notebook`` out otherwise), so papermill, the scheduler and consoles
never see them and nothing waits for a front end that is not there.

The editing tools (insert, replace, delete, move; each by cell id) are writing tools. In
``auto`` the front end applies an edit at once; in ``ask`` it shows it as a diff and the
tool waits for Accept or Reject. A cell inserted with ``run`` is run by the front end once
the ``%agent`` cell has finished: the turn holds the kernel until then, so the cell could
not run earlier without interleaving with the agent's own code.

An edit carries what it was made against: the version of the cell's source as the model
last read it (``read_notebook``, or its own insert or replace). The front end applies a
replace or delete only while the cell still reads so; when the person or a collaborator
typed in it meanwhile, the tool refuses and gives the model the cell as it reads now, so
nothing they typed is overwritten unseen. A cell the model never read carries no version
(an ask-mode diff still shows its current text, and Accept applies only to what it showed).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from agent_kernel import cellmark
from agent_kernel.errors import ToolInputError
from agent_kernel.kernel import cells as cells_run
from agent_kernel.kernel import channel
from agent_kernel.kernel.printed import AGENT_MAGICS
from agent_kernel.kernel.protocol import CELL_CHANGED, NotebookCell, source_version
from agent_kernel.secrets import redact
from agent_kernel.tools import Tool, current_context
from agent_kernel.untrusted import mark_untrusted

READ_TIMEOUT = 10.0
EDIT_TIMEOUT = 10.0
ASK_TIMEOUT = 300.0  # how long an ask-mode diff waits for Accept or Reject
MAX_EDITS_PER_TURN = 20
MAX_SOURCE = 20_000
MAX_READ_CHARS = 4_000_000  # the sources kept of what the model read (oldest forgotten first)
RESULT_CHARS = 18_000  # one read, under the dispatcher's cap: no envelope is ever cut
SOURCE_CHARS = 4_000  # a cell's source in a read (its head)
OUTPUT_CHARS = 2_000  # each output's text
CellId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


async def read_notebook(from_cell: CellId | None = None) -> str:
    """Read the open notebook as it is now: every cell's id, type, source and output text,
    also unexecuted and markdown cells; marks the running and the selected cell.

    Args:
        from_cell: Start at this cell (a notebook too large for one read says where to go on).
    """
    context = current_context()
    cells = await _cells_now()
    attachment = channel.attached()
    marks = {channel.running_cell(): "running (your %agent cell)"}
    if attachment is not None and attachment.selected_cell:
        marks.setdefault(attachment.selected_cell, "selected")
    notebook = attachment.notebook if attachment else "the notebook"
    start = _start(cells, from_cell)
    others = channel.other_people()
    head = f"{notebook}: {len(cells)} cells"
    if others:
        people = "1 other person has" if others == 1 else f"{others} other people have"
        head += (
            f" ({people} this notebook open; who wrote each cell is not recorded, "
            "so every cell's source is shown as data)"
        )
    parts, read, used = [head], [], len(head)
    for position in range(start, len(cells)):
        text, sources = _cell_text(cells[position], marks, context.shell, notebook if others else None)
        if used + len(text) > RESULT_CHARS and position > start:
            parts.append(
                f"[{len(cells) - position} more cells; read_notebook(from_cell={cells[position]['id']!r}) reads on]"
            )
            break
        if not cells[position].get("truncated"):
            _READ.remember(cells[position]["id"], cells[position]["source"])
        parts.append(text)
        read += sources
        used += len(text)
    if read:
        context.note_untrusted(list(dict.fromkeys(read)))
    return "\n\n".join(parts)


async def _cells_now() -> list[NotebookCell]:
    try:
        return await channel.read_cells(READ_TIMEOUT)
    except LookupError:
        raise ToolInputError("No notebook front end is attached now; read_notebook is unavailable.") from None
    except TimeoutError:
        raise ToolInputError(f"The notebook did not answer within {READ_TIMEOUT:.0f} s; try again later.") from None


def _start(cells: list[NotebookCell], from_cell: str | None) -> int:
    if from_cell is None:
        return 0
    for position, cell in enumerate(cells):
        if cell["id"] == from_cell:
            return position
    raise ToolInputError(f"No cell {from_cell} in the notebook; read_notebook() without from_cell lists them.")


def _cell_text(
    cell: NotebookCell, marks: dict[str | None, str], shell: Any, shared: str | None
) -> tuple[str, list[str]]:
    """One cell as the model reads it, and the untrusted sources reading it brought in.

    Outputs are data, always inside the untrusted envelope; they count as untrusted content
    unless this kernel ran the cell as it reads now and neither it nor an earlier cell
    reached the network. The source
    is data too when a turn wrote it after untrusted content (the cell's mark) or other
    people may have written it (``shared``: the notebook's name)."""
    count = cell.get("execution_count")
    state = f"[{count}]" if count is not None else ("[ ]" if cell["cell_type"] == "code" else "")
    mark = f" <- {marks[cell['id']]}" if cell["id"] in marks else ""
    lines = [f"--- cell {cell['id']} {cell['cell_type']} {state}{mark}".rstrip()]
    sources: list[str] = []
    source = _cut(cell["source"], SOURCE_CHARS)
    written_after = cellmark.untrusted({cellmark.KEY: cell["agent_kernel"]}) if "agent_kernel" in cell else None
    if written_after is not None:
        label = f"notebook cell {cell['id']}, written by an agent turn after untrusted content"
        read = f" ({'; '.join(written_after)})" if written_after else ""
        lines.append(mark_untrusted(source, label + read))
        sources.append(label + read)
    elif shared is not None:
        label = f"notebook cell {cell['id']} of {shared}, possibly written by another person"
        lines.append(mark_untrusted(source, label))
        sources.append(f"notebook {shared}: cells other people may have written")
    else:
        lines.append(source)
    outputs = _outputs_text(cell)
    if outputs:
        why = _outputs_untrusted(cell, shell)
        label = f"notebook cell {cell['id']} outputs" + (f" ({why})" if why else "")
        lines.append(mark_untrusted(outputs, label))
        if why:
            sources.append(label)
    return "\n".join(lines), sources


def _outputs_text(cell: NotebookCell) -> str:
    if cell["source"].lstrip().startswith(AGENT_MAGICS):
        return (
            "(the output of the agent's own magic: left out; session_timeline and search_sessions read past turns)"
            if cell.get("outputs")
            else ""
        )
    lines = []
    for output in cell.get("outputs", []):
        if not isinstance(output, dict):
            continue
        text = str(output.get("text", ""))[:OUTPUT_CHARS]
        images = output.get("images") or []
        lines.append(f"> {output.get('output_type', 'output')}: {text}".rstrip())
        if images:
            lines.append(f"> (image: {', '.join(map(str, images))[:200]})")
    return redact("\n".join(lines))


def _outputs_untrusted(cell: NotebookCell, shell: Any) -> str:
    """Why a cell's outputs are untrusted content ("" when this kernel ran the cell as it
    reads now and neither it nor an earlier cell reached the network)."""
    if cell["source"].lstrip().startswith(AGENT_MAGICS):
        return ""  # left out
    ran = cells_run.ran_here(shell, cell.get("execution_count"), cell["source"])
    if ran is None:
        return "not run in this kernel as it reads now: where its outputs came from is not known"
    return ran.why_untrusted()


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit:,} more characters]"


class CellEdit(TypedDict):
    """One edit sent to the notebook front end (agent_kernel.kernel.channel.edit)."""

    op: Literal["insert", "replace", "delete", "move"]
    cell: NotRequired[str]  # the cell changed (replace, delete, move)
    after: NotRequired[str]  # the cell it goes below (insert, move)
    cell_type: NotRequired[Literal["code", "markdown"]]
    source: NotRequired[str]
    run: NotRequired[bool]
    turn_cell: NotRequired[str]  # run it once this running %agent cell has finished
    base: NotRequired[str]  # replace, delete: the version of the source the model read (protocol.source_version)


class CellInserted(TypedDict):
    inserted: str
    after: str
    run: NotRequired[str]  # when the cell runs (RUN_NOTE)


class CellReplaced(TypedDict):
    replaced: str
    run: NotRequired[str]


class CellDeleted(TypedDict):
    deleted: str


class CellMoved(TypedDict):
    moved: str
    after: str


async def insert_cell(
    source: Annotated[str, Field(max_length=MAX_SOURCE)],
    cell_type: Literal["code", "markdown"] = "code",
    after: CellId | None = None,
    run: bool = False,
) -> CellInserted:
    """Insert a cell into the open notebook.

    Args:
        source: The cell's source.
        cell_type: code or markdown.
        after: Id of the cell to insert after (default: below your %agent cell and the cells you inserted this turn).
        run: Run the new code cell right after this turn ends (outputs land in it; you see them next turn).
    """
    if run and cell_type != "code":
        raise ToolInputError("Only a code cell can be run; insert markdown with run=false.")
    edits = _turn_edits()
    anchor = after or (edits.inserted[-1] if edits.inserted else channel.running_cell())
    if anchor is None:
        raise ToolInputError("Name the cell to insert after (after=cell id; read_notebook lists them).")
    change: CellEdit = {"op": "insert", "after": anchor, "cell_type": cell_type, "source": source, "run": run}
    running = channel.running_cell()
    if run and running is not None:
        change["turn_cell"] = running  # the notebook runs it once this cell has finished
    cell = await _apply(change)
    _READ.remember(cell, source)
    edits.inserted.append(cell)
    if run:
        return {"inserted": cell, "after": anchor, "run": RUN_NOTE}
    return {"inserted": cell, "after": anchor}


async def replace_cell(
    cell: CellId, source: Annotated[str, Field(max_length=MAX_SOURCE)], run: bool = False
) -> CellReplaced:
    """Replace a cell's source in the open notebook (its outputs stay until it is run again).

    Args:
        cell: The cell's id.
        source: Its new source.
        run: Run the code cell right after this turn ends (a fix: outputs land in it; you see them next turn).
    """
    change: CellEdit = {"op": "replace", "cell": _not_running(cell), "source": source, "run": run}
    running = channel.running_cell()
    if run and running is not None:
        change["turn_cell"] = running
    replaced = await _apply(change)
    _READ.remember(replaced, source)
    return {"replaced": replaced, "run": RUN_NOTE} if run else {"replaced": replaced}


async def delete_cell(cell: CellId) -> CellDeleted:
    """Delete a cell from the open notebook."""
    deleted = await _apply({"op": "delete", "cell": _not_running(cell)})
    _READ.forget(deleted)
    return {"deleted": deleted}


async def move_cell(cell: CellId, after: CellId) -> CellMoved:
    """Move a cell to just below another cell of the open notebook."""
    if cell == after:
        raise ToolInputError("A cell cannot move below itself; name another cell as after.")
    return {"moved": await _apply({"op": "move", "cell": _not_running(cell), "after": after}), "after": after}


RUN_NOTE = (
    "queued: the kernel is busy with this turn, so the notebook runs the cell right after "
    "your %agent cell finishes; its outputs are in the next turn's context"
)


@dataclass
class TurnEdits:
    """One turn's notebook edits: how many (the bound) and the cells it inserted (in order:
    the next insert goes below the last)."""

    count: int = 0
    inserted: list[str] = field(default_factory=list)


def _turn_edits() -> TurnEdits:
    context = current_context()
    key = (context.session_id, context.turn)
    if key not in _EDITS:
        _EDITS.clear()  # only the running turn's edits are kept
    return _EDITS.setdefault(key, TurnEdits())


def _not_running(cell: str) -> str:
    if cell == channel.running_cell():
        raise ToolInputError("That is your running %agent cell; it cannot be changed while the turn runs.")
    return cell


async def _apply(change: CellEdit) -> str:
    """Send one edit, marked with the session and turn, to the notebook (in ``ask`` mode as a
    diff the person accepts or rejects); the id of the cell it made or changed."""
    context = current_context()
    edits = _turn_edits()
    if edits.count >= MAX_EDITS_PER_TURN:
        raise ToolInputError(f"At most {MAX_EDITS_PER_TURN} notebook edits per turn; finish this turn first.")
    edits.count += 1
    ask = context.approve == "ask"
    mark = {cellmark.KEY: cellmark.mark(context.session_id, context.turn, context.session_sources())}
    timeout = ASK_TIMEOUT if ask else EDIT_TIMEOUT
    read = _READ.get(change.get("cell", "")) if change["op"] in ("replace", "delete") else None
    if read is not None:
        change["base"] = source_version(read)
    try:
        return await channel.edit({**change, "metadata": mark, "ask": ask}, timeout)
    except LookupError:
        raise ToolInputError("No notebook front end is attached now; notebook edits are unavailable.") from None
    except TimeoutError:
        waited = "The person did not answer the diff" if ask else "The notebook did not answer"
        raise ToolInputError(f"{waited} within {timeout:.0f} s; the edit was not applied.") from None
    except channel.Rejected:
        raise ToolInputError(
            "The person rejected this edit; the notebook is unchanged. Do not repeat it as is: "
            "ask what they want, or propose something different."
        ) from None
    except RuntimeError as refusal:
        if str(refusal) == CELL_CHANGED:
            raise await _changed(change["op"], change.get("cell", "")) from None
        raise ToolInputError(f"The notebook refused the edit: {refusal}") from None


async def _changed(op: str, cell_id: str) -> ToolInputError:
    """The refusal of an edit made against a source the cell no longer holds, with the cell
    as it reads now (which the model has then read: its next edit is made against it)."""
    context = current_context()
    head = (
        f"Cell {cell_id} changed since you read it (the person or a collaborator typed in it, or another edit landed); "
        "nothing was applied, so what they wrote is kept."
    )
    try:
        cells = await channel.read_cells(READ_TIMEOUT)
    except (LookupError, TimeoutError):
        return ToolInputError(f"{head} read_notebook shows it as it reads now.")
    now = next((cell for cell in cells if cell["id"] == cell_id), None)
    if now is None:
        return ToolInputError(f"{head} It is no longer in the notebook.")
    _READ.remember(cell_id, now["source"])
    attachment = channel.attached()
    shared = (attachment.notebook if attachment else "the notebook") if channel.other_people() else None
    text, sources = _cell_text(now, {}, context.shell, shared)
    if sources:
        context.note_untrusted(sources)
    again = f"call {op}_cell again with an edit of this source" if op != "delete" else "call delete_cell again"
    return ToolInputError(
        f"{head} It reads now:\n{text}\nIf your edit still fits, {again}; else ask the person what they want."
    )


class ReadSources:
    """What the model read of each cell, by (session, cell id): its next edit of the cell is
    made against it. Bounded in characters, the oldest forgotten first."""

    def __init__(self, limit: int = MAX_READ_CHARS) -> None:
        self.limit = limit
        self.chars = 0
        self._sources: OrderedDict[tuple[str, str], str] = OrderedDict()

    def get(self, cell_id: str) -> str | None:
        return self._sources.get((current_context().session_id, cell_id))

    def remember(self, cell_id: str, source: str) -> None:
        self.forget(cell_id)
        self._sources[(current_context().session_id, cell_id)] = source
        self.chars += len(source)
        while self.chars > self.limit and len(self._sources) > 1:
            self.chars -= len(self._sources.popitem(last=False)[1])

    def forget(self, cell_id: str) -> None:
        old = self._sources.pop((current_context().session_id, cell_id), None)
        self.chars -= len(old) if old is not None else 0


_READ = ReadSources()


# The running turn's edits, by (session, turn).
_EDITS: dict[tuple[str, int], TurnEdits] = {}


def _editing(function: Any, name: str) -> Tool:
    """A notebook-editing tool: writing (approval; read-only turns do not get it). In
    ``ask`` mode it shows the edit as a diff in the notebook and applies it only on Accept:
    that diff is the approval, so the dispatcher does not ask a second time."""
    return Tool(function, name=name, group="code", writes=True, needs_notebook=True, asks_in_notebook=True)


TOOLS = [
    Tool(read_notebook, name="read_notebook", group="code", needs_notebook=True),
    _editing(insert_cell, "insert_cell"),
    _editing(replace_cell, "replace_cell"),
    _editing(delete_cell, "delete_cell"),
    _editing(move_cell, "move_cell"),
]
