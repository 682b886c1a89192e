"""A finished turn put into the notebook as cells (``%agent_cells`` and "Insert as cells").

The cells (:func:`agent_kernel.store.steps.turn_cells`: the prompt and answer in markdown,
then the turn's successful ``run_code`` steps) go below the turn's ``%agent`` cell:

- **front end attached** (JupyterLab or Notebook 7 with the extension, see
  :mod:`agent_kernel.kernel.channel`): inserted one by one through the channel, into the
  shared document, so the open notebook (and every collaborator) shows them at once;
- **headless**: written into the notebook *file*. Which file: ``--to PATH`` when given;
  else the notebook Jupyter Server started this kernel for (``JPY_SESSION_NAME``, which
  ipykernel also puts in ``__session__``; VS Code sets ``__session__`` too), but only for
  a client that lets the kernel ask for input (``allow_stdin``): nbclient, and so
  papermill and the scheduler, does not, and papermill rewrites its output notebook after
  every cell, so a run there must name a file of its own with ``--to``. The file is
  written whole (a temporary file renamed over it) and never while a front end is
  attached: an open editor keeps its own copy and would save over the change. The
  front end's path (which follows renames) names the file only to refuse a ``--to`` that
  names the open notebook: while it is known the front end is attached and takes the
  cells itself.

Where "below the ``%agent`` cell" is: the cell the turn ran in when this kernel ran it
(remembered by :func:`remember`); else the last ``%agent``/``%%agent`` cell whose text
holds the turn's prompt; else below the running cell (the ``%agent_cells`` cell itself)
or, in a file without it, at the end.
"""

from __future__ import annotations

import json
import os
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from IPython import get_ipython

from agent_kernel.kernel import channel
from agent_kernel.paths import write_notebook_whole

__all__ = [
    "MAX_CELLS",
    "MAX_CELL_CHARS",
    "CellsError",
    "Placed",
    "agent_cell",
    "anchor_in",
    "insert",
    "interactive_client",
    "notebook_file",
    "remember",
    "write_into",
]  # fmt: skip

MAX_CELL_CHARS = 20_000  # what the extension inserts as one cell
MAX_CELLS = 201  # a turn's answer and at most 200 steps
MAX_NOTEBOOK_BYTES = 50 * 1024 * 1024  # a notebook file read to insert into
EDIT_TIMEOUT = 10.0
_REMEMBERED = 256
_AGENT_LINE = re.compile(r"^\s*%%?agent(\s|$)")


class CellsError(ValueError):
    """The cells cannot be put in the notebook; the text says why and what to do."""


@dataclass(frozen=True)
class Placed:
    """Where the cells went: ``notebook`` (the attached front end) or a file's path."""

    where: str
    cells: list[str]  # the ids of the cells made, in order
    after: str | None  # the cell they follow (None: appended to a file)


# -- which cell a turn ran in -------------------------------------------------------------

_TURN_CELLS: OrderedDict[tuple[str, int], str] = OrderedDict()


def remember(session_id: str, turn: int, cell: str | None) -> None:
    """The notebook cell turn ``turn`` of the session ran in (the newest few are kept)."""
    if cell is None:
        return
    _TURN_CELLS[(session_id, turn)] = cell
    _TURN_CELLS.move_to_end((session_id, turn))
    while len(_TURN_CELLS) > _REMEMBERED:
        _TURN_CELLS.popitem(last=False)


def agent_cell(session_id: str, turn: int) -> str | None:
    """The cell the turn ran in, when this kernel ran it in a notebook cell."""
    return _TURN_CELLS.get((session_id, turn))


def anchor_in(cells: Sequence[Mapping[str, object]], *, session_id: str, turn: int, prompt: str) -> str | None:
    """The id of the cell to insert below, among the notebook's ``cells`` (see the module)."""
    ids = [str(c.get("id")) for c in cells]
    remembered = agent_cell(session_id, turn)
    if remembered in ids:
        return remembered
    words = " ".join(prompt.split())
    for cell in reversed(cells):
        source = _text(cell.get("source", ""))
        if (
            cell.get("cell_type") == "code"
            and _AGENT_LINE.match(source)
            and words
            and words in " ".join(source.split())
        ):
            return str(cell.get("id"))
    running = channel.running_cell()
    return running if running in ids else None


def _text(source: object) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def check_sizes(cells: Sequence[Mapping[str, Any]]) -> None:
    """:class:`CellsError` when a cell is larger than the extension inserts."""
    if len(cells) > MAX_CELLS:
        raise CellsError(f"A turn becomes at most {MAX_CELLS} cells; this one has {len(cells)}.")
    for number, cell in enumerate(cells):
        if len(cell["source"]) > MAX_CELL_CHARS:
            what = "its prompt and answer" if number == 0 else f"step {number}"
            raise CellsError(
                f"The turn's {what} has {len(cell['source']):,} characters; a cell inserted into the open "
                f"notebook has at most {MAX_CELL_CHARS:,}. Export the session instead (%agent_export PATH)."
            )


# -- through the attached front end --------------------------------------------------------


