"""A job's changes as a person types them: options by field, ``NAME=VALUE`` parameters.

``agent-kernel jobs edit`` and ``%agent_jobs edit`` take the same options; both turn
them into the changes :meth:`~agent_kernel.scheduler.service.SchedulerService.update`
takes here, so a parameter is read the same way in a terminal and in a notebook.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kernel.paths import agent_home
from agent_kernel.scheduler import ScheduleError, notify

if TYPE_CHECKING:
    from agent_kernel.scheduler.jobs import Job

__all__ = ["EDITABLE", "add_notify_options", "add_options", "changes", "parameter"]

# The options that map one to one onto a job's fields (their destinations).
EDITABLE = (
    "name", "task", "notebook", "at", "cron", "timezone", "model", "token_limit", "kernel", "catchup",
    "max_catchup", "overlap", "retry_on", "retry_delay_s", "max_retries", "cell_timeout_s", "timeout_s",
)  # fmt: skip


def parameter(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` as a papermill parameter: VALUE as JSON when it is, else as a string."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip().isidentifier():
        raise ScheduleError(f"Parameters are NAME=VALUE, not {text!r}.")
    try:
        return name.strip(), json.loads(value)
    except ValueError:
        return name.strip(), value


def changes(
    job: Job,
    options: Mapping[str, Any],
    set_parameters: Iterable[str] = (),
    unset: Iterable[str] = (),
    *,
    home: str | Path | None = None,
) -> dict[str, Any]:
    """The changes ``options`` (None: not given), ``set_parameters`` (``NAME=VALUE``) and
    ``unset`` (parameter names) make to ``job``; refused when they make none. ``home``
    holds the notification targets (``--notify``)."""
    found = {name: options[name] for name in EDITABLE if options.get(name) is not None}
    if options.get("explain") is not None:
        found["explain"] = options["explain"]
    if options.get("no_notify"):
        found["notify"] = None
    elif options.get("notify") or options.get("notify_on"):
        current = job.options.get("notify")
        found["notify"] = notify.setting(
            home or agent_home(), options.get("notify") or [], options.get("notify_on"), current
        )
    if found.get("notebook"):
        found["notebook"] = str(Path(found["notebook"]).expanduser().resolve())  # as typed, from here
    set_parameters, unset = list(set_parameters), list(unset)
    if set_parameters or unset:
        parameters = dict(job.parameters)
        parameters.update(parameter(p) for p in set_parameters)
        for name in unset:
            if name not in parameters:
                raise ScheduleError(f"{job.name!r} has no parameter {name!r} to unset.")
            del parameters[name]
        found["parameters"] = parameters
    if not found:
        raise ScheduleError("Nothing to change: give an option such as --cron, -p NAME=VALUE or --timeout.")
    return found


def add_options(parser: argparse.ArgumentParser) -> None:
    """The options of an edit (``jobs edit`` in a terminal, ``%agent_jobs edit`` in a notebook)."""
    parser.add_argument("job", help="the job's id, a unique prefix of it, or its name")
    parser.add_argument("--name")
    parser.add_argument("--task", help="a new prompt (task jobs)")
    parser.add_argument("--notebook", help="a new notebook path (notebook jobs)")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--at", help="one run at this ISO 8601 time (replaces the cron expression)")
    when.add_argument("--cron", help="a 5-field cron expression (replaces --at)")
    parser.add_argument("--timezone")
    parser.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                        help="set a papermill parameter (VALUE is JSON, else a string); repeatable")  # fmt: skip
    parser.add_argument("--unset", action="append", default=[], metavar="NAME", help="remove a parameter; repeatable")
    parser.add_argument("--model")
    parser.add_argument("--token-limit", type=int)
    parser.add_argument("--kernel")
    parser.add_argument("--timeout", dest="timeout_s", type=float, help="seconds for the whole run")
    parser.add_argument("--cell-timeout", dest="cell_timeout_s", type=float, help="seconds for one cell")
    parser.add_argument("--retries", dest="max_retries", type=int)
    parser.add_argument("--retry-on", help="statuses to retry: LOST, FAILED, TIMED_OUT")
    parser.add_argument("--retry-delay", dest="retry_delay_s", type=float)
    parser.add_argument("--catchup", choices=["skip", "latest", "all"])
    parser.add_argument("--max-catchup", type=int)
    parser.add_argument("--overlap", choices=["allow", "forbid", "queue"])
    add_notify_options(parser)
    parser.add_argument("--no-notify", action="store_true", help="stop notifying about this job's runs")


def add_notify_options(parser: argparse.ArgumentParser) -> None:
    """``--notify`` and ``--notify-on``, for adding a job and for editing one."""
    parser.add_argument("--notify", action="append", default=[], metavar="TARGET",
                        help="notify a target (its name in `agent-kernel notify list`, or an apprise URL, "
                        "which is kept there, not in the job); repeatable")  # fmt: skip
    parser.add_argument("--notify-on", choices=["failure", "success", "always"],
                        help="which runs to notify about (default failure)")  # fmt: skip
    parser.add_argument("--explain", action=argparse.BooleanOptionalAction, default=None,
                        help="explain each failed run with the small model (kept on the run, in the notification)")  # fmt: skip
