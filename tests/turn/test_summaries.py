"""Session summaries for recall: made as a turn starts (idle session, a new session), in
whole in-process turns against the scripted model."""

from __future__ import annotations

import pytest
from traitlets import TraitError

from agent_kernel import Agent
from agent_kernel.store import Store, recall
from agent_kernel.testing import fail, say
from agent_kernel.turn.summaries import is_session_summary_request
from tests.support.past_sessions import past_session

PREVIOUS = "Summary of your previous session"


def session_summaries(model) -> list[dict]:
    return [r for r in model.summary_requests if is_session_summary_request(r)]


def turn_context(model) -> str:
    """The turn-context text of the last request that was not a summary request."""
    request = [r for r in model.requests if not is_session_summary_request(r)][-1]
    return request["messages"][-1]["content"][0]["text"]


def stored_summary(agent_db, name: str) -> recall.SessionSummary | None:
    with Store(agent_db).connect() as con:
        found = recall.find_session(con, name)
        assert found is not None
        return recall.summary_of(con, found[0])


def test_new_summarises_the_session_it_leaves_for_the_first_turn_only(shell_agent, scripted_model, agent_db):
    scripted_model.add(say("Noted."), say("Hello again."), say("Still here."))
    first = shell_agent.ok("The exports go to bucket zeta from now on.")
    assert session_summaries(scripted_model) == []  # nothing before the kernel's first session
    left = first.result.session

    new = shell_agent.ok("hello", new=True)
    assert len(session_summaries(scripted_model)) == 1
    context = turn_context(scripted_model)
    assert f"{PREVIOUS} {left!r}" in context and "- The exports go to bucket zeta from now on." in context
    summary = stored_summary(agent_db, left)
    assert summary is not None and summary.covers == 2 and summary.model == "scripted-model"
    # Its usage is the new turn's: two model calls recorded, counted in the turn's tokens.
    with Store(agent_db).connect() as con:
        calls = con.execute(
            "SELECT count(*), sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens) "
            "FROM model_calls m JOIN sessions s "
            "ON s.id = m.session_id WHERE s.name = ? AND m.turn = 1",
            [new.result.session],
        ).fetchone()
    assert calls[0] == 2 and new.result.tokens == calls[1]

    shell_agent.ok("and now?")
    assert len(session_summaries(scripted_model)) == 1  # the second turn makes none
    assert PREVIOUS not in turn_context(scripted_model)


def test_a_session_idle_past_the_setting_is_summarised_when_the_user_returns(shell_agent, scripted_model, agent_db):
    shell_agent.agent.config.summary_idle_minutes = 20
    scripted_model.add(say("Loaded."), say("Charted."), say("Again."))
    name = shell_agent.ok("load q3.csv into sales").result.session
    with Store(agent_db).connect() as con:  # 25 minutes pass
        con.execute("UPDATE messages SET created_at = created_at - INTERVAL 25 MINUTE")

    shell_agent.ok("chart sales by month")
    requests = session_summaries(scripted_model)
    assert len(requests) == 1 and "[user] load q3.csv into sales" in requests[0]["messages"][0]["content"][0]["text"]
    summary = stored_summary(agent_db, name)
    assert summary is not None and summary.covers == 2 and "load q3.csv into sales" in summary.summary
    assert PREVIOUS not in turn_context(scripted_model)  # the session goes on: no summary in its context

    shell_agent.ok("once more")  # not idle: nothing to make
    assert len(session_summaries(scripted_model)) == 1


def test_a_failed_summary_call_keeps_the_prompts_and_is_not_retried(shell_agent, scripted_model, agent_db):
    scripted_model.summarizer = lambda body: fail(400, "invalid_request_error", "model: not found")
    scripted_model.add(say("Noted."), say("Hi."), say("Hi again."))
    left = shell_agent.ok("Remember the fiscal year starts in April.").result.session
    shell_agent.ok("hello", new=True)
    summary = stored_summary(agent_db, left)
    assert summary is not None and summary.model is None
    assert "- Remember the fiscal year starts in April." in summary.summary
    assert "fiscal year starts in April" in turn_context(scripted_model)
    shell_agent.ok("again")
    assert len(session_summaries(scripted_model)) == 1


def test_no_summaries_when_the_setting_is_zero(shell_agent, scripted_model, agent_db):
    shell_agent.agent.config.summary_idle_minutes = 0
    scripted_model.add(say("Noted."), say("Hi."))
    left = shell_agent.ok("Remember the fiscal year starts in April.").result.session
    shell_agent.ok("hello", new=True)
    assert session_summaries(scripted_model) == [] and stored_summary(agent_db, left) is None
    assert PREVIOUS not in turn_context(scripted_model)


def test_summary_idle_minutes_is_a_setting_and_an_agent_keyword():
    assert Agent(summary_idle_minutes=45).config.summary_idle_minutes == 45
    with pytest.raises(TraitError, match="summary_idle_minutes"):
        Agent(summary_idle_minutes=-1)


def test_a_first_turn_that_failed_leaves_the_previous_summary_to_its_retry(shell_agent, scripted_model, agent_db):
    store = Store(agent_db)
    earlier = past_session(store, "last-week", [("Budget review", "Done.")], hours_ago=24 * 7)
    with store.connect() as con:
        recall.save_summary(con, earlier, "Reviewed the budget; travel is over by 12%.", covers=2, model="m")
    scripted_model.add(fail(400, "invalid_request_error", "max_tokens: too large"), say("Back."))
    assert shell_agent.execute("hello").error is not None  # nothing of this turn is stored
    assert "travel is over by 12%" in turn_context(scripted_model)
    shell_agent.ok("hello again")
    assert "travel is over by 12%" in turn_context(scripted_model)  # still the session's first turn
    assert session_summaries(scripted_model) == []  # it was up to date: nothing to make
