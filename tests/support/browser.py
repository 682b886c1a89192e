"""Driving JupyterLab's page in the browser tests (tests/browser/): open and run notebooks,
wait for the kernel, open the agent's panel and chat, and keep screenshots."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nbformat.v4 import new_code_cell
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from agent_kernel.testing import say
from tests.support.held_replies import type_at_end
from tests.support.notebooks import write_notebook
from tests.support.paths import ARTIFACTS, SCREENSHOTS

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


# Idle: the notebook or its kernel says so, and no cell shows [*] but one a later cell ran
# after (the kernel runs a notebook's cells in order). ipykernel 7.4 sometimes publishes the idle
# status of a cell that awaited a comm reply (a front end's answer) under the comm
# message's parent, so JupyterLab shows that cell [*] although it finished; see
# docs/guide/notebook.md ("Known issue").
WAIT_IDLE = """() => {
  const kernel = window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel;
  const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
  if (!(indicator?.dataset.status === 'idle' || kernel?.status === 'idle')) return false;
  const prompts = [...document.querySelectorAll('.jp-Notebook .jp-Cell .jp-InputPrompt')].map(p => p.textContent);
  return prompts.every((prompt, i) => !prompt.includes('*') || prompts.slice(i + 1).some(later => /\\[\\d+\\]/.test(later)));
}"""


def wait_idle(page, timeout: float = 60_000) -> None:
    page.wait_for_function(WAIT_IDLE, timeout=timeout)


def save_screenshot(locator, name: str, *, readme: bool = False) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    locator.screenshot(path=str(path))
    if readme and os.environ.get("AGENT_KERNEL_UPDATE_SCREENSHOTS"):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, SCREENSHOTS / name)
    return path


CHAT_TAB = ".jp-SideBar [data-id='agent-kernel-panel']"  # the Agent chat keeps the panel's id


RUN_LAST_CELL = """(code) => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  nb.model.sharedModel.insertCell(nb.model.cells.length, {cell_type: 'code', source: code});
  nb.activeCellIndex = nb.model.cells.length - 1;
  window.jupyterapp.commands.execute('notebook:run-cell');
}"""


def open_with_ids(page, lab, name: str, cells: list[tuple[str, str]], *, run_all: bool = True) -> None:
    """Open a notebook whose code cells have the given (id, source), so the scripted model can
    name them, and run them all (``run_all=False``: only open it, its kernel ready)."""
    page.goto(lab.notebook(name, [new_code_cell(source, id=cell_id) for cell_id, source in cells]))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(KERNEL_READY, timeout=60_000)
    if run_all:
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


# Every cell's source, in order, as the page's shared model holds it.
SOURCES = "() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.cells.map(c => c.getSource())"
# A notebook whose turn, in ask mode, proposes an edit of the cell ``plot`` (cell 2).
ASKING_TO_EDIT = [
    ("load", "%load_ext agent_kernel"),
    ("turn", "%agent --approve ask use bars"),
    ("plot", "kind = 'line'"),
]


def type_while_the_diff_waits(page, typist, typed: str, timeout: float = 90_000):
    """Once ``page`` shows the turn's diff card for ``plot`` (see ASKING_TO_EDIT), type
    ``typed`` at the end of that cell in ``typist`` (the same page, or another person's) and
    wait until ``page`` holds the typed text; the card."""
    diff = page.locator(".ak-edit-diff")
    diff.wait_for(timeout=timeout)
    type_at_end(typist, cell(typist, 2), typed)
    expected = "kind = 'line'" + typed
    page.wait_for_function(f"(expected) => ({SOURCES})()[2] === expected", arg=expected, timeout=30_000)
    return diff


def run_and_wait(page, code: str) -> None:
    """Type ``code`` into a new last cell, run it, and wait until the kernel is idle again."""
    page.evaluate(RUN_LAST_CELL, code)
    page.wait_for_timeout(300)
    wait_idle(page, timeout=120_000)


def agent_turn(page, lab_model, prompt: str) -> dict[str, Any]:
    """Run ``%agent PROMPT`` in a new last cell (the model answers "Answered PROMPT."); the
    model request it made."""
    start = len(lab_model.requests)
    lab_model.add(say(f"Answered {prompt}."))
    run_and_wait(page, f"%agent {prompt}")
    deadline = time.monotonic() + 60
    while len(lab_model.requests) == start:
        assert time.monotonic() < deadline, f"%agent {prompt} sent no request"
        time.sleep(0.1)
    request: dict[str, Any] = lab_model.requests[start]
    return request


def open_chat(page):
    page.locator(CHAT_TAB).click()
    chat = page.locator("#agent-kernel-panel .ak-chat")
    chat.wait_for(state="visible", timeout=30_000)
    return chat


def send(chat, prompt: str) -> None:
    box = chat.locator(".ak-chat-input")
    box.click()
    box.fill(prompt)
    box.press("Enter")


def run_cell(page, code: str, index: int):
    page.evaluate(RUN_LAST_CELL, code)
    out = cell(page, index).locator(".jp-OutputArea-output")
    out.first.wait_for(timeout=30_000)
    return out


@contextmanager
def notebook_7_chat(chromium, lab_model, tmp_path, source: str) -> Iterator[tuple[Any, Any]]:
    """Notebook 7 serving ``seven.ipynb`` (one code cell of ``source``), open in a browser
    with the chat opened by its shortcut: the page and the chat."""

    from tests.support.jupyterlab import JupyterLab

    root = tmp_path / "root"
    root.mkdir()
    write_notebook(root / "seven.ipynb", source)
    env = dict(lab_model.env(), AGENT_KERNEL_DB=str(tmp_path / "agent.duckdb"))
    server = JupyterLab(
        root, env, config={"ServerApp": {"jpserver_extensions": {"agent_kernel": True}}}, app="notebook"
    )
    context = chromium.new_context(viewport={"width": 1200, "height": 1000})
    try:
        page = context.new_page()
        page.goto(f"{server.url}/notebooks/seven.ipynb?token={server.token}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        page.locator(".jp-Notebook .jp-Cell").first.click()
        page.keyboard.press("Control+Shift+Y")  # the chat's shortcut opens the sidebar panel
        chat = page.locator("#agent-kernel-panel .ak-chat")
        chat.wait_for(state="visible", timeout=30_000)
        yield page, chat
    finally:
        context.close()
        server.stop()
        time.sleep(0.25)


def refresh_until(page, panel, locator, timeout: float = 120) -> None:
    """Click the dashboard's refresh button until ``locator`` shows (it also polls, slowly)."""
    deadline = time.monotonic() + timeout
    while locator.count() == 0:
        if time.monotonic() > deadline:
            raise AssertionError(f"not shown in the panel within {timeout} s:\n{panel.inner_text()}")
        panel.get_by_title("Refresh").click()
        try:
            locator.first.wait_for(timeout=1000)
        except PlaywrightTimeoutError:
            pass  # refresh again
