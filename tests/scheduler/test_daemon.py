"""The scheduler's pass with a controllable clock: firing, outcomes, DST, catch-up, overlap,
retries, lost runs, leadership — against a real DuckDB file and real papermill runs."""

from __future__ import annotations

import itertools
import json
import os
import signal
from collections import Counter
from datetime import datetime, timedelta

import nbformat
import pytest

from agent_kernel.scheduler import ScheduleError, leader
from agent_kernel.scheduler.clock import ManualClock
from agent_kernel.scheduler.jobs import Jobs, Policy
from agent_kernel.scheduler.runs import Runs
from agent_kernel.scheduler.service import SchedulerService
from tests.support.notebooks import write_notebook
from tests.support.scheduling import UTC, add_job, agent_kernel_cli, get_job, pid_alive, runs_of, scheduler, wait_for

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)  # 09:00 in Berlin (CET)
ALLOW = Policy(overlap="allow")


def outputs(cell) -> str:
    return "".join(
        o.get("text", "") + "".join(o.get("data", {}).get("text/plain", "")) for o in cell.get("outputs", [])
    )


# -- outcomes -------------------------------------------------------------------------------


def test_a_notebook_job_fires_at_its_time_with_its_parameters(store, home, tmp_path):
    notebook = write_notebook(
        tmp_path / "report.ipynb", "print(f'region={region} rows={rows}')", parameters="region = 'all'\nrows = 0"
    )
    clock = ManualClock(T0 - timedelta(minutes=1))
    job = add_job(store, name="report", notebook=str(notebook), cron="0 9 * * *", timezone="Europe/Berlin",
                  parameters={"region": "north", "rows": 3}, now=clock.now())  # fmt: skip
    assert job.next_run_at == T0
    daemon = scheduler(store, home, clock)
    assert daemon.run_once() == []  # 08:59 Berlin: nothing is due

    clock.set(T0 + timedelta(seconds=20))
    [run] = daemon.run_once()
    assert run.status == "SUCCEEDED" and run.error is None
    assert run.scheduled_for == T0 and run.cause == "schedule" and run.attempt == 1
    assert run.cells_done == run.cells_total == 3  # parameters, injected parameters, the print
    done = nbformat.read(run.output_path, as_version=4)
    assert outputs(done.cells[-1]) == "region=north rows=3\n"
    assert "region=north rows=3" in (home / "runs" / job.id / run.id / "stdout.log").read_text()
    assert get_job(store, job).next_run_at == T0 + timedelta(days=1)
    assert daemon.run_once() == []  # the slot fired once


def test_a_failing_notebook_is_failed_with_its_error_and_partial_output(store, home, tmp_path):
    notebook = write_notebook(
        tmp_path / "broken.ipynb", "print('loaded')", "rows = {}\nrows['missing']", "print('never')"
    )
    clock = ManualClock(T0)
    add_job(store, name="broken", notebook=str(notebook), at=T0 + timedelta(seconds=5), now=clock.now())
    clock.advance(seconds=10)
    [run] = scheduler(store, home, clock).run_once()
    assert run.status == "FAILED"
    assert run.error == "KeyError: 'missing'"
    done = nbformat.read(run.output_path, as_version=4)
    code = [c for c in done.cells if c.cell_type == "code"]
    assert run.error_cell == 2 and code[1].execution_count == 2 and code[1].source.startswith("rows = {}")
    assert outputs(code[0]) == "loaded\n" and code[2].execution_count is None  # kept as far as it got
    assert "KeyError" in outputs(code[1]) or any(o.get("ename") == "KeyError" for o in code[1].outputs)
    assert (run.cells_done, run.cells_total) == (1, 3)


