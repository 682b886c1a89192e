"""Recall in the store: BM25 search over what was said, summaries, the timeline (real DuckDB file)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from agent_kernel.model.usage import CallUsage
from agent_kernel.store import Store, recall
from agent_kernel.store.sessions import Sessions
from agent_kernel.store.usage import UsageLog
from tests.support.past_sessions import past_session


def utc(hours_ago: float) -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(hours=hours_ago)


def search(store: Store, query: str, **filters) -> list[recall.Match]:
    with store.connect() as con:
        return recall.search(con, query, recall.SearchFilters(**filters), 10)


def test_search_ranks_what_was_said_and_leaves_out_tool_traffic_and_turn_context(tmp_path):
    store = Store(tmp_path / "agent.duckdb")
    churn = past_session(
        store, "churn-study",
        [("Which churn threshold should we use?", "We settled on a churn threshold of 0.37."),
         ("Plot the cohorts", "Done: the cohort chart is in the cell.")],
        tool_noise="zebrafish = 'only in a tool call'",
    )  # fmt: skip
    past_session(store, "sales", [("Monthly sales totals please", "Sales peaked in March.")])

    found = search(store, "which churn threshold was settled on")
    assert [m.session for m in found] == ["churn-study", "churn-study"]
    assert found[0].role == "assistant" and "0.37" in found[0].snippet  # the answer holds both words
    assert found[0].relevance >= found[1].relevance > 0
    assert found[0].message_id == f"{churn}:3" and found[0].turn == 1  # after the tool call and result
    assert found[0].as_dict()["at"].endswith("Z")
    assert search(store, "zebrafish") == []  # tool inputs and results are not searched
    assert search(store, "Current date and time") == []  # nor the turn-context blocks
    assert search(store, "the of and") == []  # stopwords alone match nothing


def test_summaries_are_searched_and_filters_narrow_the_search(tmp_path):
    store = Store(tmp_path / "agent.duckdb")
    old = past_session(
        store, "old", [("load the parquet export", "Loaded 12 files.")], notebook="work/etl.ipynb", hours_ago=72
    )
    new = past_session(store, "new", [("parquet again", "Loaded 13 files.")], notebook="other.ipynb", hours_ago=2)
    with store.connect() as con:
        recall.save_summary(con, old, "The user loads the parquet export from bucket zeta.", covers=2, model="m")

    hits = search(store, "parquet")
    assert {(m.session, m.role) for m in hits} == {("old", "user"), ("old", "summary"), ("new", "user")}
    summary = next(m for m in hits if m.role == "summary")
    assert summary.turn is None and summary.message_id is None
    assert {m.session for m in search(store, "parquet", notebook="etl.ipynb")} == {"old"}  # by file name
    assert {m.session for m in search(store, "parquet", notebook="work/etl.ipynb")} == {"old"}
    assert {m.session for m in search(store, "parquet", since=utc(24))} == {"new"}
    assert {m.session for m in search(store, "parquet", until=utc(24))} == {"old"}
    # The turn that asks is left out (its own prompt would match), the rest of its session is not.
    assert {m.session for m in search(store, "parquet", skip_session=new, skip_turn=1)} == {"old"}
    assert {m.session for m in search(store, "parquet", skip_session=new, skip_turn=2)} == {"old", "new"}


def test_a_snippet_is_a_short_window_around_the_words_found():
    text = "word " * 200 + "the DECISIVE threshold is 0.37 " + "tail " * 200
    cut = recall.snippet(text, recall.query_words("decisive thresholds"))
    assert "DECISIVE threshold is 0.37" in cut
    assert cut.startswith("…") and cut.endswith("…") and len(cut) <= recall.SNIPPET_CHARS + 2
    assert recall.snippet("short\n\ntext", ["x"]) == "short text"


def test_pending_holds_what_the_summary_does_not_cover_yet(tmp_path):
    store = Store(tmp_path / "agent.duckdb")
    sid = past_session(store, "s", [("first question", "first answer")])
    with store.connect() as con:
        due = recall.pending(con, sid)
        assert due is not None and due.earlier is None and due.covers == 2 and due.name == "s"
        assert [m["role"] for m in due.messages] == ["user", "assistant"]
        recall.save_summary(con, sid, "x" * (recall.SUMMARY_CHARS + 50), covers=due.covers, model="m")
        assert recall.pending(con, sid) is None  # up to date
        stored = recall.summary_of(con, sid)
        assert stored is not None and len(stored.summary) == recall.SUMMARY_CHARS and stored.summary.endswith("…")
        con.execute(
            "INSERT INTO messages (session_id, seq, turn, role, content) VALUES (?, 2, 2, 'user', ?)",
            [sid, '[{"type": "text", "text": "second question"}]'],
        )
        again = recall.pending(con, sid)
        assert again is not None and again.earlier == stored.summary and again.covers == 3
        assert again.messages == [{"role": "user", "content": [{"type": "text", "text": "second question"}]}]


def test_the_previous_session_is_this_notebooks_else_an_idle_one_anywhere(tmp_path):
    store = Store(tmp_path / "agent.duckdb")
    past_session(store, "elsewhere-old", [("a", "b")], notebook="x.ipynb", hours_ago=48)
    elsewhere = past_session(store, "elsewhere", [("a", "b")], notebook="x.ipynb", hours_ago=5)
    busy = past_session(store, "busy", [("a", "b")], notebook="y.ipynb", hours_ago=0.01)
    here = past_session(store, "here-before", [("a", "b")], notebook="here.ipynb", hours_ago=30)
    with store.connect() as con:
        current = Sessions(con).create("here-now", notebook="here.ipynb")
        first = Sessions(con).create("first-here", notebook="new.ipynb")
        idle_before = utc(0.5)
        assert recall.previous_session(con, current_id=current.id, notebook="here.ipynb", idle_before=idle_before) == (
            here, "here-before",
        )  # fmt: skip
        # A notebook's first session: the last session anywhere that has gone idle (not the busy one).
        found = recall.previous_session(con, current_id=first.id, notebook="new.ipynb", idle_before=idle_before)
        assert found == (elsewhere, "elsewhere") and busy != elsewhere


def test_the_timeline_lists_sessions_with_their_figures_and_one_sessions_turns(tmp_path):
    store = Store(tmp_path / "agent.duckdb")
    older = past_session(store, "older", [("q", "a")], hours_ago=48)
    sid = past_session(
        store, "recent", [("load sales.csv", "Loaded 1,200 rows."), ("chart it", "Here is the chart.")], hours_ago=3
    )
    with store.connect() as con:
        con.execute(
            "INSERT INTO tool_calls (session_id, turn, tool, result_chars, is_error, created_at) VALUES "
            "(?, 2, 'run_code', 10, false, now()), (?, 2, 'run_code', 10, true, now()), (?, 2, 'render_blocks', 5, false, now())",
            [sid, sid, sid],
        )
        log = UsageLog(sid, 1)
        log.call(CallUsage("claude-sonnet-4-5", 1000, 100, 0, 0, 0.0045), duration_ms=5.0)
        log.write(con)
        recall.save_summary(con, sid, "Loaded sales and charted them.", covers=4, model="m")
        listed = recall.timeline(con, 5)
        turns, left_out = recall.turns(con, sid)
    assert [s["name"] for s in listed] == ["recent", "older"]
    recent = listed[0]
    assert recent["turns"] == 2 and recent["tool_calls"] == 3 and recent["cost_usd"] == 0.0045
    assert recent["summary"] == "Loaded sales and charted them." and recent["state"] == "idle"
    assert listed[1]["id"] == older and listed[1]["summary"] is None and listed[1]["cost_usd"] is None
    assert left_out == 0
    assert [(t["turn"], t["prompt"], t["answer"]) for t in turns] == [
        (1, "load sales.csv", "Loaded 1,200 rows."), (2, "chart it", "Here is the chart."),
    ]  # fmt: skip
    assert turns[0]["tool_calls"] == 0
    assert (
        turns[1]["tool_calls"] == 3
        and turns[1]["tool_errors"] == 1
        and turns[1]["tools"] == ["run_code", "render_blocks"]
    )


def test_deleting_a_session_deletes_its_summary(tmp_path):
    store = Store(tmp_path / "agent.duckdb")
    sid = past_session(store, "gone", [("q", "a")])
    with store.connect() as con:
        recall.save_summary(con, sid, "gone soon", covers=2, model="m")
        Sessions(con).delete(sid)
        assert recall.summary_of(con, sid) is None
