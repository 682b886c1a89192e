"""The untrusted mark on a notebook file's cells (:mod:`agent_kernel.cellmark`), for the
scheduler and ``agent-kernel cells``.

A scheduled run of a notebook holding a cell an agent turn wrote after reading untrusted
content is refused (:func:`refusal`, called by the job checks before every run) until
the person has reviewed the cell and cleared its mark: ``agent-kernel cells clear
NOTEBOOK`` (:func:`clear_file`, which takes the person's event and so refuses inside an
agent turn), or Clear on the cell's badge in JupyterLab.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agent_kernel import cellmark
from agent_kernel.paths import write_notebook_whole
from agent_kernel.scheduler import ScheduleError

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from agent_kernel.authority import PersonEvent

__all__ = ["clear_file", "marked_in", "read_notebook", "refusal"]

MAX_NOTEBOOK_BYTES = 50 * 1024 * 1024
MOST_NAMED = 5  # marked cells a refusal names


def read_notebook(path: str | Path) -> NotebookNode:
    """The notebook at ``path`` (nbformat 4), or :class:`ScheduleError` saying why not."""
    import nbformat  # noqa: PLC0415 - heavy (jsonschema, ~1.5 s): only reading or writing a notebook needs it

    file = Path(path)
    try:
        if file.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise ScheduleError(f"{file} is larger than {MAX_NOTEBOOK_BYTES // 2**20} MB.")
        notebook: NotebookNode = nbformat.read(file, as_version=4)
        return notebook
    except OSError as exc:
        raise ScheduleError(f"Cannot read {file}: {exc.strerror or exc}.") from None
    except ScheduleError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reason it does not read as a notebook
        raise ScheduleError(f"{file} does not read as a notebook ({type(exc).__name__}).") from None


def marked_in(notebook: NotebookNode) -> list[cellmark.MarkedCell]:
    """The cells of ``notebook`` that carry the untrusted mark."""
    return cellmark.marked_cells(list(notebook.cells))


def refusal(path: str, notebook: NotebookNode) -> str:
    """Why a scheduled run may not execute ``notebook`` ("" when no cell is marked)."""
    marked = marked_in(notebook)
    if not marked:
        return ""
    named = "; ".join(m.describe() for m in marked[:MOST_NAMED])
    more = f" and {len(marked) - MOST_NAMED} more" if len(marked) > MOST_NAMED else ""
    return (
        f"notebook {path} holds {len(marked)} cell{'s' if len(marked) != 1 else ''} an agent turn wrote after "
        f"reading untrusted content ({named}{more}); review them, then clear the mark with "
        f"`agent-kernel cells clear {path}` in a terminal or Clear on the cell's badge in JupyterLab"
    )


def clear_file(path: str | Path, event: PersonEvent, *, ids: list[str] | None = None) -> list[cellmark.MarkedCell]:
    """Clear the mark of the notebook's marked cells (those in ``ids``, else all), writing
    the file whole; the cells cleared."""
    file = Path(path)
    notebook = read_notebook(file)
    cleared = cellmark.clear(notebook.cells, event, ids=ids)
    if not cleared:
        return []
    write_notebook_whole(file, notebook, keep_mode=True)
    return cleared
