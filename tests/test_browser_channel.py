"""The notebook channel in a real JupyterLab 4 with Chromium: the extension attaches when
the kernel loads agent_kernel, says which notebook it is and reads the live cells.

Run it with the extension built from this checkout first on ``JUPYTER_PATH``.
"""

from __future__ import annotations

import pytest

from agent_kernel.testing import call, say

from .test_browser import cell, run_notebook, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

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
