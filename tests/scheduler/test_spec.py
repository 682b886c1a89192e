"""What a run executes: a scheduled run is no open notebook's, whatever the scheduler's environment."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import nbformat

from agent_kernel.scheduler.clock import ManualClock
from tests.support.notebooks import write_notebook
from tests.support.scheduling import add_job, scheduler

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=timezone.utc)


def test_a_run_does_not_take_the_name_of_the_notebook_the_scheduler_was_started_from(
    store, home, tmp_path, monkeypatch
):
    person = tmp_path / "analysis.ipynb"
    monkeypatch.setenv("JPY_SESSION_NAME", str(person))  # as in a terminal opened from that notebook's kernel
    notebook = write_notebook(tmp_path / "report.ipynb", "import os\nprint(repr(os.environ['JPY_SESSION_NAME']))")
    clock = ManualClock(T0 - timedelta(minutes=1))
    add_job(store, name="report", notebook=str(notebook), cron="0 9 * * *", timezone="UTC", now=clock.now())
    clock.set(T0 + timedelta(hours=1, seconds=20))
    [run] = scheduler(store, home, clock).run_once()
    assert run.status == "SUCCEEDED", run.error
    printed = nbformat.read(run.output_path, as_version=4).cells[-1]["outputs"][0]["text"]
    assert printed == "''\n"  # the run's turns file a session of their own, not analysis.ipynb's
