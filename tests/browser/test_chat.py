"""The Agent chat (its own sidebar) in a real JupyterLab 4 with Chromium: a prompt typed in
the chat runs a turn in the notebook's kernel, its transcript (tool cards, blocks, approval
cards, Stop) renders in the chat, and cells, outputs and errors reach it with one click.

Run it with the extension built from this checkout first on ``JUPYTER_PATH``.
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from agent_kernel.testing import call, reply, say, tool_use
from tests.support.browser import (
    RUN_LAST_CELL,
    cell,
    notebook_7_chat,
    open_chat,
    run_cell,
    run_notebook,
    save_screenshot,
    send,
    wait_idle,
)
from tests.support.calls import tool_results
from tests.support.dashboard import open_dashboard

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

BUSY_UNTIL = """import pathlib, time
_until = time.monotonic() + 60
while not pathlib.Path(%r).exists() and time.monotonic() < _until:
    time.sleep(0.05)"""
PNG_CELL = """import io
from PIL import Image as _I
from IPython.display import Image, display
_b = io.BytesIO(); _I.new('RGB', (48, 32), (0, 128, 255)).save(_b, 'PNG')
display(Image(_b.getvalue()))"""


def test_a_panel_prompt_runs_in_the_notebooks_kernel_and_lands_in_its_session(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    rows = [{"region": r, "revenue": n} for r, n in (("North", 12), ("South", 30), ("East", 7))]
    lab_model.add(
        call("run_code", code="from_panel = 6 * 7\nprint('defined', from_panel)"),
        reply(tool_use("render_blocks", {"title": "Revenue", "blocks": [{"type": "table", "data": rows}]})),
        say("Defined `from_panel` and showed the table."),
    )
    run_notebook(page, jupyterlab, "chat-turn", ["%load_ext agent_kernel"])
    wait_idle(page)
    chat = open_chat(page)
    # A busy kernel (a cell that runs until the test lets it end): the prompt waits its turn and says so.
    go = jupyterlab.root / "chat-turn.go"
    page.evaluate(RUN_LAST_CELL, BUSY_UNTIL % go.name)
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'busy'",
        timeout=60_000,
    )
    send(chat, "define from_panel and show the revenue table")
    chat.locator(".ak-chat-status").filter(has_text="busy: your prompt waits its turn").wait_for(timeout=10_000)
    go.touch()
    output = chat.locator(".ak-chat-output")
    output.get_by_text("Defined `from_panel`", exact=False).or_(
        output.get_by_text("Defined from_panel")
    ).first.wait_for(timeout=60_000)
    output.locator(".ak-table").wait_for(timeout=30_000)
    assert output.locator(".agent-kernel-tool").count() >= 1
    assert "defined 42" in output.inner_text()
    page.wait_for_function("() => !document.querySelector('.ak-chat[data-running]')", timeout=30_000)
    assert page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.cells.length") == 2
    # The dashboard beside the chat lists the session the panel's turn started.
    open_dashboard(page).locator(".ak-session[data-session='chat-turn']").wait_for(timeout=30_000)
    # The next cell uses what the panel's turn defined; the panel used no execution count.
    after = run_cell(page, "print('next', from_panel + 1)", 2)
    after.get_by_text("next 43").wait_for(timeout=30_000)
    expect(cell(page, 2).locator(".jp-InputPrompt")).to_have_text("[3]:", timeout=30_000)
    history = run_cell(page, "%agent_history", 3)
    page.wait_for_function(
        "() => document.querySelectorAll('.jp-Notebook .jp-Cell')[3].innerText.includes('Defined')", timeout=30_000
    )
    shown = cell(page, 3).inner_text()
    assert "define from_panel and show the revenue table" in shown
    assert history.count() >= 1
    assert len(lab_model.requests) - start == 3
    save_screenshot(page.locator("#agent-kernel-panel"), "chat-panel.png", readme=True)


def test_an_ask_mode_approval_card_is_answered_in_the_panel(lab_page, jupyterlab, lab_model):
    page = lab_page
    lab_model.add(call("run_code", code="approved_in_panel = 6 * 7"), say("Ran it after you approved."))
    run_notebook(page, jupyterlab, "chat-ask", ["%load_ext agent_kernel"])
    wait_idle(page)
    chat = open_chat(page)
    chat.locator(".ak-chat-approve").select_option("ask")
    assert "wait for your Run or Skip" in chat.locator(".ak-chat-approve-note").inner_text()
    send(chat, "set approved_in_panel")
    card = chat.locator(".ak-choice").filter(has_text="approved_in_panel = 6 * 7")
    card.wait_for(timeout=60_000)
    card.get_by_role("button", name="Run").click()
    chat.get_by_text("Ran it after you approved.").wait_for(timeout=30_000)
    run_cell(page, "print(approved_in_panel)", 1).get_by_text("42").wait_for(timeout=30_000)


def test_escape_in_the_panel_stops_a_long_run_code(lab_page, jupyterlab, lab_model):
    page = lab_page
    lab_model.add(
        call(
            "run_code",
            code="import time\nprint('counting', flush=True)\nfor progress in range(600):\n    time.sleep(0.1)\n",
        ),
    )
    run_notebook(page, jupyterlab, "chat-stop", ["%load_ext agent_kernel"])
    wait_idle(page)
    chat = open_chat(page)
    send(chat, "count slowly")
    chat.locator(".ak-chat-output").get_by_text("counting", exact=True).wait_for(timeout=60_000)
    clicked = time.monotonic()
    chat.locator(".ak-chat-input").press("Escape")
    chat.locator(".ak-chat-output").filter(has_text="■").get_by_text("■ S", exact=False).or_(
        chat.locator(".ak-chat-output").get_by_text("■ Interrupted.")
    ).first.wait_for(timeout=20_000)
    assert time.monotonic() - clicked < 10  # the code alone would run for a minute
    page.wait_for_function("() => !document.querySelector('.ak-chat[data-running]')", timeout=30_000)
    progress = run_cell(page, "print('progress', progress)", 1)
    assert 0 <= int(progress.first.inner_text().split()[-1]) < 590


def test_an_output_image_added_to_chat_reaches_the_request_as_an_image(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    lab_model.add(say("A blue rectangle."))
    run_notebook(page, jupyterlab, "chat-image", [PNG_CELL])
    wait_idle(page)
    image = cell(page, 0).locator(".jp-OutputArea-child").filter(has=page.locator("img"))
    image.first.click(button="right")
    page.locator(".lm-Menu-item").filter(has_text="Add output to chat").click()
    chat = page.locator("#agent-kernel-panel .ak-chat")
    chip = chat.locator(".ak-chip[data-kind='output']")
    chip.wait_for(timeout=10_000)
    assert chip.locator("img").count() == 1
    send(chat, "what is in this picture?")
    chat.get_by_text("A blue rectangle.").wait_for(timeout=60_000)
    content = lab_model.requests[start]["messages"][-1]["content"]
    assert content[-1]["type"] == "image" and content[-1]["source"]["media_type"] == "image/png"
    assert content[-2]["text"].startswith("Attached by the person (output: output of chat-image.ipynb cell 1 (id ")
    assert content[-3]["text"] == "what is in this picture?"


def test_fix_with_agent_on_an_error_attaches_the_cell_and_its_traceback(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    lab_model.add(say("Dividing by zero: use a non-zero denominator."))
    run_notebook(page, jupyterlab, "chat-fix", ["total = 10\ntotal / 0"])
    wait_idle(page)
    failing = cell(page, 0)
    failing.get_by_role("button", name="Fix with agent").click()
    chat = page.locator("#agent-kernel-panel .ak-chat")
    chat.locator(".ak-chip[data-kind='error']").wait_for(timeout=10_000)
    assert chat.locator(".ak-chip[data-kind='cell']").count() == 1
    assert chat.locator(".ak-chat-input").input_value().startswith("Fix the error in the attached cell")
    screenshot_dark(page)
    chat.locator(".ak-chat-input").press("Enter")
    chat.get_by_text("Dividing by zero").wait_for(timeout=60_000)
    texts = [b.get("text", "") for b in lab_model.requests[start]["messages"][-1]["content"]]
    assert any("total / 0" in t and t.startswith("Attached by the person (cell:") for t in texts)
    assert any("ZeroDivisionError" in t and t.startswith("Attached by the person (error:") for t in texts)
    assert not any("\x1b[" in t for t in texts)  # no terminal colours reach the model
    assert not tool_results(lab_model.requests[start])


def test_fix_with_agent_leads_to_the_accepted_diff_and_a_cell_that_then_runs(lab_page, jupyterlab, lab_model):
    """The model reads the failing cell's id in its attachment and proposes the fix with
    replace_cell(run=true); in ask mode the diff shows at the cell; Accept applies it, and the
    cell runs once the panel's turn has ended."""
    import re

    page = lab_page
    start = len(lab_model.requests)

    def fix(body: dict) -> object:
        texts = " ".join(b.get("text", "") for b in body["messages"][-1]["content"] if isinstance(b, dict))
        cell_id = re.search(r"\(id ([A-Za-z0-9_-]+)\)", texts).group(1)
        return reply(tool_use("replace_cell", {"cell": cell_id, "source": "total = 10\ntotal / 2", "run": True}))

    lab_model.add(fix, say("Fixed: the denominator is 2 now; the cell runs after this turn."))
    run_notebook(page, jupyterlab, "chat-fix-diff", ["%load_ext agent_kernel", "total = 10\ntotal / 0"])
    wait_idle(page)
    failing = cell(page, 1)
    failing.get_by_role("button", name="Fix with agent").click()
    chat = page.locator("#agent-kernel-panel .ak-chat")
    chat.locator(".ak-chip[data-kind='error']").wait_for(timeout=10_000)
    chat.locator(".ak-chat-approve").select_option("ask")
    chat.locator(".ak-chat-input").press("Enter")
    diff = page.locator(".ak-edit-diff")
    diff.wait_for(timeout=60_000)
    assert (
        "total / 0" in diff.locator(".ak-edit-old").inner_text()
        and "total / 2" in diff.locator(".ak-edit-new").inner_text()
    )
    diff.get_by_role("button", name="Accept").click()
    chat.get_by_text("Fixed: the denominator is 2 now").wait_for(timeout=60_000)
    failing.locator(".jp-OutputArea-output", has_text="5.0").wait_for(timeout=60_000)  # it ran, fixed
    assert "ZeroDivisionError" not in failing.locator(".jp-OutputArea").inner_text()
    result = tool_results(lab_model.requests[start + 1])[0]
    assert not result.get("is_error") and "queued" in str(result["content"])


