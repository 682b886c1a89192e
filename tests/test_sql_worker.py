"""The processes db_sql runs in: stops that must never wait on them, a fork that keeps out of the way."""

from __future__ import annotations

import os
import signal
import threading
import time

import pandas as pd
import psutil
import pytest

from agent_kernel.errors import ToolInputError
from agent_kernel.sql import guard
from agent_kernel.sql import sandbox
from agent_kernel.sql import worker as sql_worker

from .calls import sql_run as run
from .capabilities import needs_sql_guard

pytestmark = needs_sql_guard

# A frame whose pickle is far bigger than a pipe holds (64 KB): sending it to a worker blocks
# until the worker reads it.
BIG_PAIRS = {"pairs": pd.DataFrame({"a": ["a" * 400_000], "b": ["b" * 400_000]})}


def test_a_stop_does_not_wait_for_a_worker_to_read_its_request(store):
    """A worker reads its request only once it has started (imports: seconds on a busy
    machine). Stopped meanwhile, the call ends within the grace, not when the worker reads."""
    run(store, "SELECT 1")  # a worker is idle
    worker = sql_worker._take()
    os.kill(worker.pid, signal.SIGSTOP)  # from now on it reads nothing, as a worker still importing
    sql_worker._give_back(worker)
    assert sql_worker._idle[-1] is worker  # the next call takes it
    unblock = threading.Timer(20.0, os.kill, (worker.pid, signal.SIGKILL))  # the test fails rather than hangs
    unblock.start()
    sql_run = sandbox.SqlRun(store, sandbox.Limits(timeout_s=60.0), read_only=True)
    threading.Timer(0.3, sql_run.interrupt).start()
    started = time.perf_counter()
    try:
        with pytest.raises(ToolInputError, match="The query was stopped."):
            sql_worker.run(sql_run, guard.parse("SELECT count(*) FROM pairs"), params=None, frames=BIG_PAIRS, into=False)
        assert time.perf_counter() - started < 0.3 + sql_worker.GRACE_S + 1.0
    finally:
        unblock.cancel()
    assert not psutil.pid_exists(worker.pid) or psutil.Process(worker.pid).status() == psutil.STATUS_ZOMBIE
    assert run(store, "SELECT count(*) FROM pairs", frames=BIG_PAIRS).rows == [(1,)]


def test_a_stop_before_the_fork_makes_none(store):
    run(store, "SELECT 1")  # the file's tables are known: a read of frames would fork
    sql_run = sandbox.SqlRun(store, sandbox.Limits(), read_only=True)
    sql_run.interrupt()
    forks: list[int] = []
    os.register_at_fork(before=lambda: forks.append(1))  # in effect for this process's later forks
    with pytest.raises(ToolInputError, match="The query was stopped."):
        sql_worker.run_forked(sql_run, guard.parse("SELECT count(*) FROM pairs"), params=None, frames=BIG_PAIRS, into=False)
    assert forks == []


def test_a_fork_is_not_ended_by_the_kernels_interrupt(store):
    """A kernel interrupt goes to the kernel's process group, which a fork is in from its
    first instruction until it leaves it: SIGINT must not end the fork (its call would fail,
    or run again in a worker) nor run the kernel's handler there. It stops on its own signal."""
    run(store, "SELECT 1")
    pairs = {"pairs": pd.DataFrame({"a": ["a" * 60000], "b": ["b" * 60000]})}  # seconds of levenshtein
    sql_run = sandbox.SqlRun(store, sandbox.Limits(timeout_s=60.0), read_only=True)
    before = {child.pid for child in psutil.Process().children()}
    caught: list[BaseException] = []

    def call() -> None:
        try:
            sql_worker.run_sql(sql_run, guard.parse("SELECT levenshtein(a, b) FROM pairs"), frames=pairs)
        except BaseException as exc:  # noqa: BLE001 - looked at below
            caught.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    deadline = time.monotonic() + 10
    forks: list[psutil.Process] = []
    while not forks and time.monotonic() < deadline:
        forks = [c for c in psutil.Process().children() if c.pid not in before and c.cmdline() == psutil.Process().cmdline()]
        time.sleep(0.01)
    [fork] = forks
    for _ in range(5):  # from its start on: the window before it leaves the group included
        os.kill(fork.pid, signal.SIGINT)
        time.sleep(0.05)
    time.sleep(0.3)
    assert fork.is_running() and fork.status() != psutil.STATUS_ZOMBIE
    sql_run.interrupt()
    thread.join(10)
    assert [str(exc) for exc in caught] == ["The query was stopped."]
