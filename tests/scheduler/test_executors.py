"""Executors: the same run spec on local threads and on a Dask LocalCluster."""

from __future__ import annotations

from datetime import datetime, timedelta

import nbformat
import pytest

from agent_kernel.scheduler import ScheduleError
from agent_kernel.scheduler.clock import ManualClock
from agent_kernel.scheduler.daemon import Scheduler, SchedulerSettings
from agent_kernel.scheduler.executors import DaskExecutor, make_executor
from tests.support.notebooks import write_notebook
from tests.support.scheduling import UTC, add_job, runs_of

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def dask_cluster():
    """One two-worker LocalCluster for the module: each test's executor connects to it by
    address. (The executor starting a cluster of its own is tested in test_cli.py.)"""
    from distributed import LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    try:
        yield cluster
    finally:
        cluster.close()


def test_a_dask_cluster_runs_four_jobs(store, home, tmp_path, dask_cluster):
    clock = ManualClock(T0)
    jobs = []
    for n in range(4):
        notebook = write_notebook(
            tmp_path / f"job{n}.ipynb", "import os\nprint(n * 10, os.getpid())", parameters="n = 0"
        )
        jobs.append(add_job(store, name=f"job{n}", notebook=str(notebook), at=T0 + timedelta(seconds=1),
                            parameters={"n": n}, now=clock.now()))  # fmt: skip
    executor = DaskExecutor(dask_cluster.scheduler_address)
    try:
        workers = set(executor.client.scheduler_info()["workers"])
        daemon = Scheduler(
            store, home=home, clock=clock, executor=executor, settings=SchedulerSettings(max_concurrent=4)
        )
        clock.advance(seconds=2)
        finished = daemon.run_once()
    finally:
        executor.close()
    assert sorted(r.status for r in finished) == ["SUCCEEDED"] * 4
    assert {r.executor for r in finished} == {"dask"}
    used = {r.executor_detail.removeprefix("dask worker ") for r in finished}
    assert used <= workers and len(workers) == 2  # ran on the cluster's workers
    for n, job in enumerate(jobs):
        [run] = runs_of(store, job)
        out = nbformat.read(run.output_path, as_version=4)
        assert out.cells[-1].outputs[0]["text"].startswith(f"{n * 10} ")  # its own parameters


def test_a_dask_run_is_bounded_by_its_timeout_too(store, home, tmp_path, dask_cluster):
    notebook = write_notebook(tmp_path / "hang.ipynb", "import time\ntime.sleep(600)")
    clock = ManualClock(T0)
    from agent_kernel.scheduler.jobs import Policy

    add_job(store, name="hang", notebook=str(notebook), at=T0 + timedelta(seconds=1), now=clock.now(),
            policy=Policy(timeout_s=3))  # fmt: skip
    executor = DaskExecutor(dask_cluster.scheduler_address)
    try:
        clock.advance(seconds=2)
        [run] = Scheduler(store, home=home, clock=clock, executor=executor).run_once()
    finally:
        executor.close()
    assert run.status == "TIMED_OUT" and run.executor == "dask"


def test_unknown_executor_is_a_clear_error():
    with pytest.raises(ScheduleError, match="Unknown executor 'ray'"):
        make_executor("ray")