def test_a_hanging_notebook_times_out_and_its_kernel_is_gone(store, home, tmp_path):
    pid_file = tmp_path / "kernel.pid"
    notebook = write_notebook(
        tmp_path / "hang.ipynb",
        f"import os\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\nprint('started')",
        "import time\ntime.sleep(600)",
    )
    clock = ManualClock(T0)
    add_job(store, name="hang", notebook=str(notebook), at=T0 + timedelta(seconds=1), now=clock.now(),
            policy=Policy(timeout_s=12))  # fmt: skip
    clock.advance(seconds=2)
    [run] = scheduler(store, home, clock).run_once()
    assert run.status == "TIMED_OUT"
    assert "longer than its timeout of 12 s" in run.error
    kernel_pid = int(pid_file.read_text())
    wait_for(lambda: not pid_alive(kernel_pid), timeout=5, what="the kernel to be gone")
    done = nbformat.read(run.output_path, as_version=4)
    assert done.cells[0].source.startswith('<span style="color:red') and "TIMED_OUT" in done.cells[0].source
    assert "started" in outputs(done.cells[1])  # the partial notebook keeps what ran
    assert run.cells_done == 1 and run.cells_total == 2


def test_a_cancelled_run_stops_and_is_recorded_as_cancelled(store, home, tmp_path):
    notebook = write_notebook(tmp_path / "slow.ipynb", "import time\ntime.sleep(600)")
    clock = ManualClock(T0)
    job = add_job(store, name="slow", notebook=str(notebook), at=T0 + timedelta(seconds=1), now=clock.now())
    clock.advance(seconds=2)
    daemon = scheduler(store, home, clock, lease_s=2)
    [started] = daemon.tick()
    with store.connect() as con:
        assert Runs(con).request_cancel(started.id, clock.now(), "no longer needed") == "RUNNING"
    [run] = daemon.run_once()
    assert run.status == "CANCELLED" and "cancelled by a user" in run.error
    assert runs_of(store, job) == [run]  # not retried: cancelling is not a failure


# -- DST, catch-up, overlap ------------------------------------------------------------------


def walk(daemon, clock, until, step=timedelta(minutes=30)):
    while clock.now() < until:
        clock.advance(seconds=step.total_seconds())
        daemon.tick()


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (datetime(2025, 3, 29, 12, tzinfo=UTC), ["03-30 03:00 CEST", "03-31 02:30 CEST"]),  # spring forward
        (datetime(2025, 10, 25, 12, tzinfo=UTC), ["10-26 02:30 CEST", "10-27 02:30 CET"]),  # fall back
    ],
)
def test_a_daily_job_fires_once_a_day_across_dst(store, home, tmp_path, start, expected):
    from agent_kernel.scheduler.cron import zone

    notebook = write_notebook(tmp_path / "daily.ipynb", "x = 1")
    clock = ManualClock(start)
    job = add_job(store, name="daily", notebook=str(notebook), cron="30 2 * * *", timezone="Europe/Berlin",
                  now=clock.now(), policy=ALLOW)  # fmt: skip
    daemon = scheduler(store, home, clock, max_concurrent=0)  # fire only: nothing executes
    walk(daemon, clock, start + timedelta(hours=40))
    runs = runs_of(store, job)
    assert [r.status for r in runs] == ["QUEUED", "QUEUED"]
    assert [r.cause for r in runs] == ["schedule", "schedule"]
    berlin = zone("Europe/Berlin")
    assert [r.scheduled_for.astimezone(berlin).strftime("%m-%d %H:%M %Z") for r in runs] == expected


