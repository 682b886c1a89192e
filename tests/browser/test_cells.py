""" "Insert as cells" in a real JupyterLab 4 with Chromium: the button under a finished
turn puts its prompt, answer and code below the %agent cell, marked with session and turn;
the cells re-run without the model.

Run it with the extension built from this checkout first on ``JUPYTER_PATH``.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agent_kernel.testing import Failure, call, say
from tests.support.browser import KERNEL_READY, cell, run_notebook, save_screenshot, wait_idle
from tests.support.calls import result_text, tool_results

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]


def test_insert_as_cells_puts_the_turn_below_its_cell(lab_page, jupyterlab, lab_model):
    page = lab_page
    lab_model.add(
        call("run_code", code="x = 6 * 7"),
        call("run_code", code="print(x)"),
        say("x is **42**."),
    )
    run_notebook(page, jupyterlab, "insert-cells", ["%load_ext agent_kernel", "%agent compute x"])
    turn = cell(page, 1)
    turn.get_by_text("x is").first.wait_for(timeout=60_000)
    wait_idle(page)
    button = turn.get_by_role("button", name="Insert as cells")
    button.wait_for(timeout=30_000)
    button.click()
    turn.get_by_text("Inserted below this cell: the prompt and answer, 2 code cells.").wait_for(timeout=30_000)
    assert button.is_disabled()
    cells = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells"
        ".map(c => [c.cell_type, c.getSource(), c.getMetadata('agent_kernel')])"
    )
    assert [c[0] for c in cells] == ["code", "code", "markdown", "code", "code"]
    assert [c[1] for c in cells[3:]] == ["x = 6 * 7", "print(x)"]
    assert "> compute x" in cells[2][1] and "x is **42**." in cells[2][1]
    marks = [c[2] for c in cells[2:]]
    assert marks[0]["turn"] == 1 and all(m == marks[0] for m in marks)
    assert cell(page, 2).locator("strong").first.inner_text() == "Agent turn 1"  # rendered markdown
    save_screenshot(page.locator(".jp-Notebook"), "insert-as-cells.png", readme=True)


def test_inserted_cells_give_the_same_outputs_after_a_restart_and_run_all_with_no_model(
    lab_page, jupyterlab, lab_model
):
    page = lab_page
    start = len(lab_model.requests)
    lab_model.add(call("run_code", code="x = 6 * 7"), call("run_code", code="print(x)"), say("x is 42."))
    run_notebook(page, jupyterlab, "rerun-cells", ["%load_ext agent_kernel", "%agent compute x"])
    turn = cell(page, 1)
    turn.get_by_text("x is 42.").wait_for(timeout=60_000)
    wait_idle(page)
    printed = result_text(tool_results(lab_model.requests[start + 2])[0])  # what print(x) gave the model
    turn.get_by_role("button", name="Insert as cells").click()
    turn.get_by_text("Inserted below this cell").wait_for(timeout=30_000)
    # The notebook without its %agent cell, a restarted kernel and no model to reach.
    turn.locator(".jp-InputPrompt").click()
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:delete-cell')")
    lab_model.responder = lambda request: Failure(401, "authentication_error", "no model here")
    try:
        requests = len(lab_model.requests)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:restart-run-all'); }")
        page.locator(".jp-Dialog").get_by_role("button", name="Confirm Kernel Restart").click()
        code = cell(page, 3)
        expect(code.locator(".jp-InputPrompt")).to_have_text("[3]:", timeout=60_000)
        page.wait_for_function(KERNEL_READY, timeout=60_000)
        assert code.locator(".jp-OutputArea").inner_text().strip() == "42" and "42" in printed
        expect(cell(page, 2).locator(".jp-InputPrompt")).to_have_text("[2]:")
        assert cell(page, 0).locator(".jp-OutputArea").inner_text().strip() == ""
        assert len(lab_model.requests) == requests  # nothing asked the model
    finally:
        lab_model.responder = None
