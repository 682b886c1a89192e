"""A job's versions: what each change made of it, who made it, and which version a run ran.

Every creation and edit of a job stores its definition (the fields a person or the model
may set) as a new version in ``job_versions``, with the names of the fields that changed
and who changed it; the job's row carries its current ``version``, and a run records the
version it started with (``runs.job_version``, set when the run is claimed). So "it
worked until Tuesday" can be answered: the run of Tuesday ran version 3, and version 3
changed the parameters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from agent_kernel.scheduler.clock import from_db

if TYPE_CHECKING:
    import duckdb

    from agent_kernel.scheduler.records import JobVersionJson
    from agent_kernel.store.provenance import Provenance


class Job(Protocol):
    """What a version keeps of a job (a :class:`~agent_kernel.scheduler.jobs.Job`)."""

    @property
    def id(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def options(self) -> dict[str, Any]: ...


__all__ = ["JobVersion", "definition", "record", "versions", "writer"]

# The fields of a job's definition, as its versions keep them.
DEFINED = (
    "name", "notebook", "task", "parameters", "cron", "run_at", "timezone", "cwd", "model",
    "token_limit", "kernel", "catchup", "max_catchup", "overlap", "timeout_s", "cell_timeout_s",
    "max_retries", "retry_on", "retry_delay_s",
)  # fmt: skip


@dataclass(frozen=True)
class JobVersion:
    """One version of a job."""

    job_id: str
    version: int
    definition: dict[str, object]  # JSON values by field name
    changed: list[str]  # the fields this version changed ([] for the first)
    changed_by: str
    changed_at: datetime | None

    def as_json(self) -> JobVersionJson:
        return {
            "version": self.version,
            "changed": self.changed,
            "changed_by": self.changed_by,
            "changed_at": self.changed_at.isoformat() if self.changed_at else None,
            "definition": self.definition,
        }


def definition(job: Job) -> dict[str, object]:
    """The job's definition as a version keeps it (JSON values)."""
    values: dict[str, object] = {}
    for name in DEFINED:
        value = getattr(job, name)
        values[name] = value.isoformat() if isinstance(value, datetime) else value
    values["notify"] = job.options.get("notify")  # target names and when: never a URL
    values["grants"] = getattr(job, "grants", None) or None  # the person's standing grants
    return values


def writer(by: Provenance, created_by: str | None = None) -> str:
    """Who changed a job, in words: the person (and through what), or a session's turn."""
    if by.session_id is None:
        return f"the user ({created_by})" if created_by else "the user"
    return f"session {by.session_id[:8]}, turn {by.turn}"


def record(con: duckdb.DuckDBPyConnection, job: Job, changed_by: str, before: Job | None = None) -> None:
    """Store ``job`` (as stored, with its ``version``) as a version; ``before`` is the version
    it replaces, to name the fields that changed."""
    now = definition(job)
    changed = [] if before is None else [k for k, v in now.items() if definition(before).get(k) != v]
    con.execute(
        "INSERT OR REPLACE INTO job_versions (job_id, version, definition, changed, changed_by) VALUES (?, ?, ?, ?, ?)",
        [job.id, job.version, json.dumps(now, default=str), json.dumps(changed), changed_by],
    )


def versions(con: duckdb.DuckDBPyConnection, job_id: str) -> list[JobVersion]:
    """The job's versions, newest first."""
    rows = con.execute(
        "SELECT job_id, version, definition, changed, changed_by, changed_at FROM job_versions "
        "WHERE job_id = ? ORDER BY version DESC",
        [job_id],
    ).fetchall()
    return [
        JobVersion(job, version, json.loads(defined), json.loads(changed), by, from_db(at))
        for job, version, defined, changed, by, at in rows
    ]
