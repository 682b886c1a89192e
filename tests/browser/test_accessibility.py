"""Accessibility of everything the extension draws, in a real JupyterLab 4 with Chromium:
axe-core's WCAG 2.1 A/AA rules over the chat, the dashboard and its jobs manager, the
schedule dialog, approval, form and diff cards and a table widget (no serious or critical
violation), and a walk by keyboard only (Tab, Shift+Tab, Enter, Space, arrow keys) that
opens the chat, sends a prompt, answers an approval card, sorts a table and schedules the
notebook, with the focus visible at every step.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from agent_kernel.testing import call, fail, reply, say, tool_use
from tests.support.axe import axe_violations, focus_shown, serious
from tests.support.browser import cell, run_cell, run_notebook, save_screenshot, send, wait_idle
from tests.support.notebooks import write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-2")]

API = "/agent-kernel/api"
CHAT = "#agent-kernel-panel"
DASHBOARD = "#agent-kernel-dashboard"
ROWS = [{"region": r, "revenue": n} for r, n in (("North", 12), ("South", 30), ("East", 7))]
TABLE = reply(tool_use("render_blocks", {"title": "Revenue", "blocks": [{"type": "table", "data": ROWS}]}))
FORM = {
    "type": "form",
    "title": "Report settings",
    "fields": [
        {"name": "owner", "label": "Report owner", "type": "text", "required": True},
        {"name": "quarter", "label": "Quarter", "type": "select", "options": ["Q1", "Q2"], "default": "Q2"},
        {"name": "east", "label": "Include the East region", "type": "checkbox", "default": True},
    ],
}


def api(lab: Any, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        lab.url + API + path, method=method, data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"token {lab.token}", "Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read()
    return json.loads(text) if text else None


def no_serious_violations(page: Any, surface: str, *include: str) -> None:
    found = serious(axe_violations(page, *include))
    assert not found, f"{surface}: " + "\n".join(map(str, found))


def command(page: Any, name: str, args: dict[str, Any] | None = None) -> None:
    page.evaluate("([name, args]) => { window.jupyterapp.commands.execute(name, args); }", [name, args or {}])


def test_every_surface_the_extension_draws_has_no_serious_or_critical_violation(
    lab_page: Any, jupyterlab: Any, lab_model: Any
) -> None:
    page = lab_page
    write_notebook(jupyterlab.root / "report.ipynb", "print(who)", parameters="who = 'nobody'")
    job = api(jupyterlab, "POST", "/jobs", {"notebook": "report.ipynb", "name": "report", "cron": "0 9 * * *",
                                            "timezone": "UTC", "parameters": {"who": "a11y"}})  # fmt: skip
    run_notebook(page, jupyterlab, "surfaces", ["%load_ext agent_kernel", "x = 1"])
    wait_idle(page)
    plot_id = page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.cells.get(1).id")

    # The chat, before and after a turn that shows a table widget.
    command(page, "agent-kernel:show-panel")
    chat = page.locator(f"{CHAT} .ak-chat")
    chat.wait_for(state="visible", timeout=30_000)
    no_serious_violations(page, "the chat", CHAT)
    lab_model.add(TABLE, say("Here is the revenue table."))
    send(chat, "show the revenue table")
    chat.locator(".ak-table").wait_for(timeout=60_000)
    chat.get_by_text("Here is the revenue table.").wait_for(timeout=30_000)
    page.wait_for_function("() => !document.querySelector('.ak-chat[data-running]')", timeout=30_000)
    no_serious_violations(page, "the chat with a table widget", CHAT)

    # An approval card (ask mode), announced and focused while it waits.
    chat.locator(".ak-chat-approve").select_option("ask")
    lab_model.add(call("run_code", code="approved = 6 * 7"), say("Ran it."))
    send(chat, "set approved")
    card = chat.locator(".ak-choice").filter(has_text="approved = 6 * 7")
    card.wait_for(timeout=60_000)
    assert card.get_attribute("role") == "region" and card.get_attribute("aria-label")
    page.wait_for_function("() => document.activeElement?.classList.contains('ak-choice')", timeout=10_000)
    page.wait_for_function(
        "() => document.getElementById('ak-announcer')?.textContent.includes('waiting for your answer')",
        timeout=10_000,
    )
    no_serious_violations(page, "an approval card", CHAT)
    card.get_by_role("button", name="Run").click()
    chat.get_by_text("Ran it.").wait_for(timeout=60_000)
    page.wait_for_function("() => !document.querySelector('.ak-chat[data-running]')", timeout=30_000)

    # A form card.
    lab_model.add(call("render_blocks", title="Plan", blocks=[FORM]), say("Noted."))
    send(chat, "plan the report with me")
    form = chat.locator("form.ak-form")
    form.wait_for(timeout=60_000)
    no_serious_violations(page, "a form card", CHAT)
    form.get_by_role("button", name="Dismiss").click()
    chat.get_by_text("Noted.").wait_for(timeout=60_000)
    page.wait_for_function("() => !document.querySelector('.ak-chat[data-running]')", timeout=30_000)

    # A diff card (an ask-mode edit of a cell), announced and focused.
    lab_model.add(call("replace_cell", cell=plot_id, source="x = 2"), say("Changed it."))
    send(chat, "make x two")
    diff = page.locator(".ak-edit-diff")
    diff.wait_for(timeout=60_000)
    assert diff.get_attribute("role") == "region"
    page.wait_for_function("() => document.activeElement?.classList.contains('ak-edit-diff')", timeout=10_000)
    no_serious_violations(page, "a diff card", ".ak-edit-diff")
    diff.get_by_role("button", name="Reject").click()
    chat.get_by_text("Changed it.").wait_for(timeout=60_000)
    page.wait_for_function("() => !document.querySelector('.ak-chat[data-running]')", timeout=30_000)

    # The dashboard, its jobs manager showing the job, and the job's Edit dialog.
    command(page, "agent-kernel:show-dashboard")
    dashboard = page.locator(DASHBOARD)
    dashboard.locator(f".ak-job[data-job='{job['name']}']").wait_for(timeout=30_000)
    dashboard.locator(".ak-jobs-manager select[name=job]").select_option(job["id"])
    detail = dashboard.locator(".ak-job-detail")
    detail.wait_for(timeout=30_000)
    no_serious_violations(page, "the dashboard and its jobs manager", DASHBOARD)
    detail.get_by_role("button", name="Edit…").click()
    page.locator(".jp-Dialog .ak-schedule-form").wait_for(timeout=30_000)
    no_serious_violations(page, "the Edit dialog of a job", ".jp-Dialog")
    page.locator(".jp-Dialog").get_by_role("button", name="Cancel").click()
    page.locator(".jp-Dialog").wait_for(state="detached", timeout=10_000)

    # "Schedule this notebook…": its dialog.
    command(page, "docmanager:save")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
    button = page.locator("button.ak-schedule-button, .ak-schedule-button button").first
    button.click()  # the toolbar's clock opens the dialog; it is a button, not a toggle
    page.locator(".jp-Dialog .ak-schedule-form").wait_for(timeout=30_000)
    no_serious_violations(page, "the schedule dialog", ".jp-Dialog")
    save_screenshot(page.locator(".jp-Dialog-content"), "a11y-schedule-dialog.png")
    page.locator(".jp-Dialog").get_by_role("button", name="Cancel").click()
    assert button.get_attribute("aria-pressed") != "true"


def tab_until(page: Any, selector: str, *, back: bool = False, limit: int = 60) -> list[str]:
    """Press Tab (Shift+Tab) until the focus is on an element matching ``selector``; each
    step's focus must show (an outline or box-shadow) whenever it is on the extension's own
    controls. The focused elements passed, for the failure message."""
    passed: list[str] = []
    for _ in range(limit):
        page.keyboard.press("Shift+Tab" if back else "Tab")
        focus = focus_shown(page)
        passed.append(focus["what"])
        ours = page.evaluate(
            "() => Boolean(document.activeElement?.closest(\"[class^='ak-'], [class*=' ak-'], .jp-Dialog\"))"
        )
        if ours:
            assert focus["shown"], f"focus not visible on {focus['what']} (after {passed[-6:]})"
        if page.evaluate("(s) => Boolean(document.activeElement?.matches(s))", selector):
            return passed
    raise AssertionError(f"{selector} not reached by {'Shift+' if back else ''}Tab: {passed[-12:]}")


def assert_focus_shown(page: Any, where: str) -> None:
    focus = focus_shown(page)
    assert focus["shown"], f"{where}: focus not visible on {focus['what']} ({focus})"


def test_a_keyboard_only_walk_with_the_focus_always_visible(lab_page: Any, jupyterlab: Any, lab_model: Any) -> None:
    page = lab_page
    run_notebook(page, jupyterlab, "keyboard", ["%load_ext agent_kernel", "y = 1"])
    wait_idle(page)
    command(page, "docmanager:save")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
    page.locator(".jp-Notebook").focus()

    # Open the chat by its shortcut: the prompt box has the focus and shows it.
    page.keyboard.press("Control+Shift+Y")
    page.wait_for_function("() => document.activeElement?.classList.contains('ak-chat-input')", timeout=30_000)
    assert_focus_shown(page, "the prompt box")

    # Back to the approval select, to "ask" with the arrow keys, then forward to the prompt.
    tab_until(page, ".ak-chat-approve", back=True)
    for _ in range(4):
        if page.locator(f"{CHAT} .ak-chat-approve").input_value() == "ask":
            break
        page.keyboard.press("ArrowDown")
    assert page.locator(f"{CHAT} .ak-chat-approve").input_value() == "ask"
    tab_until(page, ".ak-chat-input")

    # Send a prompt with Enter; the approval card takes the focus; Tab to Run, Enter.
    lab_model.add(call("run_code", code="walked = 6 * 7"), TABLE, say("Walked and sorted."))
    page.keyboard.type("set walked and show the table")
    page.keyboard.press("Enter")
    chat = page.locator(f"{CHAT} .ak-chat")
    card = chat.locator(".ak-choice").filter(has_text="walked = 6 * 7")
    card.wait_for(timeout=60_000)
    page.wait_for_function("() => document.activeElement?.classList.contains('ak-choice')", timeout=10_000)
    assert_focus_shown(page, "the approval card")
    tab_until(page, "button[data-choice='run']")
    page.keyboard.press("Enter")
    chat.get_by_text("Walked and sorted.").wait_for(timeout=60_000)
    # The answered card gave way to the transcript's line: the focus stayed in the chat's turns,
    # not thrown to the page; Tab goes on to the table's sort headers.
    page.wait_for_timeout(300)
    assert page.evaluate("() => Boolean(document.activeElement?.closest('.ak-chat-turns'))"), focus_shown(page)
    tab_until(page, ".ak-table th button.ak-sort[data-key='revenue']")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "() => document.querySelector(\"#agent-kernel-panel .ak-table th[data-key='revenue']\")"
        "?.getAttribute('aria-sort') === 'ascending'",
        timeout=30_000,
    )
    assert page.evaluate("() => document.activeElement?.dataset.key") == "revenue"  # kept across the redraw
    assert_focus_shown(page, "the sort header after sorting")
    page.keyboard.press("Space")
    page.wait_for_function(
        "() => document.querySelector(\"#agent-kernel-panel .ak-table th[data-key='revenue']\")"
        "?.getAttribute('aria-sort') === 'descending'",
        timeout=30_000,
    )
    assert chat.locator(".ak-table tbody tr td").nth(1).inner_text() == "30"
    assert chat.locator(".ak-table th[aria-sort='none']").count() == 1  # region, unsorted
    page.wait_for_function("() => !document.querySelector('.ak-chat[data-running]')", timeout=30_000)

    # "Schedule this notebook…" from the command palette; the dialog by keyboard; Enter schedules.
    page.keyboard.press("Control+Shift+C")
    page.keyboard.type("Schedule this notebook")
    page.keyboard.press("Enter")
    page.locator(".jp-Dialog").first.wait_for(timeout=30_000)
    if not page.locator(".jp-Dialog .ak-schedule-form").count():  # "save it now?" first: Enter saves
        page.keyboard.press("Enter")
    page.locator(".jp-Dialog .ak-schedule-form").wait_for(timeout=30_000)
    page.wait_for_function("() => document.activeElement?.name === 'name'", timeout=10_000)
    assert_focus_shown(page, "the schedule dialog's Name")
    page.keyboard.press("Control+A")
    page.keyboard.type("walked by keyboard")
    tab_until(page, "select[name=preset]")
    page.keyboard.press("ArrowUp")  # every day at 9:00 -> every hour
    assert page.locator(".jp-Dialog input[name=cron]").input_value() == "0 * * * *"
    tab_until(page, ".jp-Dialog-footer button.jp-mod-accept")
    page.keyboard.press("Enter")
    page.locator(".jp-Dialog").wait_for(state="detached", timeout=30_000)
    page.locator(".Toastify__toast").filter(has_text="Scheduled “walked by keyboard”").wait_for(timeout=30_000)
    made = [j for j in api(jupyterlab, "GET", "/jobs")["jobs"] if j["name"] == "walked by keyboard"]
    assert made and made[0]["cron"] == "0 * * * *"

    # The dashboard's refresh keeps the keyboard where it was (on the job's Run now).
    command(page, "agent-kernel:show-dashboard")
    row = page.locator(f"{DASHBOARD} .ak-job[data-job='walked by keyboard']")
    row.wait_for(timeout=30_000)
    row.get_by_role("button", name="Run now").focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")  # a keyboard move: the focus shows as the keyboard's
    assert page.evaluate("() => document.activeElement?.textContent") == "Run now"
    page.evaluate("() => { window.__focusedBefore = document.activeElement; }")
    page.wait_for_function("() => !window.__focusedBefore.isConnected", timeout=40_000)  # the 10-second poll
    page.wait_for_timeout(200)
    kept = page.evaluate(
        "() => ({text: document.activeElement?.textContent,"
        " job: document.activeElement?.closest('[data-job]')?.dataset.job})"
    )
    assert kept == {"text": "Run now", "job": "walked by keyboard"}
    assert_focus_shown(page, "the dashboard's Run now after a refresh")


# Every sentence the page's live region says from now on, in order (the region is made on first
# use; a sentence is cleared before it is set, so one said twice is heard twice).
LISTEN = """() => {
  const now = () => document.getElementById('ak-announcer')?.textContent ?? '';
  window.__akSaid = [];
  window.__akLast = now();
  if (window.__akListening) return;
  window.__akListening = true;
  new MutationObserver(() => {
    const text = now();
    if (text === window.__akLast) return;
    window.__akLast = text;
    if (text) window.__akSaid.push(text);
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""
SAID = "() => window.__akSaid"


def listening_notebook(page: Any, lab: Any, name: str) -> None:
    """A new notebook with the extension loaded, the page's live region listened to."""
    run_notebook(page, lab, name, ["%load_ext agent_kernel"])
    wait_idle(page)
    page.evaluate(LISTEN)


def test_an_agent_cell_says_when_its_turn_starts_and_how_it_ends(
    lab_page: Any, jupyterlab: Any, lab_model: Any
) -> None:
    page = lab_page
    listening_notebook(page, jupyterlab, "spoken")

    # A turn that ends normally after a tool call and two streamed paragraphs: two sentences.
    lab_model.add(call("run_code", code="said = 6 * 7"), say("It is 42.\n\nThat is all."))
    run_cell(page, "%agent compute said", 1)
    cell(page, 1).get_by_text("That is all.").wait_for(timeout=60_000)
    wait_idle(page)
    finished = "Agent turn finished: 1 tool call."
    page.wait_for_function(f"() => window.__akSaid.includes({finished!r})", timeout=30_000)
    assert page.evaluate(SAID) == ["Agent turn started: waiting for the model.", finished]
    region = page.locator("#ak-announcer")
    assert region.get_attribute("aria-live") == "polite" and region.get_attribute("role") == "status"

    # A turn the model refuses: the cell fails with the turn's line, and the region says it.
    lab_model.add(fail(400, "invalid_request_error", "prompt is too long: 215000 tokens > 200000 maximum"))
    page.evaluate(LISTEN)
    run_cell(page, "%agent go on", 2)
    page.wait_for_function(
        "() => window.__akSaid.some(s => s.startsWith('Agent turn failed: Model request failed (400'))",
        timeout=60_000,
    )
    wait_idle(page)
    said = page.evaluate(SAID)
    assert said[0] == "Agent turn started: waiting for the model." and len(said) == 2, said

    # Reopened, the saved turns say nothing: only turns this page ran are announced.
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
    page.reload()
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.evaluate(LISTEN)
    cell(page, 1).get_by_text("That is all.").wait_for(timeout=60_000)
    page.wait_for_timeout(1_500)
    assert page.evaluate(SAID) == []
    assert "Agent turn" not in (page.evaluate("() => document.getElementById('ak-announcer')?.textContent") or "")


SLOW_CODE = "import time\nprint('counting', flush=True)\nfor step in range(600):\n    time.sleep(0.1)\n"


def test_an_agent_cell_says_when_its_turn_was_stopped_or_its_kernel_stopped(
    lab_page: Any, jupyterlab: Any, lab_model: Any
) -> None:
    page = lab_page
    listening_notebook(page, jupyterlab, "spoken-stops")

    # Stop pressed during a long run_code: the turn ends stopped (or interrupted, when the
    # button had to interrupt the kernel), and that is what the region says last.
    lab_model.add(call("run_code", code=SLOW_CODE))
    run_cell(page, "%agent count slowly", 1)
    cell(page, 1).get_by_text("counting", exact=True).wait_for(timeout=60_000)
    cell(page, 1).get_by_role("button", name="■ Stop").click()
    page.wait_for_function(
        "() => ['Agent turn stopped.', 'Agent turn interrupted.'].includes(window.__akSaid.at(-1))", timeout=60_000
    )
    wait_idle(page)
    assert page.evaluate(SAID)[0] == "Agent turn started: waiting for the model."

    # The kernel restarted under a running turn: its cell and the region say the kernel stopped.
    page.evaluate(LISTEN)
    lab_model.add(call("run_code", code=SLOW_CODE))
    run_cell(page, "%agent count slowly again", 2)
    cell(page, 2).get_by_text("counting", exact=True).wait_for(timeout=60_000)
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
    cell(page, 2).get_by_text("The kernel stopped during this turn.").wait_for(timeout=60_000)
    page.wait_for_function(
        "() => window.__akSaid.at(-1) === 'Agent turn failed: The kernel stopped during this turn.'", timeout=30_000
    )
