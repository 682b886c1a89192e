"""A notebook reopens whole: a turn's table, chart and form, saved while the kernel lived,
show again in JupyterLab after the kernel is gone, and in nbconvert's HTML.

The JupyterLab extension is the one installed in this environment (or the one found
first on ``JUPYTER_PATH``); the server extension is enabled by tests/conftest.py.
"""

from __future__ import annotations

import base64
import json
import re
import time

import nbformat
import pytest
from nbconvert import HTMLExporter

from agent_kernel.display.blocks import TURN_NOTEBOOK_BYTES
from agent_kernel.testing import reply, say, tool_use
from tests.support.browser import KERNEL_READY, cell, run_notebook, save_screenshot, wait_idle
from tests.support.calls import result_text, tool_results
from tests.support.capabilities import needs_widget_replies

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser"), needs_widget_replies]

SETUP = """%load_ext agent_kernel
import pandas as pd
orders = pd.DataFrame({
    "order_id": range(1, 5001),
    "region": ["North", "South", "East", "West"] * 1250,
    "amount": [1234.5 * (i % 97 + 1) for i in range(5000)],
})"""

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
CHART = {
    "type": "chart", "chartType": "line", "title": "Revenue by month",
    "data": {"labels": MONTHS, "datasets": [
        {"label": region, "data": [1000 * (m + 1) + 250 * r for m in range(12)]}
        for r, region in enumerate(["North", "South", "East"])
    ]},
}  # fmt: skip
DAILY = {"type": "chart", "chartType": "bar", "title": "Orders per day",
         "data": [{"x": f"day {d}", "y": (d * 37) % 101} for d in range(1, 201)]}  # fmt: skip
FORM = {"type": "form", "title": "Report settings", "submitLabel": "Create report", "fields": [
    {"name": "owner", "label": "Report owner", "type": "text", "required": True},
    {"name": "quarter", "label": "Quarter", "type": "select", "options": ["Q1", "Q2", "Q3", "Q4"], "default": "Q2"},
]}  # fmt: skip
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def thank(request: dict):
    data = json.loads(result_text(tool_results(request)[0]))["data"]
    return say(f"Thanks, {data['owner']}: the {data['quarter']} report is on its way.")


def bytes_of_outputs(path, index: int) -> int:
    """What cell ``index``'s outputs add to the file (written as JupyterLab writes it)."""
    notebook = nbformat.read(path, as_version=4)
    notebook.cells[index].outputs = []
    without = len(nbformat.writes(notebook).encode("utf-8")) + 1  # the file ends with a newline
    return path.stat().st_size - without


def static_table_shows_the_first_page(page, agent_cell) -> None:
    """No widget error anywhere, and the table's first page in its place."""
    page.wait_for_timeout(4_000)  # the widget manager looks for a missing model for 2 s
    text = page.evaluate("() => document.body.textContent")
    assert "model not found" not in text and "Error displaying widget" not in text
    assert agent_cell.locator(".ak-table").count() == 0
    rows = agent_cell.locator("table", has_text="order_id").locator("tbody tr")
    assert rows.count() == 25 and rows.first.is_visible()
    assert rows.first.inner_text().split("\t") == ["1", "North", "1,234.5"]
    assert agent_cell.get_by_text("Rows 1–25 of 5,000.").is_visible()


def kernel_idle(server, timeout: float = 60) -> None:
    """Until the server's one kernel has started and is idle."""
    deadline = time.monotonic() + timeout
    while not any(k["execution_state"] == "idle" for k in server.kernels()):
        assert time.monotonic() < deadline, "the notebook's kernel did not start"
        time.sleep(0.25)


