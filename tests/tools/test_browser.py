"""The browser group: whole turns in this process driving the system's Chromium against
pages served on loopback. ``site`` (127.0.0.2) is the host the tests allow with
``fetch_allow``; ``secret`` (127.0.0.1) is what a page must never reach: it records every
request, so "no hits" proves the proxy refused before anything was sent.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from agent_kernel.testing import reply, say, tool_use
from agent_kernel.tools.browser_driver import DRIVER, PROFILE_PREFIX
from tests.support.calls import offered, result_text, tool_results
from tests.support.jupyterlab import chromium_missing
from tests.support.websites import Server, Site

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))

BROWSER = ["code", "browser"]

JS_PAGE = """<html><head><title>Dashboard</title></head><body><div id=out>loading</div>
<script>setTimeout(() => { document.getElementById('out').textContent = 'Rendered by script: 42 orders'; }, 300);</script>
</body></html>"""
FORM_PAGE = """<html><body><form method=post action=/submit>
<input name=user id=user><input name=city id=city><button id=send>Send</button></form></body></html>"""
LOGIN_PAGE = """<html><body><form method=post action=/submit>
<input name=user id=user><input type=password name=password id=password><button>Log in</button></form></body></html>"""
DOWNLOAD_PAGE = """<html><body><a id=dl href=/file>report</a></body></html>"""


class BrowserSite(Site):
    """The allowed site with pages that need a browser."""

    def route(self, path: str, args: dict, headers: object) -> tuple[int, str, bytes, dict]:
        html = "text/html; charset=utf-8"
        if path == "/js":
            return 200, html, JS_PAGE.encode(), {}
        if path == "/form":
            return 200, html, FORM_PAGE.encode(), {}
        if path == "/login":
            return 200, html, LOGIN_PAGE.encode(), {}
        if path == "/framed":  # a page that embeds another host's form
            return 200, html, f"<html><body><iframe src='{args['from'][0]}/login'></iframe></body></html>".encode(), {}
        if path == "/submit":
            return 200, html, b"<html><title>Thanks</title><body>Received</body></html>", {}
        if path == "/reach":  # sub-resources pointing at another loopback address
            other = args["to"][0]
            page = (
                f"<html><body><img src='{other}/img.png'><div id=done></div><script>"
                f"fetch('{other}/fetch').catch(() => null).finally(() => {{"
                f"const ws = new WebSocket('{other.replace('http', 'ws')}/ws');"
                "const end = () => { document.getElementById('done').textContent = 'finished'; };"
                "ws.onerror = end; ws.onclose = end; });</script></body></html>"
            )
            return 200, html, page.encode(), {}
        if path == "/download":
            return 200, html, DOWNLOAD_PAGE.encode(), {}
        if path == "/file":
            return 200, "application/octet-stream", b"x" * 1000, {"content-disposition": "attachment; filename=r.bin"}
        return super().route(path, args, headers)


@pytest.fixture(scope="module")
def site() -> Iterator[BrowserSite]:
    server = BrowserSite("127.0.0.2")
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _fresh(site: Site, secret: Server) -> Iterator[None]:
    site.hits.clear()
    site.received.clear()
    secret.hits.clear()
    DRIVER.submit(DRIVER.close_all).result(timeout=30)  # another test of this worker may have left one
    yield
    DRIVER.submit(DRIVER.close_all).result(timeout=30)  # the next test's session starts its own


def browser_profiles() -> list[str]:
    """The profile directories of the running Chromium processes this process started."""
    found: set[str] = set()
    for child in psutil.Process().children(recursive=True):
        try:
            found |= {
                a.split("=", 1)[1] for a in child.cmdline() if a.startswith("--user-data-dir=") and PROFILE_PREFIX in a
            }
        except psutil.Error:
            continue
    return sorted(found)


def test_the_browser_group_is_off_by_default(shell_agent, scripted_model):
    scripted_model.add(say("ok"))
    shell_agent.ok("hello")
    assert not any(name.startswith("browser_") for name in offered(scripted_model.requests[0]))
    config = shell_agent.agent.config
    config.tool_groups = BROWSER
    scripted_model.add(say("ok"))
    shell_agent.ok("hello again")
    assert {"browser_navigate", "browser_click", "browser_close"} <= set(offered(scripted_model.requests[1]))


def grant_writing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clicking and typing after reading a page are writing actions: with nobody present,
    this run's standing grant (a job's, set by its owner) lets them run."""
    monkeypatch.setenv("AGENT_KERNEL_GRANTS", json.dumps({"after_untrusted": ["browser_type", "browser_click"]}))


