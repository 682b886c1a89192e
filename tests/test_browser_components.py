"""Components the agent builds, in a real JupyterLab 4 driven by Playwright on Chromium.

The model's HTML/CSS/JS runs in a sandboxed frame: what the tests click is inside that
frame (the component's own buttons) and outside it (the Submit the widget adds).
"""

from __future__ import annotations

import json

import pytest

from agent_kernel.testing import call, say

from .calls import result_text, tool_results
from .capabilities import needs_widget_replies
from .test_browser import cell, run_notebook, save_screenshot, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-2"), needs_widget_replies]

TALLY_HTML = """
<h3 id=title>Tally v1</h3>
<button id=add>Add one</button> <button id=ask>Ask the database</button> <button id=sneak>Run code</button>
<p>Count: <b id=count>0</b></p><p id=answer>no answer yet</p><p id=refused></p>
"""
TALLY_CSS = "body { font-family: sans-serif; } #count { color: #0969da; } button { margin-right: 6px; }"
TALLY_JS = """
const show = () => { document.getElementById('count').textContent = ak.state.count; };
document.getElementById('add').onclick = () => { ak.setState({ count: ak.state.count + 1 }); show(); };
document.getElementById('ask').onclick = () => ak.call('db_sql', { sql: 'SELECT 6 * 7 AS answer' })
  .then((r) => { document.getElementById('answer').textContent = 'answer: ' + JSON.stringify(r.rows || r); });
document.getElementById('sneak').onclick = () => ak.call('run_code', { code: 'sneaked = 1' })
  .catch((e) => { document.getElementById('refused').textContent = e.message; });
show();
"""
TALLY = {
    "name": "tally", "description": "A counter that can ask the database.", "html": TALLY_HTML, "css": TALLY_CSS,
    "js": TALLY_JS, "state": {"count": 0}, "tools": ["db_sql"],
}


