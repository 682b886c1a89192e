"""``%agent_jobs``: the scheduled jobs, seen from a notebook.

Shows each job with its schedule, next run, last run and status, and a link to the last
output notebook; says so when no scheduler daemon is running (jobs fire only while one
runs). It reads the same store as the daemon, through the scheduler service; it never
imports the scheduler's machinery (papermill, executors).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from agent_kernel.magics.args import parse_args, usage_errors

if TYPE_CHECKING:
    from datetime import datetime

    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.display.text_tables import Table
    from agent_kernel.scheduler.jobs import Job
    from agent_kernel.scheduler.runs import Run
    from agent_kernel.store import Store

__all__ = ["JobMagics", "JobsView"]


@magics_class
class JobMagics(Magics):
    """The scheduler's magics; ``store`` gives the kernel agent's store when called."""

    def __init__(self, shell: InteractiveShell, store: Callable[[], Store]) -> None:
        super().__init__(shell=shell)
        self._store = store

    @magic_arguments()
    @argument("--all", action="store_true", help="Also list disabled jobs.")
    @line_magic
    def agent_jobs(self, line: str = "") -> JobsView | Table | None:
        """Scheduled jobs: schedule, next run, last run, status and the last output notebook.

        Jobs are created by the agent's schedule tools (create_scheduled_task,
        set_reminder, manage_pulse), JupyterLab's "Schedule this notebook…" or
        `agent-kernel jobs add`, and fire while a scheduler runs: the one in Jupyter
        Server (agent-kernel's server extension) or `agent-kernel scheduler`.

        `%agent_jobs edit JOB --cron "0 9 * * *" -p region=EU --timeout 600` changes a
        job (the options of `agent-kernel jobs edit`: --name, --task, --notebook, --at,
        --cron, --timezone, -p NAME=VALUE, --unset NAME, --model, --token-limit, --kernel,
        --timeout, --cell-timeout, --retries, --retry-on, --retry-delay, --catchup,
        --max-catchup, --overlap); each change is a new version of the job.
        `%agent_jobs history JOB` lists its versions: what each changed, who, when.
        """
        from agent_kernel.scheduler import ScheduleError, leader
        from agent_kernel.scheduler.service import SchedulerService

        action, _, rest = line.strip().partition(" ")
        if action in ("edit", "history"):
            with usage_errors():
                if action == "edit":
                    self._edit(rest)
                    return None
                return self._history(rest)
        args = parse_args(self.agent_jobs, line)
        service = SchedulerService(self._store())
        try:
            states = service.jobs(include_disabled=True)
            lease = service.scheduler()
        except ScheduleError as exc:
            raise UsageError(str(exc)) from None
        shown = [state for state in states if args.all or state.job.enabled]
        rows = [_row(state.job, state.last) for state in shown]
        notes = []
        if not rows:
            notes.append(_empty_note(disabled=len(states)))
        if lease is None:
            notes.append(f"No scheduler is running: jobs fire only while one runs; {leader.HOW_TO_START}.")
        return JobsView(rows, "\n".join(notes))

    def _edit(self, line: str) -> None:
        from agent_kernel.scheduler import edits
        from agent_kernel.scheduler.clock import iso
        from agent_kernel.scheduler.service import SchedulerService
        from agent_kernel.store.provenance import Provenance

        parser = _Parser(prog="%agent_jobs edit", add_help=False)
        edits.add_options(parser)
        args = parser.parse_args(_split(line))
        service = SchedulerService(self._store(), by_name=True, listing="`%agent_jobs --all` lists them")
        before = service.get(args.job).job
        changes = edits.changes(before, vars(args), args.parameter, args.unset)
        job = service.update(before.id, changes, by=Provenance.person(), created_by="magic").job
        if job.version == before.version:
            print(f"Job {job.id} ({job.name}) is unchanged (version {job.version}).")
            return
        shown = f"next run {iso(job.next_run_at, job.timezone)}" if job.enabled else "disabled"
        print(f"Job {job.id} ({job.name}) is now version {job.version}: {job.schedule.describe()}; {shown}.")

    def _history(self, line: str) -> Table:
        from agent_kernel.display.text_tables import Table
        from agent_kernel.scheduler.service import SchedulerService

        words = _split(line)
        if len(words) != 1:
            raise UsageError("Usage: %agent_jobs history JOB (its id, a unique prefix of it, or its name).")
        service = SchedulerService(self._store(), by_name=True, listing="`%agent_jobs --all` lists them")
        job, versions = service.versions(words[0])
        rows = [
            [str(v.version), v.changed_at.strftime("%Y-%m-%d %H:%M UTC") if v.changed_at else "", v.changed_by,
             ", ".join(v.changed) if v.changed else "(created)"]
            for v in versions
        ]  # fmt: skip
        return Table(["version", "changed at", "by", "changed"], rows, note=f"{job.name} ({job.id})")


class _Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes are a ``UsageError`` (not an exit of the kernel)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}. Usage: {' '.join(self.format_usage().split()[1:])}")


def _split(line: str) -> list[str]:
    import shlex

    try:
        return shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"Cannot read the options: {exc}.") from None


def _empty_note(*, disabled: int) -> str:
    """What to do when there is no job to list (``disabled``: jobs that are switched off)."""
    if disabled:
        plural = "s are" if disabled != 1 else " is"
        return f"No enabled jobs: {disabled} job{plural} disabled (`%agent_jobs --all` lists them)."
    return (
        'No scheduled jobs yet. Ask `%agent` to schedule one ("run this notebook every morning '
        'at 8"), use the clock button "Schedule this notebook…" in a notebook\'s toolbar in '
        "JupyterLab, or run `agent-kernel jobs add` in a terminal."
    )


def _row(job: Job, last: Run | None) -> dict[str, str]:
    from agent_kernel.scheduler.cron import zone

    tz = zone(job.timezone)

    def local(instant: datetime | None) -> str:
        return instant.astimezone(tz).strftime("%Y-%m-%d %H:%M %Z") if instant else ""

    return {
        "id": job.id,
        "name": job.name,
        "kind": job.kind,
        "schedule": job.schedule.describe(),
        "next run": local(job.next_run_at) if job.enabled else "(disabled)",
        "last run": local(last.started_at or last.scheduled_for) if last else "",
        "status": last.status if last else "",
        "error": (last.error or "").splitlines()[0][:100] if last and last.error else "",
        "output": last.output_path or "" if last and last.status not in ("QUEUED",) else "",
    }


_COLUMNS = ["id", "name", "kind", "schedule", "next run", "last run", "status", "output"]
_STATUS_COLORS = {"SUCCEEDED": "#1a7f37", "FAILED": "#cf222e", "TIMED_OUT": "#cf222e", "LOST": "#9a6700",
                  "CANCELLED": "#57606a", "RUNNING": "#0969da", "QUEUED": "#57606a"}  # fmt: skip


class JobsView:
    """The table ``%agent_jobs`` returns: HTML with links in a notebook, text elsewhere.

    Without rows there is no table, only the ``note`` (what to do next). The note is one
    paragraph a line; `backticks` in it mark a command: code in HTML, plain in text.
    """

    def __init__(self, rows: list[dict[str, str]], note: str = "") -> None:
        self.rows = rows
        self.note = note

    def _repr_html_(self) -> str:
        import html  # with its entity table: not worth loading at %load_ext

        note = "".join(f"<div style='color:#57606a'>{_code_html(line)}</div>" for line in self.note.splitlines())
        if not self.rows:
            return note
        head = "".join(f"<th style='text-align:left'>{c}</th>" for c in _COLUMNS)
        body = []
        for row in self.rows:
            cells = []
            for column in _COLUMNS:
                value = html.escape(row[column])
                if column == "status" and row[column]:
                    color = _STATUS_COLORS.get(row[column], "inherit")
                    title = f" title='{html.escape(row['error'], quote=True)}'" if row["error"] else ""
                    value = f"<span style='color:{color}'{title}>{value}</span>"
                elif column == "output" and row[column]:
                    value = _link(row[column])
                cells.append(f"<td style='text-align:left'>{value}</td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{note}"

    def __repr__(self) -> str:
        from agent_kernel.display.text_tables import Table

        note = self.note.replace("`", "")
        if not self.rows:
            return note
        rows = [[row[c] if c != "status" or not row["error"] else f"{row[c]} ({row['error']})" for c in _COLUMNS]
                for row in self.rows]  # fmt: skip
        return repr(Table(_COLUMNS, rows, note=note))


def _code_html(text: str) -> str:
    """``text`` as HTML, its `backticked` parts as code."""
    import html

    parts = html.escape(text).split("`")
    return "".join(f"<code>{part}</code>" if i % 2 else part for i, part in enumerate(parts))


def _link(path: str) -> str:
    """A link the front end can open: relative to the kernel's directory when possible."""
    import html

    target = Path(path)
    try:
        relative = os.path.relpath(target, Path.cwd())
    except ValueError:  # another drive (Windows)
        relative = str(target)
    href = relative if not relative.startswith("..") else target.as_uri()
    label = f"{target.parent.name}/{target.name}"
    return f"<a href='{html.escape(href, quote=True)}' target='_blank' title='{html.escape(path, quote=True)}'>{html.escape(label)}</a>"