def test_a_script_page_a_form_and_a_screenshot_then_close_leaves_nothing(
    shell_agent, scripted_model, site, monkeypatch
):
    grant_writing(monkeypatch)
    config = shell_agent.agent.config
    config.tool_groups = BROWSER
    config.fetch_allow = ["127.0.0.2"]
    scripted_model.add(
        reply(
            tool_use("browser_navigate", {"url": site.url("/js")}),
            tool_use("browser_wait_for", {"selector": "text=Rendered by script", "timeout_s": 5}),
            tool_use("browser_text", {"selector": "#out"}),
            tool_use("browser_screenshot", {}),
        ),
        reply(
            tool_use("browser_navigate", {"url": site.url("/form")}),
            tool_use("browser_type", {"selector": "#user", "text": "ada"}),
            tool_use("browser_type", {"selector": "#city", "text": "London", "submit": True}),
        ),
        say("Done."),
    )
    shell_agent.ok("look at the dashboard and send the form")
    navigated, waited, text, shot = tool_results(scripted_model.requests[1])
    assert not any(r.get("is_error") for r in (navigated, waited, text, shot)), [
        result_text(r) for r in (navigated, waited, text, shot)
    ]
    page = json.loads(result_text(navigated))
    assert page["status"] == 200 and page["url"] == site.url("/js") and "Dashboard" in page["title"]
    read = json.loads(result_text(text))
    assert "Rendered by script: 42 orders" in read["text"]
    assert read["text"].startswith(f'<untrusted_content source="browser {site.url("/js")}">')
    images = [b for b in shot["content"] if b.get("type") == "image"]
    assert len(images) == 1 and images[0]["source"]["media_type"] == "image/png"
    assert json.loads(result_text(shot))["screenshot"] == "attached below"

    *_, submitted = tool_results(scripted_model.requests[2])
    assert not submitted.get("is_error"), result_text(submitted)
    assert json.loads(result_text(submitted))["url"] == site.url("/submit")
    assert [r["body"] for r in site.received] == ["user=ada&city=London"]

    profiles = browser_profiles()
    assert len(profiles) == 1 and Path(profiles[0]).is_dir()
    scripted_model.add(reply(tool_use("browser_close", {})), say("Closed."))
    shell_agent.ok("close the browser")
    assert json.loads(result_text(tool_results(scripted_model.requests[4])[0])) == {"closed": True}
    deadline = time.monotonic() + 10
    while browser_profiles() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert browser_profiles() == [] and not Path(profiles[0]).exists()


def test_without_fetch_allow_the_same_pages_are_refused(shell_agent, scripted_model, site):
    config = shell_agent.agent.config
    config.tool_groups = BROWSER
    config.fetch_allow = []
    scripted_model.add(
        reply(
            tool_use("browser_navigate", {"url": site.url("/js")}),
            tool_use("browser_navigate", {"url": site.url("/form")}),
        ),
        say("Refused."),
    )
    shell_agent.ok("look at the dashboard")
    for result in tool_results(scripted_model.requests[1]):
        assert result.get("is_error")
        assert "127.0.0.2 is a loopback address" in result_text(result)
        assert "fetch_allow" in result_text(result)
    assert site.hits == []


def test_a_redirect_a_sub_resource_and_a_websocket_to_another_local_address_are_refused(
    shell_agent, scripted_model, site, secret
):
    config = shell_agent.agent.config
    config.tool_groups = BROWSER
    config.fetch_allow = ["127.0.0.2"]
    other = f"http://127.0.0.1:{secret.port}"
    scripted_model.add(
        reply(
            tool_use("browser_navigate", {"url": site.url(f"/redirect?to={other}/moved")}),
            tool_use("browser_navigate", {"url": site.url(f"/reach?to={other}")}),
            tool_use("browser_wait_for", {"selector": "text=finished", "timeout_s": 10}),
        ),
        say("Refused."),
    )
    shell_agent.ok("follow the links")
    redirected, reached, waited = tool_results(scripted_model.requests[1])
    assert redirected.get("is_error") and "127.0.0.1 is a loopback address" in result_text(redirected)
    assert not reached.get("is_error") and not waited.get("is_error"), result_text(waited)
    refused = json.loads(result_text(reached)).get("refused_requests", []) + json.loads(result_text(waited)).get(
        "refused_requests", []
    )
    # Chromium's own background requests (a Google sign-in host) may be refused here too.
    local = [r for r in refused if "127.0.0.1 is a loopback address" in r]
    assert {f"{other}/fetch", f"{other}/img.png", f"CONNECT 127.0.0.1:{secret.port}"} <= {
        r.split(": ")[0].removeprefix("Refused ") for r in local
    }
    assert secret.hits == []
    assert "/redirect" in site.hits[0] and any(h.startswith("/reach") for h in site.hits)


