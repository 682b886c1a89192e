"""The jobs manager of the Agent dashboard in a real JupyterLab 4 with Chromium: a job edited
in the "Schedule this notebook" dialog, a job's detail with a run's logs and output, a run
now with other parameters, a failed run explained and compared, and the failure toast.

Jobs are made through the REST API, as the dialog makes them; the server's own scheduler
runs them with papermill in real kernels.
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest

from agent_kernel.testing import say
from tests.support.browser import refresh_until, save_screenshot
from tests.support.dashboard import open_dashboard
from tests.support.notebooks import write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-2")]

API = "/agent-kernel/api"
TOAST = ".Toastify__toast"


def call(lab, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        lab.url + API + path, method=method, data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"token {lab.token}", "Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read()
    return json.loads(text) if text else None


def make_job(lab, name: str, source: str, **fields: Any) -> dict:
    write_notebook(lab.root / f"{name}.ipynb", source, parameters="who = 'nobody'\ntimes = 1")
    body = {"notebook": f"{name}.ipynb", "name": name, "cron": "0 9 * * *", "timezone": "UTC",
            "parameters": {"who": "server"}, **fields}  # fmt: skip
    return call(lab, "POST", "/jobs", body)


def finished(lab, run: dict[str, Any], timeout: float = 120) -> str:
    """The run's status once it is neither queued nor running."""
    deadline = time.monotonic() + timeout
    while (status := call(lab, "GET", f"/runs/{run['id']}")["status"]) in (
        "QUEUED",
        "RUNNING",
    ) and time.monotonic() < deadline:
        time.sleep(0.5)
    return status


def watcher_looks(page) -> None:
    """Move the page's clock to the failure watcher's next look and wait for its answer
    (and a moment for a toast it shows)."""
    with page.expect_response(lambda response: f"{API}/runs?limit=" in response.url, timeout=30_000):
        page.clock.fast_forward(10_000)
    page.wait_for_timeout(300)


def open_lab(page, lab, workspace: str) -> None:
    page.goto(f"{lab.url}/lab/workspaces/{workspace}?reset&token={lab.token}")
    page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)


def show_job(page, panel, name: str):
    """Click the job in the panel's list: the jobs manager shows its detail."""
    row = panel.locator(f".ak-job[data-job='{name}']")
    refresh_until(page, panel, row)
    row.locator("strong").click()
    detail = panel.locator(".ak-jobs-manager .ak-job-detail")
    detail.locator(".ak-job-facts td", has_text=name).first.wait_for(timeout=30_000)
    return detail


def wait_for_run(page, panel, detail, status: str, text: str = "", timeout: float = 120):
    run = detail.locator(".ak-job-run").filter(has=page.locator(".ak-status", has_text=status))
    if text:
        run = run.filter(has_text=text)
    refresh_until(page, panel, run, timeout)
    return run.first


