"""search_sessions and session_timeline in whole in-process turns against the scripted model."""

from __future__ import annotations

from agent_kernel.store import Store
from agent_kernel.turn.summaries import is_session_summary_request
from tests.support.calls import batch
from tests.support.past_sessions import past_session


def first_text(request: dict) -> str:
    """The turn-context block of a request's last user message."""
    return request["messages"][-1]["content"][0]["text"]


def test_a_fact_from_a_session_held_a_day_earlier_is_found_listed_and_summarised(shell_agent, scripted_model, agent_db):
    # Another kernel's session, a day old, never summarised (its kernel went away).
    past_id = past_session(
        Store(agent_db),
        "yesterday",
        [("The churn threshold for the retention model is 0.37; remember it.", "Noted: churn threshold 0.37."),
         ("Plot retention by cohort", "The cohort chart is in the cell.")],
        notebook="retention.ipynb",
    )  # fmt: skip
    results, _ = batch(
        shell_agent,
        scripted_model,
        ("search_sessions", {"query": "churn threshold"}),
        ("session_timeline", {}),
        ("session_timeline", {"session": "yesterday"}),
        prompt="what churn threshold did we use before?",
    )
    found, listed, turns = results

    # The session was summarised by the small model before the turn's first request ...
    summary_requests = [r for r in scripted_model.summary_requests if is_session_summary_request(r)]
    assert len(summary_requests) == 1 and summary_requests[0]["model"] == "claude-haiku-4-5"
    assert (
        "The churn threshold for the retention model is 0.37"
        in summary_requests[0]["messages"][0]["content"][0]["text"]
    )
    # ... and the first request carries that summary in its turn context.
    first = next(r for r in scripted_model.requests if not is_session_summary_request(r))
    context = first_text(first)
    assert "Summary of your previous session 'yesterday'" in context
    assert "- The churn threshold for the retention model is 0.37; remember it." in context

    matches = found["matches"]
    assert matches and all(m["session"] == "yesterday" for m in matches)  # not this turn's own prompt
    said = {m["message_id"]: m for m in matches if m["role"] != "summary"}
    assert set(said) == {f"{past_id}:0", f"{past_id}:1"}  # the prompt and the answer of turn 1
    assert all(m["turn"] == 1 and "0.37" in m["snippet"] for m in said.values())
    assert [m["role"] for m in matches].count("summary") == 1
    assert all(m["at"] < listed["sessions"][0]["last_active"] for m in matches)  # said a day ago

    by_name = {s["name"]: s for s in listed["sessions"]}
    past = by_name["yesterday"]
    assert past["turns"] == 2 and past["notebook"] == "retention.ipynb" and past["state"] == "idle"
    assert past["summary"].startswith("Scripted summary.") and "0.37" in past["summary"]
    assert turns["session"]["name"] == "yesterday" and turns["session"]["summary"] == past["summary"]
    assert [(t["turn"], t["prompt"][:20]) for t in turns["turns"]] == [
        (1, "The churn threshold "), (2, "Plot retention by co"),
    ]  # fmt: skip


def test_bad_inputs_are_errors_the_model_can_act_on(shell_agent, scripted_model):
    results, _ = batch(
        shell_agent,
        scripted_model,
        ("search_sessions", {"query": "x", "from": "last tuesday"}),
        ("search_sessions", {"query": "x", "from": "2026-03-02", "to": "2026-03-01"}),
        ("search_sessions", {"query": "   "}),
        ("search_sessions", {"query": "x", "limit": 51}),
        ("search_sessions", {"query": "y" * 501}),
        ("session_timeline", {"limit": 3}),
        ("session_timeline", {"session": "no-such-session"}),
        ("search_sessions", {"query": "nothing said about this", "from": "2026-03-01", "to": "2026-03-01"}),
    )
    assert all(r.get("is_error") for r in results[:7]), results
    assert "from must be an ISO 8601 date or time" in results[0]["text"]
    assert "from (2026-03-02) must be before to (2026-03-01)" in results[1]["text"]
    assert "needs query" in results[2]["text"]
    assert "limit" in results[3]["text"] and "50" in results[3]["text"]
    assert "query" in results[4]["text"] and "500" in results[4]["text"]
    assert "limit" in results[5]["text"] and "5" in results[5]["text"]
    assert "No session has the name or id 'no-such-session'" in results[6]["text"]
    # One day (from = to = a date) is a valid range; nothing matched says what to try.
    assert results[7]["matches"] == [] and "Nothing matched" in results[7]["note"]


def test_to_as_a_date_includes_that_whole_day_and_notebook_narrows(shell_agent, scripted_model, agent_db):
    store = Store(agent_db)
    past_session(
        store, "two-days", [("quarterly revenue by region", "EMEA leads.")], notebook="a/rev.ipynb", hours_ago=48
    )
    past_session(store, "today", [("quarterly revenue again", "APAC caught up.")], notebook="b/rev2.ipynb", hours_ago=1)
    with store.connect() as con:
        day = con.execute("SELECT CAST(min(created_at) AS DATE) FROM messages").fetchone()[0]
    results, _ = batch(
        shell_agent,
        scripted_model,
        ("search_sessions", {"query": "quarterly revenue", "to": day.isoformat()}),
        ("search_sessions", {"query": "quarterly revenue", "notebook": "rev2.ipynb"}),
        ("search_sessions", {"query": "quarterly revenue", "limit": 1}),
    )
    assert {m["session"] for m in results[0]["matches"]} == {"two-days"}
    assert {m["session"] for m in results[1]["matches"]} == {"today"}
    assert len(results[2]["matches"]) == 1
