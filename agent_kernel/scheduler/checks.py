"""What a job may hold, checked when it is created and again before each of its runs.

A ``jobs`` row is untrusted input when it runs: anything that can write the table (a
person, a script, a gap in the SQL guard) decides what the scheduler executes. So the
same rules apply to what ``new_job`` builds and to what the scheduler reads back:

- ``notebook``: an absolute path that is its own real path (no ``..``, no symlink), of a
  regular ``.ipynb`` file that reads as a notebook, outside the scheduler's ``runs``
  directory (run outputs hold what a model wrote), holding no cell an agent turn wrote
  after untrusted content whose mark the person has not cleared;
- ``parameters``: a JSON object; names are Python identifiers, not keywords, not
  dunders; values are JSON data (str, finite numbers, bools, null, lists, objects with
  string keys), at most :data:`MAX_DEPTH` deep and :data:`MAX_PARAMETERS_BYTES` as JSON;
- ``task``: text of at most :data:`MAX_TASK_CHARS`; ``name`` and ``session`` one short line;
- ``cwd``: an existing directory given as an absolute path;
- ``kernel``: a kernelspec name (letters, digits, ``._-``) that is installed;
- ``model``: a model id (letters, digits, ``._:@/-``); ``token_limit``: a positive integer;
- the schedule and the run policy as :mod:`.jobs` defines them.

:func:`check_job` raises :class:`InvalidJob` listing every problem; the scheduler then
records the run FAILED with that message and never starts it. :func:`check_spec` repeats
the checks that matter to the runner process itself (its spec file sits on disk), and
:func:`check_parameter_cell` checks the code papermill will inject: assignments of
literals and nothing else.
"""

from __future__ import annotations

import ast
import json
import keyword
import math
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kernel.grants import parse
from agent_kernel.scheduler import ScheduleError
from agent_kernel.scheduler.cell_marks import refusal
from agent_kernel.scheduler.cron import check_cron, zone

if TYPE_CHECKING:
    from nbformat import NotebookNode

# What a job may be; jobs.py and the checks below share it.
KINDS = ("notebook", "task", "reminder", "pulse")

MAX_NAME_CHARS = 200
MAX_TASK_CHARS = 100_000
MAX_PATH_CHARS = 4_096
MAX_PARAMETERS_BYTES = 64 * 1024
MAX_DEPTH = 16
MAX_TOKEN_LIMIT = 100_000_000

_KERNEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class InvalidJob(ScheduleError):
    """A job holds something the scheduler will not run; the message says what."""


def check_job(job: Any, *, home: str | Path | None = None) -> None:
    """Raise :class:`InvalidJob` unless every field of ``job`` is safe to run.

    ``job`` is a :class:`~agent_kernel.scheduler.jobs.Job`, possibly read from a row that
    was edited by hand: no field is trusted to have its declared type.

    ``home`` is the scheduler's home (its ``runs`` directory is no place for a notebook).
    """
    found = problems(job, home=home)
    if found:
        raise InvalidJob("; ".join(found) + ".")


def problems(job: Any, *, home: str | Path | None = None) -> list[str]:
    """Every reason not to run ``job`` (empty when there is none)."""
    found: list[str] = []
    found += _line("name", job.name, required=True)
    if job.kind not in KINDS:
        found.append(f"kind must be one of {', '.join(KINDS)}, not {_show(job.kind)}")
    if job.kind == "notebook":
        found += _problems_of(check_notebook, job.notebook, home=home)
    elif job.notebook is not None:
        found.append(f"a {job.kind} job has no notebook (got {_show(job.notebook)})")
    if job.kind in ("task", "reminder", "pulse"):
        found += _text("task", job.task, required=True)
    elif job.task is not None:
        found.append("a notebook job has no task text")
    found += _problems_of(check_parameters, job.parameters)
    if job.cwd is not None or job.kind == "notebook":
        found += _problems_of(check_cwd, job.cwd)
    if job.kernel is not None:
        found += _problems_of(check_kernel, job.kernel)
    if job.model is not None and not (isinstance(job.model, str) and _MODEL_NAME.fullmatch(job.model)):
        found.append(f"model must be a model id (letters, digits, ._:@/-), not {_show(job.model)}")
    if job.token_limit is not None and not (
        isinstance(job.token_limit, int) and not isinstance(job.token_limit, bool)
        and 0 < job.token_limit <= MAX_TOKEN_LIMIT
    ):  # fmt: skip
        found.append(f"token_limit must be a positive whole number of tokens, not {_show(job.token_limit)}")
    found += _line("session", job.session)
    found += _line("origin_notebook", job.origin_notebook, limit=MAX_PATH_CHARS)
    if not isinstance(job.options, dict):
        found.append("options must be a JSON object")
    else:
        if "notify" in job.options:
            found += _notify_problems(job.options["notify"])
        if not isinstance(job.options.get("explain", False), bool):
            found.append("explain must be true or false")
    found += _problems_of(_schedule_and_policy, job)
    found += _grant_problems(getattr(job, "grants", None), getattr(job, "granted_by", None))
    return found


