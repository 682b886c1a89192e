"""read_notebook and insert_cell: whole turns in a real kernel, the notebook's front end played over its comm."""

from __future__ import annotations

from typing import Any

from agent_kernel.testing import call, say

from .calls import offered, tool_results
from .frontend import NotebookChannel

HELLO = {"type": "hello", "protocol": 1, "notebook": "sales.ipynb"}
CELLS = [
    {"id": "intro", "cell_type": "markdown", "source": "# Sales by region", "outputs": []},
    {"id": "load", "cell_type": "code", "source": "df = load()\ndf.shape", "execution_count": 3,
     "outputs": [{"output_type": "execute_result", "text": "(120, 4)", "images": []}]},
    {"id": "plot", "cell_type": "code", "source": "df.plot()", "execution_count": None, "outputs": []},
]  # fmt: skip


def result(request: dict[str, Any]) -> dict[str, Any]:
    return tool_results(request)[0]


def test_an_attached_notebook_is_read_with_its_cells_outputs_and_selection(kernel, scripted_model):
    front = NotebookChannel(kernel)
    front.cells = CELLS
    front.open(HELLO)
    front.send({"type": "focus", "cell": "plot"})
    scripted_model.add(call("read_notebook"), say("Three cells."))
    kernel.ok("%agent what is in this notebook?", on_message=front.hook)
    assert "read_notebook" in offered(scripted_model.requests[0])
    read = result(scripted_model.requests[1])
    assert not read.get("is_error")
    text = read["content"] if isinstance(read["content"], str) else read["content"][0]["text"]
    assert text.startswith("sales.ipynb: 3 cells")
    assert "--- cell intro markdown\n# Sales by region" in text
    assert "--- cell load code [3]\ndf = load()\ndf.shape\n> execute_result: (120, 4)" in text
    assert "--- cell plot code [ ] <- selected" in text


def test_without_a_front_end_the_tool_is_not_offered_and_the_turn_completes(kernel, scripted_model):
    scripted_model.add(say("No notebook tools here."))
    result_ = kernel.ok("%agent what is in this notebook?", notebook=False)
    assert "read_notebook" not in offered(scripted_model.requests[0])
    assert "No notebook tools here." in result_.stdout + "\n".join(result_.final_texts())


def test_an_auto_turn_inserts_cells_marked_with_its_session_and_turn(kernel, scripted_model):
    front = NotebookChannel(kernel)
    front.cells = CELLS
    front.open(HELLO)
    scripted_model.add(
        call("insert_cell", source="df.describe()"),
        call("insert_cell", source="## Summary", cell_type="markdown", after="load"),
        say("Added two cells."),
    )
    kernel.ok("%agent add a summary", on_message=front.hook)
    first, second = front.edits
    assert first["op"] == "insert" and first["cell_type"] == "code" and first["source"] == "df.describe()"
    assert len(first["after"]) == 32  # the %agent cell's id, as the request named it
    assert second["after"] == "load" and second["cell_type"] == "markdown"
    mark = first["metadata"]["agent_kernel"]
    assert mark["turn"] == 1 and mark == second["metadata"]["agent_kernel"] and len(mark["session"]) > 8
    assert '"inserted": "new-2"' in str(result(scripted_model.requests[2])["content"])


def test_a_refused_or_bad_edit_comes_back_as_an_error_the_model_can_act_on(kernel, scripted_model):
    front = NotebookChannel(kernel)
    front.cells = CELLS
    front.refuse_edits = "the notebook is read-only"
    front.open(HELLO)
    scripted_model.add(
        call("insert_cell", source="x = 1"),
        call("insert_cell", source="x = 1", after="../etc"),
        say("Could not."),
    )
    kernel.ok("%agent add a cell", on_message=front.hook)
    refused, bad = result(scripted_model.requests[1]), result(scripted_model.requests[2])
    assert refused["is_error"] and "The notebook refused the edit: the notebook is read-only" in str(refused["content"])
    assert bad["is_error"] and "after" in str(bad["content"])
    assert front.edits == []
