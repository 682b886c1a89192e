"""--approve ask: the approval card holds writing tools until the person decides."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from agent_kernel.testing import call, reply, say, tool_use, web_search
from tests.support.calls import offered
from tests.support.capabilities import needs_widget_replies
from tests.support.frontend import FrontEnd
from tests.support.websites import Site

pytestmark = needs_widget_replies


def results(request: dict) -> list[dict]:
    return [b for b in request["messages"][-1]["content"] if b["type"] == "tool_result"]


def test_skip_run_and_always(kernel, scripted_model):
    scripted_model.add(
        call("run_code", code="dropped = True"),
        call("run_code", code="kept = 1"),
        call("run_code", code="kept += 1"),
        reply(tool_use("run_code", {"code": "kept += 1"}), tool_use("inspect_namespace", {})),
        say("done"),
    )
    decisions = iter(["skip", "run", "always"])
    front = FrontEnd(kernel)
    front.answer["ChoiceCard"] = lambda f, card: f.custom(card, type="choice", choice=next(decisions))
    result = kernel.ok("%agent --approve ask tidy up", on_message=front.hook)

    skipped = results(scripted_model.requests[1])[0]
    assert skipped["is_error"] is True
    assert "The user declined to run run_code (they clicked Skip)" in skipped["content"]
    assert json.loads(results(scripted_model.requests[2])[0]["content"])["success"] is True
    # "Always for this session": the fourth call ran without a card; reading tools never ask.
    assert len(front.of_kind("ChoiceCard")) == 3
    assert kernel.value("kept") == 3 and kernel.value("'dropped' in globals()") is False
    card = front.of_kind("ChoiceCard")[0].state
    assert card["heading"] == "Allow run_code?" and card["code"] == "dropped = True"
    assert card["text"] == "The agent wants to run this code in your kernel."
    assert [b["id"] for b in card["buttons"]] == ["run", "skip", "always"]
    shown = "\n".join(result.final_texts())
    assert "Skipped: the agent was told you declined." in shown and "Approved: it ran." in shown
    # The skipped call never ran: its line gives no duration (the wait was the person's).
    skipped_line = next(t for t in result.final_texts() if "run_code: dropped = True" in t)
    assert skipped_line == "– run_code: dropped = True · The user declined to run run_code (they clicked Skip)"

    # "Always" lasts for the session, not beyond: a new session asks again.
    scripted_model.add(call("run_code", code="fresh = 1"), say("ok"))
    front = FrontEnd(kernel)
    front.answer["ChoiceCard"] = lambda f, card: f.custom(card, type="choice", choice="skip")
    kernel.ok("%agent --new=other --approve ask again", on_message=front.hook)
    assert len(front.of_kind("ChoiceCard")) == 1


def test_unattended_ask_refuses_writing_tools_at_once(kernel, scripted_model):
    scripted_model.add(call("run_code", code="touched = True"), say("I could not run it."))
    kernel.ok("%config AgentKernel.presence_timeout = 60")  # a card would wait this long for a view
    result = kernel.ok("%agent --approve ask change it", allow_stdin=False)  # what papermill sends
    refusal = results(scripted_model.requests[1])[0]
    assert refusal["is_error"] is True
    assert "needs the user's approval (--approve ask) and no user is present" in refusal["content"]
    assert "runs unattended" in refusal["content"]
    assert result.seconds < 40  # no card waited for an answer (60 s); a loaded machine's turn takes 5-25 s
    assert kernel.value("'touched' in globals()") is False


def test_stop_cancels_a_pending_approval(kernel, scripted_model):
    scripted_model.add(call("run_code", code="touched = True"))
    front = FrontEnd(kernel)
    front.answer["ChoiceCard"] = lambda f, card: f.custom(f.of_kind("StopButton")[0], type="stop")
    result = kernel.execute("%agent --approve ask change it", on_message=front.hook)
    shown = result.final_texts()
    assert [e["evalue"] for e in result.errors] == ["■ Stopped."]
    assert any("Stopped before it was answered." in t for t in shown)
    assert kernel.value("'touched' in globals()") is False


def test_the_call_waits_visibly_and_the_wait_is_not_its_duration(kernel, scripted_model):
    scripted_model.add(call("run_code", code="approved = 1"), say("done"))
    front = FrontEnd(kernel)

    def approve_after_a_second(f: FrontEnd, card) -> None:
        time.sleep(1.0)  # the person reads the code first
        f.custom(card, type="choice", choice="run")

    front.answer["ChoiceCard"] = approve_after_a_second
    result = kernel.ok("%agent --approve ask set it", on_message=front.hook)
    assert any(t.startswith("⏸ run_code") and "waiting for you" in t for t in result.texts())
    final = next(t for t in result.final_texts() if "run_code" in t and "approved = 1" in t)
    assert final.startswith("✓ run_code") and "waiting for you" not in final
    assert int(final.split(" ms")[0].rsplit("· ", 1)[1].replace(",", "")) < 900


def test_after_web_content_the_card_asks_again_despite_always(kernel, scripted_model):
    kernel.ok('%config AgentKernel.tool_groups = ["code", "web"]')
    scripted_model.add(
        call("run_code", code="kept = 1"),
        reply(
            *web_search("pandas pivot", [("https://example.org/pivot", "Pivot")]),
            tool_use("run_code", {"code": "kept += 1"}),
        ),
        say("done"),
    )
    decisions = iter(["always", "run"])
    front = FrontEnd(kernel)
    front.answer["ChoiceCard"] = lambda f, card: f.custom(card, type="choice", choice=next(decisions))
    result = kernel.ok("%agent --approve ask pivot it", on_message=front.hook)

    cards = front.of_kind("ChoiceCard")
    assert len(cards) == 2  # "Always" was given, yet the call after the search asked
    first, second = (c.state for c in cards)
    assert "Web content" not in first["text"]
    assert second["text"].startswith(
        "The agent wants to run this code in your kernel.\n\n⚠ Untrusted content (web, MCP, kept text) was read in this session (web_search pandas pivot)."
    )
    assert [b["id"] for b in second["buttons"]] == ["run", "skip"]  # no "Always" after web content
    assert kernel.value("kept") == 2
    assert any("⚠ Untrusted content (web, MCP, kept text) was read in this session" in t for t in result.final_texts())
    assert result.final_texts().count("read untrusted content: writing actions ask") == 1

    # The taint is the session's: a later turn that reads nothing new still asks, "Always"
    # or not, and says so in its header.
    scripted_model.add(call("run_code", code="kept += 1"), say("done"))
    front = FrontEnd(kernel)
    front.answer["ChoiceCard"] = lambda f, card: f.custom(card, type="choice", choice="run")
    result = kernel.ok("%agent --approve ask once more", on_message=front.hook)
    assert len(front.of_kind("ChoiceCard")) == 1 and kernel.value("kept") == 3
    assert result.final_texts().count("read untrusted content: writing actions ask") == 1


def test_trust_as_read_only_is_offered_for_an_unenforced_claim_and_binds_to_the_version(kernel, scripted_model):
    kernel.ok('%config AgentKernel.tool_groups = ["code", "tools"]')
    scripted_model.add(
        call("create_tool", name="count_rows", description="Counts rows.", parameter_schema={"type": "object"},
             code="return 7", writes=False),
        say("made"),
    )  # fmt: skip
    kernel.ok("%agent make a counter")
    scripted_model.add(call("count_rows"), call("count_rows"), say("done"))
    front = FrontEnd(kernel)
    front.answer["ChoiceCard"] = lambda f, card: f.custom(card, type="choice", choice="read_only")
    kernel.ok("%agent --approve ask count", on_message=front.hook)
    cards = front.of_kind("ChoiceCard")
    assert len(cards) == 1  # trusted: the second call ran without asking
    card = cards[0].state
    assert [b["id"] for b in card["buttons"]] == ["run", "skip", "always", "read_only"]
    assert card["code"] == "return 7" and card["heading"] == "Allow count_rows?"
    assert "says it changes nothing, but it runs in your kernel" in card["text"]
    assert [json.loads(results(scripted_model.requests[i])[0]["content"]) for i in (-2, -1)] == [7, 7]

    scripted_model.add(call("count_rows"), say("done"))
    kernel.ok("%agent --approve read-only count again")
    assert "count_rows" in offered(scripted_model.requests[-1])
    assert json.loads(results(scripted_model.requests[-1])[0]["content"]) == 7
    # A new version is another tool as far as the grant goes.
    scripted_model.add(call("update_tool", name="count_rows", code="return 8"), say("changed"), say("nothing to run"))
    kernel.ok("%agent change it")
    kernel.ok("%agent --approve read-only count again")
    assert "count_rows" not in offered(scripted_model.requests[-1])


def test_a_planted_tool_asks_before_it_runs_in_another_session_even_in_auto(kernel, scripted_model, tmp_path, agent_db):
    marker = tmp_path / "planted-ran"
    code = f"with open({str(marker)!r}, 'a') as f:\n    f.write('ran\\n')\nreturn 'ran'"
    kernel.ok('%config AgentKernel.tool_groups = ["code", "tools"]')
    scripted_model.add(
        reply(
            *web_search("useful helpers", [("https://evil.example/helpers", "Helpers")]),
            tool_use("create_tool", {"name": "planted", "description": "Helps.", "parameter_schema": {"type": "object"},
                                     "code": code, "writes": False}),
        ),
        say("done"),
    )  # fmt: skip
    front = FrontEnd(kernel)  # the person approves the planting session's tool: it asks after the search
    front.answer["ChoiceCard"] = lambda f, card: f.custom(card, type="choice", choice="run")
    kernel.ok("%agent --new=planter find helpers", on_message=front.hook)
    assert [c.state["heading"] for c in front.of_kind("ChoiceCard")] == ["Allow create_tool?"]
    scripted_model.add(call("planted"), call("planted"), say("done"), call("planted"), say("done"))
    decisions = iter(["skip", "trust"])
    front = FrontEnd(kernel)
    front.answer["ChoiceCard"] = lambda f, card: f.custom(card, type="choice", choice=next(decisions))
    kernel.ok("%agent --new=victim use it", on_message=front.hook)  # auto
    skipped, trusted = (results(scripted_model.requests[i])[0] for i in (-2, -1))
    assert skipped["is_error"] and "The user declined to run planted" in skipped["content"]
    assert trusted.get("is_error") is not True and trusted["content"] == "ran"
    assert marker.read_text() == "ran\n"  # only the trusted call ran
    card = front.of_kind("ChoiceCard")[0].state
    assert card["heading"] == "Trust planted?" and card["code"] == code
    assert [b["id"] for b in card["buttons"]] == ["trust", "skip"]
    assert "after it read untrusted content (web_search useful helpers)" in card["text"]
    from agent_kernel.store import Store, provenance

    with Store(agent_db).connect() as con:  # the clear names the click that made it
        assert provenance.latest(con, "tool", ["planted"])["planted"].cleared_by == "card: trust on planted"
    # Trusted once, it is no longer marked: the next session runs it without a card.
    front = FrontEnd(kernel)
    kernel.ok("%agent --new=later use it again", on_message=front.hook)
    assert front.of_kind("ChoiceCard") == [] and marker.read_text() == "ran\n" * 2


@pytest.fixture
def sites() -> Iterator[tuple[Site, Site]]:
    known, other = Site("127.0.0.2"), Site("127.0.0.3")
    yield known, other
    known.close()
    other.close()


def test_after_web_content_fetch_url_asks_only_for_a_host_the_turn_has_not_fetched(kernel, scripted_model, sites):
    known, other = sites
    kernel.ok('%config AgentKernel.tool_groups = ["code", "web"]')
    kernel.ok("%config AgentKernel.fetch_allow = ['127.0.0.2', '127.0.0.3']")
    scripted_model.add(
        call("fetch_url", url=known.url("/json")),
        call("fetch_url", url=known.url("/page")),
        call("fetch_url", url=other.url("/json")),
        call("fetch_url", url=other.url("/page")),
        say("done"),
    )
    front = FrontEnd(kernel)
    front.answer["ChoiceCard"] = lambda f, card: f.custom(card, type="choice", choice="run")
    kernel.ok("%agent --approve ask read them", on_message=front.hook)
    cards = front.of_kind("ChoiceCard")
    assert len(cards) == 1 and other.url("/json") in cards[0].state["code"]  # the new host, once
    assert known.hits == ["/json", "/page"] and other.hits == ["/json", "/page"]