@pytest.mark.parametrize(
    ("catchup", "statuses"),
    [
        ("skip", ["SKIPPED"] * 4),
        ("latest", ["SKIPPED"] * 3 + ["QUEUED"]),
        ("all", ["SKIPPED"] + ["QUEUED"] * 3),  # at most max_catchup=3 run; older ones are recorded, bounded
    ],
)
def test_catch_up_after_downtime_follows_the_policy(store, home, tmp_path, catchup, statuses):
    notebook = write_notebook(tmp_path / "hourly.ipynb", "x = 1")
    clock = ManualClock(T0)
    job = add_job(store, name="hourly", notebook=str(notebook), cron="0 * * * *", now=clock.now(),
                  policy=Policy(catchup=catchup, max_catchup=3, overlap="allow"))  # fmt: skip
    daemon = scheduler(store, home, clock, max_concurrent=0)
    clock.set(T0 + timedelta(hours=5, minutes=30))  # down from 08:00 to 13:30: 5 slots missed
    daemon.tick()
    runs = runs_of(store, job)
    assert [r.status for r in runs] == statuses
    assert runs[-1].scheduled_for == T0 + timedelta(hours=5)
    assert all(r.cause == "catchup" for r in runs)
    skipped = [r for r in runs if r.status == "SKIPPED"]
    assert skipped[0].error.startswith("Missed: no scheduler was running at 2026-03-02T")
    assert "(and 1 earlier missed slots)" in skipped[0].error  # 5 missed, 4 looked at
    assert get_job(store, job).next_run_at == T0 + timedelta(hours=6)
    clock.advance(minutes=31)  # 14:01: back to normal, on time
    daemon.tick()
    assert runs_of(store, job)[-1].cause == "schedule"


def test_a_slot_due_while_the_job_runs_is_skipped_under_forbid(store, home, tmp_path):
    notebook = write_notebook(tmp_path / "every.ipynb", "x = 1")
    clock = ManualClock(T0)
    job = add_job(store, name="every-minute", notebook=str(notebook), cron="* * * * *", now=clock.now())
    with store.connect() as con:  # another scheduler is running this job's 08:01 run, alive
        Runs(con).insert(job.id, T0 + timedelta(minutes=1), cause="schedule", status="RUNNING",
                         worker="elsewhere:4242:abcdef", now=T0 + timedelta(minutes=2))  # fmt: skip
        Jobs(con).set_next_run(job.id, T0 + timedelta(minutes=2))
    clock.set(T0 + timedelta(minutes=2, seconds=5))
    assert scheduler(store, home, clock).tick() == []
    running, skipped = runs_of(store, job)
    assert running.status == "RUNNING" and skipped.status == "SKIPPED"
    assert skipped.error == "Skipped: the job's previous run was still going (overlap: forbid)."


def test_queue_overlap_waits_for_the_previous_run_and_the_cap_holds(store, home, tmp_path):
    log = tmp_path / "spans.log"
    notebook = write_notebook(
        tmp_path / "span.ipynb",
        f"import os, time\nstart = time.time()\ntime.sleep(0.5)\n"
        f"open({str(log)!r}, 'a').write(f\"{{os.environ['AGENT_KERNEL_RUN_ID']}} {{start}} {{time.time()}}\\n\")",
    )
    clock = ManualClock(T0)
    queued = add_job(store, name="queued", notebook=str(notebook), cron="* * * * *", now=clock.now(),
                     policy=Policy(overlap="queue"))  # fmt: skip
    add_job(store, name="other", notebook=str(notebook), cron="* * * * *", now=clock.now())
    daemon = scheduler(store, home, clock, max_concurrent=1)
    clock.advance(minutes=1, seconds=1)
    assert len(daemon.tick()) == 1  # two jobs due, the cap is 1
    clock.advance(minutes=1)
    daemon.tick()  # the next slot of both: `queued` queues, `other` (forbid) skips if busy
    with store.connect() as con:
        statuses = Counter(r.status for r in Runs(con).list())
    assert statuses["RUNNING"] == 1
    finished = daemon.run_once()
    assert {r.status for r in finished} == {"SUCCEEDED"}
    queued_runs = [r for r in runs_of(store, queued) if r.status != "SKIPPED"]
    assert len(queued_runs) == 2  # both slots of the `queue` job ran
    spans = sorted((float(a), float(b)) for _, a, b in (line.split() for line in log.read_text().splitlines()))
    assert len(spans) == len(finished)
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans))  # never two at once


# -- retries, lost runs, leadership ----------------------------------------------------------------


