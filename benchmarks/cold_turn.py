"""The first ``%agent`` turn of a fresh kernel beside its second, and the user's cells meanwhile.

For each of several fresh kernels (the scripted model in a process of its own, a store
file that already exists, as on every day but the first):

- first turn:  ``%agent`` started 2 s after the ``%load_ext agent_kernel`` cell finished;
- second turn: the same ``%agent`` again, right after (everything warm).

Each is timed inside its cell. Medians over the kernels of (first - second), with the
background warm-up (the default) and without it (``AGENT_KERNEL_WARM_UP=0``).

User cells during the warm-up: right after the loading cell, a small cell (a pure-Python
loop of ~2 ms) is run back to back for 2 s; its time (inside the cell, and the round trip
the client sees) is compared with the same cells in a kernel whose warm-up is off (the
goal: as fast, within 10 %). As many kernels of each kind as for the turns, one of each
per round (taking turns at going first); the medians are of all their cells.

Everything is measured twice: on the machine as it is ("quiet"), and "busy": with a
competing CPU-bound process (``python -c "while True: pass"``) per core running meanwhile,
so the warm-up races the first turn for a share of a busy machine.

    python benchmarks/cold_turn.py [--kernels 5] [--wait 2] [--cells-seconds 2] [--loads quiet,busy] [--quick] [--json PATH]

``--quick`` runs one kernel of each kind on the machine as it is (``--loads quiet``): a
spinning process per core would take both cores from whatever runs beside it (the test
suite's other workers) for the half of the run it lasts.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results import Row, options, write

from tests.support.kernel import Kernel

SERVER = """
import sys
from agent_kernel.testing import ScriptedModel, say

with ScriptedModel(responder=lambda body: say("Done.")) as model:
    print(model.url, flush=True)
    sys.stdin.read()
"""

TURN = """
import time as _time
_t0 = _time.perf_counter()
%agent say done
print(repr(_time.perf_counter() - _t0))
"""

USER_CELL = """
import time as _time
_t0 = _time.perf_counter()
_total = 0
for _i in range(20000):
    _total += _i * _i