def test_the_cell_toolbar_asks_about_the_cell(lab_page, jupyterlab, lab_model):
    page = lab_page
    run_notebook(page, jupyterlab, "chat-ask-cell", ["revenue = {'North': 12}"])
    wait_idle(page)
    cell(page, 0).click()
    button = cell(page, 0).locator(".jp-cell-toolbar [data-command='agent-kernel:ask-about-cell']")
    button.wait_for(timeout=10_000)
    button.click()
    chat = page.locator("#agent-kernel-panel .ak-chat")
    chip = chat.locator(".ak-chip[data-kind='cell']")
    chip.wait_for(timeout=10_000)
    assert "chat-ask-cell.ipynb cell 1 (id " in chip.inner_text()
    assert chat.locator(".ak-chat-input").input_value() == "About the attached cell: "
    assert page.evaluate("() => document.activeElement.classList.contains('ak-chat-input')")


def screenshot_dark(page) -> None:
    """The chat with a failing cell's context attached, in JupyterLab Dark."""
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
    page.wait_for_timeout(500)
    save_screenshot(page.locator(".jp-LabShell"), "chat-dark.png", readme=True)
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")


def test_without_a_kernel_the_chat_says_so_and_sends_nothing(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    run_notebook(page, jupyterlab, "chat-no-kernel", ["1 + 1"])
    wait_idle(page)
    chat = open_chat(page)
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
    status = chat.locator(".ak-chat-status")
    status.filter(has_text="This notebook has no kernel").wait_for(timeout=30_000)
    send(chat, "hello?")
    status.filter(has_text="no kernel: start one").wait_for(timeout=5_000)
    assert chat.locator(".ak-chat-turn").count() == 0
    assert chat.locator(".ak-chat-input").input_value() == "hello?"  # kept, to send once a kernel runs
    assert len(lab_model.requests) == start


def test_the_chat_runs_a_turn_in_notebook_7(chromium, lab_model, tmp_path):
    lab_model.add(call("run_code", code="who = 'the agent'"), say("Set who in Notebook 7."))
    with notebook_7_chat(chromium, lab_model, tmp_path, "who = 'nobody'") as (page, chat):
        page.wait_for_function(
            "() => !document.querySelector('.ak-chat-status').textContent.includes('no kernel')", timeout=60_000
        )
        send(chat, "set who")
        chat.get_by_text("Set who in Notebook 7.").wait_for(timeout=60_000)
        assert chat.locator(".agent-kernel-tool").count() >= 1


def test_the_panel_renames_the_notebooks_session(lab_page, jupyterlab, lab_model):
    page = lab_page
    lab_model.add(say("Started."))
    run_notebook(page, jupyterlab, "chat-rename", ["%load_ext agent_kernel"])
    wait_idle(page)
    chat = open_chat(page)
    send(chat, "start a session")
    chat.get_by_text("Started.").wait_for(timeout=60_000)
    page.wait_for_function("() => !document.querySelector('.ak-chat[data-running]')", timeout=30_000)
    chat.locator(".ak-chat-session option[value='chat-rename']").wait_for(state="attached", timeout=30_000)
    chat.locator(".ak-chat-rename").click()
    dialog = page.locator(".jp-Dialog")
    dialog.locator("input").fill("sales notes")
    dialog.get_by_role("button", name="Ok").click()
    chat.locator(".ak-chat-status").filter(has_text="Renamed to sales notes.").wait_for(timeout=30_000)
    chat.locator(".ak-chat-session option[value='sales notes']").wait_for(state="attached", timeout=30_000)
    assert chat.locator(".ak-chat-session").input_value() == "sales notes"
    assert chat.locator(".ak-chat-earlier").first.inner_text().startswith("Turn 1: start a session")


def test_a_file_from_the_file_browser_is_added_to_chat(lab_page, jupyterlab, lab_model):
    page = lab_page
    (jupyterlab.root / "notes.txt").write_text("Revenue is in EUR; the East region started in March.\n")
    run_notebook(page, jupyterlab, "chat-file", ["1 + 1"])
    wait_idle(page)
    page.evaluate("() => window.jupyterapp.shell.activateById('filebrowser')")
    item = page.locator(".jp-DirListing-item[data-isdir='false']", has_text="notes.txt")
    item.click(button="right")
    page.locator(".lm-Menu-item").filter(has_text="Add to chat").first.click()
    chip = page.locator("#agent-kernel-panel .ak-chip[data-kind='file']")
    chip.wait_for(timeout=10_000)
    assert "notes.txt" in chip.inner_text()
    assert "East region started in March" in chip.get_attribute("title")