def test_failures_are_retried_with_backoff_up_to_the_limit(store, home, tmp_path):
    notebook = write_notebook(tmp_path / "flaky.ipynb", "raise RuntimeError('upstream is down')")
    clock = ManualClock(T0)
    job = add_job(store, name="flaky", notebook=str(notebook), at=T0 + timedelta(seconds=1), now=clock.now(),
                  policy=Policy(max_retries=2, retry_on=("FAILED",), retry_delay_s=10))  # fmt: skip
    daemon = scheduler(store, home, clock)
    clock.advance(seconds=2)
    [first] = daemon.run_once()
    assert first.status == "FAILED" and first.error == "RuntimeError: upstream is down"
    retry = runs_of(store, job)[-1]
    assert (retry.attempt, retry.cause, retry.status) == (2, "retry", "QUEUED")
    assert retry.not_before == clock.now() + timedelta(seconds=10)
    assert daemon.run_once() == []  # not before its back-off
    clock.advance(seconds=10)
    [second] = daemon.run_once()
    assert second.attempt == 2 and second.status == "FAILED"
    assert runs_of(store, job)[-1].not_before == clock.now() + timedelta(seconds=20)  # doubled
    clock.advance(seconds=20)
    [third] = daemon.run_once()
    assert third.attempt == 3 and third.status == "FAILED"
    clock.advance(minutes=10)
    assert daemon.run_once() == []  # max_retries=2: no fourth attempt
    assert [r.scheduled_for for r in runs_of(store, job)] == [T0 + timedelta(seconds=1)] * 3


def test_a_run_now_with_other_values_uses_them_over_the_jobs_and_so_does_its_retry(store, home, tmp_path):
    notebook = write_notebook(
        tmp_path / "report.ipynb", "print(f'region={region} rows={rows}')\nassert region != 'south'",
        parameters="region = 'all'\nrows = 0",
    )  # fmt: skip
    clock = ManualClock(T0)
    job = add_job(store, name="report", notebook=str(notebook), cron="0 3 * * *", parameters={"region": "north", "rows": 3},
                  now=clock.now(), policy=Policy(max_retries=1, retry_on=("FAILED",), retry_delay_s=0))  # fmt: skip
    service = SchedulerService(store, home=home, clock=clock)
    with pytest.raises(ScheduleError, match="class"):
        service.run_now(job.id, parameters={"class": 1})  # checked as a job's parameters are
    assert runs_of(store, job) == []
    queued = service.run_now(job.id, parameters={"region": "south"}).run
    assert queued.parameters == {"region": "south"}
    daemon = scheduler(store, home, clock)
    first, retry = daemon.run_once()  # the retry is due at once (no back-off)
    assert first.status == "FAILED" and first.parameters == {"region": "south"}
    assert outputs(nbformat.read(first.output_path, as_version=4).cells[-1]).startswith("region=south rows=3\n")
    assert (retry.attempt, retry.status, retry.parameters) == (2, "FAILED", {"region": "south"})
    assert get_job(store, job).parameters == {"region": "north", "rows": 3}  # the job keeps its own
    clock.advance(seconds=1)  # a manual run's slot is its instant
    assert service.run_now(job.id).run.parameters is None
    [done] = daemon.run_once()
    assert done.status == "SUCCEEDED" and "region=north rows=3" in outputs(
        nbformat.read(done.output_path, as_version=4).cells[-1]
    )


def test_a_run_whose_scheduler_stopped_heartbeating_is_lost_and_retried_once(store, home, tmp_path):
    notebook = write_notebook(tmp_path / "ok.ipynb", "x = 1")
    clock = ManualClock(T0)
    job = add_job(store, name="ok", notebook=str(notebook), at=T0 + timedelta(seconds=1), now=clock.now(),
                  policy=Policy(retry_delay_s=0))  # fmt: skip
    with store.connect() as con:  # a scheduler on another host fired it and then went silent
        Runs(con).insert(job.id, T0 + timedelta(seconds=1), cause="schedule", status="RUNNING",
                         worker="otherhost:77:aaaaaa", now=T0 + timedelta(seconds=1))  # fmt: skip
        Jobs(con).set_next_run(job.id, None)
    daemon = scheduler(store, home, clock, lease_s=60)
    clock.advance(seconds=30)
    daemon.tick()
    assert runs_of(store, job)[0].status == "RUNNING"  # its lease has not expired yet
    clock.advance(seconds=60)
    [retried] = daemon.run_once()
    lost, again = runs_of(store, job)
    assert lost.status == "LOST" and "otherhost:77:aaaaaa" in lost.error and "unknown" in lost.error
    assert again == retried and (again.attempt, again.cause, again.status) == (2, "retry", "SUCCEEDED")


