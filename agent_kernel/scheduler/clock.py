"""What time it is, and how instants are stored.

Every instant the scheduler handles is an aware UTC ``datetime``; the database keeps
naive UTC ``TIMESTAMP`` values (see ``store/schema.py``). Local time appears only when a
cron expression is evaluated or a time is shown. The scheduler asks a :class:`Clock`
for the time, so tests can walk it across a DST change or a long downtime.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Protocol
from zoneinfo import ZoneInfo

UTC = timezone.utc


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, aware, in UTC."""


class SystemClock:
    """The machine's clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to (tests, benchmarks)."""

    def __init__(self, start: datetime) -> None:
        self._now = as_utc(start)

    def now(self) -> datetime:
        return self._now

    def set(self, instant: datetime) -> None:
        self._now = as_utc(instant)

    def advance(self, **delta: float) -> datetime:
        self._now += timedelta(**delta)
        return self._now


def as_utc(instant: datetime) -> datetime:
    """``instant`` as aware UTC (a naive value is taken to be UTC already)."""
    if instant.tzinfo is None:
        return instant.replace(tzinfo=UTC)
    return instant.astimezone(UTC)


def to_db(instant: datetime | None) -> datetime | None:
    """The naive UTC value a ``TIMESTAMP`` column stores."""
    return None if instant is None else as_utc(instant).replace(tzinfo=None)


def from_db(value: datetime | None) -> datetime | None:
    """An aware UTC instant from a ``TIMESTAMP`` column."""
    return None if value is None else value.replace(tzinfo=UTC)


def iso(instant: datetime | None, tz: str | None = None) -> str | None:
    """ISO 8601 to the second: in ``tz`` with its offset, else UTC with ``Z``."""
    if instant is None:
        return None
    if tz and tz != "UTC":
        return instant.astimezone(ZoneInfo(tz)).isoformat(timespec="seconds")
    return as_utc(instant).strftime("%Y-%m-%dT%H:%M:%SZ")