def test_a_component_renders_calls_its_declared_tool_and_returns_what_was_submitted(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    lab_model.add(
        call("create_ui_component", **TALLY),
        call("render_and_wait", component="tally", height=200),
        call("update_ui_component", name="tally", html=TALLY_HTML.replace("Tally v1", "Tally v2")),
        call("read_ui_component", name="tally", version=1),
        call("render_blocks", blocks=[{"type": "component", "name": "tally", "height": 200}]),
        say("All done."),
    )
    run_notebook(page, jupyterlab, "components", ["%load_ext agent_kernel", "%agent build me a tally"])
    agent_cell = cell(page, 1)
    card = agent_cell.locator(".ak-component").first
    card.wait_for(timeout=60_000)
    assert "tally · version 1" in card.inner_text()
    assert "Made by the agent in session" in card.inner_text() and "no untrusted content" in card.inner_text()
    frame_element = card.locator("iframe.ak-component-frame")
    assert frame_element.get_attribute("sandbox") == "allow-scripts"
    frame = card.frame_locator("iframe.ak-component-frame")
    frame.locator("#add").click()
    frame.locator("#add").click()
    frame.locator("#count").filter(has_text="2").wait_for(timeout=10_000)
    frame.locator("#ask").click()
    frame.get_by_text("answer: ").wait_for(timeout=30_000)
    assert "42" in frame.locator("#answer").inner_text()
    frame.locator("#sneak").click()
    frame.get_by_text("is not declared by this component").wait_for(timeout=30_000)
    save_screenshot(card, "component.png", readme=True)
    card.get_by_role("button", name="Submit").click()

    agent_cell.get_by_text("All done.").wait_for(timeout=60_000)
    wait_idle(page)
    submitted = json.loads(result_text(tool_results(lab_model.requests[start + 2])[0]))
    assert submitted == {"action": "submit", "state": {"count": 2}}
    first = json.loads(result_text(tool_results(lab_model.requests[start + 4])[0]))
    assert first["version"] == 1 and "Tally v1" in first["html"]
    # The answered component is a static record now; the second version shows live.
    assert "tally · version 1 · Submitted" in agent_cell.locator(".agent-kernel-component-static").first.inner_text()
    live = agent_cell.locator(".ak-component")
    assert live.count() == 1 and "tally · version 2" in live.inner_text()
    live.frame_locator("iframe.ak-component-frame").get_by_text("Tally v2").wait_for(timeout=30_000)

    # The saved notebook holds the static record and no script.
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !document.querySelector('.jp-mod-dirty')", timeout=15_000)
    saved = json.loads((jupyterlab.root / "components.ipynb").read_text())
    outputs = [o for c in saved["cells"] for o in c.get("outputs", [])]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    markup = "".join(h if isinstance(h, str) else "".join(h) for h in html)
    assert "agent-kernel-component-static" in markup and "tally · version 1</strong>" in markup
    assert "· Submitted" in markup and "tally · version 2</strong>" in markup
    assert "<script" not in markup.lower() and "<iframe" not in markup.lower()


HOSTILE_JS = """
const report = [];
const attempt = (label, action) => { try { report.push(label + ': ' + action()); } catch (e) { report.push(label + ': blocked'); } };
attempt('parent.document', () => typeof parent.document.body);
attempt('parent write', () => { window.parent.__akPwned = 1; return 'written'; });
attempt('top write', () => { top.__akPwned = 1; return 'written'; });
attempt('cookie', () => 'read ' + document.cookie);
attempt('storage', () => { localStorage.setItem('k', 'v'); return 'written'; });
attempt('require', () => typeof parent.require);
attempt('jupyterapp', () => typeof parent.jupyterapp.serviceManager);
attempt('top navigation', () => { top.location = 'http://127.0.0.1:9/escaped'; return 'navigated'; });
fetch('MARKER').then(() => report.push('fetch: read')).catch(() => report.push('fetch: blocked'))
  .then(() => ak.call('run_code', { code: 'pwned = 1' }))
  .then(() => report.push('run_code: ran'), (e) => report.push('run_code: ' + e.message))
  .then(() => {
    document.getElementById('out').textContent = report.join('\\n');
    ak.send('report', report);
    setTimeout(() => { location.href = 'about:blank'; }, 1500);
  });
"""


def test_a_hostile_component_reaches_nothing_and_is_removed_when_it_navigates(lab_page, jupyterlab, lab_model):
    page = lab_page
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    marker = f"{jupyterlab.url}/api/contents?ak-component-fetch-marker"
    start = len(lab_model.requests)
    lab_model.add(
        call("render_and_wait", html="<pre id=out>running</pre>", js=HOSTILE_JS.replace("MARKER", marker),
             messages=["report"]),
        say("Seen."),
        say("Read the report."),
    )
    run_notebook(page, jupyterlab, "hostile", ["%load_ext agent_kernel", "%agent show it", "%agent what did it report?"])
    agent_cell = cell(page, 1)
    agent_cell.get_by_text("the component tried to navigate and was removed").wait_for(timeout=60_000)
    agent_cell.get_by_text("Seen.").wait_for(timeout=60_000)
    cell(page, 2).get_by_text("Read the report.").wait_for(timeout=60_000)
    wait_idle(page)
    assert page.evaluate("() => [window.__akPwned, window.top.__akPwned]") == [None, None]
    assert "/escaped" not in page.url and page.url.startswith(jupyterlab.url)
    assert not [url for url in requested if "ak-component-fetch-marker" in url or "/escaped" in url]
    answer = json.loads(result_text(tool_results(lab_model.requests[start + 1])[0]))
    assert answer["action"] == "dismiss" and "navigate" in answer["reason"]
    context = lab_model.requests[start + 2]["messages"][-1]["content"][0]["text"]
    assert "A message from the UI component 'inline'" in context
    report = json.loads(context.split("report: ", 1)[1].split("\n", 1)[0].split("<", 1)[0])
    found = {line.split(": ", 1)[0]: line.split(": ", 1)[1] for line in report}
    # A sandboxed frame's top navigation is ignored or throws, by browser version: the page stayed put (above).
    assert found.pop("top navigation") in ("blocked", "navigated")
    assert found | {"run_code": ""} == {
        "parent.document": "blocked", "parent write": "blocked", "top write": "blocked", "cookie": "blocked",
        "storage": "blocked", "require": "blocked", "jupyterapp": "blocked", "fetch": "blocked", "run_code": "",
    }
    assert any(line.startswith("run_code: Refused: tool 'run_code' is not declared") for line in report)


def test_in_ask_mode_a_components_writing_call_waits_for_the_approval_card(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    lab_model.add(
        call("render_and_wait", html="<button id=go>Compute</button><p id=out>idle</p>", tools=["run_code"],
             js="document.getElementById('go').onclick = () => ak.call('run_code', {code: 'approved = 6 * 7'})"
                ".then((r) => { document.getElementById('out').textContent = 'ran: ' + r.success; },"
                " (e) => { document.getElementById('out').textContent = e.message; });"),
        say("Finished."),
    )
    run_notebook(page, jupyterlab, "ask", ["%load_ext agent_kernel", "%agent --approve ask compute with me"])
    agent_cell = cell(page, 1)
    card = agent_cell.locator(".ak-component").first
    card.wait_for(timeout=60_000)
    frame = card.frame_locator("iframe.ak-component-frame")
    frame.locator("#go").click()
    approval = agent_cell.locator(".ak-choice").filter(has_text="approved = 6 * 7")
    approval.wait_for(timeout=30_000)
    assert "Allow run_code?" in approval.inner_text()
    approval.get_by_role("button", name="Run").click()
    frame.get_by_text("ran: true").wait_for(timeout=30_000)
    card.get_by_role("button", name="Submit").click()
    agent_cell.get_by_text("Finished.").wait_for(timeout=60_000)
    wait_idle(page)
    answer = json.loads(result_text(tool_results(lab_model.requests[start + 1])[0]))
    assert answer == {"action": "submit", "state": {}}