def test_the_unique_slot_holds_even_if_two_schedulers_both_think_they_lead(store, home, tmp_path):
    notebook = write_notebook(tmp_path / "ok.ipynb", "x = 1")
    clock = ManualClock(T0)
    job = add_job(store, name="ok", notebook=str(notebook), cron="0 * * * *", now=clock.now(), policy=ALLOW)
    first = scheduler(store, home, clock, max_concurrent=0, lease_s=10)
    second = scheduler(store, home, clock, max_concurrent=0, lease_s=10)
    clock.set(T0 + timedelta(hours=1, seconds=1))
    first.tick()
    second.tick()
    assert first.is_leader and not second.is_leader
    # `second` wakes after `first`'s lease ran out, holding a view from before the firing.
    clock.advance(seconds=11)
    with store.connect() as con:
        Jobs(con).set_next_run(job.id, T0 + timedelta(hours=1))
    second.tick()
    assert second.is_leader
    runs = runs_of(store, job)
    assert [(r.scheduled_for, r.attempt) for r in runs] == [(T0 + timedelta(hours=1), 1)]


def test_two_daemons_never_fire_the_same_slot_and_one_takes_over(store, tmp_path):
    log = tmp_path / "executions.log"
    notebook = write_notebook(
        tmp_path / "tick.ipynb",
        f"import os\nopen({str(log)!r}, 'a').write(os.environ['AGENT_KERNEL_RUN_ID'] + '\\n')",
    )
    now = datetime.now(UTC)
    job = add_job(store, name="every-2s", notebook=str(notebook), cron="*/2 * * * * *", now=now,
                  policy=Policy(overlap="allow", retry_delay_s=0))  # fmt: skip
    args = ["scheduler", "--poll", "0.2", "--lease", "3", "--grace", "30", "--max-concurrent", "4"]
    daemons = [agent_kernel_cli(*args, log=tmp_path / f"daemon-{n}.log") for n in (1, 2)]
    try:

        def holder():
            with store.connect() as con:
                lease = leader.current(con)
            return lease.holder if lease else None

        first = wait_for(holder, what="a leader")
        wait_for(lambda: len(runs_of(store, job)) >= 2, what="two firings")
        leading = next(d for d in daemons if f":{d.pid}:" in first)
        leading.send_signal(signal.SIGKILL)
        leading.wait()
        second = wait_for(lambda: (h := holder()) and h != first and h, what="the other daemon to take over")
        standby = next(d for d in daemons if d is not leading)
        assert f":{standby.pid}:" in second
        # It first retries the runs the killed leader lost, each a kernel: slow on a busy machine.
        wait_for(lambda: any(r.worker == second and r.status == "SUCCEEDED" for r in runs_of(store, job)),
                 timeout=120, what="a run by the new leader")  # fmt: skip
        standby.send_signal(signal.SIGTERM)
        assert standby.wait(timeout=30) == 0
    finally:
        for daemon in daemons:
            if daemon.poll() is None:
                daemon.kill()
            daemon.wait()
    runs = runs_of(store, job)
    slots = Counter((r.scheduled_for, r.attempt) for r in runs)
    assert max(slots.values()) == 1
    executed = Counter(log.read_text().split())
    assert max(executed.values()) == 1  # no run executed twice
    by_id = {r.id: r for r in runs}
    first_attempts = Counter(by_id[run_id].scheduled_for for run_id in executed if by_id[run_id].attempt == 1)
    assert max(first_attempts.values()) == 1  # no slot executed twice (a LOST run's retry is attempt 2)
    assert {r.worker.split(":")[1] for r in runs if r.worker} <= {str(d.pid) for d in daemons}


