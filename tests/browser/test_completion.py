"""Inline completion in a real JupyterLab 4 with Chromium: typing in a cell shows the
scripted model's answer as ghost text, streamed through the server extension, and Tab
accepts it.

Run it with the extension built from this checkout first on ``JUPYTER_PATH``.
"""

from __future__ import annotations

import pytest

from agent_kernel.testing import say
from tests.support.browser import cell, save_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

ANSWER = "sum(values) / len(values)"


def test_typing_shows_ghost_text_from_the_model_and_tab_accepts_it(lab_page, jupyterlab, lab_model):
    page = lab_page
    asked = len(lab_model.requests)
    lab_model.responder = lambda request: say(ANSWER, chunk_size=5, chunk_delay=0.05)
    try:
        page.goto(jupyterlab.notebook("completion", ["# the scores\nvalues = [3, 5, 8]", ""]))
        editor = cell(page, 1).locator(".cm-content")
        editor.wait_for(timeout=60_000)
        editor.click()
        page.keyboard.type("mean = ", delay=40)
        ghost = cell(page, 1).locator(".jp-GhostText")
        ghost.wait_for(timeout=30_000)
        page.wait_for_function(
            "text => document.querySelector('.jp-GhostText')?.textContent === text", arg=ANSWER, timeout=30_000
        )
        save_screenshot(cell(page, 1), "inline-completion.png", readme=True)
        page.keyboard.press("Tab")
        page.wait_for_function("() => !document.querySelector('.jp-GhostText')", timeout=10_000)
        source = page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells[1].getSource()"
        )
        assert source == f"mean = {ANSWER}"
    finally:
        lab_model.responder = None
    sent = lab_model.requests[asked:]
    assert sent, "no completion request reached the model"
    # The request for what was typed (another may follow once Tab has put the answer in the cell).
    typed = '<current_cell language="python">\nmean = <CURSOR>\n</current_cell>'
    asked_for = [r["messages"][0]["content"] for r in sent if r["messages"][0]["content"][-1]["text"] == typed]
    assert asked_for, [r["messages"][0]["content"][-1]["text"] for r in sent]
    assert "values = [3, 5, 8]" in asked_for[-1][0]["text"]