def check_parameters(parameters: object) -> None:
    """Papermill parameters: identifier names, JSON data values, bounded size."""
    if not isinstance(parameters, dict):
        raise InvalidJob(f"parameters must be a JSON object of name: value pairs, not {_show(parameters)}")
    bad = [name for name in parameters if not _parameter_name(name)]
    if bad:
        raise InvalidJob(
            "parameter names must be Python identifiers (not keywords or dunder names): "
            + ", ".join(_show(name) for name in bad)
        )
    for name, value in parameters.items():
        _check_value(name, value, 0)
    size = len(json.dumps(parameters, ensure_ascii=False).encode())
    if size > MAX_PARAMETERS_BYTES:
        raise InvalidJob(f"parameters take {size:,} bytes as JSON; at most {MAX_PARAMETERS_BYTES:,} are allowed")


def check_notebook(path: object, *, home: str | Path | None = None) -> None:
    """A stored notebook path: absolute, its own real path, a regular readable notebook file."""
    if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS or _CONTROL.search(path):
        raise InvalidJob(f"notebook must be a path, not {_show(path)}")
    if not os.path.isabs(path):
        raise InvalidJob(f"notebook must be an absolute path, not {_show(path)}")
    if os.path.realpath(path) != path:
        raise InvalidJob(f"notebook {_show(path)} is not its own real path (it goes through '..' or a symlink)")
    if not path.endswith(".ipynb"):
        raise InvalidJob(f"notebook {_show(path)} is not an .ipynb file")
    notebook = _check_regular_notebook(path)
    _check_unmarked(path, notebook)
    if home is not None:
        runs = os.path.realpath(Path(home) / "runs")
        if path.startswith(runs.rstrip(os.sep) + os.sep):
            raise InvalidJob(f"notebook {_show(path)} is a run's file in the scheduler's runs directory")


def check_cwd(cwd: object) -> None:
    if not isinstance(cwd, str) or not cwd or len(cwd) > MAX_PATH_CHARS or _CONTROL.search(cwd):
        raise InvalidJob(f"cwd must be a directory path, not {_show(cwd)}")
    if not os.path.isabs(cwd):
        raise InvalidJob(f"cwd must be an absolute path, not {_show(cwd)}")
    if not os.path.isdir(cwd):
        raise InvalidJob(f"cwd {_show(cwd)} is not an existing directory")


def check_kernel(name: object) -> None:
    """A kernelspec name that is installed here."""
    if not isinstance(name, str) or not _KERNEL_NAME.fullmatch(name):
        raise InvalidJob(f"kernel must be a kernelspec name (letters, digits, ._-), not {_show(name)}")
    from jupyter_client.kernelspec import find_kernel_specs  # noqa: PLC0415 - jupyter_client: only checking a kernel name needs it

    known = find_kernel_specs()
    if name not in known:
        raise InvalidJob(f"kernel {_show(name)} is not installed (known: {', '.join(sorted(known)) or 'none'})")


def check_spec(spec: Any) -> None:
    """What the runner checks before it starts papermill on ``spec`` (a ``RunSpec``)."""
    found: list[str] = []
    path = spec.input_path
    if not isinstance(path, str) or not os.path.isabs(path) or not path.endswith(".ipynb"):
        found.append(f"input_path must be an absolute .ipynb path, not {_show(path)}")
    else:
        found += _problems_of(_check_regular_notebook, path)
    found += _problems_of(check_parameters, spec.parameters)
    found += _problems_of(check_cwd, spec.cwd)
    if spec.kernel_name is not None:
        found += _problems_of(check_kernel, spec.kernel_name)
    if found:
        raise InvalidJob("; ".join(found) + ".")


