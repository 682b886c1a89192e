"""A session follows its notebook in JupyterLab: a new Untitled.ipynb runs two turns, is
renamed, continues, has its kernel restarted, continues, is moved into a folder, continues,
is closed and reopened, and continues; every request carries the earlier turns, and the chat
shows the history (also of turns run from cells, as they end) and the session's meter.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.browser import KERNEL_READY, agent_turn, run_and_wait
from tests.support.calls import prompts_of

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

PATH = "() => window.jupyterapp.shell.currentWidget?.context?.path ?? null"


def chat_shows(page, turns: list[str], timeout: float = 60_000) -> None:
    """The chat's history lists exactly ``turns`` (their prompts, in order) and its meter is
    the session's (not "new session")."""
    page.evaluate("() => window.jupyterapp.commands.execute('agent-kernel:show-panel')")
    chat = page.locator(".ak-chat").first
    chat.wait_for(state="visible", timeout=30_000)
    expected = [f"Turn {n}: {prompt}" for n, prompt in enumerate(turns, 1)]
    page.wait_for_function(
        """(expected) => {
          const shown = [...document.querySelectorAll('.ak-chat-earlier summary')].map(s => s.textContent);
          return JSON.stringify(shown) === JSON.stringify(expected);
        }""",
        arg=expected,
        timeout=timeout,
    )
    # The history and the meter are answers to two requests: the meter may follow a moment later.
    expect(chat.locator(".ak-chat-meter")).not_to_have_text("new session", timeout=timeout)


def dashboard_lists(page, session: str) -> None:
    """The Agent dashboard lists ``session`` for the current notebook."""
    page.evaluate(
        """() => {
          const c = window.jupyterapp.commands;
          return c.execute(c.hasCommand('agent-kernel:show-dashboard') ? 'agent-kernel:show-dashboard'
                                                                      : 'agent-kernel:show-panel');
        }"""
    )
    page.locator(f".ak-session[data-session='{session}']").first.wait_for(state="attached", timeout=60_000)


def test_a_session_follows_its_notebook_through_rename_restart_move_and_reopen(lab_page, jupyterlab, lab_model):
    page = lab_page
    page.goto(f"{jupyterlab.url}/lab/workspaces/rename?reset&token={jupyterlab.token}")
    page.wait_for_selector(".jp-LabShell", timeout=60_000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:create-new', {kernelName: 'python3'})")
    page.wait_for_function(f"() => ({PATH})() === 'Untitled.ipynb'", timeout=60_000)
    page.wait_for_function(KERNEL_READY, timeout=120_000)
    run_and_wait(page, "%load_ext agent_kernel")
    assert prompts_of(agent_turn(page, lab_model, "first")) == ["first"]
    assert prompts_of(agent_turn(page, lab_model, "second")) == ["first", "second"]
    chat_shows(page, ["first", "second"])

    # Renamed as JupyterLab asks on a first save: File > Rename Notebook…
    page.evaluate("() => { window.jupyterapp.commands.execute('docmanager:rename'); }")  # the dialog's promise
    dialog = page.locator(".jp-Dialog")
    dialog.locator("input").fill("analysis.ipynb")
    dialog.get_by_role("button", name="Rename").click()
    page.wait_for_function(f"() => ({PATH})() === 'analysis.ipynb'", timeout=30_000)
    chat_shows(page, ["first", "second"])  # at once, with its meter
    dashboard_lists(page, "Untitled")
    assert prompts_of(agent_turn(page, lab_model, "third")) == ["first", "second", "third"]
    chat_shows(page, ["first", "second", "third"])  # a cell's turn shows as it ends

    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.restartKernel()")
    page.wait_for_function(KERNEL_READY, timeout=120_000)
    run_and_wait(page, "%load_ext agent_kernel")
    assert prompts_of(agent_turn(page, lab_model, "fourth")) == ["first", "second", "third", "fourth"]

    # Moved into a folder, as the file browser's drag and drop does it.
    (jupyterlab.root / "work").mkdir()
    page.evaluate("() => window.jupyterapp.serviceManager.contents.rename('analysis.ipynb', 'work/analysis.ipynb')")
    page.wait_for_function(f"() => ({PATH})() === 'work/analysis.ipynb'", timeout=30_000)
    chat_shows(page, ["first", "second", "third", "fourth"])
    assert prompts_of(agent_turn(page, lab_model, "fifth"))[-2:] == ["fourth", "fifth"]

    # Saved, closed, its kernel shut down, and reopened: a new kernel started for the new path.
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.evaluate("() => window.jupyterapp.shell.currentWidget.close()")
    jupyterlab.shutdown_kernels()
    page.evaluate("() => { window.jupyterapp.commands.execute('docmanager:open', {path: 'work/analysis.ipynb'}); }")
    page.wait_for_function(f"() => ({PATH})() === 'work/analysis.ipynb'", timeout=60_000)
    page.wait_for_function(KERNEL_READY, timeout=120_000)
    chat_shows(page, ["first", "second", "third", "fourth", "fifth"])
    run_and_wait(page, "%load_ext agent_kernel")
    assert prompts_of(agent_turn(page, lab_model, "sixth")) == ["first", "second", "third", "fourth", "fifth", "sixth"]
    assert not (jupyterlab.root / "Untitled.ipynb").exists()
