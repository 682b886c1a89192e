"""The live notebook, through the extension's channel (agent_kernel.kernel.channel).

Offered only while a notebook front end with the extension is attached (the turn leaves
tools that ``needs_notebook`` out otherwise), so papermill, the scheduler and consoles
never see them and nothing waits for a front end that is not there.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from agent_kernel.errors import ToolInputError
from agent_kernel.kernel import channel
from agent_kernel.tools import Tool, current_context

READ_TIMEOUT = 10.0
EDIT_TIMEOUT = 10.0
MAX_EDITS_PER_TURN = 20
CellId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


async def read_notebook() -> str:
    """Read the open notebook as it is now: every cell's id, type, source and output text,
    also unexecuted and markdown cells; marks the running and the selected cell."""
    try:
        cells = await channel.read_cells(READ_TIMEOUT)
    except LookupError:
        raise ToolInputError(
            "No notebook front end is attached now; read_notebook is unavailable."
        ) from None
    except TimeoutError:
        raise ToolInputError(
            f"The notebook did not answer within {READ_TIMEOUT:.0f} s; try again later."
        ) from None
    attachment = channel.attached()
    marks = {channel.running_cell(): "running (your %agent cell)"}
    if attachment is not None and attachment.selected_cell:
        marks.setdefault(attachment.selected_cell, "selected")
    notebook = attachment.notebook if attachment else "the notebook"
    return "\n\n".join([f"{notebook}: {len(cells)} cells"] + [_cell_text(c, marks) for c in cells])


def _cell_text(cell: dict[str, Any], marks: dict[str | None, str]) -> str:
    count = cell.get("execution_count")
    state = f"[{count}]" if count is not None else ("[ ]" if cell["cell_type"] == "code" else "")
    mark = f" <- {marks[cell['id']]}" if cell["id"] in marks else ""
    lines = [f"--- cell {cell['id']} {cell['cell_type']} {state}{mark}".rstrip(), cell["source"]]
    for output in cell.get("outputs", []):
        if not isinstance(output, dict):
            continue
        text = str(output.get("text", ""))[:2000]
        images = output.get("images") or []
        lines.append(f"> {output.get('output_type', 'output')}: {text}".rstrip())
        if images:
            lines.append(f"> (image: {', '.join(map(str, images))[:200]})")
    return "\n".join(lines)


async def insert_cell(
    source: Annotated[str, Field(max_length=20_000)],
    cell_type: Literal["code", "markdown"] = "code",
    after: CellId | None = None,
) -> dict[str, Any]:
    """Insert a cell into the open notebook (not run).

    Args:
        source: The cell's source.
        cell_type: code or markdown.
        after: Id of the cell to insert after (default: below your %agent cell and the cells you inserted this turn).
    """
    context = current_context()
    key = (context.session_id, context.turn)
    if key not in _EDITS:
        _EDITS.clear()  # only the running turn's edits are kept
    edits = _EDITS.setdefault(key, [])
    if len(edits) >= MAX_EDITS_PER_TURN:
        raise ToolInputError(f"At most {MAX_EDITS_PER_TURN} notebook edits per turn; finish this turn first.")
    anchor = after or (edits[-1] if edits else channel.running_cell())  # in the order inserted
    if anchor is None:
        raise ToolInputError("Name the cell to insert after (after=cell id; read_notebook lists them).")
    mark = {"agent_kernel": {"session": context.session_id, "turn": context.turn}}
    change = {"op": "insert", "after": anchor, "cell_type": cell_type, "source": source, "metadata": mark}
    try:
        cell = await channel.edit(change, EDIT_TIMEOUT)
    except LookupError:
        raise ToolInputError("No notebook front end is attached now; notebook edits are unavailable.") from None
    except TimeoutError:
        raise ToolInputError(f"The notebook did not answer within {EDIT_TIMEOUT:.0f} s; try again later.") from None
    except RuntimeError as refusal:
        raise ToolInputError(f"The notebook refused the edit: {refusal}") from None
    edits.append(cell)
    return {"inserted": cell, "after": anchor}


# The cells each turn inserted, by (session, turn): the bound, and what an undo reverts.
_EDITS: dict[tuple[str, int], list[str]] = {}


TOOLS = [
    Tool(read_notebook, name="read_notebook", group="code", needs_notebook=True),
    Tool(insert_cell, name="insert_cell", group="code", writes=True, needs_notebook=True),
]