def test_a_job_is_edited_in_the_schedule_dialog_and_a_refused_change_shows_in_it(lab_page, jupyterlab):
    page, lab = lab_page, jupyterlab
    job = make_job(lab, "report", "print(f'hello {who}')")
    open_lab(page, lab, "edit")
    panel = open_dashboard(page)
    detail = show_job(page, panel, "report")
    assert "At 09:00" in detail.locator(".ak-job-facts").inner_text()
    assert detail.locator(".ak-job-parameters tr").all_inner_texts() == ["who\t'server'"]
    assert detail.locator(".ak-version").all_inner_texts()[0].startswith("v1\ncreated")

    detail.get_by_role("button", name="Edit…").click()
    dialog = page.locator(".jp-Dialog")
    dialog.get_by_text("Edit “report”").wait_for(timeout=30_000)
    # Opened pre-filled from the job.
    assert dialog.locator("input[name='name']").input_value() == "report"
    assert dialog.locator("input[name='cron']").input_value() == "0 9 * * *"
    assert dialog.locator("select[name='preset']").input_value() == "0 9 * * *"
    assert dialog.locator("input[name='timezone']").input_value() == "UTC"
    assert dialog.locator("input[name='parameter-who']").input_value() == "'server'"
    assert dialog.locator("input[name='timeout_s']").input_value() == "3600"
    # The notebook's own parameter, as the notebook has it: left so, it stays the notebook's.
    assert dialog.locator("input[name='parameter-times']").input_value() == "1"
    # A change the server refuses: its message shows in the dialog, which keeps what was typed.
    dialog.locator("select[name='preset']").select_option(label="Custom (edit the cron expression)")
    dialog.locator("input[name='cron']").fill("every day")
    dialog.locator("input[name='parameter-who']").fill("'browser'")
    dialog.get_by_role("button", name="Save").click()
    error = page.locator(".jp-Dialog .ak-form-error")
    error.wait_for(timeout=30_000)
    assert "Cron expression 'every day' has 2 fields" in error.inner_text()
    assert dialog.locator("input[name='parameter-who']").input_value() == "'browser'"
    assert call(lab, "GET", f"/jobs/{job['id']}")["version"] == 1  # nothing was changed
    dialog.locator("input[name='cron']").fill("30 6 * * MON-FRI")
    dialog.locator("input[name='timeout_s']").fill("600")
    save_screenshot(dialog.locator(".jp-Dialog-content"), "labextension-edit-dialog.png", readme=True)
    dialog.get_by_role("button", name="Save").click()
    page.get_by_text("Saved “report” (version 2).").wait_for(timeout=30_000)

    # The change shows in the panel, and is a new version with what it changed.
    facts = detail.locator(".ak-job-facts")
    refresh_until(page, panel, facts.locator("td", has_text="Monday through Friday"))
    assert "At 06:30" in facts.inner_text() and "10.0 min" in facts.inner_text()
    assert detail.locator(".ak-job-parameters tr").all_inner_texts() == ["who\t'browser'"]
    newest = detail.locator(".ak-version").first
    assert newest.get_attribute("data-version") == "2"
    assert "changed" in newest.inner_text() and "cron" in newest.inner_text() and "parameters" in newest.inner_text()
    job = call(lab, "GET", f"/jobs/{job['id']}")
    assert (job["cron"], job["parameters"], job["timeout_s"], job["version"]) == (
        "30 6 * * MON-FRI", {"who": "browser"}, 600.0, 2)  # fmt: skip
    versions = call(lab, "GET", f"/jobs/{job['id']}/versions")["versions"]
    assert [v["version"] for v in versions] == [2, 1]
    assert set(versions[0]["changed"]) >= {"cron", "parameters", "timeout_s"}
    call(lab, "DELETE", f"/jobs/{job['id']}")