def in_notebook_7(chromium, lab_model, tmp_path, notebook) -> None:
    """``notebook`` opened in Notebook 7 (trusted, as its own saves are) with a new kernel."""
    from nbformat.sign import NotebookNotary

    from tests.support.jupyterlab import JupyterLab

    root = tmp_path / "root"
    root.mkdir()
    data = tmp_path / "jupyter-home" / "data"
    data.mkdir(parents=True)
    NotebookNotary(data_dir=str(data)).sign(notebook)
    nbformat.write(notebook, root / "whole.ipynb")
    server = JupyterLab(root, dict(lab_model.env(), AGENT_KERNEL_DB=str(tmp_path / "agent.duckdb")), app="notebook")
    context = chromium.new_context(viewport={"width": 1200, "height": 1500})
    try:
        page = context.new_page()
        page.goto(f"{server.url}/notebooks/whole.ipynb?token={server.token}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        kernel_idle(server)
        agent_cell = cell(page, 1)
        agent_cell.locator(".ak-widget-fallback", has_text="All orders").wait_for(
            timeout=30_000
        )  # the extension's renderer
        static_table_shows_the_first_page(page, agent_cell)
        assert agent_cell.locator(".vega-embed").count() == 2
    finally:
        context.close()
        server.stop()


def test_a_saved_notebook_reopens_whole_after_its_kernel_is_gone(lab_page, jupyterlab, lab_model, chromium, tmp_path):
    page = lab_page
    lab_model.add(
        reply(tool_use("render_blocks", {"title": "The quarter", "blocks": [
            {"type": "table", "variable": "orders", "title": "All orders"}, CHART, DAILY, FORM]})),
        thank,
    )  # fmt: skip
    run_notebook(page, jupyterlab, "whole", [SETUP, "%agent show me the quarter"])
    agent_cell = cell(page, 1)

    # Live: the table widget pages in the kernel, its numbers with thousands separators.
    table = agent_cell.locator(".ak-table")
    table.wait_for(timeout=60_000)
    assert table.locator("tbody tr").first.inner_text().split("\t") == ["1", "North", "1,234.5"]
    agent_cell.get_by_title("Next page").click()
    agent_cell.locator(".ak-pager").get_by_text("Rows 26–50 of 5,000").wait_for(timeout=30_000)
    assert table.locator("tbody tr").first.inner_text().split("\t")[0] == "26"

    form = agent_cell.locator("form.ak-form")
    form.wait_for(timeout=30_000)
    assert agent_cell.locator(".ak-widget-fallback:visible").count() == 0  # the widgets stand in their place
    form.locator("[data-field=owner]").fill("Ada Lovelace")
    form.get_by_role("button", name="Create report").click()
    agent_cell.get_by_text("Thanks, Ada Lovelace: the Q2 report is on its way.").wait_for(timeout=60_000)
    wait_idle(page)
    agent_cell.get_by_title("Previous page").click()  # paging goes on after the turn ended
    agent_cell.locator(".ak-pager").get_by_text("Rows 1–25 of 5,000").wait_for(timeout=30_000)

    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)

    # Opened again while the kernel lives (a reload): the live widget comes back and pages.
    page.reload()
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    agent_cell = cell(page, 1)
    agent_cell.locator(".ak-table").wait_for(timeout=60_000)
    assert agent_cell.locator(".ak-widget-fallback:visible").count() == 0
    agent_cell.get_by_title("Last page").click()
    agent_cell.locator(".ak-pager").get_by_text("Rows 4,976–5,000 of 5,000").wait_for(timeout=30_000)
    jupyterlab.shutdown_kernels()

    path = jupyterlab.root / "whole.ipynb"
    saved = nbformat.read(path, as_version=4)
    outputs = [o.get("data", {}) for o in saved.cells[1].outputs]
    added = bytes_of_outputs(path, 1)
    sizes = [{mime: len(json.dumps(value, indent=1)) for mime, value in d.items()} for d in outputs]
    assert added < TURN_NOTEBOOK_BYTES, f"one turn added {added:,} bytes to the notebook: {sizes}"
    # Each chart keeps the kernel's PNG at scale 1 (JupyterLab adds its own, larger, to a
    # Vega output without one).
    pictures = [base64.b64decode(d["image/png"]) for d in outputs if "image/png" in d]
    assert len(pictures) == 2 and all(len(p) < 30_000 for p in pictures), [len(p) for p in pictures]
    # Every widget view left in the file carries a static rendering beside it.
    assert all("text/html" in d for d in outputs if WIDGET_VIEW in d)
    # The displays the turn blanked as it settled (status line, Stop) are not kept.
    assert all(d and d != {"text/plain": ""} for d in outputs), outputs[:3]

    # Reopened with a new kernel that never saw the widgets.
    page.goto(f"{jupyterlab.url}/lab/workspaces/whole2/tree/whole.ipynb?reset&token={jupyterlab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(KERNEL_READY, timeout=60_000)
    reopened = cell(page, 1)
    static = reopened.locator(".ak-widget-fallback", has_text="All orders")  # the table's
    static.wait_for(timeout=30_000)
    assert "%agent_cells" in reopened.locator(".ak-widget-fallback", has_text="Insert as cells").inner_text()
    static_table_shows_the_first_page(page, reopened)
    assert static.is_visible()
    charts = reopened.locator(".vega-embed")
    assert charts.count() == 2 and charts.first.is_visible()
    assert "Submitted" in reopened.locator(".agent-kernel-form-static").inner_text()
    assert "Ada Lovelace" in reopened.locator(".agent-kernel-form-static").inner_text()
    save_screenshot(reopened, "reopened-turn.png")

    # nbconvert (and so nbviewer) shows the same without widget state: HTML and the PNGs.
    html, _ = HTMLExporter().from_filename(str(path))
    assert "model not found" not in html
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", html)
    assert cells[cells.index("North") - 1 : cells.index("North") + 2] == ["1", "North", "1,234.5"]
    assert "Rows 1–25 of 5,000." in html and "Ada Lovelace" in html
    assert html.count('src="data:image/png;base64,') == 2  # the two charts

    # Notebook 7 draws it with the same extension.
    in_notebook_7(chromium, lab_model, tmp_path, saved)
