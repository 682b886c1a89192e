"""Continue at the token limit: the same turn goes on with a raised limit."""

from __future__ import annotations

from agent_kernel.store import Store
from agent_kernel.store.sessions import Sessions
from agent_kernel.testing import reply, say, tool_use

from .capabilities import needs_widget_replies
from .frontend import FrontEnd

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
    assert card.state["buttons"][0]["label"] == "Continue (+300 tokens)"
    shown = "\n".join(result.final_texts())
    assert "All steps done." in shown and "Continued: the session's limit is now 650 tokens." in shown
    assert len(scripted_model.requests) == 2  # one turn, two model calls
    session = stored_session(agent_db)
    assert (session.state, session.token_limit) == ("idle", 650)


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
