"""The approval policy after untrusted content, through whole in-process turns (nobody to
approve, as under papermill): the taint is the session's, a host it fetched from passes and
a new one asks, writing actions ask in auto too, standing grants allow what they name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_kernel.testing import call, reply, say, tool_use
from tests.support.calls import standing_grants
from tests.support.websites import Site


@pytest.fixture(scope="module")
def sites() -> Iterator[tuple[Site, Site]]:
    known, other = Site("127.0.0.2"), Site("127.0.0.3")
    yield known, other
    known.close()
    other.close()


def results(request: dict) -> list[dict]:
    return [b for b in request["messages"][-1]["content"] if b.get("type") == "tool_result"]


def web_turns(shell_agent, sites) -> None:
    """The web group on, both sites reachable, their hits forgotten."""
    for site in sites:
        site.hits.clear()
    config = shell_agent.agent.config
    config.tool_groups = ["code", "web"]
    config.fetch_allow = ["127.0.0.2", "127.0.0.3"]


def fetch_three(shell_agent, scripted_model, sites, mode: str) -> list[dict]:
    """One turn: fetch the known host, fetch it again, then fetch a host not fetched before."""
    known, other = sites
    web_turns(shell_agent, sites)
    scripted_model.add(
        reply(tool_use("fetch_url", {"url": known.url("/json")})),
        reply(tool_use("fetch_url", {"url": known.url("/page")}), tool_use("fetch_url", {"url": other.url("/json")})),
        say("done"),
    )
    shell_agent.ok("read them", approve=mode)
    first = results(scripted_model.requests[-2])
    return [*first, *results(scripted_model.requests[-1])]


def test_after_web_content_ask_mode_fetches_known_hosts_and_refuses_new_ones_unattended(
    shell_agent, scripted_model, sites
):
    known, other = sites
    first, again, new_host = fetch_three(shell_agent, scripted_model, sites, "ask")
    assert not first.get("is_error") and not again.get("is_error")  # the host this session fetched from
    assert (
        new_host["is_error"]
        and "needs the user's approval (--approve ask) and no user is present" in new_host["content"]
    )
    assert "fetch_url to a host not yet fetched in this session" in new_host["content"]
    assert known.hits == ["/json", "/page"] and other.hits == []


def test_read_only_refuses_every_fetch_after_web_content_and_auto_refuses_a_new_host_unattended(
    shell_agent, scripted_model, sites
):
    known, other = sites
    first, again, new_host = fetch_three(shell_agent, scripted_model, sites, "read-only")
    assert not first.get("is_error")
    assert again["is_error"] and new_host["is_error"] and "read-only" in again["content"]
    assert known.hits == ["/json"] and other.hits == []
    first, again, new_host = fetch_three(shell_agent, scripted_model, sites, "auto")
    assert not first.get("is_error") and not again.get("is_error")
    assert new_host["is_error"] and "fetch_url to a host this session has not read from" in new_host["content"]
    assert other.hits == []


def test_a_later_turn_of_the_session_asks_before_a_new_host(shell_agent, scripted_model, sites):
    """Taint belongs to the session: turn 2 ("go on") of a session that read a page in
    turn 1 asks before fetch_url to a host the session has not read from."""
    known, other = sites
    web_turns(shell_agent, sites)
    for mode in ("ask", "auto"):
        scripted_model.add(call("fetch_url", url=known.url("/page")), say("read it"))
        shell_agent.ok("read the page", approve=mode, new=f"web-{mode}")
        scripted_model.add(
            reply(
                tool_use("fetch_url", {"url": known.url("/json")}), tool_use("fetch_url", {"url": other.url("/json")})
            ),
            say("done"),
        )
        shell_agent.ok("go on", approve=mode)
        again, new_host = results(scripted_model.requests[-1])
        assert not again.get("is_error"), (mode, again)  # the host it read from in turn 1
        assert new_host["is_error"] and "no user is present" in new_host["content"], (mode, new_host)
    assert other.hits == []
    # A fresh session that read nothing fetches the first host without asking, in ask too.
    scripted_model.add(call("fetch_url", url=other.url("/json")), say("done"))
    shell_agent.ok("fetch it", approve="ask", new="fresh")
    assert not results(scripted_model.requests[-1])[0].get("is_error") and other.hits == ["/json"]


def test_auto_after_untrusted_content_refuses_writing_actions_unattended_and_keeps_local_analysis_free(
    shell_agent, scripted_model, sites
):
    known, _ = sites
    config = shell_agent.agent.config
    config.tool_groups = ["code", "data", "memory", "tools", "web"]
    config.fetch_allow = ["127.0.0.2"]
    # A session that read nothing untrusted: its writing actions run, nobody is asked.
    scripted_model.add(
        reply(tool_use("run_code", {"code": "clean = 1"}), tool_use("set_state", {"key": "k", "value": 1})),
        say("done"),
    )
    shell_agent.ok("work locally", new="local")
    assert not any(r.get("is_error") for r in results(scripted_model.requests[-1]))
    assert shell_agent.value("clean") == 1
    # After a page: in-kernel code and tool creation are refused; data writes and reading run.
    scripted_model.add(
        call("fetch_url", url=known.url("/page")),
        reply(
            tool_use("run_code", {"code": "steered = 1"}),
            tool_use(
                "create_tool",
                {"name": "t", "description": "d", "parameter_schema": {"type": "object"}, "code": "return 1"},
            ),
            tool_use("memory", {"action": "store", "content": "the page said hello"}),
            tool_use("set_state", {"key": "k", "value": 2}),
            tool_use("inspect_namespace", {}),
            tool_use("run_code", {"code": "6 * 7", "isolated": True}),
        ),
        say("done"),
    )
    cell = shell_agent.ok("read the page", new="web")
    code, tool, memory, state, inspect, boxed = results(scripted_model.requests[-1])
    assert code["is_error"] and tool["is_error"]
    assert "run_code changes things, and this session read untrusted content (fetch_url" in code["content"]
    assert "no user is present to give it" in code["content"]
    from agent_kernel.tools.isolation import isolation

    assert ("`isolated: true` (a sandbox with no network" in code["content"]) == isolation().sandboxed
    assert not any(r.get("is_error") for r in (memory, state, inspect))
    # In the bubblewrap sandbox an isolated run reaches nothing: it runs unasked. A plain
    # separate process can read the user's files: it asks like in-kernel code.
    assert bool(boxed.get("is_error")) != isolation().sandboxed
    assert "steered" not in shell_agent.shell.user_ns
    assert cell.lines.count("read untrusted content: writing actions are refused: nobody can approve") == 1


def test_standing_grants_allow_exactly_the_tools_and_hosts_they_name(shell_agent, scripted_model, sites, monkeypatch):
    known, other = sites
    other.hits.clear()
    config = shell_agent.agent.config
    config.tool_groups = ["code", "tools", "web"]
    config.fetch_allow = ["127.0.0.2", "127.0.0.3"]
    standing_grants(monkeypatch, tools=("run_code",), hosts=("127.0.0.3",))
    scripted_model.add(
        call("fetch_url", url=known.url("/page")),
        reply(
            tool_use("run_code", {"code": "granted = 1"}),
            tool_use(
                "create_tool",
                {"name": "t", "description": "d", "parameter_schema": {"type": "object"}, "code": "return 1"},
            ),
            tool_use("fetch_url", {"url": other.url("/json")}),
            tool_use("fetch_url", {"url": other.url("/json"), "method": "POST"}),
        ),
        say("done"),
    )
    cell = shell_agent.ok("read and act", new="job")
    assert (
        "read untrusted content: writing actions are refused: nobody can approve "
        "(standing grants: after untrusted content may: run_code; hosts: 127.0.0.3)"
    ) in cell.lines
    code, tool, fetched, posted = results(scripted_model.requests[-1])
    assert not code.get("is_error") and shell_agent.value("granted") == 1
    assert tool["is_error"] and "create_tool changes things" in tool["content"]
    assert not fetched.get("is_error")  # a granted host
    assert posted["is_error"]  # a request with a body writes: fetch_url is not a granted tool
    assert other.hits == ["/json"]


def test_without_the_sandbox_an_isolated_run_asks_like_kernel_code(shell_agent, scripted_model, sites, monkeypatch):
    from agent_kernel.tools.isolation import MODE_ENV, isolation

    known, _ = sites
    config = shell_agent.agent.config
    config.tool_groups = ["code", "web"]
    config.fetch_allow = ["127.0.0.2"]
    monkeypatch.setenv(MODE_ENV, "process")  # a separate process, not a sandbox: it can read files
    isolation.cache_clear()
    try:
        scripted_model.add(
            call("fetch_url", url=known.url("/page")), call("run_code", code="6 * 7", isolated=True), say("done")
        )
        shell_agent.ok("read and compute", new="web")
    finally:
        isolation.cache_clear()
    refused = results(scripted_model.requests[-1])[0]
    assert refused["is_error"] and "run_code changes things" in refused["content"]
    assert "isolated" not in refused["content"]  # not offered where it would not be a sandbox