def test_a_jobs_standing_grants_show_in_its_detail_and_are_set_in_the_schedule_dialog(lab_page, jupyterlab):
    page, lab = lab_page, jupyterlab
    job = make_job(
        lab, "granted", "print('hi')", grants={"hosts": ["api.example.com"], "after_untrusted": ["run_code"]}
    )
    plain = make_job(lab, "plain", "print('hi')")
    open_lab(page, lab, "grants")
    panel = open_dashboard(page)
    detail = show_job(page, panel, "granted")
    unattended = detail.locator(".ak-job-facts tr", has_text="Unattended runs")
    assert unattended.locator("td").inner_text() == "After untrusted content may: run_code; hosts: api.example.com"
    assert unattended.get_attribute("title").startswith("Set by server: POST /agent-kernel/api/jobs by jupyterlab")

    detail.get_by_role("button", name="Edit…").click()
    dialog = page.locator(".jp-Dialog")
    dialog.get_by_text("Edit “granted”").wait_for(timeout=30_000)
    assert dialog.locator("input[name='grant-tools']").input_value() == "run_code"
    assert dialog.locator("input[name='grant-hosts']").input_value() == "api.example.com"
    dialog.locator("input[name='grant-hosts']").fill("https://api.example.com/")  # the server says what is wrong
    dialog.get_by_role("button", name="Save").click()
    error = page.locator(".jp-Dialog .ak-form-error")
    error.wait_for(timeout=30_000)
    assert "(no scheme, port or path)" in error.inner_text()
    dialog.locator("input[name='grant-hosts']").fill("")
    dialog.locator("input[name='grant-tools']").fill("write_notepad, run_code")
    dialog.get_by_role("button", name="Save").click()
    page.get_by_text("Saved “granted” (version 2).").wait_for(timeout=30_000)
    refresh_until(page, panel, detail.locator(".ak-job-facts td", has_text="may: run_code, write_notepad; hosts: none"))
    changed = call(lab, "GET", f"/jobs/{job['id']}")
    assert changed["grants"] == {"hosts": [], "after_untrusted": ["run_code", "write_notepad"]}
    assert changed["granted_by"].startswith(f"server: PATCH /agent-kernel/api/jobs/{job['id']} by jupyterlab")

    detail = show_job(page, panel, "plain")
    unattended = detail.locator(".ak-job-facts tr", has_text="Unattended runs")
    assert unattended.locator("td").inner_text() == "After untrusted content, writing actions and new hosts are refused"
    for made in (job, plain):
        call(lab, "DELETE", f"/jobs/{made['id']}")


def test_a_jobs_detail_shows_a_run_now_with_other_parameters_its_logs_and_output(lab_page, jupyterlab, lab_model):
    page, lab = lab_page, jupyterlab
    source = (
        "import sys\n"
        "print(f'hello {who}')\n"
        "print(f'note for {who}', file=sys.stderr)\n"
        "assert who != 'broken', f'who is {who}'"
    )
    job = make_job(lab, "daily", source)
    open_lab(page, lab, "detail")
    panel = open_dashboard(page)
    detail = show_job(page, panel, "daily")

    # Run now with another value: this run uses it, the job keeps its own.
    detail.get_by_role("button", name="Run with…").click()
    dialog = page.locator(".jp-Dialog")
    dialog.get_by_text("Run “daily” now with…").wait_for(timeout=30_000)
    assert dialog.locator("input[name='parameter-who']").input_value() == "'server'"
    assert dialog.locator("input[name='parameter-times']").input_value() == "1"  # the notebook's own
    dialog.locator("input[name='parameter-who']").fill("'visitor'")
    dialog.locator("input[name='parameter-times']").fill("2")
    dialog.get_by_role("button", name="Run now").click()
    run = wait_for_run(page, panel, detail, "SUCCEEDED", "who = 'visitor', times = 2")
    assert call(lab, "GET", f"/jobs/{job['id']}")["parameters"] == {"who": "server"}
    [listed] = call(lab, "GET", f"/runs?job={job['id']}")["runs"]
    assert listed["parameters"] == {"who": "visitor", "times": 2}

    # Its logs: what the kernel printed to stdout and stderr.
    run.get_by_role("button", name="Logs").click()
    logs = detail.locator(".ak-job-run .ak-run-logs")
    logs.wait_for(timeout=30_000)
    assert "hello visitor" in logs.locator(".ak-log-stdout pre").inner_text()
    assert "note for visitor" in logs.locator(".ak-log-stderr pre").inner_text()
    save_screenshot(panel.locator(".ak-jobs-manager"), "labextension-job-detail.png", readme=True)

    # Its output notebook, read-only in a sandboxed iframe, with a copy to edit.
    kernels = "() => Array.from(window.jupyterapp.serviceManager.kernels.running()).length"
    before = page.evaluate(kernels)
    detail.locator(".ak-job-run").first.get_by_role("button", name="Output").click()
    view = page.locator(".ak-run-output:visible")
    view.wait_for(timeout=30_000)
    assert view.locator("iframe.ak-run-output-frame").get_attribute("sandbox") == ""
    page.frame_locator(".ak-run-output:visible iframe.ak-run-output-frame").get_by_text("hello visitor").wait_for(
        timeout=30_000
    )
    assert page.evaluate(kernels) == before
    view.get_by_role("button", name="Open a copy to edit").click()
    output = page.locator(".jp-NotebookPanel:visible .jp-OutputArea-output").filter(has_text="hello visitor")
    output.wait_for(timeout=60_000)
    assert page.evaluate("() => window.jupyterapp.shell.currentWidget.context.path").startswith(
        "agent-kernel-runs/daily-"
    )
    call(lab, "DELETE", f"/jobs/{job['id']}")


