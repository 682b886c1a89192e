"""One leader at a time: a lease row that the scheduler renews while it lives.

A second ``agent-kernel scheduler`` on the same database stands by until the lease
expires (its holder stopped renewing) or its holder is seen to be dead (same host, no
such process). Only the leader fires slots and starts runs; ``UNIQUE(job_id,
scheduled_for, attempt)`` still guards every firing should two ever both believe they
lead (a paused process waking up after its lease expired).
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import psutil

from agent_kernel.scheduler.clock import from_db, to_db

if TYPE_CHECKING:
    import duckdb

LEASE = "scheduler"


def new_worker_id() -> str:
    """``host:pid:nonce``: who holds a lease or runs a run."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def worker_is_dead(worker: str | None) -> bool:
    """True when ``worker`` was a process on this host that no longer exists."""
    if not worker:
        return False
    host, _, rest = worker.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False

    return not psutil.pid_exists(int(pid_text))


@dataclass(frozen=True)
class Lease:
    holder: str
    acquired_at: datetime
    expires_at: datetime


def current(con: duckdb.DuckDBPyConnection, name: str = LEASE) -> Lease | None:
    row = con.execute("SELECT holder, acquired_at, expires_at FROM scheduler_leases WHERE name = ?", [name]).fetchone()
    if row is None:
        return None
    acquired, expires = from_db(row[1]), from_db(row[2])
    assert acquired is not None and expires is not None
    return Lease(row[0], acquired, expires)


def acquire(
    con: duckdb.DuckDBPyConnection, worker: str, now: datetime, ttl_s: float, name: str = LEASE
) -> tuple[bool, Lease | None]:
    """Take or renew the lease; return whether ``worker`` holds it, and the lease."""
    held = current(con, name)
    expires = now + timedelta(seconds=ttl_s)
    if held is None:
        con.execute(
            "INSERT INTO scheduler_leases (name, holder, acquired_at, expires_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            [name, worker, to_db(now), to_db(expires)],
        )
    elif held.holder == worker or held.expires_at <= now or worker_is_dead(held.holder):
        acquired = held.acquired_at if held.holder == worker else now
        con.execute(
            "UPDATE scheduler_leases SET holder = ?, acquired_at = ?, expires_at = ? WHERE name = ?",
            [worker, to_db(acquired), to_db(expires), name],
        )
    lease = current(con, name)
    return (lease is not None and lease.holder == worker), lease


def release(con: duckdb.DuckDBPyConnection, worker: str, name: str = LEASE) -> None:
    con.execute("DELETE FROM scheduler_leases WHERE name = ? AND holder = ?", [name, worker])


def running(con: duckdb.DuckDBPyConnection, now: datetime, name: str = LEASE) -> Lease | None:
    """The lease of the scheduler that leads now, or None when none is running.

    A lease past its expiry, or held by a process on this host that is gone, means that
    no scheduler fires jobs: they wait until one starts.
    """
    lease = current(con, name)
    if lease is None or lease.expires_at <= now or worker_is_dead(lease.holder):
        return None
    return lease


# What a person can do when :func:`running` finds none.
HOW_TO_START = (
    "start JupyterLab or Jupyter Server with agent-kernel installed (its server extension runs "
    "the scheduler), or run `agent-kernel scheduler` in a terminal"
)
