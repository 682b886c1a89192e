"""The ``code`` group, part two: ``notebook_cells``, the cells the user ran, on demand.

The turn context shows the cells run since the last turn in short; this returns any of
them whole (within a size budget): by a range of execution counts or by text they
contain. A cell's result is inside the untrusted envelope (it may hold fetched content);
when the cell, or an earlier one, reached the network, the read counts as untrusted content.
"""

from __future__ import annotations

from collections.abc import Mapping

from typing_extensions import NotRequired, TypedDict

from agent_kernel.errors import ToolInputError
from agent_kernel.kernel import cells as notebook
from agent_kernel.tools import Tool, current_context

RESULT_CHARS = 20_000  # all cells of one call, sources, results and errors together
CELL_RESULT_CHARS = 2_000
MATCH_CHARS = 200
LAST_CELLS = 10  # cells returned when no range or text is given
MOST_CELLS = 100
MOST_COUNT = 10_000_000


class NotebookCells(TypedDict):
    """``notebook_cells``'s reply."""

    cells: list[Mapping[str, object]]  # as kernel.cells.Cell.as_dict gives them
    note: NotRequired[str]  # nothing matched, or older cells were left out to fit


async def notebook_cells(
    first: int | None = None, last: int | None = None, matching: str | None = None
) -> NotebookCells:
    """The user's cells (source, result, error) by execution count; default the last 10.

    ``first`` and ``last`` are execution counts, ``matching`` text the source contains (any
    case). Their limits are checked in :func:`_check`, not in the schema, so the tool's
    definition (sent with every request) stays short.
    """
    context = current_context()
    _check(first, last, matching)
    if first is None and last is None and matching is None:
        found = notebook.history(context.shell, first=-LAST_CELLS)
    else:
        found = notebook.history(context.shell, first=first or 1, last=last, matching=matching)
        found = found[:MOST_CELLS] if first is not None else found[-MOST_CELLS:]
    entries: list[Mapping[str, object]] = []
    used, left_out = 0, 0
    for cell in reversed(found):
        entry = cell.as_dict(CELL_RESULT_CHARS)
        size = sum(len(str(v)) for v in entry.values())
        if used + size > RESULT_CHARS and entries:
            left_out += 1
            continue
        entries.append(entry)
        used += size
    entries.reverse()
    fetched = [f"notebook cell [{c.count}] result" for c in found if (c.result or c.printed) and c.untrusted]
    if fetched:
        context.note_untrusted(fetched)
    answer: NotebookCells = {"cells": entries}
    if not entries:
        answer["note"] = "No cell matches (the kernel's history holds cells run with history on)."
    if left_out:
        answer["note"] = f"{left_out} older cells left out to fit; ask for a narrower range."
    return answer


def _check(first: int | None, last: int | None, matching: str | None) -> None:
    for name, count in (("first", first), ("last", last)):
        if count is not None and not 1 <= count <= MOST_COUNT:
            raise ToolInputError(f"{name} is an execution count from 1 to {MOST_COUNT:,}, not {count}.")
    if first is not None and last is not None and last < first:
        raise ToolInputError(f"last ({last}) is before first ({first}); give first <= last.")
    if matching is not None and not 1 <= len(matching) <= MATCH_CHARS:
        raise ToolInputError(f"matching is 1 to {MATCH_CHARS} characters of text, not {len(matching)}.")


DESCRIPTION = (
    "The user's cells (source, result, error) by execution count: first..last, or matching text; default the last 10."
)
TOOLS = [Tool(notebook_cells, name="notebook_cells", group="code", description=DESCRIPTION)]
