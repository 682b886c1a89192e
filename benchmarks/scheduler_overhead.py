"""What the scheduler adds to a papermill run, and what a Dask cluster gives back.

1. **Overhead.** The same small parameterized notebook, alternately:

   - baseline: ``papermill IN OUT -p n 3`` (the papermill CLI: a process that starts a
     kernel, runs the cells, saves the output);
   - scheduler: one due job processed by a running scheduler (``Scheduler.run_once``:
     fire the slot into DuckDB, claim it, build the spec, start the runner process,
     which runs papermill with per-cell progress, stdout/stderr logs and the timeout
     watchdog, then record the result).

   Also shown, not part of the goal: ``agent-kernel scheduler --once`` as a cold process
   (what a system cron entry would pay: interpreter, imports, one pass), and the same
   comparison for a notebook that works 3 s longer (the scheduler's cost is fixed per run:
   two short DuckDB connections, each of which costs ~17 ms just to open and close).

2. **Throughput.** 8 short jobs due at once: the local executor one at a time
   (``max_concurrent=1``) against the Dask executor on a ``LocalCluster`` of 2 workers
   (``max_concurrent=8``). The cluster's start-up is reported on its own.

Medians over --repeat runs, printed side by side with their ratios.

``--long-repeat 0`` leaves out the longer notebook (``--quick`` does; it also skips the
uncounted warm-up run of ``--once``, which only steadies the figures of longer runs).

    python benchmarks/scheduler_overhead.py [--repeat 7] [--long-repeat 5] [--batches 3] [--jobs 8] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results import Row, options, write

from agent_kernel.scheduler.clock import ManualClock
from agent_kernel.scheduler.daemon import Scheduler, SchedulerSettings
from agent_kernel.scheduler.jobs import Jobs, new_job
from agent_kernel.store import Store
from tests.support.notebooks import write_notebook

BIN = Path(sys.executable).parent
NOTEBOOK_CELLS = (
    "import math\nvalues = [math.sqrt(i) for i in range(n * 10_000)]",
    "total = sum(values)\nprint(f'n={n} total={total:.1f}')",
    "summary = {'n': n, 'count': len(values)}\nsummary",
)


def add_due_job(store: Store, clock: ManualClock, notebook: Path, name: str) -> None:
    with store.connect() as con:
        Jobs(con).add(new_job(name=name, kind="notebook", notebook=str(notebook), parameters={"n": 3},
                              at=clock.now() + timedelta(seconds=1), timezone="UTC", now=clock.now()))  # fmt: skip
    clock.advance(seconds=2)


def overhead(
    work: Path, repeat: int, *, seconds: float = 0.0, cold: bool = True, warm_up: bool = True
) -> dict[str, list[float]]:
    """Alternate the papermill CLI and a scheduler pass over the same notebook, which
    works ``seconds`` longer than the small one. ``warm_up``: one cold ``--once`` run first,
    not counted, so that no measured run pays for the first read of the files from disk."""
    cells = NOTEBOOK_CELLS + ((f"import time\ntime.sleep({seconds})",) if seconds else ())
    notebook = write_notebook(work / f"notebook-{seconds:g}.ipynb", *cells, parameters="n = 1")
    store = Store(work / f"overhead-{seconds:g}.duckdb")
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
    scheduler = Scheduler(store, home=work / "home", clock=clock)
    timings: dict[str, list[float]] = {"papermill": [], "scheduler": []}
    env = dict(os.environ, AGENT_KERNEL_DB=str(work / "cold.duckdb"), AGENT_KERNEL_HOME=str(work / "home"))
    if cold:
        timings["cold --once"] = []
    if cold and warm_up:
        add_due_job(
            Store(work / "cold.duckdb"),
            ManualClock(datetime.now(timezone.utc) - timedelta(seconds=3)),
            notebook,
            "warm",
        )
        subprocess.run([BIN / "agent-kernel", "scheduler", "--once"], env=env, check=True, capture_output=True)
    for i in range(repeat):
        started = time.perf_counter()
        subprocess.run([BIN / "papermill", str(notebook), str(work / f"pm-{i}.ipynb"), "-p", "n", "3",
                        "--no-progress-bar", "--cwd", str(work)], check=True, capture_output=True)  # fmt: skip
        timings["papermill"].append(time.perf_counter() - started)

        add_due_job(store, clock, notebook, f"run-{i}")
        started = time.perf_counter()
        [run] = scheduler.run_once()
        timings["scheduler"].append(time.perf_counter() - started)
        assert run.status == "SUCCEEDED", run.error
        if not cold:
            continue

        now = datetime.now(timezone.utc)
        due = now.replace(microsecond=0) + timedelta(seconds=1)
        with Store(work / "cold.duckdb").connect() as con:
            Jobs(con).add(new_job(name=f"cold-{i}", kind="notebook", notebook=str(notebook), parameters={"n": 3},
                                  at=due, timezone="UTC", now=now))  # fmt: skip
        time.sleep(max((due - datetime.now(timezone.utc)).total_seconds() + 0.05, 0))
        started = time.perf_counter()
        subprocess.run([BIN / "agent-kernel", "scheduler", "--once"], env=env, check=True, capture_output=True)
        timings["cold --once"].append(time.perf_counter() - started)
    scheduler.close()
    return timings


def throughput(work: Path, batches: int, jobs: int = 8) -> tuple[dict[str, list[float]], float]:
    from agent_kernel.scheduler.executors import DaskExecutor, LocalExecutor

    notebook = write_notebook(work / "short.ipynb", "import time\ntime.sleep(0.3)", "x = n * 2", parameters="n = 1")
    timings: dict[str, list[float]] = {"local serial": [], "dask 2 workers": []}
    started = time.perf_counter()
    dask = DaskExecutor(n_workers=2)
    cluster_start = time.perf_counter() - started
    try:
        for batch in range(batches):
            for label, executor, cap in (("local serial", LocalExecutor(), 1), ("dask 2 workers", dask, jobs)):
                store = Store(work / f"tp-{label.split()[0]}-{batch}.duckdb")
                clock = ManualClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
                for n in range(jobs):
                    add_due_job(store, clock, notebook, f"short-{n}")
                    clock.advance(seconds=-2)  # all due at the same instant
                clock.advance(seconds=2)
                scheduler = Scheduler(store, home=work / "home", clock=clock, executor=executor,
                                      settings=SchedulerSettings(max_concurrent=cap))  # fmt: skip
                started = time.perf_counter()
                finished = scheduler.run_once()
                timings[label].append(time.perf_counter() - started)
                assert [r.status for r in finished] == ["SUCCEEDED"] * jobs, [r.error for r in finished]
    finally:
        dask.close()
    return timings, cluster_start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--long-repeat", type=int, default=5)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=8, help="short jobs due at once, for the throughput")
    args = options(parser, quick={"repeat": 1, "long_repeat": 0, "batches": 1, "jobs": 2})
    logging.getLogger("distributed").setLevel(logging.ERROR)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="agent-kernel-bench-") as tmp:
        work = Path(tmp)
        sections = [
            (
                f"One small notebook (3 cells), median of {args.repeat}:",
                "a small notebook",
                overhead(work, args.repeat, warm_up=not args.quick),
            )
        ]
        if args.long_repeat:
            sections.append((f"The same notebook working 3 s longer, median of {args.long_repeat}:",
                             "the notebook working 3 s longer", overhead(work, args.long_repeat, seconds=3, cold=False)))  # fmt: skip
        for title, notebook, runs in sections:
            base = statistics.median(runs["papermill"])
            rows.append(Row(f"scheduler run of {notebook} (baseline: papermill CLI)",
                            statistics.median(runs["scheduler"]), "s", base, goal=1.1, goal_of="ratio"))  # fmt: skip
            if "cold --once" in runs:
                rows.append(Row("cold `agent-kernel scheduler --once` (baseline: papermill CLI)",
                                statistics.median(runs["cold --once"]), "s", base))  # fmt: skip
            print(title)
            for label, values in runs.items():
                median = statistics.median(values)
                extra = (
                    ""
                    if label == "papermill"
                    else (
                        f"   {median / base:5.2f}x  ({(median / base - 1) * 100:+.1f}%, {(median - base) * 1000:+.0f} ms a run)"
                    )
                )
                print(f"  {label:<13} {median:6.2f} s{extra}")
        print("  goal: scheduler <= 1.10x papermill")

        batches, cluster = throughput(work, args.batches, args.jobs)
        serial = statistics.median(batches["local serial"])
        print(
            f"\n{args.jobs} short jobs due at once, median of {args.batches} batches (LocalCluster start {cluster:.2f} s, not included):"
        )
        for label, values in batches.items():
            median = statistics.median(values)
            print(
                f"  {label:<15} {median:6.2f} s   {args.jobs / median:5.2f} jobs/s   {serial / median:5.2f}x local serial"
            )
        rows.append(Row(f"{args.jobs} short jobs on Dask, 2 workers (baseline: local, one at a time)",
                        statistics.median(batches["dask 2 workers"]), "s", serial))  # fmt: skip
    write(args, "scheduler_overhead", rows)


if __name__ == "__main__":
    main()
