"""%agent_jobs: jobs with next run, last run, status and a link to the last output notebook."""

from __future__ import annotations

from datetime import datetime, timedelta

from agent_kernel.scheduler import leader
from agent_kernel.scheduler.clock import ManualClock

from .scheduling import UTC, add_job, home_fixture, scheduler, store_fixture, write_notebook  # noqa: F401 - fixtures


def test_agent_jobs_lists_jobs_with_their_last_run_and_output(kernel, store, home, tmp_path):
    now = datetime.now(UTC).replace(microsecond=0)
    nightly = write_notebook(tmp_path / "nightly.ipynb", "print('ok')")
    broken = write_notebook(tmp_path / "broken.ipynb", "1 / 0")
    add_job(store, name="nightly", notebook=str(nightly), cron="0 2 * * *", timezone="Europe/Berlin", now=now)
    add_job(store, name="broken", notebook=str(broken), at=now + timedelta(hours=1), now=now)
    add_job(store, name="later", task="Summarise.", at=now + timedelta(days=3), now=now)
    scheduler(store, home, ManualClock(now + timedelta(hours=1, seconds=1))).run_once()

    shown = kernel.ok("%agent_jobs")
    page = shown.final_texts("text/html")[-1]
    assert page.count("<tr>") == 4  # header and three jobs
    assert "nightly" in page and "At 02:00 every day (Europe/Berlin)" in page
    assert "<span style='color:#cf222e' title='ZeroDivisionError: division by zero'>FAILED</span>" in page
    assert "<a href='home/runs/" in page and "/output.ipynb' target='_blank'" in page  # relative to the kernel's dir
    assert "No scheduler is running: jobs fire only while one runs; start JupyterLab or Jupyter Server" in page
    assert "or run `agent-kernel scheduler` in a terminal." in page
    text = shown.final_texts()[-1]
    assert "FAILED (ZeroDivisionError: division by zero)" in text and "later" in text


def test_agent_jobs_when_empty_and_while_a_scheduler_leads(kernel, store):
    empty = kernel.ok("%agent_jobs").final_texts()[-1]
    assert "No scheduled jobs yet" in empty
    with store.connect() as con:
        leader.acquire(con, "otherhost:1:abcdef", datetime.now(UTC), 300)
    assert "No scheduler is running" not in kernel.ok("%agent_jobs").final_texts()[-1]
    bad = kernel.execute("%agent_jobs --everything")
    assert bad.status == "error" and bad.stderr.strip() == (
        "UsageError: unrecognized arguments: --everything. Usage: %agent_jobs [--all]"
    )
    doc = kernel.ok("print(get_ipython().find_magic('agent_jobs').__doc__)").stdout
    assert "next run" in doc and "agent-kernel scheduler" in doc
    assert "%agent_jobs [--all]" in doc and "Also list disabled jobs." in doc
