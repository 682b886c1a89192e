"""The agent in a real JupyterLab 4, driven by Playwright on Debian's Chromium.

One JupyterLab server and one browser serve the whole session (fixtures in conftest.py);
each test opens its own notebook (and so its own kernel) and scripts the model. What the
tests click is what a person clicks: the widgets' own buttons and inputs.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from agent_kernel.testing import call, reply, say, text, tool_use

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts" / "browser"
SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


KERNEL_READY = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const kernel = panel && panel.sessionContext && panel.sessionContext.session
    && panel.sessionContext.session.kernel;
  return Boolean(kernel && kernel.connectionStatus === "connected" && kernel.status === "idle");
}"""


def run_notebook(page, lab, name: str, cells: list[str]) -> None:
    """Open a new notebook with ``cells`` in JupyterLab and run them all."""
    page.goto(lab.notebook(name, cells))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(KERNEL_READY, timeout=60_000)
    # Not awaited: the command's promise resolves only when every cell has finished.
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    page.wait_for_function(
        "() => document.querySelector('.jp-Notebook .jp-Cell .jp-InputPrompt').textContent.includes('[1]')",
        timeout=60_000,
    )


def cell(page, index: int):
    return page.locator(".jp-Notebook .jp-Cell").nth(index)


def wait_idle(page, timeout: float = 60_000) -> None:
    page.wait_for_function(
        "() => { const i = document.querySelector('.jp-Notebook-ExecutionIndicator');"
        " return i && i.dataset.status === 'idle'"
        " && !document.querySelector('.jp-InputPrompt:not(:empty)')?.textContent.includes('*'); }",
        timeout=timeout,
    )


def save_screenshot(locator, name: str, *, readme: bool = False) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    locator.screenshot(path=str(path))
    if readme and os.environ.get("AGENT_KERNEL_UPDATE_SCREENSHOTS"):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, SCREENSHOTS / name)
    return path


def requests_since(model, start: int) -> list[dict]:
    return model.requests[start:]


def tool_results(request: dict) -> list[dict]:
    return [b for b in request["messages"][-1]["content"] if b.get("type") == "tool_result"]


# -- (a) streamed text and a table ----------------------------------------------------------


def test_streamed_text_and_a_sortable_paged_table(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    rows = [{"month": f"2025-{i:02d}", "region": region, "revenue": (i * 37 + len(region) * 11) % 97 + 3}
            for i in range(1, 13) for region in ("North", "South", "East")]
    intro = "I looked at your sales by month and region; here is the table. " * 6 + "End of the introduction."
    lab_model.add(
        reply(
            text(intro),
            tool_use("render_blocks", {"title": "Revenue by month", "blocks": [
                {"type": "table", "data": rows, "columns": [
                    {"key": "month", "label": "Month"}, {"key": "region", "label": "Region"},
                    {"key": "revenue", "label": "Revenue"}]},
            ]}),
            chunk_delay=0.04,
        ),
        say("March in the East was the best month."),
    )
    run_notebook(page, jupyterlab, "streamed", ["%load_ext agent_kernel", "%agent show me the revenue table"])
    agent_cell = cell(page, 1)
    # The answer streams: part of it is on the page while the rest has not arrived yet.
    page.wait_for_function(
        "() => { const t = document.querySelectorAll('.jp-Notebook .jp-Cell')[1].innerText;"
        " return t.includes('I looked at your sales') && !t.includes('End of the introduction'); }",
        timeout=30_000,
        polling=50,
    )
    table = agent_cell.locator(".ak-table")
    table.wait_for(timeout=30_000)
    agent_cell.get_by_text("March in the East was the best month.").wait_for(timeout=30_000)
    assert agent_cell.locator(".ak-pager").inner_text().startswith("«")
    assert "Rows 1–25 of 36" in agent_cell.locator(".ak-pager").inner_text()
    first_rows = table.locator("tbody tr")
    assert first_rows.count() == 25
    assert first_rows.first.inner_text().split("\t")[:2] == ["2025-01", "North"]

    # Sorting by Revenue (twice: descending) happens in the kernel, after the turn ended.
    header = table.locator("th", has_text="Revenue")
    header.click()
    header.click()
    best = max(rows, key=lambda r: r["revenue"])
    page.wait_for_function(
        "(v) => document.querySelector('.ak-table tbody tr td:last-child').textContent === v",
        arg=str(best["revenue"]),
        timeout=10_000,
    )
    assert "▼" in table.locator("th", has_text="Revenue").inner_text()
    agent_cell.get_by_title("Next page").click()
    page.get_by_text("Rows 26–36 of 36").wait_for(timeout=10_000)
    assert table.locator("tbody tr").count() == 11
    save_screenshot(agent_cell, "streamed-text-and-table.png")
    assert len(requests_since(lab_model, start)) == 2
