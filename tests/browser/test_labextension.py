"""The JupyterLab extension in a real JupyterLab 4 with Chromium: the Agent dashboard, the
"Schedule this notebook…" dialog, and the turn renderer after a notebook is reopened.

The extension is the one installed in this environment (`make install`); the server
extension is enabled by the test server's configuration (tests/conftest.py).
"""

from __future__ import annotations

import os
import shutil

import nbformat
import pytest

from agent_kernel.testing import reply, say, tool_use
from tests.support.browser import (
    KERNEL_READY,
    cell,
    refresh_until,
    run_notebook,
    save_screenshot,
    wait_idle,
)
from tests.support.dashboard import open_dashboard
from tests.support.notebooks import write_notebook
from tests.support.paths import ARTIFACTS, SCREENSHOTS

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]


def save_panel_screenshot(page, panel) -> None:
    """The panel down to its last section (the sidebar itself is as tall as the window)."""
    box, last = panel.bounding_box(), panel.locator(".ak-stats").bounding_box()
    path = ARTIFACTS / "labextension-panel.png"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), clip={"x": box["x"], "y": box["y"], "width": box["width"],
                                          "height": last["y"] + last["height"] - box["y"] + 8})  # fmt: skip
    if os.environ.get("AGENT_KERNEL_UPDATE_SCREENSHOTS"):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, SCREENSHOTS / path.name)


def test_the_panel_lists_the_session_of_an_agent_cell_and_the_job_it_scheduled(lab_page, jupyterlab, lab_model):
    page = lab_page
    lab_model.add(
        reply(tool_use("run_code", {"code": "1 / 0"})),
        reply(tool_use("create_scheduled_task", {"name": "nightly summary", "task": "Summarise the sales table.",
                                                 "cron": "0 2 * * *", "timezone": "UTC"})),
        say("Scheduled the nightly summary."),
    )  # fmt: skip
    run_notebook(page, jupyterlab, "panel", ["%load_ext agent_kernel", "%agent schedule a nightly summary"])
    cell(page, 1).get_by_text("Scheduled the nightly summary.").wait_for(timeout=60_000)
    wait_idle(page)

    panel = open_dashboard(page)
    session = panel.locator(".ak-session").first
    refresh_until(page, panel, panel.locator(".ak-session"))
    assert "idle" in session.inner_text() and "tokens" in session.inner_text()
    job = panel.locator(".ak-job[data-job='nightly summary']")
    refresh_until(page, panel, job)
    assert "At 02:00 every day (UTC)" in job.inner_text() and "not run yet" in job.inner_text()
    # The server runs the scheduler: no warning that jobs will not fire.
    assert panel.locator(".ak-jobs .ak-warning").count() == 0
    # Every figure says what it counts.
    stats = panel.locator(".ak-stats .ak-figures")
    refresh_until(page, panel, stats.locator("th", has_text="Failures by kind"))
    labels = stats.locator("th").all_inner_texts()
    assert labels == ["Code runs", "Failures by kind", "Tool calls", "Tokens", "Store"], labels
    assert " on disk, growing about " in stats.locator("tr", has_text="Store").locator("td").inner_text()
    failures = stats.locator("tr", has_text="Failures by kind").locator("td").inner_text()
    assert failures.endswith("runtime error") or "runtime errors" in failures, failures
    assert "failed)" in stats.locator("tr", has_text="Code runs").inner_text()
    assert panel.locator(".ak-days th").all_inner_texts() == ["Day", "Code runs", "Failed", "Cost"]
    save_panel_screenshot(page, panel)


