"""A job from what the "Schedule this notebook" dialog (or any API client) sends.

The notebook is named by its path relative to the server's root, as JupyterLab names
files; it must lie inside the root and have a kernel spec (papermill needs one). Every
refusal is a :class:`BadRequest` whose message says what to change; what the job may
hold is then checked by the scheduler service, whose ``ScheduleError`` is a 400 too.

Every request body passes :func:`parse_body`, the API's one reader of bodies: at most
:data:`MAX_BODY_BYTES`, strict UTF-8, one JSON object nesting at most :data:`MAX_DEPTH`
levels, finite numbers, and strings that are valid Unicode (no unpaired surrogates), so
nothing past it meets a body the standard library or DuckDB would choke on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict, cast

from agent_kernel.grants import StandingGrants, parse
from agent_kernel.paths import agent_home
from agent_kernel.scheduler.checks import MAX_TOKEN_LIMIT
from agent_kernel.scheduler.jobs import MAX_CATCHUP, MAX_RETRIES, MAX_RETRY_DELAY_S, MAX_RUN_SECONDS, Policy
from agent_kernel.scheduler.notify import Targets
from agent_kernel.scheduler.service import JobFields

if TYPE_CHECKING:
    from agent_kernel.server.shapes import RunActionRequest

FIELDS = {"name", "notebook", "cron", "at", "timezone", "parameters", "overlap", "grants"}
TEXT_FIELDS = ("name", "cron", "at", "timezone", "overlap")
MAX_BODY_BYTES = 1_000_000
MAX_DEPTH = 32
MAX_PATH_CHARS = 4096
MAX_FIELD_CHARS = 1000


class BadRequest(ValueError):
    """Input the API refuses (400); the message is shown to the person."""


def parse_body(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object, or :class:`BadRequest` saying what is wrong with it."""
    if len(raw) > MAX_BODY_BYTES:
        raise BadRequest(f"The request body is {len(raw):,} bytes; at most {MAX_BODY_BYTES:,} are accepted.")
    if not raw.strip():
        return {}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"The request body is not UTF-8: {exc}.") from None
    try:
        body = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise BadRequest(f"The request body nests too deeply; at most {MAX_DEPTH} levels are accepted.") from None
    except ValueError as exc:
        raise BadRequest(f"The request body is not JSON: {exc}.") from None
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    _check_values(body)
    return body


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _check_values(body: object) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH`, numbers that are not finite and strings
    that are not valid Unicode (walked without recursion, so no depth can overflow it)."""
    pending: list[tuple[object, int]] = [(body, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise BadRequest(f"The request body nests too deeply; at most {MAX_DEPTH} levels are accepted.")
            items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
            pending.extend((item, depth + 1) for item in items)
        elif isinstance(value, float) and not math.isfinite(value):
            raise BadRequest("The request body holds a number too large for JSON; send a finite number.")
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise BadRequest(
                    f"The request body holds a string with an unpaired surrogate ({value[:40]!r}); send valid Unicode."
                ) from None


def check_text(value: str, what: str, limit: int) -> str:
    """``value`` when it is at most ``limit`` characters without NUL or other control characters."""
    if len(value) > limit:
        raise BadRequest(f"{what} is {len(value):,} characters long; at most {limit:,} are accepted.")
    if any(ord(c) < 0x20 or c == "\x7f" for c in value):
        raise BadRequest(f"{what} holds a NUL or another control character: {value[:80]!r}; send it without.")
    return value


def notebook_in_root(path: object, root: Path) -> Path:
    """The notebook's absolute path; it must be an .ipynb file inside ``root``."""
    if not isinstance(path, str) or not path.strip():
        raise BadRequest("Give `notebook`: the notebook's path relative to the Jupyter root.")
    relative = check_text(path, "`notebook`", MAX_PATH_CHARS).strip().lstrip("/")
    try:
        absolute = (root / relative).resolve()
        absolute.relative_to(root.resolve())
    except ValueError:
        raise BadRequest(f"{path!r} is outside the Jupyter root; give a path inside it.") from None
    except OSError as exc:
        raise BadRequest(f"{path[:200]!r} is not a usable path: {exc.strerror or exc}.") from None
    if absolute.suffix != ".ipynb":
        raise BadRequest(f"{path!r} is not a notebook (.ipynb).")
    try:
        found = absolute.is_file()
    except OSError as exc:
        raise BadRequest(f"{path[:200]!r} is not a usable path: {exc.strerror or exc}.") from None
    if not found:
        raise BadRequest(f"No notebook at {path!r}: save it first.")
    return absolute


def kernel_name(notebook: Path) -> str:
    """The notebook's kernel spec name; papermill starts that kernel for each run."""
    try:
        metadata = json.loads(notebook.read_text(encoding="utf-8")).get("metadata", {})
    except (OSError, ValueError) as exc:
        raise BadRequest(f"Cannot read {notebook.name}: {exc}.") from exc
    spec = metadata.get("kernelspec") if isinstance(metadata, dict) else None
    name = spec.get("name") if isinstance(spec, dict) else None
    if not isinstance(name, str) or not name:
        raise BadRequest(f"{notebook.name} has no kernel: open it, choose a kernel and save it.")
    return name


def job_fields(body: dict[str, Any], root: Path) -> JobFields:
    """What to create from the dialog's request; the scheduler service checks the rest."""
    unknown = set(body) - FIELDS
    if unknown:
        raise BadRequest(f"Unknown field(s): {', '.join(sorted(unknown))}; accepted: {', '.join(sorted(FIELDS))}.")
    notebook = notebook_in_root(body.get("notebook"), root)
    kernel = kernel_name(notebook)
    for key in TEXT_FIELDS:
        if body.get(key) is not None and not isinstance(body[key], str):
            raise BadRequest(f"`{key}` must be a string.")
        if body.get(key) is not None:
            check_text(body[key], f"`{key}`", MAX_FIELD_CHARS)
    parameters = body.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise BadRequest("`parameters` must be an object of name: value pairs.")
    bad = [name for name in parameters if not name.isidentifier()]
    if bad:
        raise BadRequest(f"Parameter names must be Python identifiers; {bad[0]!r} is not one.")
    return JobFields(
        name=body.get("name") or notebook.stem,
        kind="notebook",
        timezone=body.get("timezone") or None,
        notebook=str(notebook),
        parameters=parameters,
        at=body.get("at") or None,
        cron=body.get("cron") or None,
        kernel=kernel,
        policy=Policy(overlap=body.get("overlap") or "forbid"),
    )


def job_grants(body: Mapping[str, object]) -> StandingGrants | None:
    """The standing grants a create or ``PATCH`` body sets (None: it names none; ``null`` or
    ``{}``: none at all). They are the person's: the handler passes its request as their event."""
    if "grants" not in body:
        return None
    try:
        return parse(body["grants"])
    except ValueError as exc:
        raise BadRequest(f'`grants`: {exc}; send {{"hosts": [names], "after_untrusted": [tool names]}}.') from None


def run_action(body: Mapping[str, object]) -> RunActionRequest:
    """What a ``POST /runs/ID`` body asks for: ``{"action": "open" | "cancel" | "explain"}``."""
    action = body.get("action")
    if set(body) != {"action"} or action not in ("open", "cancel", "explain"):
        raise BadRequest('Send {"action": "open"}, {"action": "cancel"} or {"action": "explain"}.')
    return {"action": action}


def run_parameters(body: Mapping[str, object]) -> dict[str, object] | None:
    """The values a ``POST /jobs/ID/run`` body asks the run to use over the job's
    parameters (None: the job's own); the scheduler service checks them as a job's."""
    unknown = set(body) - {"parameters"}
    if unknown:
        raise BadRequest(f"Unknown field(s): {', '.join(sorted(unknown))}; this route takes only `parameters`.")
    if "parameters" not in body:
        return None
    parameters = body["parameters"]
    if not isinstance(parameters, dict):
        raise BadRequest("`parameters` must be an object of name: value pairs.")
    bad = [name for name in parameters if not name.isidentifier()]
    if bad:
        raise BadRequest(f"Parameter names must be Python identifiers; {bad[0]!r} is not one.")
    return parameters


# What ``PATCH /jobs/ID`` may change, beside ``enabled`` and ``grants``: by type, numbers
# with their range (whole numbers for int; a float's lowest bound excluded when it is 0.0).
EDIT_TEXT = ("name", "cron", "at", "timezone", "overlap", "catchup", "model", "retry_on")
EDIT_NUMBERS: dict[str, tuple[type, float, float]] = {
    "timeout_s": (float, 0.0, MAX_RUN_SECONDS),
    "cell_timeout_s": (float, 0.0, MAX_RUN_SECONDS),
    "retry_delay_s": (float, -1.0, MAX_RETRY_DELAY_S),  # 0 allowed: retry at once
    "max_retries": (int, 0, MAX_RETRIES),
    "max_catchup": (int, 1, MAX_CATCHUP),
    "token_limit": (int, 1, MAX_TOKEN_LIMIT),
}
EDIT_FIELDS = {*EDIT_TEXT, *EDIT_NUMBERS, "notebook", "task", "parameters", "notify", "explain", "grants"}
MAX_TASK_CHARS = 20_000


class JobChanges(TypedDict, total=False):
    """What a ``PATCH /jobs/ID`` body changes once :func:`job_changes` has checked it: fields
    the scheduler service's ``update`` takes, each of its type (``kernel`` comes with a new
    ``notebook``: the kernel spec it names)."""

    name: str
    cron: str
    at: str
    timezone: str
    overlap: str
    catchup: str
    model: str
    retry_on: str
    timeout_s: float
    cell_timeout_s: float
    retry_delay_s: float
    max_retries: int
    max_catchup: int
    token_limit: int
    task: str
    parameters: dict[str, object]
    notebook: str
    kernel: str
    explain: bool
    notify: dict[str, object] | None


def number(key: str, value: object) -> int | float:
    """``value`` of the numeric field ``key`` when it has the field's type and range
    (:data:`EDIT_NUMBERS`), else :class:`BadRequest` naming both."""
    kind, low, high = EDIT_NUMBERS[key]
    whole = kind is int
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and not isinstance(value, int)):
        raise BadRequest(f"`{key}` must be a {'whole ' if whole else ''}number.")
    if whole and not low <= value <= high:
        raise BadRequest(f"`{key}` must be a whole number from {low:,.0f} to {high:,.0f}, not {_shown(value)}.")
    if not whole and not low < value <= high:
        above = "0 or more" if low < 0 else "more than 0"
        raise BadRequest(f"`{key}` must be a number of seconds, {above} and at most {high:,.0f}, not {_shown(value)}.")
    return int(value) if whole else float(value)


def _shown(value: int | float) -> str:
    """A number as a message shows it (a huge whole number by its length: no float holds it)."""
    if isinstance(value, int) and abs(value) >= 10**15:
        return f"a number of {len(str(abs(value)))} digits"
    return f"{value:g}" if isinstance(value, float) else str(value)


def job_changes(body: dict[str, Any], root: Path) -> JobChanges:
    """The changes a ``PATCH /jobs/ID`` body asks for (``enabled`` aside), checked by type
    and size here; what they make of the job is checked by the scheduler service as a new
    job is."""
    unknown = set(body) - EDIT_FIELDS - {"enabled"}
    if unknown:
        accepted = ", ".join(sorted(EDIT_FIELDS | {"enabled"}))
        raise BadRequest(f"Unknown field(s): {', '.join(sorted(unknown))}; accepted: {accepted}.")
    changes: dict[str, Any] = {}
    for key in EDIT_TEXT:
        if key in body:
            if not isinstance(body[key], str) or not body[key].strip():
                raise BadRequest(f"`{key}` must be a non-empty string.")
            changes[key] = check_text(body[key], f"`{key}`", MAX_FIELD_CHARS)
    for key in EDIT_NUMBERS:
        if key in body:
            changes[key] = number(key, body[key])
    if "task" in body:
        if not isinstance(body["task"], str) or not body["task"].strip():
            raise BadRequest("`task` must be a non-empty string.")
        changes["task"] = check_text(body["task"], "`task`", MAX_TASK_CHARS)
    if "parameters" in body:
        parameters = body["parameters"]
        if not isinstance(parameters, dict):
            raise BadRequest("`parameters` must be an object of name: value pairs.")
        bad = [name for name in parameters if not name.isidentifier()]
        if bad:
            raise BadRequest(f"Parameter names must be Python identifiers; {bad[0]!r} is not one.")
        changes["parameters"] = parameters
    if "notebook" in body:
        notebook = notebook_in_root(body["notebook"], root)
        changes["notebook"] = str(notebook)
        changes["kernel"] = kernel_name(notebook)
    if "explain" in body:
        if not isinstance(body["explain"], bool):
            raise BadRequest("`explain` must be true or false.")
        changes["explain"] = body["explain"]
    if "notify" in body:  # target names only (the scheduler service checks them)
        notify = body["notify"]
        if notify is not None and not isinstance(notify, dict):
            raise BadRequest('`notify` must be {"targets": [names], "on": "failure"} or null.')
        targets = (notify or {}).get("targets") or []
        if isinstance(targets, list) and all(isinstance(t, str) for t in targets):
            known = {t.name for t in Targets(agent_home()).all()}
            missing = [t for t in targets if t not in known]
            if missing:
                raise BadRequest(
                    f"No notification target {missing[0]!r}: `agent-kernel notify add URL --name NAME` adds one."
                )
        changes["notify"] = notify
    if "enabled" in body and not isinstance(body["enabled"], bool):
        raise BadRequest("`enabled` must be true or false.")
    # Each key was checked above to hold its field's type (the numbers by EDIT_NUMBERS).
    return cast("JobChanges", changes)
