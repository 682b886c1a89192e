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
from agent_kernel.sql import guard, sandbox
from agent_kernel.sql import worker as sql_worker
from tests.support.calls import sql_run as run
from tests.support.capabilities import needs_sql_guard

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
            sql_worker.run(
                sql_run, guard.parse("SELECT count(*) FROM pairs"), params=None, frames=BIG_PAIRS, into=False
            )
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
        sql_worker.run_forked(
            sql_run, guard.parse("SELECT count(*) FROM pairs"), params=None, frames=BIG_PAIRS, into=False
        )
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
        forks = [
            c for c in psutil.Process().children() if c.pid not in before and c.cmdline() == psutil.Process().cmdline()
        ]
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


# -- the fork kept for the next call -----------------------------------------------------------


def _sales(rows: int = 2_000_000) -> pd.DataFrame:
    import numpy as np

    return pd.DataFrame(
        {"id": np.arange(rows), "amount": np.ones(rows), "region": pd.Categorical(["EU", "NA"] * (rows // 2))}
    )


TOTAL = "SELECT sum(amount) AS total, count(*) AS n FROM sales"


def _kept_pid() -> int | None:
    kept = sql_worker._kept
    return kept.pid if kept is not None else None


def test_the_fork_takes_the_next_calls_while_the_frames_are_unchanged(store):
    run(store, "SELECT 1")  # the file's tables are known
    sales = _sales()
    frames = {"sales": sales, "other": pd.DataFrame({"n": [1, 2, 3]})}
    forks = sql_worker._forks
    assert run(store, TOTAL, frames=frames).rows == [(2_000_000.0, 2_000_000)]
    pid = _kept_pid()
    assert pid is not None and sql_worker._forks == forks + 1
    assert run(store, "SELECT region, count(*) FROM sales GROUP BY ALL ORDER BY 1", frames=frames).rows == [
        ("EU", 1_000_000), ("NA", 1_000_000),
    ]  # fmt: skip
    assert run(store, "SELECT sum(n) FROM other", frames=frames).rows == [(6,)]  # a frame the first call did not name
    top = run(store, "SELECT id FROM sales ORDER BY id DESC LIMIT 3", frames=frames, into=True)
    assert top.frame["id"].tolist() == [1_999_999, 1_999_998, 1_999_997]
    assert sql_worker._forks == forks + 1 and _kept_pid() == pid


def _write_in_place(frames):
    frames["sales"].loc[1_000_000, "amount"] = 1001.0


def _rebind(frames):
    frames["sales"] = frames["sales"].assign(amount=frames["sales"]["amount"])
    frames["sales"].loc[0, "amount"] = 1001.0


def _replace_column(frames):
    frames["sales"]["amount"] = frames["sales"]["amount"] * 1.0 + (frames["sales"]["id"] == 5) * 1000.0


def _write_then_fork(frames):
    """Written, then another fork of the kernel shares the written page again: the page
    shows as shared, and only the count of forks tells the kept fork it is out of date."""
    _write_in_place(frames)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.read(read, 1)
        os._exit(0)
    frames["_other_fork"] = (pid, write)


@pytest.mark.parametrize("change", [_write_in_place, _rebind, _replace_column, _write_then_fork])
def test_a_frame_changed_since_the_fork_is_read_as_it_is_now(store, change):
    run(store, "SELECT 1")
    frames = {"sales": _sales()}
    assert run(store, TOTAL, frames=frames).rows == [(2_000_000.0, 2_000_000)]
    first = _kept_pid()
    change(frames)
    other = frames.pop("_other_fork", None)
    try:
        assert run(store, TOTAL, frames=frames).rows == [(2_001_000.0, 2_000_000)]
    finally:
        if other is not None:
            os.write(other[1], b"x")
            os.waitpid(other[0], 0)
    assert _kept_pid() not in (None, first)  # a new fork, kept in its place
    assert _gone(first)


def _gone(pid: int, wait_s: float = 3.0) -> bool:
    """Whether ``pid`` has left (a zombie not reaped yet counts), waiting ``wait_s`` at most."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)
    return False


def test_a_frame_of_python_objects_gets_a_fork_each_call(store):
    """A list in a cell can change with no write to the column: no fork is trusted with it."""
    run(store, "SELECT 1")
    frames = {"tags": pd.DataFrame({"tag": [["a"], ["b"]]})}
    forks = sql_worker._forks
    assert run(store, "SELECT count(*) FROM tags", frames=frames).rows == [(2,)]
    frames["tags"]["tag"][0].append("c")
    assert run(store, "SELECT len(tag) FROM tags ORDER BY 1 DESC LIMIT 1", frames=frames).rows == [(2,)]
    assert sql_worker._forks == forks + 2


@pytest.mark.parametrize("stop", ["limit", "interrupt"])
def test_a_call_on_the_kept_fork_is_stopped_like_any_and_the_fork_let_go(store, stop):
    run(store, "SELECT 1")
    frames = {"pairs": pd.DataFrame({"a": ["a" * 120000], "b": ["b" * 120000]})}  # a minute of levenshtein
    limits = sandbox.Limits(timeout_s=1.0 if stop == "limit" else 60.0)
    assert run(store, "SELECT count(*) FROM pairs", frames=frames, limits=limits).rows == [(1,)]
    kept, forks = _kept_pid(), sql_worker._forks
    sql_run = sandbox.SqlRun(store, limits, read_only=True)
    if stop == "interrupt":
        threading.Timer(1.0, sql_run.interrupt).start()
    started = time.perf_counter()
    with pytest.raises(ToolInputError) as caught:
        sql_worker.run_sql(sql_run, guard.parse("SELECT levenshtein(a, b) FROM pairs"), frames=frames)
    assert ("longer than 1 s" if stop == "limit" else "The query was stopped.") in str(caught.value)
    assert time.perf_counter() - started < 1.0 + sql_worker.GRACE_S + 1.0
    assert sql_worker._forks == forks  # it ran on the kept fork
    assert _kept_pid() is None and _gone(kept)  # and was let go
    assert run(store, "SELECT count(*) FROM pairs", frames=frames).rows == [(1,)]


def test_a_call_that_fails_lets_its_fork_go(store):
    """An error may be the fork's database failing: the next call gets a new fork."""
    run(store, "SELECT 1")
    frames = {"sales": _sales(1000)}
    run(store, TOTAL, frames=frames)
    kept = _kept_pid()
    with pytest.raises(ToolInputError, match="nope"):
        run(store, "SELECT nope FROM sales", frames=frames)
    assert _kept_pid() is None and _gone(kept)
    assert run(store, TOTAL, frames=frames).rows == [(1000.0, 1000)]
    assert _kept_pid() not in (None, kept)


def test_huge_values_on_the_kept_fork_are_stopped_within_the_memory_bound(store):
    run(store, "SELECT 1")
    frames = {"df": pd.DataFrame({"n": range(1001)})}
    limits = sandbox.Limits(timeout_s=60, memory_limit="512MB")  # the memory bound acts, not the clock
    assert run(store, "SELECT count(*) FROM df", frames=frames, limits=limits).rows == [(1001,)]
    kept = _kept_pid()
    assert kept is not None
    with pytest.raises(ToolInputError, match="memory"):
        run(store, "SELECT repeat('x', 10000000) AS s FROM df", frames=frames, limits=limits)
    assert _kept_pid() is None
    assert run(store, "SELECT count(*) FROM df", frames=frames, limits=limits).rows == [(1001,)]


def test_the_kept_fork_leaves_when_let_go_or_when_idle(store, monkeypatch):
    run(store, "SELECT 1")
    frames = {"sales": _sales(1000)}
    run(store, TOTAL, frames=frames)
    kept = sql_worker._kept
    sql_worker.retire_kept()  # as each cell does
    assert sql_worker._kept is None and _gone(kept.pid, wait_s=1.0)  # at once (SIGKILL)
    monkeypatch.setattr(sql_worker, "KEEP_S", 1.0)  # read by the fork made next
    run(store, TOTAL, frames=frames)
    idle = sql_worker._kept
    assert _gone(idle.pid, wait_s=2.5)  # it left on its own
    assert run(store, TOTAL, frames=frames).rows == [(1000.0, 1000)]  # and the next call makes another
    assert sql_worker._kept is not idle


def test_the_kept_fork_keeps_no_frame_alive(store):
    import weakref

    run(store, "SELECT 1")
    frame = _sales(1000)
    run(store, "SELECT count(*) FROM frame", frames={"frame": frame})
    assert sql_worker._kept is not None
    dropped = weakref.ref(frame)
    del frame
    assert dropped() is None
