"""``agent-kernel lab --offline`` as a newcomer tries it: the command started in a subprocess
(this venv's console script), its JupyterLab driven in Chromium. The guided notebook opens,
the status bar says the offline scripted model answers, ``%agent`` cells run code, chart and
name the model, "Explain" and "Fix with agent" answer the tour's misspelt name (Fix repairs
it), the chat answers, and inline completion suggests; Ctrl-C then stops everything."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect

from agent_kernel.lab import TOUR
from agent_kernel.testing.demo import OFFLINE_MODEL
from tests.support.browser import KERNEL_READY, cell, wait_idle
from tests.support.lab_command import ROOT_OPTIONS, jupyter_folders, start_lab
from tests.support.paths import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

AGENT_KERNEL = Path(sys.executable).parent / "agent-kernel"
TOKEN = "offline-lab-token"


@pytest.fixture(scope="module")
def offline_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``agent-kernel lab --offline --no-browser``: its URL and its directory; Ctrl-C at the end."""
    base = tmp_path_factory.mktemp("offline-lab")
    home, work = base / "jupyter", base / "work"
    settings = home / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    env = dict(
        os.environ,
        **jupyter_folders(home, TOKEN),
        AGENT_KERNEL_DB=str(base / "agent.duckdb"),
        AGENT_KERNEL_HOME=str(base / "agent-home"),
        AGENT_KERNEL_WARM_UP="1",
    )
    env.pop("ANTHROPIC_API_KEY", None)
    env.pop("ANTHROPIC_BASE_URL", None)
    # The page exposes `window.jupyterapp` to the test.
    options = ("--LabApp.expose_app_in_browser=True", *ROOT_OPTIONS)
    lab = start_lab(AGENT_KERNEL, work, "--offline", env=env, log=base / "lab.log", jupyter_options=options)
    try:
        yield lab.url, work
    finally:
        code = lab.stop()
    assert code == 0, lab.log.read_text()
    assert "JupyterLab stopped; the offline scripted model stopped with it." in lab.log.read_text()


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A page at 1280x1000; a failing test leaves its screenshot in tests/artifacts."""
    context = chromium.new_context(viewport={"width": 1280, "height": 1000})
    try:
        yield context.new_page()
    finally:
        context.close()


FIND_CELL = (
    "text => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells"
    ".findIndex(c => c.getSource().includes(text))"
)


def _source(page: Any, index: int) -> str:
    return str(
        page.evaluate(
            "i => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells[i].getSource()", index
        )
    )


def test_the_offline_tour_in_jupyterlab(offline_lab, page):
    try:
        _tour(page, *offline_lab)
    except BaseException:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "FAILED-offline-lab.png"), full_page=True)
        raise


def _tour(page: Any, url: str, work: Path) -> None:
    assert (work / TOUR).is_file()
    page.goto(f"{url}/?token={TOKEN}")  # the server's default page is the tour
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    assert page.evaluate("() => window.jupyterapp.shell.currentWidget.context.path") == TOUR

    status = page.locator(".ak-offline-status")
    status.wait_for(timeout=60_000)
    assert status.inner_text() == "Agent: offline scripted model"
    assert OFFLINE_MODEL in (status.get_attribute("title") or "")

    # Run all: the %agent cell loads the CSV; it stops at the tour's failing cell.
    page.wait_for_function(KERNEL_READY, timeout=120_000)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    cells = page.locator(".jp-Notebook .jp-Cell")
    agent = cells.filter(has_text="%agent load sales.csv")
    agent.get_by_text("Here are the monthly revenue totals").wait_for(timeout=180_000)
    footer = agent.locator(".jp-OutputArea")  # the footer follows the answer's last words
    expect(footer).to_contain_text(f"{OFFLINE_MODEL} (offline scripted model, not Claude)", timeout=60_000)
    expect(footer).to_contain_text("2025-12")
    charted = cells.filter(has_text="%agent now chart")
    charted.get_by_text("The chart above shows the monthly revenue totals").wait_for(timeout=180_000)
    charted.locator(".jp-OutputArea-output").locator("svg, canvas").first.wait_for(timeout=60_000)
    failing = cell(page, page.evaluate(FIND_CELL, "len(price)"))
    failing.get_by_text("NameError").first.wait_for(timeout=120_000)
    wait_idle(page, timeout=120_000)

    # Explain: the chat opens with the error attached; Enter sends it; the answer says what it means.
    failing.get_by_role("button", name="Explain").click()
    chat = page.locator(".ak-chat").first
    chat.locator(".ak-chip[data-kind='error']").wait_for(timeout=30_000)
    chat.locator(".ak-chat-input").press("Enter")
    chat.get_by_text("nothing in the kernel defines").wait_for(timeout=120_000)
    page.wait_for_function("() => !document.querySelector('.ak-chat[data-running]')", timeout=60_000)

    # Fix with agent: the chat opens with the cell and its traceback; Enter sends them.
    failing.get_by_role("button", name="Fix with agent").click()
    chat.locator(".ak-chip[data-kind='cell']").wait_for(timeout=30_000)
    page.wait_for_function(  # the chat's model choice names the offline model
        "m => [...document.querySelectorAll('.ak-chat select')].some(s => s.selectedOptions[0]?.text.includes(m))",
        arg=OFFLINE_MODEL,
        timeout=60_000,
    )
    chat.locator(".ak-chat-input").press("Enter")
    diff = page.locator(".ak-edit-diff")
    replaced = chat.get_by_text("I replaced the source of cell")
    deadline = time.monotonic() + 120
    while replaced.count() == 0:  # ask mode shows the diff to accept; auto mode applies it
        assert time.monotonic() < deadline, chat.inner_text()
        if diff.count():
            assert "len(prices)" in diff.locator(".ak-edit-new").inner_text()
            diff.get_by_role("button", name="Accept").click()
        try:
            replaced.wait_for(timeout=1000)
        except PlaywrightTimeoutError:
            pass
    failing.locator(".jp-OutputArea-output", has_text="3.25").wait_for(timeout=120_000)  # it ran, fixed
    assert "len(prices)" in _source(page, page.evaluate(FIND_CELL, "average ="))
    page.wait_for_function("() => !document.querySelector('.ak-chat[data-running]')", timeout=60_000)

    # The chat answers a question, offline and saying so.
    box = chat.locator(".ak-chat-input")
    box.click()
    box.fill("What can you do here?")
    box.press("Enter")
    chat.get_by_text("You asked: “What can you do here?”").wait_for(timeout=120_000)
    assert "offline scripted demo model, not Claude" in chat.inner_text()
    page.wait_for_function("() => !document.querySelector('.ak-chat[data-running]')", timeout=60_000)

    # Inline completion in a new cell.
    count = page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.cells.length")
    page.evaluate(
        """n => {
          const nb = window.jupyterapp.shell.currentWidget.content;
          nb.model.sharedModel.insertCell(n, {cell_type: 'code', source: ''});
          nb.activeCellIndex = n;
        }""",
        count,
    )
    editor = cell(page, count).locator(".cm-content")
    editor.wait_for(timeout=30_000)
    editor.click()
    page.keyboard.type("import pan", delay=60)
    page.wait_for_function("() => document.querySelector('.jp-GhostText')?.textContent === 'das as pd'", timeout=60_000)
    page.keyboard.press("Tab")
    page.wait_for_function("() => !document.querySelector('.jp-GhostText')", timeout=10_000)
    assert _source(page, count) == "import pandas as pd"


@pytest.mark.parametrize(
    ("answer", "warned"),
    [({"offline": True, "model": "<img src=x onerror=alert(1)>"}, True), ({"offline": False, "model": None}, False)],
)
def test_the_page_shows_the_item_only_for_a_valid_offline_answer(offline_lab, page, answer, warned):
    url, _ = offline_lab
    warnings: list[str] = []
    page.on("console", lambda message: warnings.append(message.text) if message.type == "warning" else None)
    served: list[str] = []

    def serve(route: Any) -> None:
        served.append(route.request.url)
        route.fulfill(json=answer)

    page.route("**/agent-kernel/api/offline*", serve)
    page.goto(f"{url}/lab?token={TOKEN}")
    page.locator(".jp-StatusBar-Left").wait_for(timeout=90_000)
    deadline = time.monotonic() + 60
    while not served:
        assert time.monotonic() < deadline, "the page never asked for the offline status"
        page.wait_for_timeout(250)
    page.wait_for_timeout(1500)  # the answer read, the item would be there by now
    assert page.locator(".ak-offline-status").count() == 0
    assert any("offline status of an unknown shape" in w for w in warnings) is warned