def test_a_failed_run_toasts_once_and_is_explained_and_compared_in_the_panel(lab_page, jupyterlab, lab_model):
    page, lab = lab_page, jupyterlab
    source = "print(f'hello {who}')\nassert who != 'broken', f'who is {who}'"
    job = make_job(lab, "nightly", source)
    # The page's clock runs as usual; the test moves it on to the watcher's next look
    # (every 10 s) instead of waiting for it.
    page.clock.install()
    open_lab(page, lab, "toast")
    good = call(lab, "POST", f"/jobs/{job['id']}/run")
    assert finished(lab, good) == "SUCCEEDED"

    # The page is open (the panel is not): a run that fails now shows a toast.
    bad = call(lab, "POST", f"/jobs/{job['id']}/run", {"parameters": {"who": "broken"}})
    assert finished(lab, bad) == "FAILED"
    watcher_looks(page)
    toast = page.locator(TOAST, has_text="Scheduled run of “nightly” failed")
    toast.wait_for(timeout=30_000)
    assert "who is broken" in toast.inner_text()
    save_screenshot(toast, "labextension-failure-toast.png", readme=True)
    # Once per run: later looks and a reload do not tell again.
    watcher_looks(page)
    watcher_looks(page)
    assert toast.count() == 1
    page.reload()
    page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
    watcher_looks(page)
    watcher_looks(page)
    assert page.locator(TOAST, has_text="Scheduled run of “nightly” failed").count() == 0

    # Show it: the failed run in the job's detail, explained on demand, compared with the last good run.
    bad2 = call(lab, "POST", f"/jobs/{job['id']}/run", {"parameters": {"who": "broken"}})
    assert finished(lab, bad2) == "FAILED"
    watcher_looks(page)
    toast = page.locator(TOAST, has_text="Scheduled run of “nightly” failed")
    toast.wait_for(timeout=30_000)
    toast.get_by_role("button", name="Show").click()
    panel = page.locator("#agent-kernel-dashboard")
    panel.wait_for(state="visible", timeout=30_000)
    detail = panel.locator(".ak-jobs-manager .ak-job-detail")
    failed = detail.locator(f".ak-job-run[data-run='{bad2['id']}']")
    refresh_until(page, panel, failed)
    assert "FAILED" in failed.inner_text() and "who is broken" in failed.inner_text()
    lab_model.add(say("Cell 1 asserts who is not 'broken', and this run was started with who = 'broken'."))
    failed.get_by_role("button", name="Explain").click()
    explanation = failed.locator(".ak-explanation")
    refresh_until(page, panel, explanation)
    assert "started with who = 'broken'" in explanation.inner_text()
    assert failed.get_by_role("button", name="Explain").count() == 0

    failed.get_by_role("button", name="Diff").click()
    dialog = page.locator(".jp-Dialog")
    dialog.get_by_text(f"Run {bad2['id']} against run {good['id']}").wait_for(timeout=30_000)
    text = dialog.locator(".ak-run-diff pre").inner_text()
    assert "Parameter who: 'server' -> 'broken'" in text and "First failing cell" in text
    save_screenshot(dialog.locator(".jp-Dialog-content"), "labextension-run-diff.png")
    dialog.get_by_role("button", name="Close").click()
    assert call(lab, "GET", f"/runs/{bad['id']}")["status"] == "FAILED"
    call(lab, "DELETE", f"/jobs/{job['id']}")
