"""The agent in a real JupyterLab 4, driven by Playwright on Debian's Chromium.

One JupyterLab server and one browser serve the whole session (fixtures in conftest.py);
each test opens its own notebook (and so its own kernel) and scripts the model. What the
tests click is what a person clicks: the widgets' own buttons and inputs.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from agent_kernel.testing import call, reply, say, text, tool_use
from tests.support.browser import cell, run_notebook, save_screenshot, wait_idle
from tests.support.calls import result_text, tool_results
from tests.support.capabilities import needs_widget_replies

# One worker runs the browser modules: each starts its own JupyterLab server and Chromium.
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-2"), needs_widget_replies]

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def requests_since(model, start: int) -> list[dict]:
    return model.requests[start:]


# -- (a) streamed text and a table ----------------------------------------------------------


def test_streamed_text_and_a_sortable_paged_table(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    rows = [
        {"month": f"2025-{i:02d}", "region": region, "revenue": (i * 37 + len(region) * 11) % 97 + 3}
        for i in range(1, 13)
        for region in ("North", "South", "East")
    ]
    intro = "I looked at your sales by month and region; here is the table. " * 6 + "End of the introduction."
    lab_model.add(
        reply(
            text(intro),
            tool_use(
                "render_blocks",
                {
                    "title": "Revenue by month",
                    "blocks": [
                        {
                            "type": "table",
                            "data": rows,
                            "columns": [
                                {"key": "month", "label": "Month"},
                                {"key": "region", "label": "Region"},
                                {"key": "revenue", "label": "Revenue"},
                            ],
                        },
                    ],
                },
            ),
            chunk_delay=0.04,
        ),
        say("March in the East was the best month."),
    )
    run_notebook(page, jupyterlab, "streamed", ["%load_ext agent_kernel", "%agent show me the revenue table"])
    agent_cell = cell(page, 1)
    # The answer streams: part of it is on the page while the rest has not arrived yet.
    page.wait_for_function(
        "() => { const t = document.querySelectorAll('.jp-Notebook .jp-Cell')[1].innerText;"
        " return t.includes('I looked at your sales') && !t.includes('End of the introduction'); }",
        timeout=30_000,
        polling=50,
    )
    table = agent_cell.locator(".ak-table")
    table.wait_for(timeout=30_000)
    agent_cell.get_by_text("March in the East was the best month.").wait_for(timeout=30_000)
    agent_cell.locator(".agent-kernel-muted").filter(has_text="scripted-model").wait_for(timeout=30_000)
    # One live transcript: a front end that draws widgets gets no repeated paragraphs or cards.
    assert agent_cell.inner_text().count("End of the introduction.") == 1
    assert agent_cell.locator(".agent-kernel-tool").count() == 1
    assert agent_cell.locator(".ak-pager").inner_text().startswith("«")
    assert "Rows 1–25 of 36" in agent_cell.locator(".ak-pager").inner_text()
    first_rows = table.locator("tbody tr")
    assert first_rows.count() == 25
    assert first_rows.first.inner_text().split("\t")[:2] == ["2025-01", "North"]

    # Sorting by Revenue (twice: descending) happens in the kernel, after the turn ended.
    header = table.locator("th", has_text="Revenue")
    header.click()
    header.click()
    best = max(rows, key=lambda r: r["revenue"])
    page.wait_for_function(
        "(v) => document.querySelector('.ak-table tbody tr td:last-child').textContent === v",
        arg=str(best["revenue"]),
        timeout=30_000,  # a round trip to the kernel, on a machine the other tests keep busy
    )
    assert "▼" in table.locator("th", has_text="Revenue").inner_text()
    agent_cell.get_by_title("Next page").click()
    page.get_by_text("Rows 26–36 of 36").wait_for(timeout=30_000)
    assert table.locator("tbody tr").count() == 11
    save_screenshot(agent_cell, "streamed-text-and-table.png")
    assert len(requests_since(lab_model, start)) == 2


# -- (b) a form (with a chart above it) is filled in and submitted ----------------------------


FORM_FIELDS = [
    {"name": "owner", "label": "Report owner", "type": "text", "required": True},
    {"name": "quarter", "label": "Quarter", "type": "select", "options": ["Q1", "Q2", "Q3", "Q4"], "default": "Q2"},
    {"name": "budget", "label": "Budget (EUR)", "type": "number", "default": 1500},
    {"name": "start", "label": "Start date", "type": "date", "required": True},
    {"name": "include_east", "label": "Include the East region", "type": "checkbox", "default": True},
    {"name": "notes", "label": "Notes", "type": "textarea"},
]


def thank_for_the_form(request: dict):
    result = json.loads(result_text(tool_results(request)[0]))
    data = result["data"]
    return say(
        f"Thanks, {data['owner']}: a {data['quarter']} report from {data['start']} with a "
        f"budget of {data['budget']} (East included: {data['include_east']})."
    )


def test_form_is_filled_in_and_the_turn_goes_on_with_its_values(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    revenue = [120, 135, 160, 150, 175, 190]
    lab_model.add(
        call(
            "render_blocks",
            title="Plan the quarterly report",
            blocks=[
                {
                    "type": "markdown",
                    "content": "Revenue grew in **five of six** months. Tell me how to set up the report.",
                },
                {
                    "type": "chart",
                    "chartType": "bar",
                    "title": "Revenue by month (kEUR)",
                    "data": {
                        "labels": MONTHS[:6],
                        "datasets": [
                            {"label": "North", "data": revenue},
                            {"label": "South", "data": [r - 40 for r in revenue]},
                        ],
                    },
                },
                {"type": "form", "title": "Report settings", "fields": FORM_FIELDS, "submitLabel": "Create report"},
            ],
        ),
        thank_for_the_form,
    )
    run_notebook(page, jupyterlab, "form", ["%load_ext agent_kernel", "%agent plan the report with me"])
    agent_cell = cell(page, 1)
    form = agent_cell.locator("form.ak-form")
    form.wait_for(timeout=30_000)
    agent_cell.locator(".vega-embed").wait_for(timeout=30_000)  # JupyterLab drew the Vega-Lite chart
    assert form.locator("[data-field=quarter]").input_value() == "Q2"  # defaults are filled in
    assert form.locator("[data-field=budget]").input_value() == "1500"
    assert form.locator("[data-field=include_east]").is_checked()

    # A required field left empty is pointed out, and nothing is sent.
    form.get_by_role("button", name="Create report").click()
    form.get_by_text("Report owner is required.").wait_for(timeout=5_000)
    assert len(lab_model.requests) == start + 1

    form.locator("[data-field=owner]").fill("Ada Lovelace")
    form.locator("[data-field=quarter]").select_option("Q3")
    form.locator("[data-field=budget]").fill("2500.5")
    form.locator("[data-field=start]").fill("2026-07-01")
    form.locator("[data-field=include_east]").uncheck()
    form.locator("[data-field=notes]").fill("Split by region, please.")
    save_screenshot(agent_cell, "form-and-chart.png", readme=True)
    form.get_by_role("button", name="Create report").click()

    agent_cell.get_by_text("Thanks, Ada Lovelace").wait_for(timeout=30_000)
    shown = agent_cell.inner_text()
    assert "a Q3 report from 2026-07-01 with a budget of 2500.5 (East included: False)" in shown
    result = json.loads(result_text(tool_results(lab_model.requests[start + 1])[0]))
    assert result == {
        "action": "submit",
        "data": {
            "owner": "Ada Lovelace",
            "quarter": "Q3",
            "budget": 2500.5,
            "start": "2026-07-01",
            "include_east": False,
            "notes": "Split by region, please.",
        },
    }
    # The answered form stays in the notebook as a static record of what was sent.
    assert agent_cell.locator("form.ak-form").count() == 0
    assert "Submitted" in agent_cell.locator(".agent-kernel-form-static").inner_text()
    save_screenshot(agent_cell, "form-submitted.png")


# -- (c) approval: Skip declines, Run executes --------------------------------------------------


def test_approval_card_skip_declines_and_run_executes(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    lab_model.add(
        call("run_code", code="dropped = 'the sales table'"),
        call("run_code", code="approved = 6 * 7\nprint('approved', approved)"),
        say("Done: I computed `approved` and did not drop anything."),
    )
    run_notebook(
        page,
        jupyterlab,
        "approval",
        [
            "%load_ext agent_kernel",
            "%agent --approve ask tidy up my namespace",
            "print('dropped' in globals(), approved)",
        ],
    )
    agent_cell = cell(page, 1)
    first = agent_cell.locator(".ak-choice").filter(has_text="dropped = 'the sales table'")
    first.wait_for(timeout=30_000)
    assert "Allow run_code?" in first.inner_text()
    first.get_by_role("button", name="Skip").click()

    second = agent_cell.locator(".ak-choice").filter(has_text="approved = 6 * 7")
    second.wait_for(timeout=30_000)
    save_screenshot(agent_cell, "approval-card.png", readme=True)
    second.get_by_role("button", name="Run").click()
    agent_cell.get_by_text("Done: I computed").wait_for(timeout=30_000)

    skipped = tool_results(lab_model.requests[start + 1])[0]
    assert skipped["is_error"] is True and "The user declined to run run_code" in skipped["content"]
    ran = json.loads(result_text(tool_results(lab_model.requests[start + 2])[0]))
    assert ran["success"] is True and ran["stdout"] == "approved 42\n"
    cell(page, 2).get_by_text("False 42").wait_for(timeout=30_000)
    shown = agent_cell.inner_text()
    assert "Skipped: the agent was told you declined." in shown and "Approved: it ran." in shown


# -- (d) Stop ends a long run_code ---------------------------------------------------------------


def test_stop_button_ends_a_long_run_code(lab_page, jupyterlab, lab_model):
    page = lab_page
    lab_model.add(
        call(
            "run_code",
            code="import time\nprint('counting', flush=True)\nfor progress in range(600):\n    time.sleep(0.1)\n",
        ),
    )
    run_notebook(
        page,
        jupyterlab,
        "stop",
        [
            "%load_ext agent_kernel",
            "%agent count slowly",
            "print('progress', progress)",
        ],
    )
    agent_cell = cell(page, 1)
    agent_cell.get_by_text("counting", exact=True).wait_for(timeout=30_000)
    clicked = time.monotonic()
    agent_cell.get_by_role("button", name="■ Stop").click()
    # The turn did not finish, so the cell fails with one line (and Run All stops there).
    failure = agent_cell.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
    failure.filter(has_text="■").wait_for(timeout=20_000)
    stopped_after = time.monotonic() - clicked
    # The turn's footer, then the line saying it stopped, last.
    assert failure.filter(has_text="■").last.inner_text().strip().splitlines()[-1] in ("■ Stopped.", "■ Interrupted.")
    assert "interrupts.py" not in agent_cell.inner_text()
    assert stopped_after < 10  # the code alone would run for a minute
    wait_idle(page)
    page.evaluate(
        "() => { const nb = window.jupyterapp.shell.currentWidget.content; nb.activeCellIndex = 2;"
        " window.jupyterapp.commands.execute('notebook:run-cell'); }"
    )
    after = cell(page, 2).locator(".jp-OutputArea-output")
    after.first.wait_for(timeout=30_000)
    progress = int(after.first.inner_text().split()[-1])
    assert 0 <= progress < 590
    assert agent_cell.get_by_role("button", name="■ Stop").count() == 0


# -- (e) model-written script payloads run nowhere, live or after the notebook is trusted --------


def payload(place: str) -> str:
    """Script in every form the page could run: handlers, <script>, SVG, javascript: links."""
    flag = f"window.__pwned=(window.__pwned||[]).concat('{place}')"
    return (
        f'{place}: <img src=x onerror="{flag}"> <script>{flag}</script> <svg onload="{flag}"></svg> '
        f'<svg><animate onbegin="{flag}" attributeName=x dur=1s /></svg> <details open ontoggle="{flag}"></details> '
        f'<a href="javascript:{flag}">a</a> [m](javascript:{flag}) <javascript:{flag}>'
    )


def short(place: str) -> str:
    """A payload that fits a label (300 characters) or a key (200)."""
    flag = f"window.__pwned=['{place}']"
    return f'{place}: <img src=x onerror="{flag}"><svg onload="{flag}"></svg><a href="javascript:{flag}">a</a>'[:190]


def payload_blocks() -> list[dict]:
    return [
        {"type": "markdown", "content": payload("markdown")},
        {"type": "alert", "variant": "danger", "content": payload("alert")},
        {"type": "table", "title": short("table-title"), "data": [{short("header"): payload("cell")}]},
        {
            "type": "chart",
            "chartType": "bar",
            "title": short("chart-title"),
            "xLabel": short("x-label"),
            "data": {"labels": [short("x-value")], "datasets": [{"label": short("series"), "data": [1]}]},
        },
        {"type": "code", "language": "html", "content": payload("code")},
        {"type": "json", "data": {short("json-key"): payload("json-value")}},
        {
            "type": "image",
            "url": "https://127.0.0.1:9/x.png\" onerror=\"window.__pwned=['image-url']",
            "alt": short("image-alt"),
        },
        {
            "type": "form",
            "title": short("form-title"),
            "submitLabel": short("submit"),
            "fields": [{"name": "f", "label": short("field-label"), "type": "select", "options": [short("option")]}],
        },
    ]


def pwned(page) -> list:
    return page.evaluate("() => window.__pwned || []")


def cell_requests(frames: list[str]) -> list[str]:
    """The execute requests among websocket frames, but the Agent panel's own silent reads of
    its settings row and its secrets row (no code, one fixed expression each)."""
    return [f for f in frames if '"execute_request"' in f and "panel_state(" not in f and "secrets_state(" not in f]


def test_model_written_script_runs_nowhere_live_or_after_trust(lab_page, jupyterlab, lab_model):
    page = lab_page
    sent: list[str] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda frame: sent.append(str(frame))))
    lab_model.add(
        reply(
            text(payload("streamed") + " more text follows. " * 20),
            tool_use("send_message", {"text": payload("send_message")}),
            chunk_delay=0.02,
        ),
        call("render_blocks", title=short("render-title"), blocks=payload_blocks()),
        call("ask_user", question=payload("question"), options=[short("ask-option"), "fine"]),
        call("run_code", code=payload("approval")),
        say(payload("final")),
    )
    run_notebook(page, jupyterlab, "payloads", ["%load_ext agent_kernel", "%agent --approve ask show everything"])
    agent_cell = cell(page, 1)
    form = agent_cell.locator("form.ak-form")
    form.wait_for(timeout=60_000)
    agent_cell.locator(".vega-embed").first.wait_for(state="attached", timeout=30_000)
    form.get_by_role("button", name="Dismiss").click()
    question = agent_cell.locator(".ak-choice").filter(has_text="question:")
    question.wait_for(timeout=30_000)
    question.get_by_role("button", name="fine").click()
    approval = agent_cell.locator(".ak-choice").filter(has_text="Allow run_code?")
    approval.wait_for(timeout=30_000)
    approval.get_by_role("button", name="Skip").click()
    agent_cell.get_by_text("final: ").wait_for(timeout=30_000)
    wait_idle(page)
    page.wait_for_timeout(1_000)
    shown = agent_cell.inner_text()
    for place in (
        "streamed",
        "send_message",
        "markdown",
        "alert",
        "table-title",
        "header",
        "cell",
        "code",
        "json-value",
        "form-title",
        "field-label",
        "question",
        "approval",
        "final",
    ):
        assert f"{place}: <img src=x onerror=" in shown or f"{place}: " in shown, place  # shown as text
    assert "<script>" in shown  # the payload is visible as text, not run
    assert pwned(page) == []
    assert page.locator("a[href^='javascript' i], iframe, object, embed").count() == 0
    executes = cell_requests(sent)
    assert len(executes) == 2  # the two cells the test ran; nothing from the payloads

    # Saved, trusted and opened again: the static renderings run nothing either.
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !document.querySelector('.jp-mod-dirty')", timeout=15_000)
    path = jupyterlab.root / "payloads.ipynb"
    import subprocess
    import sys

    subprocess.run(
        [sys.executable, "-m", "jupyter", "trust", str(path)],
        check=True,
        capture_output=True,
        env={**os.environ, "JUPYTER_DATA_DIR": str(jupyterlab.root.parent / "jupyter-home" / "data")},
    )
    jupyterlab.shutdown_kernels()
    sent.clear()
    page.goto(f"{jupyterlab.url}/lab/workspaces/payloads-again/tree/payloads.ipynb?reset&token={jupyterlab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    reopened = cell(page, 1)
    reopened.get_by_text("final: ").wait_for(timeout=30_000)
    reopened.locator(".vega-embed").first.wait_for(state="attached", timeout=30_000)
    page.wait_for_timeout(1_500)
    assert "untrusted" not in reopened.inner_text().lower()
    assert pwned(page) == []
    assert page.locator("a[href^='javascript' i], iframe, object, embed").count() == 0
    assert not cell_requests(sent)


# -- sub-sessions: side by side, a child's question answered in the parent's cell ----------------


def test_sub_sessions_show_as_sections_and_a_childs_question_is_answered_in_the_parent_cell(
    lab_page, jupyterlab, lab_model
):
    from tests.support.subsessions import report_wait, route, wait_for_spawned

    page = lab_page
    lab_model.responder = route(
        {
            "ASK-COLOUR": [
                call("ask_user", question="Which colour for the chart?", options=["red", "blue"]),
                report_wait,
            ],
            "SUM-UP": [call("run_code", code="total = 6 * 7\nprint(total)"), report_wait],
            "fan out": [
                reply(
                    tool_use("spawn_session", {"task": "ASK-COLOUR: ask which colour the chart should use"}),
                    tool_use("spawn_session", {"task": "SUM-UP: compute the total"}),
                ),
                wait_for_spawned,
                say("Both sub-sessions finished."),
            ],
        }
    )
    try:
        run_notebook(page, jupyterlab, "subsessions", [
            "%load_ext agent_kernel",
            '%config AgentKernel.tool_groups = ["code", "llm", "ui"]',
            "%agent fan out the work to two sub-sessions",
        ])  # fmt: skip
        agent_cell = cell(page, 2)
        # The child's question is a card in the parent's cell, while its sibling runs on.
        question = agent_cell.locator(".ak-choice")
        question.wait_for(timeout=60_000)
        assert "Which colour for the chart?" in question.inner_text()
        sections = agent_cell.locator("details.agent-kernel-subsession")
        assert sections.count() == 2
        save_screenshot(agent_cell, "subsessions-question.png")
        question.get_by_role("button", name="blue").click()
        agent_cell.get_by_text("Both sub-sessions finished.").wait_for(timeout=60_000)
        wait_idle(page)
        # Each child is a collapsible section that says how it ended and what it reported.
        texts = {}
        for i in range(sections.count()):
            section = sections.nth(i)
            section.locator("summary").click()  # open it, as a person would
            texts["ASK" if "ASK-COLOUR" in section.inner_text() else "SUM"] = section.inner_text()
        assert "completed" in texts["ASK"] and "blue" in texts["ASK"]
        assert "completed" in texts["SUM"] and "42" in texts["SUM"]
        save_screenshot(agent_cell, "subsessions-done.png")
    finally:
        lab_model.responder = None
