"""Jobs: validation of what is asked for, policies, and finding jobs by id, prefix or name."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from agent_kernel.scheduler import ScheduleError
from agent_kernel.scheduler.jobs import Jobs, Policy, new_job
from tests.support.scheduling import UTC, add_job

NOW = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({"catchup": "some"}, "catchup must be one of skip, latest, all"),
        ({"overlap": "replace"}, "overlap must be one of allow, forbid, queue"),
        ({"timeout_s": 0}, "timeout_s must be a number of seconds, more than 0 and at most 604,800, not 0"),
        ({"retry_on": ("SUCCEEDED",)}, "retry_on takes FAILED, TIMED_OUT, LOST, not SUCCEEDED"),
        ({"max_catchup": 0}, "max_catchup must be a whole number from 1 to 1000, not 0"),
        # Every number has its type and range: a DuckDB column holds what passes.
        (
            {"max_retries": 10**30},
            "max_retries must be a whole number from 0 to 100, not 1000000000000000000000000000000",
        ),
        ({"max_retries": -1}, "max_retries must be a whole number from 0 to 100"),
        ({"max_retries": 1.5}, "max_retries must be a whole number"),
        ({"max_retries": True}, "max_retries must be a whole number"),
        ({"max_catchup": 2**63}, "max_catchup must be a whole number from 1 to 1000"),
        ({"timeout_s": float("inf")}, "timeout_s must be a number of seconds"),
        ({"timeout_s": float("nan")}, "timeout_s must be a number of seconds"),
        ({"timeout_s": 10**400}, "timeout_s must be a number of seconds"),
        ({"timeout_s": "3600"}, "timeout_s must be a number of seconds"),
        ({"cell_timeout_s": -1.0}, "cell_timeout_s must be a number of seconds"),
        ({"cell_timeout_s": 8 * 86_400}, "cell_timeout_s must be a number of seconds, more than 0 and at most 604,800"),
        ({"retry_delay_s": -0.5}, "retry_delay_s must be a number of seconds, 0 and at most 86,400"),
        ({"retry_delay_s": 1e300}, "retry_delay_s must be a number of seconds"),
        ({"retry_on": "LOST"}, "retry_on takes statuses such as LOST,FAILED"),
    ],
)
def test_impossible_policies_are_refused(policy, message):
    with pytest.raises(ScheduleError, match=message):
        Policy(**policy)


def test_retry_delay_doubles_up_to_an_hour():
    policy = Policy(retry_delay_s=30)
    assert [policy.retry_delay(n) for n in (1, 2, 3)] == [30, 60, 120]
    assert policy.retry_delay(20) == 3600


def test_a_job_round_trips_through_the_table(store, tmp_path):
    job = add_job(store, name="t", task="Say hi {who}.", parameters={"who": "there", "n": [1, 2]}, cron="*/5 * * * *",
                  timezone="Asia/Tokyo", model="m", token_limit=10, now=NOW,
                  policy=Policy(retry_on=("LOST", "FAILED"), max_retries=3, overlap="queue"))  # fmt: skip
    with store.connect() as con:
        again = Jobs(con).get(job.id)
    assert again == job
    assert again.policy == Policy(retry_on=("LOST", "FAILED"), max_retries=3, overlap="queue")
    assert again.next_run_at == NOW + timedelta(minutes=5) and again.type == "cron"


def test_jobs_are_found_by_id_prefix_or_unique_name(store):
    first = add_job(store, name="report", task="x", cron="0 * * * *", now=NOW)
    add_job(store, name="twin", task="x", cron="0 * * * *", now=NOW)
    add_job(store, name="twin", task="y", cron="0 * * * *", now=NOW)
    with store.connect() as con:
        jobs = Jobs(con)
        assert jobs.find(first.id).id == first.id and jobs.find(first.id[:5]).id == first.id
        assert jobs.find("report").id == first.id
        assert jobs.find("twin") is None  # ambiguous: say so rather than pick one
        assert jobs.find("%") is None


def test_a_schedule_that_never_fires_is_refused():
    with pytest.raises(ScheduleError, match="Bad day-of-month"):
        new_job(name="never", kind="task", task="x", cron="0 0 30 2 *", timezone="UTC", now=NOW)
    quiet = {"quiet_hours": [{"start": "00:00", "end": "12:00"}, {"start": "12:00", "end": "00:00"}]}
    with pytest.raises(ScheduleError, match="never fires"):
        new_job(name="never", kind="task", task="x", cron="0 * * * *", timezone="UTC", now=NOW, options=quiet)
