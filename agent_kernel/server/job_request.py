"""A job from what the "Schedule this notebook" dialog (or any API client) sends.

The notebook is named by its path relative to the server's root, as JupyterLab names
files; it must lie inside the root and have a kernel spec (papermill needs one). Every
refusal is a :class:`BadRequest` whose message says what to change.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from ..scheduler import ScheduleError

FIELDS = {"name", "notebook", "cron", "at", "timezone", "parameters", "overlap"}


class BadRequest(ValueError):
    """Input the API refuses (400); the message is shown to the person."""


def parse_body(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"The request body is not JSON: {exc}.") from exc
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    return body


def notebook_in_root(path: Any, root: Path) -> Path:
    """The notebook's absolute path; it must be an .ipynb file inside ``root``."""
    if not isinstance(path, str) or not path.strip():
        raise BadRequest("Give `notebook`: the notebook's path relative to the Jupyter root.")
    relative = path.strip().lstrip("/")
    absolute = (root / relative).resolve()
    try:
        absolute.relative_to(root.resolve())
    except ValueError:
        raise BadRequest(f"{path!r} is outside the Jupyter root; give a path inside it.") from None
    if absolute.suffix != ".ipynb":
        raise BadRequest(f"{path!r} is not a notebook (.ipynb).")
    if not absolute.is_file():
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


def job_from_request(body: dict[str, Any], root: Path, now: datetime, *, user: str | None) -> Any:
    """A validated :class:`~agent_kernel.scheduler.jobs.Job` (not stored yet)."""
    from ..scheduler.cron import local_timezone_name
    from ..scheduler.jobs import Policy, new_job

    unknown = set(body) - FIELDS
    if unknown:
        raise BadRequest(f"Unknown field(s): {', '.join(sorted(unknown))}; accepted: {', '.join(sorted(FIELDS))}.")
    notebook = notebook_in_root(body.get("notebook"), root)
    kernel = kernel_name(notebook)
    for key in ("name", "cron", "at", "timezone", "overlap"):
        if body.get(key) is not None and not isinstance(body[key], str):
            raise BadRequest(f"`{key}` must be a string.")
    parameters = body.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise BadRequest("`parameters` must be an object of name: value pairs.")
    bad = [name for name in parameters if not name.isidentifier()]
    if bad:
        raise BadRequest(f"Parameter names must be Python identifiers; {bad[0]!r} is not one.")
    try:
        policy = Policy(overlap=body.get("overlap") or "forbid")
        return new_job(
            name=body.get("name") or notebook.stem,
            kind="notebook",
            now=now,
            timezone=body.get("timezone") or local_timezone_name(),
            notebook=str(notebook),
            parameters=parameters,
            at=body.get("at") or None,
            cron=body.get("cron") or None,
            kernel=kernel,
            policy=policy,
            created_by=f"jupyterlab:{user}" if user else "jupyterlab",
        )
    except ScheduleError as exc:
        raise BadRequest(str(exc)) from exc
