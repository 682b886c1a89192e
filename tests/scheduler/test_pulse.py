"""The pulse: its schedule from pulses per day, active days and quiet hours; its notes
carried from one autonomous firing to the next."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from agent_kernel.scheduler import ScheduleError, pulse
from agent_kernel.scheduler.clock import ManualClock
from agent_kernel.scheduler.cron import zone
from agent_kernel.testing import call, say
from tests.support.scheduling import UTC, runs_of, scheduler

MONDAY = datetime(2026, 3, 2, 5, 0, tzinfo=UTC)  # 06:00 in Berlin


@pytest.mark.parametrize(
    ("per_day", "days", "cron"),
    [
        (48, range(7), "*/30 * * * *"),
        (24, range(7), "0 * * * *"),
        (12, [1, 2, 3, 4, 5], "0 */2 * * 1,2,3,4,5"),
        (6, [0, 6], "0 */4 * * 0,6"),
        (2, [3], "0 */12 * * 3"),
    ],
)
def test_pulses_per_day_and_active_days_make_the_cron(per_day, days, cron):
    assert pulse.pulse_cron(per_day, list(days)) == cron


@pytest.mark.parametrize(("per_day", "days"), [(10, [1]), (12, []), (12, [7])])
def test_impossible_pulse_settings_are_refused(per_day, days):
    with pytest.raises(ScheduleError):
        pulse.pulse_cron(per_day, days)


def test_quiet_hours_and_days_shape_the_day(store):
    clock = ManualClock(MONDAY)
    with store.connect() as con:
        job = pulse.configure(con, clock.now(), timezone="Europe/Berlin", pulses_per_day=12,
                              active_days=[1, 2, 3, 4, 5], quiet_hours=["20:00-09:00"])  # fmt: skip
        state = pulse.status(con, job, clock.now())
    berlin = zone("Europe/Berlin")
    assert job.next_run_at.astimezone(berlin).strftime("%a %H:%M") == "Mon 10:00"
    assert state["remaining_today"] == 5  # 10, 12, 14, 16, 18 (20:00 is quiet)
    assert state["interval_minutes"] == 120 and state["fired_today"] == 0
    friday_evening = datetime(2026, 3, 6, 19, 0, tzinfo=UTC)  # 20:00 Berlin: quiet, then the weekend
    assert job.schedule.next_after(friday_evening).astimezone(berlin).strftime("%a %H:%M") == "Mon 10:00"
    with store.connect() as con:
        paused = pulse.configure(con, clock.now(), timezone="Europe/Berlin", enabled=False)
        assert paused.next_run_at is None and pulse.status(con, paused, clock.now())["remaining_today"] == 0
        with pytest.raises(ScheduleError, match="keep them to 2,000"):
            pulse.update_notes(con, "n" * 2001)


def test_each_pulse_reads_the_notes_the_last_one_left(store, home, scripted_model):
    clock = ManualClock(MONDAY)
    with store.connect() as con:
        pulse.configure(con, clock.now(), timezone="UTC", pulses_per_day=24, instruction="Look at the sales table.")
    daemon = scheduler(store, home, clock)
    scripted_model.add(
        call("manage_pulse", action="update_notes", notes="Sales checked up to March 1; look at returns next."),
        say("Pulse done."),
    )
    clock.set(MONDAY + timedelta(hours=1, seconds=5))
    [first] = daemon.run_once()
    assert first.status == "SUCCEEDED", first.error
    prompt = scripted_model.requests[0]["messages"][0]["content"][-1]["text"]
    assert prompt.startswith("This is an autonomous pulse (number 1 today, every 60 minutes")
    assert "Look at the sales table." in prompt and "(none yet: this is the first pulse)" in prompt
    assert scripted_model.requests[1]["messages"][-1]["content"][0]["content"].startswith('{"success": true')

    scripted_model.add(say("Returns look normal."))
    clock.set(MONDAY + timedelta(hours=2, seconds=5))
    [second] = daemon.run_once()
    assert second.status == "SUCCEEDED", second.error
    prompt = scripted_model.requests[2]["messages"][0]["content"][-1]["text"]
    assert "number 2 today" in prompt and "Sales checked up to March 1; look at returns next." in prompt
    assert len(scripted_model.requests[2]["messages"]) == 1  # a fresh session each time
    assert [r.status for r in runs_of(store)] == ["SUCCEEDED", "SUCCEEDED"]
