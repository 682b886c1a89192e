"""Schedules: cron in a timezone across DST changes, one-shot instants, quiet hours, limits."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import datetime, time, timedelta, timezone

import pytest

from agent_kernel.scheduler import ScheduleError
from agent_kernel.scheduler.cron import (
    QuietWindow,
    Schedule,
    local_timezone_name,
    parse_instant,
    zone,
)

UTC = timezone.utc
BERLIN = zone("Europe/Berlin")


def all_slots(schedule: Schedule, start: datetime, end: datetime) -> list[datetime]:
    slots, count = schedule.slots(start, end, keep=10_000)
    assert count == len(slots)
    return slots


def test_daily_job_fires_once_at_the_end_of_the_spring_gap():
    # 2025-03-30: Berlin clocks jump from 02:00 to 03:00, so 02:30 does not exist.
    schedule = Schedule(cron="30 2 * * *", timezone="Europe/Berlin")
    slots = all_slots(schedule, datetime(2025, 3, 29, tzinfo=UTC), datetime(2025, 4, 1, tzinfo=UTC))
    local = [s.astimezone(BERLIN).strftime("%m-%d %H:%M %Z") for s in slots]
    assert local == ["03-29 02:30 CET", "03-30 03:00 CEST", "03-31 02:30 CEST"]


def test_daily_job_fires_once_when_its_hour_happens_twice():
    # 2025-10-26: Berlin clocks go back from 03:00 to 02:00, so 02:30 happens twice.
    schedule = Schedule(cron="30 2 * * *", timezone="Europe/Berlin")
    slots = all_slots(schedule, datetime(2025, 10, 25, tzinfo=UTC), datetime(2025, 10, 28, tzinfo=UTC))
    days = Counter(s.astimezone(BERLIN).date() for s in slots)
    assert sorted(days.values()) == [1, 1, 1]
    assert slots[1] == datetime(2025, 10, 26, 0, 30, tzinfo=UTC)  # the first 02:30 (CEST)


def test_hourly_job_fires_every_real_hour_across_both_changes():
    schedule = Schedule(cron="15 * * * *", timezone="Europe/Berlin")
    spring = all_slots(schedule, datetime(2025, 3, 29, 23, tzinfo=UTC), datetime(2025, 3, 30, 22, 0, tzinfo=UTC))
    autumn = all_slots(schedule, datetime(2025, 10, 25, 22, tzinfo=UTC), datetime(2025, 10, 26, 23, 0, tzinfo=UTC))
    assert len(spring) == 23 and len(autumn) == 25  # the local days have 23 and 25 hours
    for slots in (spring, autumn):
        gaps = {b - a for a, b in itertools.pairwise(slots)}
        assert gaps == {timedelta(hours=1)}


def test_next_after_never_goes_back_inside_the_repeated_hour():
    schedule = Schedule(cron="30 2 * * *", timezone="Europe/Berlin")
    # 01:20 UTC is 02:20 CET, after the first 02:30 (00:30 UTC) already happened.
    inside = datetime(2025, 10, 26, 1, 20, tzinfo=UTC)
    assert schedule.next_after(inside) == datetime(2025, 10, 27, 1, 30, tzinfo=UTC)


def test_one_shot_schedule_has_one_slot():
    at = datetime(2026, 2, 25, 9, tzinfo=UTC)
    schedule = Schedule(at=at)
    assert schedule.next_after(at - timedelta(seconds=1)) == at
    assert schedule.next_after(at) is None
    assert schedule.slots(at - timedelta(days=1), at + timedelta(days=1), keep=5) == ([at], 1)
    assert schedule.describe() == "once at 2026-02-25 09:00 UTC"


def test_quiet_hours_drop_slots_and_wrap_past_midnight():
    quiet = (QuietWindow.parse("22:00-07:00"),)
    schedule = Schedule(cron="0 */2 * * *", timezone="Europe/Berlin", quiet=quiet)
    day = all_slots(schedule, datetime(2026, 6, 1, 0, tzinfo=BERLIN), datetime(2026, 6, 1, 23, 59, tzinfo=BERLIN))
    assert [s.astimezone(BERLIN).hour for s in day] == [8, 10, 12, 14, 16, 18, 20]
    assert time(23, 30) in quiet[0] and time(6, 59) in quiet[0] and time(7, 0) not in quiet[0]
    with pytest.raises(ScheduleError, match="HH:MM"):
        QuietWindow.parse("late")


def test_a_long_gap_is_bounded_and_counted():
    schedule = Schedule(cron="* * * * *", timezone="UTC")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = start + timedelta(days=30)  # 43,201 minute slots
    slots, count = schedule.slots(start, end, keep=3)
    assert slots == [end - timedelta(minutes=2), end - timedelta(minutes=1), end]
    assert count >= 20_000  # at least what was scanned before jumping to the end


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "every day"}, "has 2 fields; use 5"),
        ({"cron": "61 * * * *"}, "is not valid \\(Bad minute\\)"),
        ({"cron": "0 9 * * MON", "timezone": "Mars/Olympus"}, "Unknown timezone 'Mars/Olympus'"),
        ({}, "exactly one of `at`"),
    ],
)
def test_bad_schedules_say_what_to_change(kwargs, message):
    with pytest.raises(ScheduleError, match=message):
        Schedule(**kwargs)


def test_instants_are_read_in_the_given_timezone():
    assert parse_instant("2026-02-25T09:00:00Z", "Europe/Berlin") == datetime(2026, 2, 25, 9, tzinfo=UTC)
    assert parse_instant("2026-02-25T09:00", "Europe/Berlin") == datetime(2026, 2, 25, 8, tzinfo=UTC)
    assert parse_instant("2026-07-01 09:00+02:00", "UTC") == datetime(2026, 7, 1, 7, tzinfo=UTC)
    with pytest.raises(ScheduleError, match="ISO 8601"):
        parse_instant("tomorrow at nine", "UTC")


def test_local_timezone_name_is_a_valid_iana_name(monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    assert local_timezone_name() == "America/New_York"
    monkeypatch.setenv("TZ", "Not/AZone")
    zone(local_timezone_name())  # falls back to the system's, or UTC
