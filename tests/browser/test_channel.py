"""The notebook channel in a real JupyterLab 4 with Chromium: the extension attaches when
the kernel loads agent_kernel, says which notebook it is and reads the live cells.

Run it with the extension built from this checkout first on ``JUPYTER_PATH``.
"""

from __future__ import annotations

import os
import shutil

import pytest
from playwright.sync_api import expect

from agent_kernel.testing import call, say
from tests.support.browser import cell, open_with_ids, run_notebook, save_screenshot, wait_idle
from tests.support.calls import tool_results
from tests.support.paths import ARTIFACTS, SCREENSHOTS

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-2")]

WAIT_ATTACHED = """from agent_kernel.kernel import channel as c
import asyncio
for _ in range(200):
    if c.attached():
        break
    await asyncio.sleep(0.05)
print("attached to", c.attached().notebook)"""
READ = """cells = await c.read_cells()
print([(x["cell_type"], x["source"][:12]) for x in cells])"""


def test_the_extension_attaches_and_the_kernel_reads_the_notebook(lab_page, jupyterlab):
    page = lab_page
    run_notebook(page, jupyterlab, "channel", ["%load_ext agent_kernel", WAIT_ATTACHED, READ])
    wait_idle(page)
    assert "attached to channel.ipynb" in cell(page, 1).locator(".jp-OutputArea").inner_text()
    shown = cell(page, 2).locator(".jp-OutputArea").inner_text()
    assert "('code', '%load_ext ag')" in shown and "('code', 'cells = awai')" in shown


def test_an_auto_turn_inserts_two_cells_below_its_agent_cell(lab_page, jupyterlab, lab_model):
    page = lab_page
    lab_model.add(
        call("insert_cell", source="print(6 * 7)"),
        call("insert_cell", source="## The answer", cell_type="markdown"),
        say("Inserted two cells."),
    )
    run_notebook(page, jupyterlab, "inserts", ["%load_ext agent_kernel", "%agent add two cells"])
    cell(page, 1).get_by_text("Inserted two cells.").wait_for(timeout=60_000)
    wait_idle(page)
    cells = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells"
        ".map(c => [c.cell_type, c.getSource(), c.getMetadata('agent_kernel')])"
    )
    assert [c[:2] for c in cells] == [
        ["code", "%load_ext agent_kernel"], ["code", "%agent add two cells"],
        ["code", "print(6 * 7)"], ["markdown", "## The answer"],
    ]  # fmt: skip
    assert cells[2][2]["turn"] == 1 and cells[3][2] == cells[2][2]
    assert cell(page, 3).locator("h2").inner_text().startswith("The answer")  # rendered markdown


NOTEBOOK_CELLS = "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells.map(c => c.getSource())"
HOSTILE_MARKDOWN = '## Note\n<img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script>'


def test_an_auto_turn_inserts_a_cell_that_runs_after_the_turn_and_markdown_is_sanitised(
    lab_page, jupyterlab, lab_model
):
    page = lab_page
    lab_model.add(
        call("insert_cell", source="print(6 * 7)", run=True),
        call("insert_cell", source=HOSTILE_MARKDOWN, cell_type="markdown"),
        say("Inserted two cells; the first runs after this turn."),
    )
    run_notebook(page, jupyterlab, "runs", ["%load_ext agent_kernel", "%agent add two cells"])
    cell(page, 1).get_by_text("Inserted two cells").wait_for(timeout=60_000)
    cell(page, 2).locator(".jp-OutputArea").get_by_text("42").wait_for(timeout=30_000)  # ran, in that cell
    wait_idle(page)
    assert page.evaluate(NOTEBOOK_CELLS)[2:] == ["print(6 * 7)", HOSTILE_MARKDOWN]
    expect(cell(page, 2).locator(".jp-InputPrompt")).to_have_text("[3]:", timeout=30_000)
    rendered = cell(page, 3)
    assert rendered.locator("h2").inner_text().startswith("Note")
    assert rendered.locator("script").count() == 0 and rendered.locator("img[onerror]").count() == 0
    assert page.evaluate("() => window.__pwned") is None  # nothing the model wrote ran
    save_screenshot(cell(page, 2), "notebook-ran-cell.png")
    first, last = cell(page, 1).bounding_box(), cell(page, 2).bounding_box()
    clip = {
        "x": first["x"],
        "y": first["y"],
        "width": first["width"],
        "height": last["y"] + last["height"] - first["y"],
    }
    page.screenshot(path=str(save_screenshot(cell(page, 1), "notebook-inserted-cells.png")), clip=clip)
    if os.environ.get("AGENT_KERNEL_UPDATE_SCREENSHOTS"):
        shutil.copy(ARTIFACTS / "notebook-inserted-cells.png", SCREENSHOTS / "notebook-inserted-cells.png")


