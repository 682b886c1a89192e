"""--approve ask: the approval card holds writing tools until the person decides."""

from __future__ import annotations

import json
import time

from agent_kernel.testing import call, reply, say, tool_use, web_search

from .capabilities import needs_widget_replies
from .frontend import FrontEnd

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
    kernel.ok("%config AgentKernel.presence_timeout = 30")  # a card would wait this long for a view
    result = kernel.ok("%agent --approve ask change it", allow_stdin=False)  # what papermill sends
    refusal = results(scripted_model.requests[1])[0]
    assert refusal["is_error"] is True
    assert "needs the user's approval (--approve ask) and no user is present" in refusal["content"]
    assert "runs unattended" in refusal["content"]
    assert result.seconds < 15  # no card waited for an answer (30 s)
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
    assert second["text"].startswith("The agent wants to run this code in your kernel.\n\n⚠ Web content was read in this turn (web_search pandas pivot).")
    assert [b["id"] for b in second["buttons"]] == ["run", "skip"]  # no "Always" after web content
    assert kernel.value("kept") == 2
    assert any("⚠ Web content was read in this turn" in t for t in result.final_texts())

    # A turn without web content: "Always for this session" holds again.
    scripted_model.add(call("run_code", code="kept += 1"), say("done"))
    front = FrontEnd(kernel)
    kernel.ok("%agent --approve ask once more", on_message=front.hook)
    assert front.of_kind("ChoiceCard") == [] and kernel.value("kept") == 3
