"""The approval policy's fetch_url rule after web content, through whole in-process turns
(nobody to approve, as under papermill): a host the turn fetched from passes, a new one asks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_kernel.testing import reply, say, tool_use

from .websites import Site


@pytest.fixture(scope="module")
def sites() -> Iterator[tuple[Site, Site]]:
    known, other = Site("127.0.0.2"), Site("127.0.0.3")
    yield known, other
    known.close()
    other.close()


def results(request: dict) -> list[dict]:
    return [b for b in request["messages"][-1]["content"] if b.get("type") == "tool_result"]


def fetch_three(shell_agent, scripted_model, sites, mode: str) -> list[dict]:
    """One turn: fetch the known host, fetch it again, then fetch a host not fetched before."""
    known, other = sites
    known.hits.clear()
    other.hits.clear()
    config = shell_agent.agent.config
    config.tool_groups = ["code", "web"]
    config.fetch_allow = ["127.0.0.2", "127.0.0.3"]
    scripted_model.add(
        reply(tool_use("fetch_url", {"url": known.url("/json")})),
        reply(tool_use("fetch_url", {"url": known.url("/page")}), tool_use("fetch_url", {"url": other.url("/json")})),
        say("done"),
    )
    shell_agent.ok("read them", approve=mode)
    first = results(scripted_model.requests[-2])
    return [*first, *results(scripted_model.requests[-1])]


def test_after_web_content_ask_mode_fetches_known_hosts_and_refuses_new_ones_unattended(shell_agent, scripted_model, sites):
    known, other = sites
    first, again, new_host = fetch_three(shell_agent, scripted_model, sites, "ask")
    assert not first.get("is_error") and not again.get("is_error")  # the host this turn fetched from
    assert new_host["is_error"] and "needs the user's approval (--approve ask) and no user is present" in new_host["content"]
    assert "fetch_url to a host not yet fetched in this turn" in new_host["content"]
    assert known.hits == ["/json", "/page"] and other.hits == []


def test_read_only_refuses_every_fetch_after_web_content_and_auto_runs_them(shell_agent, scripted_model, sites):
    known, other = sites
    first, again, new_host = fetch_three(shell_agent, scripted_model, sites, "read-only")
    assert not first.get("is_error")
    assert again["is_error"] and new_host["is_error"] and "read-only" in again["content"]
    assert known.hits == ["/json"] and other.hits == []
    outcomes = fetch_three(shell_agent, scripted_model, sites, "auto")
    assert not any(o.get("is_error") for o in outcomes) and other.hits == ["/json"]