def test_downloads_are_refused(shell_agent, scripted_model, site, monkeypatch):
    grant_writing(monkeypatch)
    config = shell_agent.agent.config
    config.tool_groups = BROWSER
    config.fetch_allow = ["127.0.0.2"]
    scripted_model.add(
        reply(
            tool_use("browser_navigate", {"url": site.url("/file")}),
            tool_use("browser_navigate", {"url": site.url("/download")}),
            tool_use("browser_click", {"selector": "#dl"}),
        ),
        say("No download."),
    )
    shell_agent.ok("download the report")
    direct, _, clicked = tool_results(scripted_model.requests[1])
    assert direct.get("is_error") and "refuses downloads" in result_text(direct)
    assert not clicked.get("is_error"), result_text(clicked)
    assert json.loads(result_text(clicked))["downloads_refused"] == [site.url("/file")]
    (profile,) = browser_profiles()
    assert not [p for p in Path(profile).rglob("*") if p.is_file() and p.stat().st_size == 1000]


def test_without_chromium_the_tools_say_how_to_install_it(shell_agent, scripted_model, site, monkeypatch):
    monkeypatch.setenv("CHROMIUM", "/nonexistent/chromium")
    config = shell_agent.agent.config
    config.tool_groups = BROWSER
    config.fetch_allow = ["127.0.0.2"]
    scripted_model.add(reply(tool_use("browser_navigate", {"url": site.url("/js")})), say("No browser."))
    shell_agent.ok("look")
    (result,) = tool_results(scripted_model.requests[1])
    assert result.get("is_error") and "make install" in result_text(result)


def test_clicking_and_typing_count_as_writing(shell_agent, scripted_model, site):
    config = shell_agent.agent.config
    config.tool_groups = BROWSER
    config.approve = "read-only"
    scripted_model.add(say("ok"))
    shell_agent.ok("look")
    names = set(offered(scripted_model.requests[0]))
    assert {"browser_navigate", "browser_text", "browser_screenshot", "browser_wait_for"} <= names
    assert not names & {"browser_click", "browser_type"}


def test_in_ask_mode_reading_runs_and_clicks_or_a_new_host_after_a_page_need_approval(
    shell_agent, scripted_model, site
):
    config = shell_agent.agent.config
    config.tool_groups = BROWSER
    config.fetch_allow = ["127.0.0.2", "127.0.0.3"]
    scripted_model.add(
        reply(tool_use("browser_navigate", {"url": site.url("/form")})),
        reply(tool_use("browser_text", {}), tool_use("browser_navigate", {"url": site.url("/js")})),
        reply(
            tool_use("browser_navigate", {"url": f"http://127.0.0.3:{site.port}/js"}),
            tool_use("browser_type", {"selector": "#user", "text": "ada"}),
            tool_use("browser_click", {"selector": "#send"}),
        ),
        say("Waiting for the user."),
    )
    shell_agent.ok("send the form", approve="ask")
    assert not tool_results(scripted_model.requests[1])[0].get("is_error")
    assert not any(r.get("is_error") for r in tool_results(scripted_model.requests[2]))  # same host: reading
    for refused in tool_results(scripted_model.requests[3]):
        assert refused["is_error"] is True and "needs the user's approval" in result_text(refused)
        assert f"browser {site.url('/')}" in result_text(refused)  # the page read is named
    assert site.received == []  # the form was never sent