print(repr(_time.perf_counter() - _t0))
"""


# How far the warm-up got before the first turn stopped it (the turn waits for the step under
# way, then does the rest itself): steps done, of all, and the
# CPU seconds its threads spent on them.
WARM_UP_PROGRESS = """
from agent_kernel.turn import warmup as _warmup
_w = _warmup._CURRENT
print(repr((len(_w.steps_done), len(_w._steps()) + 1, sum(_w.step_cpu_seconds.values())) if _w else None))
"""


def first_and_second(env: dict[str, str], cwd: str, wait: float) -> tuple[float, float, tuple | None]:
    """The first and second turn's seconds, and the warm-up's progress (WARM_UP_PROGRESS)."""
    kernel = Kernel(env, cwd=cwd)
    try:
        kernel.ok("%load_ext agent_kernel", allow_stdin=False)
        time.sleep(wait)
        first = _seconds(kernel.ok(TURN, allow_stdin=False))
        second = _seconds(kernel.ok(TURN, allow_stdin=False))
        progress = ast.literal_eval(kernel.ok(WARM_UP_PROGRESS, allow_stdin=False).stdout.strip().splitlines()[-1])
    finally:
        kernel.shutdown()
    return first, second, progress


def user_cells(env: dict[str, str], cwd: str, seconds: float) -> tuple[list[float], list[float]]:
    """In-cell and round-trip times of the small cell, run back to back after loading."""
    kernel = Kernel(env, cwd=cwd)
    inside, round_trip = [], []
    try:
        kernel.ok("%load_ext agent_kernel", allow_stdin=False)
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            execution = kernel.ok(USER_CELL, allow_stdin=False)
            inside.append(_seconds(execution))
            round_trip.append(execution.seconds)
    finally:
        kernel.shutdown()
    return inside, round_trip


@contextlib.contextmanager
def competing(load: str) -> Iterator[None]:
    """A CPU-bound process per core while the block runs (``load`` "busy"), else nothing."""
    spinners = []
    if load == "busy":
        spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=5)
    parser.add_argument("--wait", type=float, default=2.0, help="seconds between loading and the first turn")
    parser.add_argument("--cells-seconds", type=float, default=2.0, help="seconds of user cells after loading")
    parser.add_argument(
        "--loads", default="quiet,busy", help="quiet (the machine as it is), busy (a spinning process per core)"
    )
    args = options(parser, quick={"kernels": 1, "wait": 1.0, "cells_seconds": 0.5, "loads": "quiet"})
    loads = [load.strip() for load in args.loads.split(",") if load.strip()]
    assert loads and set(loads) <= {"quiet", "busy"}, args.loads
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()
    assert re.match(r"http://127\.0\.0\.1:\d+", url), url
    results: dict[tuple[str, str], list[tuple[float, float, tuple | None]]] = {
        (load, mode): [] for load in loads for mode in ("on", "off")
    }
    cells: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp, "bench.duckdb")
        from agent_kernel.store import Store

        with Store(db).connect():  # an existing store, its tables made
            pass
        base = {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "bench", "AGENT_KERNEL_DB": str(db)}
        try:
            for load in loads:
                for _ in range(args.kernels):
                    for mode in ("on", "off"):
                        env = dict(base, AGENT_KERNEL_WARM_UP="1" if mode == "on" else "0")
                        with competing(load):
                            results[load, mode].append(first_and_second(env, tmp, args.wait))
                # A kernel's cells on a busy machine vary with how the scheduler treats
                # that kernel (one kernel's median moved from 9 to 20 ms between runs):
                # a kernel of each kind per round, taking turns at going first.
                for round_ in range(args.kernels):
                    for mode in ("on", "off") if round_ % 2 == 0 else ("off", "on"):
                        env = dict(base, AGENT_KERNEL_WARM_UP="1" if mode == "on" else "0")
                        with competing(load):
                            inside, trip = user_cells(env, tmp, args.cells_seconds)
                        cells.setdefault((load, mode), ([], []))[0].extend(inside)
                        cells[load, mode][1].extend(trip)
        finally:
            server.communicate("")
    rows = []
    for load in loads:
        spinning = f", a spinning process per core ({os.cpu_count()})" if load == "busy" else ""
        print(f"{load}{spinning}: median of {args.kernels} fresh kernels, first turn {args.wait:g} s after %load_ext")
        print("  warm-up   first turn   second turn   first - second")
        for mode in ("on", "off"):
            first = statistics.median(f for f, _, _ in results[load, mode]) * 1000
            second = statistics.median(s for _, s, _ in results[load, mode]) * 1000
            extra = statistics.median(f - s for f, s, _ in results[load, mode]) * 1000
            goal = "   (goal <= 300 ms)" if mode == "on" else ""
            print(f"  {mode:7s} {first:9.1f} ms {second:10.1f} ms {extra:12.1f} ms{goal}")
        progress = [p for _, _, p in results[load, "on"] if p]
        if progress:
            steps = ", ".join(f"{done}/{total} ({cpu:.2f} s CPU)" for done, total, cpu in progress)
            print(f"  warm-up steps done by the first turn (it waits for the one under way), each kernel: {steps}")
        print(
            f"  a small user cell (~2 ms of Python) run back to back for {args.cells_seconds:g} s right after %load_ext,"
            f" in {args.kernels} fresh kernels of each kind (all their cells)"
        )
        print("  warm-up   cells   in cell: median    max   round trip: median    max")
        for mode in ("on", "off"):
            inside, trip = cells[load, mode]
            print(
                f"  {mode:7s} {len(inside):5d}   {statistics.median(inside) * 1000:13.2f} ms {max(inside) * 1000:6.1f}"
                f"   {statistics.median(trip) * 1000:15.2f} ms {max(trip) * 1000:6.1f}"
            )
        extra = {mode: statistics.median(f - s for f, s, _ in results[load, mode]) * 1000 for mode in ("on", "off")}
        inside = {mode: statistics.median(cells[load, mode][0]) * 1000 for mode in ("on", "off")}
        trip = {mode: statistics.median(cells[load, mode][1]) * 1000 for mode in ("on", "off")}
        busy = ", busy machine" if load == "busy" else ""
        rows += [
            Row(f"cold first turn over a warm one, {args.wait:g} s after %load_ext{busy} (baseline: no warm-up)",
                extra["on"], "ms", extra["off"], goal=300),
            Row(f"user cell during the warm-up, in cell{busy} (baseline: no warm-up)", inside["on"], "ms", inside["off"],
                goal=1.1, goal_of="ratio"),
            Row(f"user cell during the warm-up, round trip{busy} (baseline: no warm-up)", trip["on"], "ms", trip["off"],
                goal=1.1, goal_of="ratio"),
        ]  # fmt: skip
    write(args, "cold_turn", rows)


def _seconds(execution) -> float:
    return float(execution.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    os.environ.pop("JPY_SESSION_NAME", None)
    main()