def test_a_killed_daemons_run_becomes_lost_and_is_retried_once(store, tmp_path):
    marker, pids = tmp_path / "first-attempt-done", tmp_path / "pids.log"
    notebook = write_notebook(
        tmp_path / "long.ipynb",
        f"import os, pathlib, time\nopen({str(pids)!r}, 'a').write(f\"{{os.getpid()}}\\n\")\n"
        f"marker = pathlib.Path({str(marker)!r})\nfirst = not marker.exists()\nmarker.touch()\n"
        "if first:\n    time.sleep(600)",
    )
    job = add_job(store, name="long", notebook=str(notebook), at=datetime.now(UTC) + timedelta(seconds=1),
                  now=datetime.now(UTC), policy=Policy(retry_delay_s=0))  # fmt: skip
    daemon = agent_kernel_cli("scheduler", "--poll", "0.2", "--lease", "30", log=tmp_path / "daemon.log")
    try:
        wait_for(lambda: pids.exists() and pids.read_text().strip(), what="the notebook to start")
        [run] = runs_of(store, job)
        assert run.status == "RUNNING"
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
    finally:
        if daemon.poll() is None:
            daemon.kill()
    kernel = int(pids.read_text().split()[0])
    wait_for(lambda: not pid_alive(kernel), timeout=10, what="the orphaned kernel to be gone")
    assert runs_of(store, job)[0].status == "RUNNING"  # nobody recorded it yet

    once = agent_kernel_cli("scheduler", "--once", "--lease", "30")
    out, err = once.communicate(timeout=120)
    assert once.returncode == 0, err
    lost, retry = runs_of(store, job)
    assert lost.status == "LOST" and f":{daemon.pid}:" in lost.error
    assert (retry.attempt, retry.cause, retry.status) == (2, "retry", "SUCCEEDED")
    assert "1 run(s) finished" in out and "SUCCEEDED long" in out
    assert len(pids.read_text().split()) == 2  # the retry ran once; the lost run did not go on
    result = json.loads((tmp_path / "home" / "runs" / job.id / lost.id / "result.json").read_text())
    assert result["exit_code"] == 13  # the runner saw its scheduler die and stopped itself


def test_disabled_jobs_do_not_fire_and_resume_without_catching_up(store, home, tmp_path):
    notebook = write_notebook(tmp_path / "ok.ipynb", "x = 1")
    clock = ManualClock(T0)
    job = add_job(store, name="ok", notebook=str(notebook), cron="0 * * * *", now=clock.now(), policy=ALLOW)
    daemon = scheduler(store, home, clock, max_concurrent=0)
    with store.connect() as con:
        Jobs(con).set_enabled(job, False, clock.now())
    clock.advance(hours=3, minutes=30)
    daemon.tick()
    assert runs_of(store, job) == []
    with store.connect() as con:
        resumed = Jobs(con).set_enabled(get_job(store, job), True, clock.now())
    assert resumed.next_run_at == T0 + timedelta(hours=4)
    daemon.tick()
    assert runs_of(store, job) == []


def test_removing_a_job_cancels_its_queued_run(store, home, tmp_path):
    notebook = write_notebook(tmp_path / "ok.ipynb", "x = 1")
    clock = ManualClock(T0)
    job = add_job(store, name="ok", notebook=str(notebook), at=T0 + timedelta(seconds=1), now=clock.now())
    clock.advance(seconds=2)
    scheduler(store, home, clock, max_concurrent=0).tick()
    with store.connect() as con:
        assert Jobs(con).delete(job.id, clock.now()) is True
        assert Jobs(con).get(job.id) is None
    [run] = runs_of(store, job)
    assert run.status == "CANCELLED" and run.error == "the job was deleted"
    assert os.path.isdir(tmp_path / "home") is False or not any((tmp_path / "home").rglob("output.ipynb"))
