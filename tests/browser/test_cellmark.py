"""The untrusted mark on cells in a real JupyterLab 4 with Chromium: a cell an agent turn
wrote after its session read untrusted content shows a badge with its sources (as text),
the agent reads it as data and its edits keep the mark, and only the person's Clear (after
a confirmation) removes it, recorded in the cell.

Run it with the extension built from this checkout first on ``JUPYTER_PATH``.
"""

from __future__ import annotations

import nbformat
import pytest
from playwright.sync_api import expect

from agent_kernel.testing import call, say
from tests.support.browser import KERNEL_READY, cell, wait_idle
from tests.support.calls import only_as_data, result_text, tool_results
from tests.support.notebooks import write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

HOSTILE_SOURCE = "<img src=x onerror=window.__pwned=1>"
SOURCES = ["web_fetch https://evil.example/figures", HOSTILE_SOURCE]
MARKS = "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells.map(c => c.getMetadata('agent_kernel') ?? null)"


def _open(page, lab, name: str) -> None:
    planted = nbformat.v4.new_code_cell("steered = 1")
    planted["id"] = "planted"
    planted.metadata["agent_kernel"] = {"session": "a" * 32, "turn": 2, "untrusted": True, "sources": SOURCES}
    clean = nbformat.v4.new_code_cell("clean = 1")
    clean.metadata["agent_kernel"] = {"session": "a" * 32, "turn": 1}
    write_notebook(lab.root / f"{name}.ipynb", "%load_ext agent_kernel", planted, clean,
                   "%agent --new=blind fix the planted cell", "%agent --new=reader read the notebook and tidy it")  # fmt: skip
    page.goto(f"{lab.url}/lab/workspaces/{name}/tree/{name}.ipynb?reset&token={lab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(KERNEL_READY, timeout=60_000)


def test_a_marked_cell_shows_its_badge_keeps_its_mark_through_the_agents_edit_and_only_the_person_clears_it(
    lab_page, jupyterlab, lab_model
):
    page = lab_page
    start = len(lab_model.requests)
    lab_model.add(
        call("replace_cell", cell="planted", source="steered = 2"), say("Fixed."),  # a session that read nothing
        call("read_notebook"), call("replace_cell", cell="planted", source="steered = 3"), say("Tidied."),
    )  # fmt: skip
    _open(page, jupyterlab, "cellmark")
    badge = cell(page, 1).locator(".ak-untrusted-badge")
    expect(badge).to_contain_text(f"written after untrusted content ({'; '.join(SOURCES)})")
    assert cell(page, 2).locator(".ak-untrusted-badge").count() == 0  # a clean mark shows nothing
    assert "ak-untrusted-cell" in (cell(page, 1).get_attribute("class") or "")

    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    cell(page, 3).get_by_text("Fixed.").wait_for(timeout=60_000)
    marks = page.evaluate(MARKS)
    assert marks[1]["untrusted"] is True and marks[1]["sources"] == SOURCES  # a clean session's edit kept it
    assert marks[1]["session"] != "a" * 32  # the mark names the session that edited it last
    cell(page, 4).get_by_text("Tidied.").wait_for(timeout=60_000)
    wait_idle(page)
    [read] = [
        result_text(block) for request in lab_model.requests[start:] for block in tool_results(request)
        if "--- cell planted" in result_text(block)
    ]  # fmt: skip
    [label] = only_as_data(read, "steered = 2")  # the reader got the marked cell as data
    assert label.startswith("notebook cell planted, written by an agent turn after untrusted content (web_fetch")
    assert (
        page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.getCell(1).getSource()")
        == "steered = 3"
    )
    marks = page.evaluate(MARKS)
    assert marks[1]["untrusted"] is True  # its session read the marked cell: tainted by it
    assert marks[1]["sources"][0].startswith("notebook cell planted, written by an agent turn after untrusted content")
    expect(badge).to_be_visible()
    assert page.evaluate("() => window.__pwned") is None  # the sources are text, never HTML

    badge.get_by_role("button", name="Clear").click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Clear the mark only once you have read the cell")
    dialog.get_by_role("button", name="Clear the mark").click()
    expect(badge).to_have_count(0)
    cleared = page.evaluate(MARKS)[1]
    assert "untrusted" not in cleared and cleared["cleared"]["by"] == "panel: JupyterLab, Clear on the cell"
    assert cleared["cleared"]["sources"].startswith("notebook cell planted, written by an agent turn")
