"""%agent_jobs: jobs with next run, last run, status and a link to the last output notebook."""

from __future__ import annotations

from datetime import datetime, timedelta

from agent_kernel.scheduler import leader
from agent_kernel.scheduler.clock import ManualClock
from agent_kernel.scheduler.service import SchedulerService
from tests.support.notebooks import write_notebook
from tests.support.scheduling import UTC, add_job, scheduler


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
    assert "or run <code>agent-kernel scheduler</code> in a terminal.</div>" in page
    text = shown.final_texts()[-1]
    assert "FAILED (ZeroDivisionError: division by zero)" in text and "later" in text


def test_agent_jobs_when_empty_and_while_a_scheduler_leads(kernel, store):
    empty = kernel.ok("%agent_jobs")
    # No table to fill: what to do next, each command as code (no literal backticks).
    page = empty.final_texts("text/html")[-1]
    assert "<table" not in page and "<th" not in page and "`" not in page
    assert page.startswith("<div style='color:#57606a'>No scheduled jobs yet. Ask <code>%agent</code> to schedule one")
    assert "or run <code>agent-kernel jobs add</code> in a terminal.</div>" in page
    assert "<div style='color:#57606a'>No scheduler is running" in page
    text = empty.final_texts()[-1]
    assert text.splitlines()[0].startswith("No scheduled jobs yet. Ask %agent to schedule one")
    assert "`" not in text and "name" not in text.split() and "----" not in text
    assert "run agent-kernel scheduler in a terminal" in text
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


def test_agent_jobs_says_when_every_job_is_disabled(kernel, store):
    job = add_job(
        store, name="paused", task="Summarise.", at=datetime.now(UTC) + timedelta(days=1), now=datetime.now(UTC)
    )
    with store.connect() as con:
        leader.acquire(con, "otherhost:1:abcdef", datetime.now(UTC), 300)
    SchedulerService(store).disable(job.id)
    shown = kernel.ok("%agent_jobs").final_texts()[-1]
    assert shown == "No enabled jobs: 1 job is disabled (%agent_jobs --all lists them)."
    listed = kernel.ok("%agent_jobs --all").final_texts()[-1]
    assert "paused" in listed and "(disabled)" in listed


def test_agent_jobs_edit_and_history(kernel, store):
    job = add_job(store, name="digest", task="Summarise.", cron="0 9 * * *", timezone="UTC", now=datetime.now(UTC))
    shown = kernel.ok('%agent_jobs edit digest --cron "30 6 * * MON-FRI" -p region=north --timeout 600')
    assert shown.stdout.startswith(f"Job {job.id} (digest) is now version 2: At 06:30 on Monday through Friday")
    table = kernel.ok("%agent_jobs history digest").final_texts()[-1]
    assert "the user (magic)" in table and "parameters, cron, timeout_s" in table and "(created)" in table
    for line, message in [
        ("%agent_jobs edit digest --cron '0 25 * * *'", "Cron expression '0 25 * * *' is not valid"),
        ("%agent_jobs edit digest", "Nothing to change"),
        ("%agent_jobs edit nope --cron '0 7 * * *'", "No job 'nope'"),
        ("%agent_jobs edit digest --overlap sometimes", "argument --overlap: invalid choice"),
        ("%agent_jobs edit digest --cron 'unclosed", "Cannot read the options"),
        ("%agent_jobs history", "Usage: %agent_jobs history JOB"),
    ]:
        # IPython shows a UsageError as one line on stderr, with no traceback.
        refused = kernel.execute(line)
        assert refused.stderr.startswith("UsageError: ") and message in refused.stderr, (line, refused.stderr)
        assert refused.stderr.count("\n") <= 1 and "Traceback" not in refused.stderr
    with store.connect() as con:
        assert con.execute("SELECT max(version) FROM job_versions WHERE job_id = ?", [job.id]).fetchone() == (2,)
