"""When a job fires: a cron expression in an IANA timezone, or one instant.

Cron is evaluated by cronsim, which follows Debian cron across DST changes: a daily
``30 2 * * *`` fires once when 02:30 happens twice (autumn) and at 03:00 when 02:30 does
not happen (spring); an hourly job fires every real hour. (croniter 7 fires such a daily
job twice in autumn.) Slots come out as UTC instants; all arithmetic is done in UTC.

*Quiet hours* (used by the pulse) are local time windows in which slots are dropped.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from agent_kernel.scheduler import ScheduleError
from agent_kernel.scheduler.clock import UTC, as_utc

# Iterations of a cron expression scanned forward before the scan jumps to the end.
_SCAN_LIMIT = 20_000


@dataclass(frozen=True)
class QuietWindow:
    """Local times ``[start, end)`` with no firing; ``end <= start`` wraps past midnight."""

    start: time
    end: time

    def __contains__(self, moment: time) -> bool:
        if self.start < self.end:
            return self.start <= moment < self.end
        return moment >= self.start or moment < self.end

    @classmethod
    def parse(cls, value: dict[str, str] | str) -> QuietWindow:
        """From ``{"start": "22:00", "end": "07:00"}`` or ``"22:00-07:00"``."""
        if isinstance(value, str):
            start, sep, end = value.partition("-")
            if not sep:
                raise ScheduleError(f"Quiet hours {value!r} need the form HH:MM-HH:MM, e.g. 22:00-07:00.")
        else:
            start, end = value.get("start", ""), value.get("end", "")
        try:
            window = cls(time.fromisoformat(start.strip()), time.fromisoformat(end.strip()))
        except ValueError:
            raise ScheduleError(
                f"Quiet hours {value!r} need start and end times as HH:MM, e.g. 22:00 and 07:00."
            ) from None
        if window.start == window.end:
            raise ScheduleError(
                f"Quiet hours {value!r} start and end at the same time; give a window such as 22:00-07:00."
            )
        return window

    def to_json(self) -> dict[str, str]:
        return {"start": self.start.strftime("%H:%M"), "end": self.end.strftime("%H:%M")}


@dataclass(frozen=True)
class Schedule:
    """A cron expression (with its timezone) or a single instant ``at``."""

    cron: str | None = None
    at: datetime | None = None
    timezone: str = "UTC"
    quiet: tuple[QuietWindow, ...] = ()

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.at is None):
            raise ScheduleError("Give exactly one of `at` (one time) or `cron` (recurring).")
        zone(self.timezone)
        if self.cron is not None:
            check_cron(self.cron)

    @property
    def kind(self) -> str:
        return "cron" if self.cron is not None else "once"

    def describe(self) -> str:
        """Human words: 'At 08:00 every day (Europe/Berlin)' or the instant."""
        if self.cron is None:
            assert self.at is not None
            return "once at " + self.at.astimezone(zone(self.timezone)).strftime("%Y-%m-%d %H:%M %Z")

        try:
            words = CronSim(self.cron, datetime.now(UTC)).explain()
        except Exception:  # noqa: BLE001 - explain() does not cover every expression
            words = self.cron
        quiet = "".join(f", not {w.start:%H:%M}-{w.end:%H:%M}" for w in self.quiet)
        return f"{words} ({self.timezone}{quiet})"

    def next_after(self, instant: datetime) -> datetime | None:
        """The first slot strictly after ``instant``, or None when there is none."""
        for slot in self._iter_from(instant):
            return slot
        return None

    def slots(self, start: datetime, end: datetime, keep: int) -> tuple[list[datetime], int]:
        """The last ``keep`` slots in ``[start, end]`` and how many there are in all.

        A very long gap (a frequent cron over weeks of downtime) is not walked slot by
        slot: after a bounded scan the last slots are found by walking back from ``end``
        and the total is reported as at least what was scanned.
        """
        start, end = as_utc(start), as_utc(end)
        last: deque[datetime] = deque(maxlen=max(keep, 1))
        count = 0
        for slot in self._iter_from(start - timedelta(seconds=1)):
            if slot > end:
                return list(last), count
            last.append(slot)
            count += 1
            if count >= _SCAN_LIMIT:
                break
        tail = self._last_before(end, keep, not_before=start)
        return tail, max(count, len(tail))

    # -- iteration ------------------------------------------------------------------------

    def _iter_from(self, instant: datetime) -> Iterator[datetime]:
        """Slots strictly after ``instant``, in order, as UTC."""
        instant = as_utc(instant)
        if self.at is not None:
            if self.at > instant:
                yield self.at
            return

        assert self.cron is not None
        tz = zone(self.timezone)
        previous = instant
        quiet_in_a_row = 0
        try:
            for local in CronSim(self.cron, instant.astimezone(tz)):
                slot = local.astimezone(UTC)
                # cronsim works on local wall time; around an autumn change a slot can come
                # out at or before where we started. Slots only move forward here.
                if slot <= previous:
                    continue
                previous = slot
                if self.quiet and self._is_quiet(slot):
                    quiet_in_a_row += 1
                    if quiet_in_a_row > _SCAN_LIMIT:  # every slot is quiet: it never fires
                        return
                    continue
                quiet_in_a_row = 0
                yield slot
        except StopIteration:  # cronsim gives up after 50 years without a match
            return

    def _last_before(self, end: datetime, keep: int, *, not_before: datetime) -> list[datetime]:
        if self.cron is None:
            return [self.at] if self.at is not None and not_before <= self.at <= end else []
        tz = zone(self.timezone)
        found: list[datetime] = []
        for local in CronSim(self.cron, (end + timedelta(seconds=1)).astimezone(tz), reverse=True):
            slot = local.astimezone(UTC)
            if slot < not_before or len(found) >= keep:
                break
            if slot <= end and not (self.quiet and self._is_quiet(slot)) and slot not in found:
                found.append(slot)
        return sorted(found)

    def _is_quiet(self, slot: datetime) -> bool:
        moment = slot.astimezone(zone(self.timezone)).time()
        return any(moment in window for window in self.quiet)


# -- validation and parsing ---------------------------------------------------------------


def check_cron(expression: str) -> None:
    """Raise :class:`ScheduleError` with a usable message for a bad cron expression."""
    fields = expression.split()
    if len(fields) not in (5, 6):
        raise ScheduleError(
            f"Cron expression {expression!r} has {len(fields)} fields; use 5: minute hour "
            "day-of-month month day-of-week, e.g. '0 9 * * MON-FRI' (9:00 on weekdays)."
        )
    try:
        CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise ScheduleError(
            f"Cron expression {expression!r} is not valid ({exc}). Fields: minute hour "
            "day-of-month month day-of-week, e.g. '*/15 * * * *' or '0 9 * * MON-FRI'."
        ) from None


def zone(name: str) -> ZoneInfo:
    """The ``ZoneInfo`` for an IANA name, or a :class:`ScheduleError` saying what is valid."""
    try:
        if not name or name != name.strip():
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(
            f"Unknown timezone {name!r}: use an IANA name such as 'Europe/Berlin', 'America/New_York' or 'UTC'."
        ) from None


def local_timezone_name() -> str:
    """The machine's IANA timezone name (``TZ``, /etc/timezone, /etc/localtime), else UTC."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        candidates.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    except OSError:
        pass
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo" + os.sep in target:
            candidates.append(target.split("zoneinfo" + os.sep, 1)[1])
    except OSError:
        pass
    for name in candidates:
        if name:
            try:
                zone(name)
            except ScheduleError:
                continue
            return name
    return "UTC"


def parse_instant(text: str, timezone: str) -> datetime:
    """An ISO 8601 date-time as UTC; without an offset it is read in ``timezone``."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ScheduleError(
            f"`at` must be an ISO 8601 date and time, e.g. 2026-02-25T09:00:00Z or "
            f"2026-02-25T09:00 (read in {timezone}); got {text!r}."
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=zone(timezone))
    return parsed.astimezone(UTC)
