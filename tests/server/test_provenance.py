"""The tainted-items API in a real Jupyter server over a real DuckDB file: the list the
Agent panel shows, clearing one item, a kind or all, the 400s, and authentication."""

from __future__ import annotations

import http.cookiejar
import urllib.request

import pytest

from agent_kernel.store import Store, provenance
from agent_kernel.store.provenance import Provenance
from agent_kernel.store.sessions import Sessions
from tests.support.jupyterlab import lab_server
from tests.support.server import API, SERVER_CONFIG

PAGE = "https://hostile.example/page"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("server")
    config = SERVER_CONFIG | {"AgentKernelServer": {"scheduler": False}}
    with lab_server(base, config=config) as lab:
        yield lab, Store(base / "agent.duckdb")


def plant(store: Store) -> str:
    """A session that read a hostile page and then kept a tool, a memory and a skill;
    the person's own write of a prompt. Returns the session's id."""
    with store.connect() as con:
        session = Sessions(con).create("research", notebook=None)
        after_page = Provenance(session.id, 2, (PAGE, "mcp:notes/search"))
        provenance.record(con, "tool", "collect_env", after_page, version=1)
        provenance.record(con, "memory", "deploy steps", after_page)
        provenance.record(con, "skill", "summarise", Provenance(session.id, 3, (PAGE,)))
        provenance.record(con, "prompt", "instructions", Provenance.person(), version=4)
        provenance.record(con, "notepad", session.id, Provenance(session.id, 1, ()))
    return session.id


def test_the_list_shows_each_tainted_item_with_where_it_came_from(client, server):
    _, store = server
    status, reply = client.call("GET", f"{API}/tainted")
    assert status == 200 and reply["items"] == [] and reply["total"] == 0 and "tool" in reply["kinds"]
    session_id = plant(store)

    status, reply = client.call("GET", f"{API}/tainted")
    assert status == 200 and reply["total"] == 3
    listed = {(item["kind"], item["name"]): item for item in reply["items"]}
    assert set(listed) == {("tool", "collect_env"), ("memory", "deploy steps"), ("skill", "summarise")}
    tool = listed["tool", "collect_env"]
    assert tool["session"] == "research" and tool["session_id"] == session_id and tool["turn"] == 2
    assert tool["sources"] == [PAGE, "mcp:notes/search"] and tool["version"] == 1 and tool["tainted"]
    assert tool["created_at"]  # when it was written

    # One item, then a kind, then everything: each clear is the person's review.
    status, reply = client.call("POST", f"{API}/tainted/clear", {"kind": "tool", "name": "collect_env"})
    assert status == 200 and reply["cleared"] == 1
    status, reply = client.call("GET", f"{API}/tainted")
    left = {(i["kind"], i["name"]) for i in reply["items"]}
    assert left == {("memory", "deploy steps"), ("skill", "summarise")}
    with store.connect() as con:
        cleared = provenance.latest(con, "tool", ["collect_env"])["collect_env"]
        assert not cleared.tainted  # and the row names the request that cleared it, and who sent it
        assert cleared.cleared_by.startswith(
            "server: POST /agent-kernel/api/tainted/clear kind=tool name=collect_env user="
        )
        assert provenance.latest(con, "memory", ["deploy steps"])["deploy steps"].tainted
    status, reply = client.call("POST", f"{API}/tainted/clear", {"kind": "tool", "name": "collect_env"})
    assert status == 200 and reply["cleared"] == 0  # already reviewed
    status, reply = client.call("POST", f"{API}/tainted/clear", {"kind": "skill"})
    assert status == 200 and reply["cleared"] == 1
    status, reply = client.call("POST", f"{API}/tainted/clear", {"all": True})
    assert status == 200 and reply["cleared"] == 1
    status, reply = client.call("GET", f"{API}/tainted")
    assert reply["items"] == [] and reply["total"] == 0


BAD_BODIES = [
    ({}, "Send {"),
    ({"name": "x"}, "Send {"),
    ({"kind": "tool", "name": "x", "extra": 1}, "Send {"),
    ({"all": "yes"}, "Send {"),
    ({"all": True, "kind": "tool"}, "Send {"),
    ({"all": False}, "Send {"),
    ({"kind": "bogus", "name": "x"}, "`kind` must be one of tool, library, skill, memory"),
    ({"kind": ["tool"], "name": "x"}, "`kind` must be one of"),
    ({"kind": "tool", "name": 5}, "`name` must be a non-empty string of at most 200 characters"),
    ({"kind": "tool", "name": ""}, "`name` must be a non-empty string"),
    ({"kind": "tool", "name": "x" * 201}, "`name` must be a non-empty string of at most 200 characters"),
    ([{"kind": "tool"}], "The request body must be a JSON object."),
]


@pytest.mark.parametrize(("body", "message"), BAD_BODIES)
def test_a_bad_clear_request_is_a_400_with_a_message(client, body, message):
    status, reply = client.call("POST", f"{API}/tainted/clear", body)
    assert status == 400 and message in reply["message"], reply


def test_a_body_that_is_not_json_is_a_400(client):
    status, reply = client.call("POST", f"{API}/tainted/clear", raw=b"{not json")
    assert status == 400 and reply["message"].startswith("The request body is not JSON")


def test_the_routes_need_the_servers_token_and_a_browser_write_needs_the_xsrf_token(client, server):
    lab, _ = server
    for method, route, body in [("GET", "tainted", None), ("POST", "tainted/clear", {"all": True})]:
        status, _ = client.call(method, f"{API}/{route}", body, token=False)
        assert status == 403, (method, route)
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    browser.open(f"{lab.url}/lab?token={lab.token}", timeout=30).read()
    xsrf = {c.name: c.value for c in jar}["_xsrf"]
    status, reply = client.call("GET", f"{API}/tainted", token=False, opener=browser)
    assert status == 200 and "items" in reply
    status, reply = client.call("POST", f"{API}/tainted/clear", {"all": True}, token=False, opener=browser)
    assert status == 403 and "xsrf" in reply["message"].lower()
    status, reply = client.call(
        "POST", f"{API}/tainted/clear", {"all": True}, token=False, opener=browser,
        headers={"X-XSRFToken": xsrf},
    )  # fmt: skip
    assert status == 200 and reply["cleared"] >= 0