def test_an_ask_turn_shows_diffs_reject_keeps_the_cell_and_accept_applies(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    lab_model.add(
        call("replace_cell", cell="plot", source="kind = 'bar'"),
        call("replace_cell", cell="plot", source="kind = 'barh'"),
        say("Changed it to horizontal bars."),
    )
    open_with_ids(page, jupyterlab, "asks", [
        ("load", "%load_ext agent_kernel"), ("turn", "%agent --approve ask make it a bar chart"),
        ("plot", "kind = 'line'"),
    ])  # fmt: skip
    diff = page.locator(".ak-edit-diff")
    diff.wait_for(timeout=60_000)
    assert "The agent proposes to change cell 3" in diff.inner_text()
    assert diff.locator(".ak-edit-old pre").inner_text() == "kind = 'line'"
    assert diff.locator(".ak-edit-new pre").inner_text() == "kind = 'bar'"
    save_screenshot(cell(page, 2), "notebook-edit-diff.png", readme=True)
    diff.get_by_role("button", name="Reject").click()
    page.wait_for_function("() => document.querySelectorAll('.ak-edit-diff').length === 1"
                           " && document.querySelector('.ak-edit-new pre').textContent === \"kind = 'barh'\"",
                           timeout=30_000)  # fmt: skip
    assert page.evaluate(NOTEBOOK_CELLS)[2] == "kind = 'line'"  # the rejected edit left it
    page.locator(".ak-edit-diff").get_by_role("button", name="Accept").click()
    cell(page, 1).get_by_text("Changed it to horizontal bars.").wait_for(timeout=60_000)
    assert page.evaluate(NOTEBOOK_CELLS)[2] == "kind = 'barh'"
    rejected = tool_results(lab_model.requests[start + 1])[0]
    assert rejected["is_error"] and "The person rejected this edit" in str(rejected["content"])
    assert not tool_results(lab_model.requests[start + 2])[0].get("is_error")


def test_undo_reverts_the_turns_edits_together(lab_page, jupyterlab, lab_model):
    page = lab_page
    lab_model.add(
        call("replace_cell", cell="a", source="a = 100"),
        call("move_cell", cell="c", after="turn"),
        call("delete_cell", cell="b"),
        call("insert_cell", source="print(a)"),
        say("Reorganised."),
    )
    cells = [
        ("load", "%load_ext agent_kernel"),
        ("turn", "%agent reorganise"),
        ("a", "a = 1"),
        ("b", "b = 2"),
        ("c", "c = 3"),
    ]
    open_with_ids(page, jupyterlab, "undo", cells)
    cell(page, 1).get_by_text("Reorganised.").wait_for(timeout=60_000)
    wait_idle(page)
    assert page.evaluate(NOTEBOOK_CELLS)[2:] == ["print(a)", "c = 3", "a = 100"]
    page.locator(".jp-Notebook .jp-Cell").nth(3).click(button="right")
    page.locator(".lm-Menu").get_by_text("Undo the agent's edits of this turn").click()
    for _ in range(50):  # the shared document changes as the undo applies
        if page.evaluate(NOTEBOOK_CELLS) == [source for _, source in cells]:
            break
        page.wait_for_timeout(200)
    assert page.evaluate(NOTEBOOK_CELLS) == [source for _, source in cells]
    ids = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells.map(c => c.getId())"
    )
    assert ids == [i for i, _ in cells]