def test_schedule_this_notebook_creates_a_job_the_server_runs_and_its_output_opens(lab_page, jupyterlab):
    page = lab_page
    write_notebook(jupyterlab.root / "report.ipynb", "print(f'hello {who}')", parameters="who = 'nobody'")
    page.goto(f"{jupyterlab.url}/lab/workspaces/report/tree/report.ipynb?reset&token={jupyterlab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(KERNEL_READY, timeout=60_000)

    button = page.locator(".jp-NotebookPanel-toolbar [data-jp-item-name='agentKernelSchedule'] button")
    # Unsaved (as JupyterLab marks a notebook it just filled language_info in): a run would
    # use the file on disk, so the dialog offers to save it first.
    page.evaluate("() => { window.jupyterapp.shell.currentWidget.context.model.dirty = true; }")
    button.click()
    dialog = page.locator(".jp-Dialog")
    dialog.get_by_text("report.ipynb has unsaved changes. A scheduled run uses the saved file: save it now?").wait_for(
        timeout=30_000
    )
    assert dialog.get_by_role("button").all_inner_texts() == ["Cancel", "Save and schedule"]
    dialog.get_by_role("button", name="Cancel").click()  # cancelled: still unsaved, nothing scheduled
    assert page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty")
    button.click()
    dialog.get_by_role("button", name="Save and schedule").click()
    dialog.get_by_text("Runs report.ipynb with papermill").wait_for(timeout=30_000)
    assert not page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty")
    assert dialog.locator("input[name='name']").input_value() == "report"
    assert dialog.locator("input[name='parameter-who']").input_value() == "'nobody'"
    dialog.locator("input[name='parameter-who']").fill("'browser'")
    dialog.locator("select[name='preset']").select_option(label="Weekdays at 9:00")
    dialog.locator("input[name='timezone']").fill("Europe/Paris")
    save_screenshot(dialog.locator(".jp-Dialog-content"), "labextension-schedule-dialog.png", readme=True)
    dialog.get_by_role("button", name="Schedule").click()
    page.get_by_text("Scheduled “report”").wait_for(timeout=30_000)

    panel = open_dashboard(page)
    job = panel.locator(".ak-job[data-job='report']")
    refresh_until(page, panel, job)
    assert "Monday through Friday (Europe/Paris)" in job.inner_text()
    job.get_by_role("button", name="Run now").click()
    done = panel.locator(".ak-run").filter(has_text="SUCCEEDED").filter(has_text="report")
    refresh_until(page, panel, done)
    # The output opens read-only where the run left it: nothing copied, no kernel started.
    kernels = "() => Array.from(window.jupyterapp.serviceManager.kernels.running()).length"
    before = page.evaluate(kernels)
    done.first.get_by_role("button", name="Open output").click()
    view = page.locator(".ak-run-output:visible")
    view.wait_for(timeout=30_000)
    frame = view.locator("iframe.ak-run-output-frame")
    assert frame.get_attribute("sandbox") == ""  # what the run printed runs no script here
    page.frame_locator(".ak-run-output:visible iframe.ak-run-output-frame").get_by_text("hello browser").wait_for(
        timeout=30_000
    )
    assert page.get_by_role("tab", name="report (run output, read-only)").get_attribute("aria-selected") == "true"
    page.wait_for_timeout(1000)
    assert page.evaluate(kernels) == before
    assert not (jupyterlab.root / "agent-kernel-runs").exists()
    save_screenshot(view, "labextension-run-output.png")
    # A copy to edit: into the project folder, opened as a notebook.
    view.get_by_role("button", name="Open a copy to edit").click()
    output = page.locator(".jp-NotebookPanel:visible .jp-OutputArea-output").filter(has_text="hello browser")
    output.wait_for(timeout=60_000)
    assert page.evaluate("() => window.jupyterapp.shell.currentWidget.context.path").startswith(
        "agent-kernel-runs/report-"
    )


def test_a_saved_and_reopened_agent_turn_renders_with_the_extension_also_untrusted(lab_page, jupyterlab, lab_model):
    page = lab_page
    lab_model.add(
        reply(tool_use("run_code", {"code": "answer = 6 * 7\nprint(answer)"})),
        say('The answer is **42** <img src=x onerror="window.__pwned=1">.'),
    )
    run_notebook(page, jupyterlab, "reopened", ["%load_ext agent_kernel", "%agent what is six times seven?"])
    agent_cell = cell(page, 1)
    agent_cell.get_by_text("The answer is").wait_for(timeout=60_000)
    wait_idle(page)
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
    jupyterlab.shutdown_kernels()

    # Rewritten outside JupyterLab, the notebook is no longer trusted when it opens again.
    path = jupyterlab.root / "reopened.ipynb"
    saved = nbformat.read(path, as_version=4)
    assert any("application/vnd.agent-kernel.turn+json" in o.get("data", {}) for o in saved.cells[1].outputs)
    nbformat.write(saved, path)
    page.goto(f"{jupyterlab.url}/lab/workspaces/reopened2/tree/reopened.ipynb?reset&token={jupyterlab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    reopened = cell(page, 1)
    card = reopened.locator("details.ak-turn-tool")
    card.wait_for(timeout=30_000)
    assert "run_code" in card.inner_text() and "answer = 6 * 7" in card.locator("summary").inner_text()
    assert not card.locator("pre.ak-turn-input").is_visible()
    card.locator("summary").click()
    assert card.locator("pre.ak-turn-input").inner_text() == "answer = 6 * 7\nprint(answer)"
    assert reopened.locator(".ak-turn-text strong").inner_text() == "42"
    assert "<img src=x" in reopened.locator(".ak-turn-text").inner_text()  # shown as text, never run
    assert reopened.locator(".ak-turn-notice").filter(has_text="scripted-model").count() == 1
    assert page.evaluate("() => window.__pwned || 0") == 0
    save_screenshot(reopened, "labextension-turn.png")


def test_the_extension_loads_in_notebook_7(chromium, lab_model, tmp_path):
    from tests.support.jupyterlab import JupyterLab

    root = tmp_path / "root"
    root.mkdir()
    write_notebook(root / "seven.ipynb", "who = 'nobody'")
    server = JupyterLab(root, lab_model.env(), app="notebook")
    context = chromium.new_context(viewport={"width": 1200, "height": 1000})
    try:
        page = context.new_page()
        page.goto(f"{server.url}/notebooks/seven.ipynb?token={server.token}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        # The notebook toolbar has the extension's button, and it opens the dialog.
        button = page.locator("[data-jp-item-name='agentKernelSchedule'] button")
        button.wait_for(timeout=30_000)
        button.click()
        dialog = page.locator(".jp-Dialog")
        dialog.wait_for(timeout=30_000)
        assert dialog.inner_text().startswith("Schedule this notebook")
    finally:
        context.close()
        server.stop()
