"""The memory store on a real DuckDB file: BM25 recall, filters, summaries' period keys, the cap."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from agent_kernel.errors import ToolInputError
from agent_kernel.store import Store
from agent_kernel.store.memories import SECTION_CHARS, Filters, Memories, period_key


@pytest.fixture
def memories(tmp_path):
    with Store(tmp_path / "agent.duckdb").connect() as con:
        yield Memories(con)


def test_recall_ranks_by_relevance_and_only_returns_matches(memories):
    memories.remember("Prefers plotly charts to matplotlib", category="preference", tags=["charts"])
    memories.remember("Works on the quarterly revenue forecast for the EU team", category="work")
    memories.remember("Has a cat called Miso", category="personal-context")
    memories.remember("Wants line charts with a log scale for revenue", category="preference")
    found = memories.recall("Which library should I use for the charts?", Filters())
    assert [m.content for m in found] == [
        "Prefers plotly charts to matplotlib",  # "charts" in text and tags, and "library" nowhere
        "Wants line charts with a log scale for revenue",
    ]
    assert found[0].relevance > found[1].relevance > 0
    assert memories.recall("cats", Filters())[0].content == "Has a cat called Miso"  # plural folded
    assert memories.recall("the of and", Filters()) == []  # only stopwords: nothing to match
    only_work = memories.recall("revenue", Filters(types=["work"]))
    assert [m.type for m in only_work] == ["work"]


def test_filters_and_list(memories):
    memories.remember("old fact", tags=["x"])
    memories.summarize("December went well", summary_type="monthly-summary", period_key="2025-12")
    memories.summarize("Week 50 review", summary_type="weekly-summary", period_key="2025-W50")
    assert {m.content for m in memories.list(Filters(store="summaries"))} == {"December went well", "Week 50 review"}
    assert [m.content for m in memories.list(Filters(period_key_prefix="2025-W"))] == ["Week 50 review"]
    assert [m.content for m in memories.list(Filters(tags=["x", "y"]))] == ["old fact"]
    tomorrow = memories.list(Filters())[0].created_at + timedelta(days=1)
    assert memories.list(Filters(since=tomorrow)) == []
    assert len(memories.list(Filters(until=tomorrow), limit=2)) == 2


def test_a_summary_of_the_same_period_replaces_the_last(memories):
    first, replaced = memories.summarize("draft", summary_type="weekly-summary", period_key="2025-W50")
    again, replaced_again = memories.summarize("final", summary_type="weekly-summary", period_key="2025-W50")
    assert (replaced, replaced_again) == (False, True) and first.id == again.id and again.content == "final"
    other, _ = memories.summarize("chat", summary_type="conversation-summary", period_key="2025-12-10", chat_id="a")
    assert other.chat_id == "a" and len(memories.list(Filters(store="summaries"))) == 2


@pytest.mark.parametrize(
    ("summary_type", "given", "expected"),
    [
        ("weekly-summary", "2025-W50", "2025-W50"),
        ("weekly-summary", "2026-w1", "2026-W01"),
        ("weekly-summary", "2025-12-29", "2026-W01"),  # ISO weeks: that Monday is in 2026's week 1
        ("weekly-summary", "2020-W53", "2020-W53"),
        ("daily-summary", "2025-12-10", "2025-12-10"),
        ("monthly-summary", "2025-3", "2025-03"),
        ("monthly-summary", "2025-12-10", "2025-12"),
        ("quarterly-summary", "2025-q4", "2025-Q4"),
        ("quarterly-summary", "2025-08-01", "2025-Q3"),
        ("yearly-summary", "2025", "2025"),
        ("yearly-summary", None, "2024"),
        ("weekly-summary", None, "2024-W07"),
        ("conversation-summary", None, "2024-02-14"),
    ],
)
def test_period_keys_are_canonical(summary_type, given, expected):
    assert period_key(summary_type, given, date(2024, 2, 14)) == expected


@pytest.mark.parametrize(
    ("summary_type", "given"),
    [
        ("weekly-summary", "2025-W53"),
        ("weekly-summary", "2025-12"),
        ("monthly-summary", "2025-13"),
        ("quarterly-summary", "2025-Q5"),
        ("yearly-summary", "25"),
    ],
)
def test_period_keys_that_do_not_fit_are_refused(summary_type, given):
    with pytest.raises(ToolInputError, match="does not fit"):
        period_key(summary_type, given, date(2024, 2, 14))


def test_the_memory_section_is_capped(memories):
    memories.remember("Likes tea", pursuing_priority=None)
    memories.remember("Learn Rust", category="life-goal", pursuing_priority=30)
    memories.remember("Ship the Q4 report", category="project", pursuing_priority=90)
    section = memories.section()
    lines = section.splitlines()
    assert lines[1].startswith("- (fact) Likes tea") and "priority 90" in lines[2] and "priority 30" in lines[3]
    long = "x" * 900
    for _ in range(3):
        memories.remember(long)
    with pytest.raises(ToolInputError) as refused:
        memories.remember(long)
    assert f"cap of {SECTION_CHARS:,}" in str(refused.value) and "Forget memories" in str(refused.value)
    assert len(memories.section()) <= SECTION_CHARS
    forgotten = memories.forget(memories.list(Filters(), limit=1)[0].id)
    assert forgotten is not None and memories.forget(forgotten.id) is None
    memories.remember(long)  # room again


def test_a_store_with_thousands_of_memories_shows_the_most_important_that_fit(memories):
    """Rows written without the tool's cap (a script, an older version): the section stays
    within it, the highest priority first, then a line counting the rest."""
    memories.con.execute(
        "INSERT INTO memories (id, store, type, content, tags, pursuing_priority, created_at) "
        "SELECT 'mem-' || i, 'user_memory', 'fact', 'Ran notebook ' || i || ' on the sales data ' || repeat('x', 300), "
        "['data'], 10, TIMESTAMP '2025-01-01' + to_minutes(i) FROM range(3000) t(i)"
    )
    memories.con.execute(
        "INSERT INTO memories (id, store, type, content, tags, pursuing_priority, created_at) VALUES "
        "('goal', 'user_memory', 'project', 'Ship the Q4 report', [], 95, TIMESTAMP '2025-06-01'), "
        "('huge', 'user_memory', 'fact', repeat('y', 5000), [], 99, TIMESTAMP '2025-06-01')"
    )
    memories.summarize("December went well", summary_type="monthly-summary", period_key="2025-12")
    section = memories.section()
    lines = section.splitlines()
    assert len(section) <= SECTION_CHARS < len(memories.section(max_chars=None))
    assert "Ship the Q4 report" in lines[1]  # the 5,000-character one is passed over, not the rest
    shown = sum(line.startswith("- (") for line in lines)
    assert 5 < shown < 15 and "Ran notebook 2999 " in section and "Ran notebook 0 " not in section  # the newest
    assert [line.split(" on ")[0] for line in lines[2:4]] == [  # shown oldest first, as ever
        f"- (fact) Ran notebook {3001 - shown}",  # shown - 1 of them, beside the goal
        f"- (fact) Ran notebook {3002 - shown}",
    ]
    assert lines[-2] == (
        f"{3002 - shown:,} more user memories are stored but not shown here for room: memory "
        "action=recall with a query (store_filter=user_memory) finds them."
    )
    assert lines[-1].startswith("Summaries stored: 1 ")
    assert memories.section() == section  # byte-stable while the memories are
    assert memories.recall("notebook 1234", Filters(store="user_memory"), limit=1)[0].id == "mem-1234"  # not shown
    added = memories.remember("Prefers plotly")  # already over: stored, recallable, not refused
    assert memories.recall("plotly", Filters())[0].id == added.id and len(memories.section()) <= SECTION_CHARS


def test_a_few_memories_are_all_shown(memories):
    memories.remember("Likes tea")
    memories.remember("Ship the Q4 report", category="project", pursuing_priority=90)
    assert memories.section() == memories.section(max_chars=None)
    assert "more user memories" not in memories.section()


def test_a_memory_over_its_cap_is_refused_whoever_stores_it(memories):
    from agent_kernel.store.memories import MEMORY_CHARS

    long = "fact " * (MEMORY_CHARS // 5) + "!"
    with pytest.raises(ToolInputError, match=f"{len(long):,} characters; one memory holds at most {MEMORY_CHARS:,}"):
        memories.summarize(long, summary_type="daily-summary", period_key="2026-01-01")
    with pytest.raises(ToolInputError, match="at most 20 tags"):
        memories.remember("short", tags=[f"t{i}" for i in range(21)])
    memories.summarize(long[:MEMORY_CHARS], summary_type="daily-summary", period_key="2026-01-01")
    assert [len(m.content) for m in memories.list(Filters(), 10)] == [MEMORY_CHARS]