def test_the_editors_own_undo_reverts_a_replaced_source(lab_page, jupyterlab, lab_model):
    page = lab_page
    lab_model.add(call("replace_cell", cell="a", source="a = 100"), say("Replaced."))
    open_with_ids(
        page, jupyterlab, "editor-undo", [("load", "%load_ext agent_kernel"), ("turn", "%agent set a"), ("a", "a = 1")]
    )
    cell(page, 1).get_by_text("Replaced.").wait_for(timeout=60_000)
    wait_idle(page)
    shared = "window.jupyterapp.shell.currentWidget.content.model.sharedModel.getCell(2)"
    assert page.evaluate(f"() => {shared}.getSource()") == "a = 100"
    page.evaluate(f"() => {shared}.undo()")  # what Ctrl+Z in the cell's editor calls
    assert page.evaluate(f"() => {shared}.getSource()") == "a = 1"


def test_in_ask_mode_only_an_accepted_cell_is_inserted_and_run(lab_page, jupyterlab, lab_model):
    page = lab_page
    lab_model.add(
        call("insert_cell", source="print('rejected ran')", run=True),
        call("insert_cell", source="print('accepted ran')", run=True),
        say("One cell queued."),
    )
    run_notebook(page, jupyterlab, "ask-runs", ["%load_ext agent_kernel", "%agent --approve ask add a cell"])
    diff = page.locator(".ak-edit-diff")
    diff.wait_for(timeout=60_000)
    assert "Accept also runs it" in diff.inner_text()
    diff.get_by_role("button", name="Reject").click()
    page.wait_for_function("() => document.querySelector('.ak-edit-new pre')?.textContent.includes('accepted')",
                           timeout=30_000)  # fmt: skip
    page.locator(".ak-edit-diff").get_by_role("button", name="Accept").click()
    cell(page, 1).get_by_text("One cell queued.").wait_for(timeout=60_000)
    cell(page, 2).locator(".jp-OutputArea").get_by_text("accepted ran").wait_for(timeout=30_000)
    wait_idle(page)
    assert page.evaluate(NOTEBOOK_CELLS)[2:] == ["print('accepted ran')"]
    assert page.locator(".jp-Notebook .jp-Cell").count() == 3
    assert cell(page, 2).locator(".jp-OutputArea").inner_text().strip() == "accepted ran"


HOSTILE_EDITS = """answers = []
for change in [
    {"op": "exec", "cell": "x", "source": "import os"},  # not an operation of ours
    {"op": "insert", "after": "../x", "cell_type": "code", "source": "1"},
    {"op": "insert", "after": cells[0]["id"], "cell_type": "raw", "source": "1"},
    {"op": "replace", "cell": cells[0]["id"], "source": 7},
    {"op": "delete", "cell": "no-such-cell"},
    {"op": "insert", "after": cells[0]["id"], "cell_type": "markdown", "source": "# x", "run": True},
]:
    answers.append((await c._CHANNEL.request({"type": "edit", **change}, 5)).get("error"))
try:
    await c._CHANNEL.request({"type": "edit", "op": "insert", "after": cells[0]["id"],
                              "cell_type": "code", "source": "x" * 70_000}, 2)
except TimeoutError:
    answers.append("ignored")
print(answers)"""


def test_the_extension_refuses_edits_that_are_not_its_own_well_formed_messages(lab_page, jupyterlab):
    page = lab_page
    run_notebook(page, jupyterlab, "hostile", ["%load_ext agent_kernel", WAIT_ATTACHED, READ, HOSTILE_EDITS])
    wait_idle(page)
    shown = cell(page, 3).locator(".jp-OutputArea").inner_text()
    assert shown.startswith("['op is insert, replace, delete or move', 'after is a cell id',") and "ignored" in shown
    assert "'only an inserted or replaced code cell can run'" in shown and "no cell no-such-cell" in shown
    assert len(page.evaluate(NOTEBOOK_CELLS)) == 4  # nothing was inserted
