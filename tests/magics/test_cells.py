"""%agent_cells and "Insert as cells": a scripted analysis in a real kernel, its turns put
into a notebook file (headless) and into the played notebook front end; the cells then
re-run in a fresh kernel with no model reachable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat

from agent_kernel.testing import call, say
from tests.support.capabilities import needs_widget_replies
from tests.support.frontend import FrontEnd, NotebookChannel, wait_for
from tests.support.kernel import Kernel
from tests.support.notebooks import write_notebook

HELLO = {"type": "hello", "protocol": 1, "notebook": "analysis.ipynb"}
DEAD_MODEL = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "ANTHROPIC_API_KEY": ""}


def script_analysis(scripted_model) -> None:
    """Turn 1 computes y (a failing step between), turn 2 computes z."""
    scripted_model.add(
        call("run_code", code="x = 21"),
        call("run_code", code="1 / 0"),
        call("run_code", code="y = x * 2\nprint('y =', y)"),
        say("y is **42**."),
        call("run_code", code="z = y + 1\nprint('z =', z)"),
        say("z is 43."),
    )


def notebook_file(path: Path) -> Path:
    ask_y, ask_z = nbformat.v4.new_code_cell("%agent compute y"), nbformat.v4.new_code_cell("%agent and z")
    ask_y["id"], ask_z["id"] = "ask-y", "ask-z"
    return write_notebook(
        path, nbformat.v4.new_markdown_cell("# Analysis"), ask_y, ask_z, "print('end')", kernelspec=False
    )


def usage_error(execution) -> str:
    """The one line IPython prints for a UsageError (on stderr, no traceback); the cell fails."""
    assert execution.status == "error" and not execution.errors, execution.errors
    assert execution.stderr.startswith("UsageError: "), execution.stderr
    return execution.stderr


def test_headless_the_cells_go_into_the_kernels_notebook_file_below_each_turns_cell(scripted_model, agent_db, tmp_path):
    path = notebook_file(tmp_path / "analysis.ipynb")
    kernel = Kernel({"JPY_SESSION_NAME": str(path)}, cwd=str(tmp_path))
    try:
        kernel.ok("%load_ext agent_kernel")
        script_analysis(scripted_model)
        kernel.ok("%agent compute y")
        kernel.ok("%agent and z")
        first = kernel.ok("%agent_cells 1")
        assert "Inserted turn 1 of session 'analysis'" in first.stdout and "2 code cells" in first.stdout
        kernel.ok("%agent_cells")  # the last turn
    finally:
        kernel.shutdown()
    cells = nbformat.read(path, as_version=4).cells
    nbformat.validate(nbformat.read(path, as_version=4))
    sources = [c.source for c in cells]
    assert sources[:2] == ["# Analysis", "%agent compute y"]
    assert sources[2].startswith("**Agent turn 1** (session `analysis`)\n\n> compute y\n\ny is **42**.")
    assert sources[3:5] == ["x = 21", "y = x * 2\nprint('y =', y)"]
    assert sources[5] == "%agent and z"
    assert sources[6].startswith("**Agent turn 2**") and sources[7] == "z = y + 1\nprint('z =', z)"
    assert sources[8] == "print('end')"
    marks = [c.metadata.get("agent_kernel") for c in cells]
    assert marks[2] == marks[3] == marks[4] and marks[2]["turn"] == 1 and len(marks[2]["session"]) == 32
    assert marks[6]["turn"] == marks[7]["turn"] == 2 and marks[0] is None and marks[8] is None
    assert [c.cell_type for c in cells[2:5]] == ["markdown", "code", "code"]


def test_with_the_front_end_the_cells_are_inserted_in_order_below_the_turns_cell(kernel, scripted_model):
    front = NotebookChannel(kernel)
    front.cells = [
        {"id": "intro", "cell_type": "markdown", "source": "# Analysis", "outputs": []},
        {"id": "ask", "cell_type": "code", "source": "%agent compute y", "execution_count": 1, "outputs": []},
    ]
    front.open(HELLO)
    script_analysis(scripted_model)
    kernel.ok("%agent compute y", on_message=front.hook)
    kernel.ok("%agent and z", on_message=front.hook)
    done = kernel.ok("%agent_cells 1", on_message=front.hook)
    assert "into the notebook below the turn's %agent cell" in done.stdout
    assert [e["after"] for e in front.edits] == ["ask", "new-1", "new-2"]
    assert [e["cell_type"] for e in front.edits] == ["markdown", "code", "code"]
    assert [e["source"] for e in front.edits[1:]] == ["x = 21", "y = x * 2\nprint('y =', y)"]
    assert "> compute y" in front.edits[0]["source"] and "y is **42**." in front.edits[0]["source"]
    marks = [e["metadata"]["agent_kernel"] for e in front.edits]
    assert all(m == marks[0] for m in marks) and marks[0]["turn"] == 1


def test_bad_input_is_a_usage_error(kernel, scripted_model, tmp_path):
    assert "No session yet" in usage_error(kernel.execute("%agent_cells"))
    scripted_model.add(say("Nothing to run."))
    kernel.ok("%agent hello")
    assert "TURN is a turn's number" in usage_error(kernel.execute("%agent_cells two"))
    assert "TURN is a turn's number" in usage_error(kernel.execute("%agent_cells -1"))
    assert "has no turn 7; its turns are 1 to 1" in usage_error(kernel.execute("%agent_cells 7"))
    assert "--to PATH" in usage_error(kernel.execute("%agent_cells"))  # no front end, no notebook file known
    assert "names an .ipynb file" in usage_error(kernel.execute("%agent_cells --to notes.txt"))
    assert "No session named 'other'" in usage_error(kernel.execute("%agent_cells --session other"))
    assert "Usage:" in usage_error(kernel.execute("%agent_cells 1 2"))
    (tmp_path / "broken.ipynb").write_text("{not json")
    assert "is not a notebook" in usage_error(kernel.execute("%agent_cells --to broken.ipynb"))


def test_an_unattended_run_needs_a_file_of_its_own(scripted_model, agent_db, tmp_path):
    path = notebook_file(tmp_path / "analysis.ipynb")
    kernel = Kernel({"JPY_SESSION_NAME": str(path)}, cwd=str(tmp_path))
    try:
        kernel.ok("%load_ext agent_kernel")
        scripted_model.add(say("Done."))
        kernel.ok("%agent compute y", allow_stdin=False)
        refused = kernel.execute("%agent_cells", allow_stdin=False)
        assert "unattended" in usage_error(refused)
        assert "unattended" in usage_error(kernel.execute("%agent_cells --to analysis.ipynb", allow_stdin=False))
        kernel.ok("%agent_cells --to cells.ipynb", allow_stdin=False)
    finally:
        kernel.shutdown()
    assert nbformat.read(path, as_version=4).cells[1].source == "%agent compute y"  # untouched
    (made,) = nbformat.read(tmp_path / "cells.ipynb", as_version=4).cells
    assert made.cell_type == "markdown" and "Done." in made.source


def test_insert_as_cells_then_a_fresh_kernel_runs_them_with_no_model_to_the_same_values(
    kernel, scripted_model, agent_db, tmp_path
):
    front = NotebookChannel(kernel)
    front.cells = [
        {"id": "ask", "cell_type": "code", "source": "%agent compute y", "execution_count": 1, "outputs": []}
    ]
    front.open(HELLO)
    widgets = FrontEnd(kernel)

    def both(message: dict[str, Any], _kernel: Any = None) -> None:
        front.hook(message)
        widgets.hook(message)

    script_analysis(scripted_model)
    ran = kernel.ok("%agent compute y", on_message=both)
    (button,) = widgets.of_kind("InsertCellsButton")
    widgets.custom(button, type="insert")

    def inserted() -> bool:
        kernel.ok("import asyncio\nawait asyncio.sleep(0.2)", on_message=both)
        return any(m.get("type") == "done" for m in button.messages)

    assert wait_for(inserted, timeout=20)
    assert [e["after"] for e in front.edits] == ["ask", "new-1", "new-2"]
    (said,) = [m for m in button.messages if m.get("type") == "done"]
    assert said["text"] == "Inserted below this cell: the prompt and answer, 2 code cells."
    sources = [e["source"] for e in front.edits if e["cell_type"] == "code"]
    values = {name: kernel.value(name) for name in ("x", "y")}
    # A kernel restart and Run All, with no model reachable.
    fresh = Kernel(DEAD_MODEL, cwd=str(tmp_path))
    try:
        printed = "".join(fresh.ok(source).stdout for source in sources)
        assert {name: fresh.value(name) for name in values} == values
    finally:
        fresh.shutdown()
    assert printed == "y = 42\n" and "y = 42" in ran.stdout


def test_headless_no_button_is_shown(kernel, scripted_model):
    widgets = FrontEnd(kernel)
    scripted_model.add(say("Done."))
    kernel.ok("%agent hello", on_message=widgets.hook)
    assert widgets.of_kind("InsertCellsButton") == []


def test_the_open_notebooks_file_is_not_written_under_its_front_end(scripted_model, agent_db, tmp_path):
    path = notebook_file(tmp_path / "analysis.ipynb")
    kernel = Kernel({"JPY_SESSION_NAME": str(path)}, cwd=str(tmp_path))
    try:
        kernel.ok("%load_ext agent_kernel")
        front = NotebookChannel(kernel)
        front.cells = []
        front.open(HELLO)
        scripted_model.add(say("Done."))
        kernel.ok("%agent compute y", on_message=front.hook)
        refused = kernel.execute("%agent_cells --to analysis.ipynb", on_message=front.hook)
        assert "would save over the file" in usage_error(refused)
    finally:
        kernel.shutdown()
    assert len(nbformat.read(path, as_version=4).cells) == 4


@needs_widget_replies
def test_cells_of_a_turn_after_untrusted_content_are_marked_and_the_scheduler_refuses_them(
    kernel, scripted_model, agent_db, tmp_path
):
    from datetime import datetime, timezone

    from agent_kernel.scheduler import ScheduleError
    from agent_kernel.scheduler.jobs import new_job
    from tests.support.calls import after_hostile_page

    kernel.ok("%config AgentKernel.tool_groups = ['code', 'web']")
    scripted_model.add(call("run_code", code="x = 21"), say("Set."))
    kernel.ok("%agent --session web set x")
    scripted_model.add(after_hostile_page(("run_code", {"code": "y = x * 2"})), say("Done."))
    person = FrontEnd(kernel)  # lets the code run on its approval card
    person.answer["ChoiceCard"] = lambda front, card: front.custom(card, type="choice", choice="run")
    kernel.ok("%agent --session web read the figures", on_message=person.hook)
    assert kernel.value("y") == 42
    path = tmp_path / "report.ipynb"
    kernel.ok(f"%agent_cells 1 --to {path}")
    clean = [c.metadata["agent_kernel"] for c in nbformat.read(path, as_version=4).cells]
    assert all("untrusted" not in m for m in clean) and len(clean) == 2
    kernel.ok(f"%agent_cells 2 --to {path}")
    cells = nbformat.read(path, as_version=4).cells
    steered = [c.metadata["agent_kernel"] for c in cells if c.metadata["agent_kernel"]["turn"] == 2]
    assert len(steered) == 2 and all(m["untrusted"] is True for m in steered)
    assert steered[0]["sources"] == ["web_fetch https://evil.example/figures"]
    try:
        new_job(
            name="report", kind="notebook", notebook=str(path), cwd=str(tmp_path), cron="0 8 * * *", timezone="UTC",
            now=datetime.now(timezone.utc),
        )  # fmt: skip
    except ScheduleError as refused:
        assert "an agent turn wrote after reading untrusted content" in str(refused)
        assert f"agent-kernel cells clear {path}" in str(refused)
    else:
        raise AssertionError("a job was made on a notebook holding marked cells")
