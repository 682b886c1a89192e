"""Notifications of scheduled runs, sent through apprise (e-mail, Slack, Teams, Discord,
Matrix, ntfy, webhooks, ...: https://github.com/caronc/apprise/wiki).

A notification URL carries its service's credentials, so it never enters the store, a run's
log or anything the model reads. The URLs live in one file beside the runs,
``$AGENT_KERNEL_HOME/notify.json``, readable by its owner only; jobs and everything else
name a target by its **name** (``ops-slack``), and show it by apprise's privacy form of
the URL (``slack://T...A/T...B/...``). Targets marked ``default`` notify for jobs that name
none of their own.

A job says when (``on``: ``failure``, the default, ``success`` or ``always``; a reminder
``always``) in its
options (``{"notify": {"targets": [...], "on": "failure"}}``). A notification names the
job, the run's status, its error (the first failing cell's exception) and its output
notebook. Delivery happens after the run is recorded and never changes how it ended; a
failed delivery is recorded on the run (``runs.notify_error``), its message redacted of
the URL's parts.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets as random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from agent_kernel.scheduler import ScheduleError
from agent_kernel.scheduler.checks import MAX_NOTIFY_TARGETS as MAX_TARGETS
from agent_kernel.scheduler.checks import NOTIFY_ON as ON

if TYPE_CHECKING:
    from agent_kernel.scheduler.jobs import Job
    from agent_kernel.scheduler.records import NotifySetting
    from agent_kernel.scheduler.runs import Run

__all__ = ["ON", "Targets", "deliver", "message_of", "setting", "wanted"]

log = logging.getLogger("agent_kernel.scheduler")

FAILED_STATUSES = ("FAILED", "TIMED_OUT", "LOST")
MAX_URL_CHARS = 2_000
BODY_CHARS = 4_000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Target:
    name: str
    url: str
    default: bool = False

    @property
    def shown(self) -> str:
        """The URL with its credentials hidden (apprise's privacy form)."""
        return _privacy(self.url)


class Targets:
    """The notification targets of one agent home (its ``notify.json``)."""

    def __init__(self, home: str | Path) -> None:
        self.path = Path(home) / "notify.json"

    def all(self) -> list[Target]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise ScheduleError(f"Cannot read {self.path}: {exc}.") from None
        return [Target(name, entry["url"], bool(entry.get("default"))) for name, entry in sorted(raw.items())]

    def get(self, name: str) -> Target:
        for target in self.all():
            if target.name == name:
                return target
        raise ScheduleError(f"No notification target {name!r}: `agent-kernel notify list` shows them.")

    def add(self, url: str, *, name: str | None = None, default: bool = False) -> Target:
        """Keep ``url`` (checked by apprise) under ``name`` (made up when None)."""
        url = url.strip()
        if not url or len(url) > MAX_URL_CHARS:
            raise ScheduleError(f"A notification URL is 1 to {MAX_URL_CHARS} characters.")
        if not _valid(url):
            raise ScheduleError(
                f"{_privacy(url) or 'That value'} is not a notification URL apprise knows "
                "(e.g. mailto://user:pass@example.com, slack://TokenA/TokenB/TokenC, ntfy://topic, json://host/path)."
            )
        if name is not None and not _NAME.match(name):
            raise ScheduleError(f"A target's name is letters, digits, '.', '_' or '-' (at most 64), not {name!r}.")
        targets = {t.name: t for t in self.all()}
        same = next((t for t in targets.values() if t.url == url), None)
        if name is None:
            name = same.name if same is not None else f"{url.split(':', 1)[0]}-{random.token_hex(3)}"
        if name not in targets and len(targets) >= MAX_TARGETS:
            raise ScheduleError(f"At most {MAX_TARGETS} notification targets; remove one first.")
        targets[name] = Target(name, url, default or (targets[name].default if name in targets else False))
        self._write(targets)
        return targets[name]

    def remove(self, name: str) -> None:
        targets = {t.name: t for t in self.all()}
        if name not in targets:
            raise ScheduleError(f"No notification target {name!r}: `agent-kernel notify list` shows them.")
        del targets[name]
        self._write(targets)

    def for_job(self, job: Job) -> list[Target]:
        """The targets a job notifies: its own, else the defaults."""
        named = (job.options.get("notify") or {}).get("targets") or []
        known = {t.name: t for t in self.all()}
        if named:
            return [known[n] for n in named if n in known]
        return [t for t in known.values() if t.default]

    def _write(self, targets: dict[str, Target]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {t.name: {"url": t.url, "default": t.default} for t in targets.values()}
        temporary = self.path.with_suffix(".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
        os.chmod(temporary, 0o600)
        os.replace(temporary, self.path)


def setting(home: str | Path, given: list[str], on: str | None, current: NotifySetting | None) -> NotifySetting:
    """A job's ``notify`` option from what a person typed: target names or URLs (a URL is
    kept in the targets file under a made-up name; only names reach the job) and when."""
    targets = Targets(home)
    names = list((current.get("targets") if current else None) or [])
    if given:
        names = [targets.add(item).name if "://" in item else targets.get(item).name for item in given]
    when = on or (current.get("on") if current else None) or "failure"
    if when not in ON:
        raise ScheduleError(f"--notify-on is one of {', '.join(ON)}, not {when!r}.")
    return {"targets": list(dict.fromkeys(names)), "on": when}


def wanted(job: Job, run: Run) -> bool:
    """Whether the run's outcome is one its job notifies about."""
    default = "always" if job.kind == "reminder" else "failure"  # a reminder is meant to be heard
    on = (job.options.get("notify") or {}).get("on") or default
    if run.status in ("QUEUED", "RUNNING", "SKIPPED"):
        return False
    failed = run.status in FAILED_STATUSES
    return on == "always" or (on == "failure" and failed) or (on == "success" and run.status == "SUCCEEDED")


def message_of(job: Job, run: Run, explanation: str | None = None) -> tuple[str, str]:
    """The notification's title and body."""
    title = f"{job.name}: {run.status}"
    lines = [f"Job {job.name} ({job.id}), run {run.id}: {run.status}."]
    if job.kind == "reminder":
        reminder = (job.task or "").removeprefix("(A reminder you set earlier in this session.) ")
        title = "Reminder" + ("" if run.status == "SUCCEEDED" else f" ({run.status})")
        lines = [f"Reminder: {reminder[:1000]}", f"The agent took it up in session {job.session} ({run.status})."]
    if run.error:
        where = f" in cell [{run.error_cell}]" if run.error_cell else ""
        lines.append(f"Error{where}: {run.error.splitlines()[0][:500]}")
    if explanation:
        lines.append(f"Why: {explanation}")
    if run.output_path:
        lines.append(f"Output notebook: {run.output_path}")
    return title, "\n".join(lines)[:BODY_CHARS]


def deliver(targets: list[Target], title: str, body: str, *, failed: bool) -> str | None:
    """Send to every target; None when all got it, else what failed (redacted)."""
    if not targets:
        return None
    import apprise  # noqa: PLC0415 - apprise (~0.3 s) loads only to send or check a notification

    sender = apprise.Apprise()
    for target in targets:
        sender.add(target.url)
    kind = apprise.NotifyType.FAILURE if failed else apprise.NotifyType.SUCCESS
    problems: list[str] = []
    handler = _Collect(problems)
    apprise_log = logging.getLogger("apprise")
    apprise_log.addHandler(handler)
    try:
        ok = bool(sender.notify(title=title, body=body, notify_type=kind))
    except Exception as exc:  # noqa: BLE001 - a delivery must never fail the run
        ok, problems = False, [f"{type(exc).__name__}: {exc}"]
    finally:
        apprise_log.removeHandler(handler)
    if ok:
        return None
    said = "; ".join(dict.fromkeys(problems))[:1000] or "the service did not accept it"
    return _without_urls(f"Not delivered to {', '.join(t.name for t in targets)}: {said}", targets)


class _Collect(logging.Handler):
    """What apprise logs as warnings while sending (why a delivery failed)."""

    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage()[:300])


def _valid(url: str) -> bool:
    import apprise  # noqa: PLC0415 - apprise: see deliver

    return apprise.Apprise.instantiate(url, suppress_exceptions=True) is not None


def _privacy(url: str) -> str:
    """The URL as it may be shown: apprise's privacy form, or for what apprise cannot read
    only its scheme, and only a scheme apprise knows ("" when it is none). Such a value
    may be a credential pasted in the wrong place, whole or before a "://"."""
    import apprise  # noqa: PLC0415 - apprise: see deliver

    plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    if plugin is None:
        scheme = url.split("://", 1)[0].lower() if "://" in url else ""
        return f"{scheme}://…" if scheme in _known_schemes() else ""
    shown: Any = plugin.url(privacy=True)  # type: ignore[no-untyped-call]
    return str(shown).split("?", 1)[0]


def _known_schemes() -> set[str]:
    from apprise.manager_plugins import NotificationManager  # noqa: PLC0415 - apprise: see deliver

    manager = NotificationManager()  # type: ignore[no-untyped-call]  # one per process, its plugins loaded once
    return {str(scheme).lower() for scheme in manager.schemas()}  # type: ignore[no-untyped-call]


def _without_urls(text: str, targets: list[Target]) -> str:
    """``text`` with each target's URL and its secret-looking parts replaced by its name."""
    for target in targets:
        text = text.replace(target.url, f"[{target.name}]")
        parts = urlsplit(target.url)
        pieces = [parts.password, parts.username, *parts.path.split("/"), parts.query]
        for piece in pieces:
            if piece and len(piece) >= 6:
                text = text.replace(piece, "…").replace(unquote(piece), "…")
    return text
