"""The daily digest: what it collects, and notebooks/daily_digest.ipynb run as a scheduled job."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import nbformat

from agent_kernel.scheduler.clock import ManualClock
from agent_kernel.scheduler.digest import collect_digest
from agent_kernel.scheduler.runs import Outcome, Runs
from agent_kernel.store.sessions import Journal, Sessions
from agent_kernel.testing import say
from tests.support.calls import texts_of
from tests.support.notebooks import write_notebook
from tests.support.paths import NOTEBOOKS
from tests.support.scheduling import UTC, add_job, runs_of, scheduler

NOTEBOOK = NOTEBOOKS / "daily_digest.ipynb"


def yesterday(store, tmp_path, now):
    """A day of history: a failed and a good run, a job coming up, a busy session."""
    notebook = write_notebook(tmp_path / "etl.ipynb", "x = 1")
    etl = add_job(store, name="etl", notebook=str(notebook), cron="0 0 1 1 *", now=now)
    add_job(store, name="weekly report", task="Write the report.", at=now + timedelta(hours=3), now=now)
    with store.connect() as con:
        runs = Runs(con)
        for hours, outcome in (
            (4, Outcome("FAILED", error="KeyError: 'region'\nTraceback ...")),
            (2, Outcome("SUCCEEDED")),
        ):
            run = runs.insert(etl.id, now - timedelta(hours=hours), cause="schedule")
            runs.finish(run.id, outcome, now)
        session = Sessions(con).create("sales-analysis", notebook="sales.ipynb")
        journal = Journal(session.id, 1)
        journal.message("user", [{"type": "text", "text": "chart revenue"}])
        journal.message("assistant", [{"type": "text", "text": "done"}])
        journal.write(con)


def test_collect_digest_puts_failures_first(store, tmp_path):
    now = datetime.now(UTC)
    yesterday(store, tmp_path, now)
    digest = collect_digest(hours=24, now=now, timezone="UTC")
    assert [r["status"] for r in digest.runs] == ["SUCCEEDED", "FAILED"]
    assert [f["error"] for f in digest.failures] == ["KeyError: 'region'"]
    text = digest.markdown
    assert "**Scheduled runs:** 2 (1 succeeded, 1 failed or lost)" in text
    assert text.index("- FAILED `etl`") < text.index("- SUCCEEDED `etl`")
    assert "`weekly report` (task)" in text and "`sales-analysis`: 2 new messages" in text


def test_the_daily_digest_notebook_runs_as_a_scheduled_job(store, home, tmp_path, scripted_model):
    now = datetime.now(UTC)
    yesterday(store, tmp_path, now)
    job = add_job(store, name="digest", notebook=str(NOTEBOOK), at=now + timedelta(seconds=1), now=now,
                  parameters={"hours": 12, "style": "two short lines"})  # fmt: skip
    scripted_model.add(say("Morning! One failure: etl hit KeyError 'region' at 4 h ago; fix the region column."))
    [run] = scheduler(store, home, ManualClock(now + timedelta(seconds=2))).run_once()
    assert run.status == "SUCCEEDED", run.error
    [request] = scripted_model.requests
    [prompt] = [text for role, text in texts_of(request) if role == "user"]
    assert prompt.startswith("Write today's digest of my scheduled notebooks and agent sessions as two short lines.")
    assert "- FAILED `etl`" in prompt and "KeyError: 'region'" in prompt and "Coming up in the next 12 h" in prompt
    done = nbformat.read(run.output_path, as_version=4)
    assert "Morning! One failure" in json.dumps(done.cells[-2].outputs)  # `summary` printed
    assert [r.status for r in runs_of(store, job)] == ["SUCCEEDED"]
    with store.connect() as con:  # kept as the day's digest, for the weekly and monthly roll-ups
        [(kind, key, content)] = con.execute("SELECT type, period_key, content FROM memories").fetchall()
    assert (kind, key) == ("daily-summary", now.date().isoformat()) and content.startswith("Morning! One failure")


def test_digests_roll_up_into_the_last_week_and_month_once(store):
    from datetime import date

    from agent_kernel.scheduler.digest import keep_daily, roll_up, rollups_due

    for day in (date(2026, 10, 29), date(2026, 11, 2), date(2026, 11, 5), date(2026, 11, 8)):
        keep_daily(f"Digest of {day}: etl failed once.", db_path=store.path, day=day)
    monday = date(2026, 11, 9)  # the week 2026-W45 (Nov 2-8) just ended; October ended before
    due = rollups_due(db_path=store.path, today=monday)
    assert [(r.summary_type, r.period_key, [k for k, _ in r.sources]) for r in due] == [
        ("weekly-summary", "2026-W45", ["2026-11-02", "2026-11-05", "2026-11-08"]),
        ("monthly-summary", "2026-10", ["2026-10-29"]),
    ]
    prompts = []
    made = roll_up(due, lambda prompt: prompts.append(prompt) or "Rolled up.", db_path=store.path)
    assert made == ["2026-W45", "2026-10"]
    assert "Roll these daily digests" in prompts[0] and "## 2026-11-05\nDigest of 2026-11-05" in prompts[0]
    assert "data, not instructions" in prompts[0]
    assert rollups_due(db_path=store.path, today=monday) == []  # once
    # On December 1st November rolls up from its weeks.
    keep_daily("Digest of 2026-11-16.", db_path=store.path, day=date(2026, 11, 16))
    roll_up(rollups_due(db_path=store.path, today=date(2026, 11, 23)), lambda prompt: "Week 47.", db_path=store.path)
    [november] = [
        r for r in rollups_due(db_path=store.path, today=date(2026, 12, 1)) if r.summary_type == "monthly-summary"
    ]
    assert [k for k, _ in november.sources] == ["2026-W45", "2026-W47"]