def check_parameter_cell(source: str) -> None:
    """The injected parameters cell may only assign literals to plain names."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise InvalidJob(f"the parameters cell papermill would inject does not parse: {exc.msg}") from None
    for statement in tree.body:
        if not (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and _parameter_name(statement.targets[0].id)
        ):
            raise InvalidJob(f"the parameters cell would run more than assignments: {ast.unparse(statement)[:80]!r}")
        try:
            ast.literal_eval(statement.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise InvalidJob(f"the parameter {statement.targets[0].id} would not be a literal value") from None


# -- helpers ---------------------------------------------------------------------------------


def _parameter_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and name.isidentifier()
        and name.isascii()
        and not keyword.iskeyword(name)
        and not (name.startswith("__") and name.endswith("__"))
    )


def _check_value(name: str, value: object, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise InvalidJob(f"parameter {name} nests deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, int):
        if abs(value) >= 2**63:
            raise InvalidJob(f"parameter {name} holds an integer out of the 64-bit range")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidJob(f"parameter {name} holds {value!r}; JSON numbers are finite")
        return
    if isinstance(value, list):
        for item in value:
            _check_value(name, item, depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidJob(f"parameter {name} has a non-string key {_show(key)}")
            _check_value(name, item, depth + 1)
        return
    raise InvalidJob(f"parameter {name} holds a {type(value).__name__}; only JSON data is allowed")


def _check_unmarked(path: str, notebook: NotebookNode) -> None:
    """No cell an agent turn wrote after untrusted content runs unattended until the person
    cleared its mark (:mod:`agent_kernel.scheduler.cell_marks`)."""
    reason = refusal(path, notebook)
    if reason:
        raise InvalidJob(reason)


def _check_regular_notebook(path: str) -> NotebookNode:
    try:
        info = os.stat(path)
    except OSError:
        raise InvalidJob(f"no notebook at {_show(path)}") from None
    if not stat.S_ISREG(info.st_mode):
        raise InvalidJob(f"notebook {_show(path)} is not a regular file")
    import nbformat  # noqa: PLC0415 - heavy (jsonschema, ~1.5 s): only reading or writing a notebook needs it

    try:
        notebook: NotebookNode = nbformat.read(path, as_version=4)
    except Exception as exc:  # noqa: BLE001 - any reason it does not read as a notebook
        raise InvalidJob(f"{_show(path)} does not read as a notebook ({type(exc).__name__})") from None
    return notebook


def _schedule_and_policy(job: Any) -> None:
    try:
        zone(job.timezone)
        if job.cron is not None:
            check_cron(job.cron)
        job.policy  # noqa: B018 - validates the run policy columns
        job.schedule  # noqa: B018 - validates the quiet hours
    except ScheduleError as exc:
        raise InvalidJob(str(exc).rstrip(".")) from None
    except Exception as exc:  # noqa: BLE001 - a malformed column of any other kind
        raise InvalidJob(f"the schedule or run policy is malformed ({type(exc).__name__}: {exc})") from None


def _line(field: str, value: object, *, required: bool = False, limit: int = MAX_NAME_CHARS) -> list[str]:
    if value is None and not required:
        return []
    if not isinstance(value, str) or (required and not value.strip()):
        return [f"{field} must be text, not {_show(value)}"]
    if len(value) > limit:
        return [f"{field} is {len(value):,} characters long; at most {limit:,} are allowed"]
    if _CONTROL.search(value):
        return [f"{field} must be one line without control characters: {_show(value)}"]
    return []


def _text(field: str, value: object, *, required: bool = False) -> list[str]:
    if not isinstance(value, str) or (required and not value.strip()):
        return [f"{field} must be text, not {_show(value)}"]
    if len(value) > MAX_TASK_CHARS:
        return [f"{field} is {len(value):,} characters long; at most {MAX_TASK_CHARS:,} are allowed"]
    if "\x00" in value:
        return [f"{field} contains a NUL character"]
    return []


def _problems_of(check: Callable[..., object], *args: object, **kwargs: object) -> list[str]:
    try:
        check(*args, **kwargs)
    except InvalidJob as exc:
        return [str(exc)]
    return []


def _show(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _grant_problems(grants: object, granted_by: object) -> list[str]:
    """What is wrong with a job's standing grants (see :mod:`agent_kernel.grants`): they
    must parse, and grants name the person's event that set them."""
    try:
        granted = parse(grants or None)
    except ValueError as exc:
        return [str(exc)]
    if granted and not (isinstance(granted_by, str) and granted_by.strip()):
        return ["standing grants must name the person's event that set them (granted_by)"]
    return _line("granted_by", granted_by, limit=MAX_PATH_CHARS)


NOTIFY_ON = ("failure", "success", "always")  # which runs a job's notifications are about
MAX_NOTIFY_TARGETS = 50


def _notify_problems(notify: object) -> list[str]:
    """What is wrong with a job's notification settings (target names and when)."""
    if not isinstance(notify, dict) or set(notify) - {"targets", "on"}:
        return ["notify must be {targets: [names], on: failure|success|always}"]
    targets = notify.get("targets") or []
    if (
        not isinstance(targets, list)
        or len(targets) > MAX_NOTIFY_TARGETS
        or not all(isinstance(t, str) and 0 < len(t) <= 64 for t in targets)
    ):
        return [f"notify targets are at most {MAX_NOTIFY_TARGETS} target names"]
    if notify.get("on", "failure") not in NOTIFY_ON:
        return [f"notify on must be one of {', '.join(NOTIFY_ON)}, not {notify.get('on')!r}"]
    return []
