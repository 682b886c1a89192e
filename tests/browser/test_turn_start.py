"""The first seconds of a turn in a real JupyterLab: Stop and a status line at once, the
kernel busy while a form waits, and a stopped turn that says what it did.

Driven like test_browser.py: one JupyterLab server and one Chromium for the module, each
test its own notebook and kernel, the model scripted.
"""

from __future__ import annotations

import time

import pytest

from agent_kernel.testing import call, say
from tests.support.browser import KERNEL_READY, cell, save_screenshot, wait_idle
from tests.support.capabilities import needs_widget_replies

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser"), needs_widget_replies]

# Notes, in the page's clock (performance.now()), when the kernel started the %agent cell
# (its execute_input) and when the cell first showed the Stop button and the status line.
WATCH_THE_TURN = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const kernel = panel.sessionContext.session.kernel;
  const seen = window.__turn = { statuses: [] };
  kernel.iopubMessage.connect((_, msg) => {
    if (msg.header.msg_type === 'execute_input' && msg.content.code.startsWith('%agent') && !seen.started) {
      seen.started = performance.now();
    }
  });
  kernel.statusChanged.connect((_, status) => { seen.statuses.push([performance.now(), status]); });
  const look = () => {
    const agentCell = document.querySelectorAll('.jp-Notebook .jp-Cell')[1];
    if (!agentCell) return;
    if (!seen.stop && agentCell.querySelector('button.agent-kernel-stop')) seen.stop = performance.now();
    if (!seen.status && agentCell.innerText.includes('waiting for the model')) seen.status = performance.now();
  };
  new MutationObserver(look).observe(document.body, { subtree: true, childList: true, characterData: true });
}"""

KERNEL_STATUS = "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status"


def open_notebook(page, lab, name: str, cells: list[str]) -> None:
    """Open a notebook of ``cells`` and run its first cell (``%load_ext``) only."""
    page.goto(lab.notebook(name, cells))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(KERNEL_READY, timeout=60_000)
    run_cell(page, 0)
    page.wait_for_function(
        "() => document.querySelector('.jp-Notebook .jp-Cell .jp-InputPrompt').textContent.includes('[1]')",
        timeout=60_000,
    )
    wait_idle(page)


def run_cell(page, index: int) -> None:
    page.evaluate(
        "(i) => { const nb = window.jupyterapp.shell.currentWidget.content; nb.activeCellIndex = i;"
        " window.jupyterapp.commands.execute('notebook:run-cell'); }",
        index,
    )


def test_stop_and_the_status_line_show_within_200_ms_while_the_model_takes_3_s(lab_page, jupyterlab, lab_model):
    page = lab_page
    lab_model.add(say("The sum of the numbers is 42.", delay=3))
    open_notebook(page, jupyterlab, "turn-start", ["%load_ext agent_kernel", "%agent add up 19 and 23"])
    time.sleep(1)  # the person types the prompt
    page.evaluate(WATCH_THE_TURN)
    run_cell(page, 1)
    agent_cell = cell(page, 1)
    agent_cell.locator("button.agent-kernel-stop").wait_for(timeout=10_000)
    agent_cell.get_by_text("waiting for the model…").wait_for(timeout=10_000)
    seen = page.evaluate("() => window.__turn")
    assert seen["stop"] - seen["started"] < 200, seen
    assert seen["status"] - seen["started"] < 200, seen
    save_screenshot(agent_cell, "turn-start-waiting.png")
    # The answer comes after the model's 3 s; the button and the status line then go, the footer stays.
    agent_cell.get_by_text("The sum of the numbers is 42.").wait_for(timeout=30_000)
    agent_cell.locator(".agent-kernel-muted").filter(has_text="scripted-model").wait_for(timeout=30_000)
    wait_idle(page)
    assert agent_cell.locator("button.agent-kernel-stop").count() == 0
    assert "waiting for the model" not in agent_cell.inner_text()


FORM = [{"type": "form", "title": "Report settings", "submitLabel": "Create report", "fields": [
    {"name": "owner", "label": "Report owner", "type": "text", "required": True},
]}]  # fmt: skip


def test_the_kernel_is_busy_while_a_form_waits(lab_page, jupyterlab, lab_model):
    page = lab_page
    lab_model.add(call("render_blocks", title="Plan the report", blocks=FORM), say("Thanks, Ada."))
    open_notebook(page, jupyterlab, "form-busy", ["%load_ext agent_kernel", "%agent plan the report with me"])
    page.evaluate(WATCH_THE_TURN)
    run_cell(page, 1)
    agent_cell = cell(page, 1)
    form = agent_cell.locator("form.ak-form")
    form.wait_for(timeout=30_000)
    # The form's messages to the kernel (it rendered, a field typed into) go on a subshell,
    # which reports each busy then idle: the status bar must still say the cell runs.
    form.locator("[data-field=owner]").fill("Ada")
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        time.sleep(0.25)
        assert page.evaluate(KERNEL_STATUS) == "busy", page.evaluate("() => window.__turn.statuses")
    indicator = page.locator(".jp-Notebook-ExecutionIndicator")
    assert indicator.get_attribute("data-status") == "busy"
    form.get_by_role("button", name="Create report").click()
    agent_cell.get_by_text("Thanks, Ada.").wait_for(timeout=30_000)
    wait_idle(page)
    # Once the turn ends the front end may ask the kernel a moment's question (the chat
    # reloads the session it announced): the kernel settles to idle.
    page.wait_for_function(f"() => ({KERNEL_STATUS})() === 'idle'", timeout=30_000)


def test_after_stop_the_footer_counts_the_run_code_that_ran_and_no_traceback_shows(lab_page, jupyterlab, lab_model):
    page = lab_page
    lab_model.add(
        call(
            "run_code",
            code="import time\nprint('counting', flush=True)\nfor step in range(600):\n    time.sleep(0.1)\n",
        ),
    )
    open_notebook(page, jupyterlab, "stop-footer", ["%load_ext agent_kernel", "%agent count slowly"])
    run_cell(page, 1)
    agent_cell = cell(page, 1)
    agent_cell.get_by_text("counting", exact=True).wait_for(timeout=30_000)
    time.sleep(1)  # the code runs a while before the person stops it
    agent_cell.get_by_role("button", name="■ Stop").click()
    failure = agent_cell.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
    failure.filter(has_text="■").wait_for(timeout=20_000)
    wait_idle(page)
    shown = agent_cell.locator(".jp-OutputArea").inner_text()
    lines = [line for line in shown.splitlines() if line.strip()]
    # The footer counts the call that ran; the line saying the turn was stopped is the last.
    assert lines[-1].strip() in ("■ Stopped.", "■ Interrupted."), lines
    assert "scripted-model" in lines[-2] and "· 1 tool call ·" in lines[-2], lines
    assert "run_code was stopped" in shown
    for trace in ("Traceback", "KeyboardInterrupt", "Cell In[", "CancelledError"):
        assert trace not in shown, shown
    save_screenshot(agent_cell, "turn-stopped.png")
