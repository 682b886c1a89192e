"""The live notebook, through the extension's channel (agent_kernel.kernel.channel).

Offered only while a notebook front end with the extension is attached (the turn leaves
tools that ``needs_notebook`` out otherwise), so papermill, the scheduler and consoles
never see them and nothing waits for a front end that is not there.
"""

from __future__ import annotations

from typing import Any

from agent_kernel.errors import ToolInputError
from agent_kernel.kernel import channel
from agent_kernel.tools import Tool

READ_TIMEOUT = 10.0


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


TOOLS = [Tool(read_notebook, name="read_notebook", group="code", needs_notebook=True)]
