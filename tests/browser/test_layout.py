"""The chat's own sidebar and the Agent dashboard at 1280×800 in a real JupyterLab 4 with
Chromium: the chat sits in the right sidebar, the sessions, jobs (with the jobs manager),
runs and stats in the left one, and at the sidebars' default widths no control is
narrower than its label, none is cut by its box or the sidebar's edge, and no text is
cut with an ellipsis (Notebook 7's chat too).

Run it with the extension built from this checkout first on ``JUPYTER_PATH``.
"""

from __future__ import annotations

import pytest

from agent_kernel.testing import reply, say, tool_use
from tests.support.browser import (
    KERNEL_READY,
    cell,
    notebook_7_chat,
    open_chat,
    refresh_until,
    save_screenshot,
    wait_idle,
)
from tests.support.dashboard import measure, open_dashboard

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

NAME = "quarterly-revenue-by-region-analysis"


def assert_nothing_clipped(found: dict, at_least: int) -> None:
    assert found["problems"] == [], "\n".join(found["problems"])
    assert len(found["controls"]) >= at_least, found["controls"]


def test_at_1280_by_800_the_chat_and_the_dashboard_clip_no_control(jupyterlab, lab_model, chromium):
    lab_model.add(
        reply(tool_use("run_code", {"code": "1 / 0"})),
        reply(tool_use("create_scheduled_task", {"name": "nightly revenue summary", "task": "Summarise revenue.",
                                                 "cron": "0 2 * * *", "timezone": "UTC"})),
        say("Scheduled the nightly revenue summary."),
    )  # fmt: skip
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.goto(jupyterlab.notebook(NAME, ["%load_ext agent_kernel", "%agent schedule a nightly summary"]))
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        page.wait_for_function(KERNEL_READY, timeout=60_000)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        cell(page, 1).get_by_text("Scheduled the nightly revenue summary.").wait_for(timeout=90_000)
        wait_idle(page)

        chat = open_chat(page)
        assert page.evaluate("() => Boolean(document.querySelector('#agent-kernel-panel').closest('#jp-right-stack'))")
        # A chip with a long label (the cell of a long-named notebook), the session of the cell's
        # turn and the kernel's models in the settings row.
        cell(page, 1).click()
        page.evaluate("() => window.jupyterapp.commands.execute('agent-kernel:add-cell-to-chat')")
        chat.locator(".ak-chip[data-kind='cell']").wait_for(timeout=30_000)
        chat.locator(f".ak-chat-session option[value='{NAME}']").wait_for(state="attached", timeout=60_000)
        page.wait_for_function(
            "() => document.querySelector('.ak-chat-model').selectedOptions[0].textContent.includes('(default)')",
            timeout=60_000,
        )
        chat.locator(".ak-chat-meter").filter(has_text="compacts at").wait_for(timeout=60_000)
        found = measure(page, "#agent-kernel-panel")
        assert_nothing_clipped(found, at_least=9)
        labels = {c["name"] for c in found["controls"]}
        for name in ("Model of the next turns", "Approval of the next turns", "Thinking of the next turns",
                     "Session the next turn continues", "Rename this session", "Archive this session"):  # fmt: skip
            assert name in labels, labels
        # The session selector names the session, never an id; the settings are one row.
        chosen = chat.locator(".ak-chat-session").evaluate(
            "s => [s.selectedOptions[0].textContent, s.selectedOptions[0].title]"
        )
        assert chosen[0].rstrip("…") in NAME and chosen[1] == f"Session {NAME}", chosen
        print("chat", found["width"], [(c["name"], round(c["width"]), round(c["needed"])) for c in found["controls"]])
        save_screenshot(page.locator("#agent-kernel-panel"), "chat-sidebar.png", readme=True)
        tops = chat.locator(".ak-chat-settings select").evaluate_all(
            "nodes => nodes.map(n => Math.round(n.getBoundingClientRect().top))"
        )
        # Model, thinking and approval share one row at the default width (the session picker
        # with its rename and archive buttons may take the next).
        assert len(tops) == 4 and tops[0] == tops[1] == tops[2], tops
        faces = chat.locator(".ak-chat-settings .ak-select-face").all_inner_texts()
        assert faces[1:3] == ["off", "auto"] and faces[3].rstrip("…") in NAME, faces

        dashboard = open_dashboard(page)
        assert page.evaluate(
            "() => Boolean(document.querySelector('#agent-kernel-dashboard').closest('#jp-left-stack'))"
        )
        assert chat.is_visible()  # the chat stays open beside the dashboard
        job = dashboard.locator(".ak-job[data-job='nightly revenue summary']")
        refresh_until(page, dashboard, job)
        refresh_until(page, dashboard, dashboard.locator(".ak-session"))
        refresh_until(page, dashboard, dashboard.locator(".ak-stats th", has_text="Failures by kind"))
        job.locator("strong").click()
        detail = dashboard.locator(".ak-jobs-manager .ak-job-detail")
        detail.wait_for(timeout=30_000)
        found = measure(page, "#agent-kernel-dashboard")
        assert_nothing_clipped(found, at_least=8)
        print(
            "dashboard", found["width"], [(c["name"], round(c["width"]), round(c["needed"])) for c in found["controls"]]
        )
        save_screenshot(dashboard, "agent-dashboard.png", readme=True)
    finally:
        context.close()


def test_notebook_7s_chat_clips_no_control(chromium, lab_model, tmp_path):
    with notebook_7_chat(chromium, lab_model, tmp_path, "%load_ext agent_kernel") as (page, chat):
        assert page.evaluate("() => Boolean(document.querySelector('#agent-kernel-panel').closest('#jp-right-stack'))")
        page.wait_for_function(
            "() => document.querySelector('.ak-chat-model').selectedOptions[0].textContent.includes('(default)')",
            timeout=60_000,
        )
        assert_nothing_clipped(measure(page, "#agent-kernel-panel"), at_least=8)
