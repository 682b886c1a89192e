"""Continue at the token or cost limit: the same turn goes on with a raised limit."""

from __future__ import annotations

import re

import pytest

from agent_kernel.store import Store
from agent_kernel.store.sessions import Sessions
from agent_kernel.testing import reply, say, tool_use
from tests.support.capabilities import needs_widget_replies
from tests.support.frontend import FrontEnd

pytestmark = needs_widget_replies

USAGE = {"input_tokens": 300, "output_tokens": 50}


def stored_session(db):
    with Store(db).connect() as con:
        return Sessions(con).list()[0]


def test_continue_raises_the_limit_and_resumes_the_same_turn(kernel, scripted_model, agent_db):
    scripted_model.add(reply(tool_use("run_code", {"code": "step = 1"}), usage=USAGE), say("All steps done."))
    front = FrontEnd(kernel)
    front.answer["ChoiceCard"] = lambda f, card: f.custom(card, type="choice", choice="continue")
    result = kernel.ok("%agent --token-limit 300 work", on_message=front.hook)
    [card] = front.of_kind("ChoiceCard")
    assert card.state["heading"] == "Token limit reached"
    assert card.state["text"] == "This session has used 350 of its 300 tokens."
    # The raised limit leaves room for the next call (about 300 input tokens and what the
    # first call added), plus the limit again: one Continue, not one per call.
    step = int(re.fullmatch(r"Continue \(\+([\d,]+) tokens\)", card.state["buttons"][0]["label"])[1].replace(",", ""))
    raised = 300 + step
    assert 350 + 300 + 300 < raised < 350 + 600 + 300
    shown = "\n".join(result.final_texts())
    assert "All steps done." in shown and f"Continued: the session's limit is now {raised:,} tokens." in shown
    assert len(scripted_model.requests) == 2  # one turn, two model calls
    session = stored_session(agent_db)
    assert (session.state, session.token_limit) == ("idle", raised)


def test_stop_here_ends_at_the_limit(kernel, scripted_model, agent_db):
    scripted_model.add(reply(tool_use("run_code", {"code": "step = 1"}), usage=USAGE))
    front = FrontEnd(kernel)
    front.answer["ChoiceCard"] = lambda f, card: f.custom(card, type="choice", choice="stop")
    result = kernel.execute("%agent --token-limit 300 work", on_message=front.hook)
    assert "Stopped at the token limit." in "\n".join(result.final_texts())
    assert result.status == "error" and "reached its token limit" in result.errors[0]["evalue"]
    assert len(scripted_model.requests) == 1
    assert stored_session(agent_db).state == "token_limit_reached"


def test_the_stop_button_at_the_limit_keeps_the_state(kernel, scripted_model, agent_db):
    scripted_model.add(reply(tool_use("run_code", {"code": "step = 1"}), usage=USAGE))
    front = FrontEnd(kernel)
    front.answer["ChoiceCard"] = lambda f, card: f.custom(f.of_kind("StopButton")[0], type="stop")
    result = kernel.execute("%agent --token-limit 300 work", on_message=front.hook)
    assert [e["evalue"] for e in result.errors] == ["■ Stopped."]
    assert stored_session(agent_db).state == "token_limit_reached"


def test_continue_at_the_cost_limit_raises_it_and_resumes(kernel, scripted_model, agent_db):
    kernel.ok(
        '%config AgentKernel.prices = {"scripted-model": {"input": 2, "output": 16}}\n'
        "%config AgentKernel.cost_limit = 0.001"
    )
    scripted_model.add(reply(tool_use("run_code", {"code": "step = 1"}), usage=USAGE), say("All steps done."))
    front = FrontEnd(kernel)
    front.answer["ChoiceCard"] = lambda f, card: f.custom(card, type="choice", choice="continue")
    result = kernel.ok("%agent work", on_message=front.hook)
    [card] = front.of_kind("ChoiceCard")  # $0.0014 spent: 300 in at $2, 50 out at $16 a million
    assert card.state["heading"] == "Cost limit reached"
    assert card.state["text"] == "This session has cost $0.0014 of its $0.0010 limit."
    assert card.state["buttons"][0]["label"] == "Continue (+$0.0014)"
    shown = "\n".join(result.final_texts())
    assert "All steps done." in shown and "Continued: the session's cost limit is now $0.0024." in shown
    assert len(scripted_model.requests) == 2
    session = stored_session(agent_db)
    assert session.state == "idle" and session.cost_limit == pytest.approx(0.0024)


def test_a_call_that_would_pass_the_limit_waits_for_continue(kernel, scripted_model, agent_db):
    scripted_model.add(reply(tool_use("run_code", {"code": "step = 1"}), usage=USAGE), say("All steps done."))
    front = FrontEnd(kernel)
    front.answer["ChoiceCard"] = lambda f, card: f.custom(card, type="choice", choice="continue")
    result = kernel.ok("%agent --token-limit 500 work", on_message=front.hook)
    [card] = front.of_kind("ChoiceCard")  # 350 used: under 500, but the next call needs ~350 more
    needed = re.fullmatch(
        r"This session has used 350 of its 500 tokens\. The next model call needs about ([\d,]+) more\.",
        card.state["text"],
    )
    assert needed and 300 < int(needed[1].replace(",", "")) < 600
    assert "All steps done." in "\n".join(result.final_texts())
    assert len(scripted_model.requests) == 2
    assert stored_session(agent_db).token_limit > 350 + int(needed[1].replace(",", ""))