def test_a_new_session_closes_the_browser_of_the_one_left_behind(shell_agent, scripted_model, site):
    config = shell_agent.agent.config
    config.tool_groups = BROWSER
    config.fetch_allow = ["127.0.0.2"]
    scripted_model.add(reply(tool_use("browser_navigate", {"url": site.url("/js")})), say("Opened."))
    shell_agent.ok("open the dashboard")
    (profile,) = browser_profiles()
    scripted_model.add(say("A fresh start."))
    shell_agent.ok("something else", new=True)
    deadline = time.monotonic() + 10
    while (browser_profiles() or Path(profile).exists()) and time.monotonic() < deadline:
        time.sleep(0.1)  # closed on the browser thread, without waiting
    assert browser_profiles() == [] and not Path(profile).exists()


def test_at_exit_the_browser_closes_and_its_profile_is_deleted(tmp_path):
    script = (
        "from agent_kernel.tools.browser_driver import DRIVER\n"
        "session = DRIVER.submit(lambda: DRIVER.session('s', lambda: [], 10**6)).result(timeout=60)\n"
        "print(session.profile, flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    profile = done.stdout.strip()
    assert PROFILE_PREFIX in profile and not Path(profile).exists()
    assert not [p for p in psutil.process_iter(["cmdline"]) if any(profile in a for a in (p.info["cmdline"] or []))]


def test_a_password_is_typed_only_into_a_page_on_its_host_and_never_reaches_the_model(
    shell_agent, scripted_model, site, monkeypatch
):
    passwords = {
        "SITE_PASSWORD": "pw-4f9c2a7e1b",
        "OTHER_PASSWORD": "pw-other-8d2e6c",
        "LOOSE_PASSWORD": "pw-loose-3a7f1d",
    }
    for name, value in passwords.items():
        monkeypatch.setenv(name, value)
    grant_writing(monkeypatch)
    config = shell_agent.agent.config
    config.tool_groups = BROWSER
    config.secret_env = list(passwords)
    config.secret_hosts = {"SITE_PASSWORD": ["127.0.0.2"], "OTHER_PASSWORD": ["127.0.0.3"]}
    config.fetch_allow = ["127.0.0.2", "127.0.0.3"]
    site.received.clear()
    framing = BrowserSite("127.0.0.3")
    scripted_model.add(
        reply(
            tool_use("browser_navigate", {"url": site.url("/login")}),
            tool_use("browser_type", {"selector": "#user", "text": "ada"}),
            tool_use("browser_type", {"selector": "#password", "text": "{secret:OTHER_PASSWORD}"}),  # bound elsewhere
            tool_use("browser_type", {"selector": "#password", "text": "{secret:LOOSE_PASSWORD}"}),  # bound to none
            tool_use("browser_type", {"selector": "#password", "text": "{secret:SITE_PASSWORD}", "submit": True}),
            tool_use("browser_type", {"selector": "#user", "text": "{secret:NOT_DECLARED}"}),
            # The bound host's page, with a frame from another host: the frame's field is refused.
            tool_use("browser_navigate", {"url": site.url(f"/framed?from={framing.url()[:-1]}")}),
            tool_use(
                "browser_type",
                {
                    "selector": "iframe >> internal:control=enter-frame >> #password",
                    "text": "{secret:SITE_PASSWORD}",
                    "submit": True,
                },
            ),
        ),
        say("Logged in."),
    )
    try:
        shell_agent.ok("log in")
    finally:
        framing.close()
    navigated, user, other, loose, typed, unknown, framed, in_frame = tool_results(scripted_model.requests[1])
    assert not framed.get("is_error"), result_text(framed)
    assert in_frame.get("is_error") and result_text(in_frame).startswith(
        f"SITE_PASSWORD is bound to 127.0.0.2; it is never sent to 127.0.0.3:{framing.port}."
    )
    assert framing.received == []
    assert not any(r.get("is_error") for r in (navigated, user, typed)), [
        result_text(r) for r in (navigated, user, typed)
    ]
    assert other.get("is_error") and result_text(other).startswith(
        f"OTHER_PASSWORD is bound to 127.0.0.3; it is never sent to 127.0.0.2:{site.port}."
    )
    assert loose.get("is_error") and "LOOSE_PASSWORD is bound to no host yet, and no user is present" in result_text(
        loose
    )
    assert unknown.get("is_error") and "No declared secret 'NOT_DECLARED'" in result_text(unknown)
    assert [r["body"] for r in site.received] == ["user=ada&password=pw-4f9c2a7e1b"]
    assert not any(value in json.dumps(request) for request in scripted_model.requests for value in passwords.values())