async def insert(
    cells: Sequence[Mapping[str, Any]], *, session_id: str, turn: int, prompt: str, timeout: float = EDIT_TIMEOUT
) -> Placed:
    """Insert ``cells`` below the turn's cell in the attached notebook, in order."""
    check_sizes(cells)
    try:
        present = await channel.read_cells(timeout)
        after = anchor_in(present, session_id=session_id, turn=turn, prompt=prompt)
        if after is None:
            raise CellsError("The notebook has no cell to insert below; run %agent_cells in a cell of it.")
        anchor, made = after, []
        for cell in cells:
            change = {
                "op": "insert", "after": anchor, "cell_type": cell["cell_type"], "source": cell["source"],
                "metadata": cell["metadata"],
            }  # fmt: skip
            anchor = await channel.edit(change, timeout)
            made.append(anchor)
    except LookupError:
        raise CellsError("The notebook front end went away; run %agent_cells again.") from None
    except TimeoutError:
        raise CellsError(f"The notebook did not answer within {timeout:g} s; try again.") from None
    except RuntimeError as refusal:
        raise CellsError(f"The notebook refused the cells: {refusal}") from None
    return Placed("notebook", made, after)


# -- into the notebook file ------------------------------------------------------------------


def interactive_client() -> bool:
    """Whether the running cell's client lets the kernel ask for input (a person's front end;
    nbclient, so papermill and the scheduler, sends ``allow_stdin: false``)."""
    kernel: Any = getattr(get_ipython(), "kernel", None)
    if kernel is None:
        return True  # a terminal IPython: a person
    try:
        parent = kernel.get_parent("shell") or {}
    except Exception:  # noqa: BLE001 - an unusual kernel: nobody known
        return False
    return bool((parent.get("content") or {}).get("allow_stdin"))


def session_notebook(namespace: Mapping[str, object]) -> Path | None:
    """The notebook file this kernel runs for, if it exists: the attached front end's (it
    follows renames and moves), else the one Jupyter Server (or VS Code) started it for."""
    attached = channel.attached()
    if attached is not None and attached.path and os.path.isfile(attached.path):
        return Path(attached.path)
    named = os.environ.get("JPY_SESSION_NAME") or namespace.get("__session__")
    if not isinstance(named, str) or not named.endswith(".ipynb"):
        return None
    path = Path(named)
    for candidate in [path] if path.is_absolute() else [Path.cwd() / path, Path.cwd() / path.name]:
        if candidate.is_file():
            return candidate
    return None


def notebook_file(explicit: str | None, namespace: Mapping[str, object]) -> Path:
    """The file headless cells go into (see the module docstring), or :class:`CellsError`."""
    session = session_notebook(namespace)
    if explicit is not None:
        path = Path(os.path.expanduser(explicit))
        if path.suffix != ".ipynb":
            raise CellsError(f"--to names an .ipynb file, not {explicit!r}.")
        if session is not None and _same(path, session):
            if not interactive_client():
                raise CellsError(
                    f"{explicit} is the notebook this unattended run executes; name a file of its own with --to."
                )
            if channel.attached() is not None:
                raise CellsError(
                    f"{explicit} is open in the notebook front end, which would save over the file: "
                    "leave out --to and the cells go in through the front end."
                )
        return path
    if session is None:
        raise CellsError(
            "No notebook front end with the agent-kernel extension is attached and this kernel does not "
            "know its notebook file: name one with --to PATH."
        )
    if not interactive_client():
        raise CellsError(
            "This run is unattended (papermill or the scheduler rewrites its notebook as it goes): "
            "name a file of its own with --to PATH."
        )
    return session


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def write_into(path: Path, cells: Sequence[Mapping[str, Any]], *, session_id: str, turn: int, prompt: str) -> Placed:
    """Insert ``cells`` into the notebook file ``path`` below the turn's cell (a new
    notebook when the file does not exist), writing it whole."""
    import nbformat  # noqa: PLC0415 - heavy (jsonschema); only writing cells into a file needs it

    check_sizes(cells)
    if path.exists():
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise CellsError(f"{path} is larger than {MAX_NOTEBOOK_BYTES // 2**20} MB; name another file with --to.")
        try:
            notebook = nbformat.read(path, as_version=4)
        except (OSError, ValueError, json.JSONDecodeError, nbformat.reader.NotJSONError) as exc:
            raise CellsError(f"{path} is not a notebook that can be read: {str(exc)[:200]}") from None
    else:
        notebook = nbformat.v4.new_notebook()
        notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    made = [_node(cell) for cell in cells]
    after = anchor_in(notebook.cells, session_id=session_id, turn=turn, prompt=prompt)
    at = len(notebook.cells) if after is None else [c.get("id") for c in notebook.cells].index(after) + 1
    notebook.cells[at:at] = made
    write_notebook_whole(path, notebook)
    return Placed(str(path), [str(c["id"]) for c in made], after)


def _node(cell: Mapping[str, Any]) -> Any:
    import nbformat  # noqa: PLC0415 - heavy: see write_into

    if cell["cell_type"] == "markdown":
        return nbformat.v4.new_markdown_cell(cell["source"], metadata=dict(cell["metadata"]))
    return nbformat.v4.new_code_cell(cell["source"], metadata=dict(cell["metadata"]))
