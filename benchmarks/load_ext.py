"""How long ``%load_ext agent_kernel`` takes, beside ``import anthropic`` and IPython's own
start, in fresh interpreters.

Each figure is the median of several fresh ``python`` processes, so no import is cached:
the wall-clock time, and the process's CPU time beside it (what a machine busy with
other work inflates less).

    python benchmarks/load_ext.py [--runs 15] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from results import Row, options, write

LOAD = """
import json, time
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
t, c = time.perf_counter(), time.process_time()
shell.run_line_magic("load_ext", "agent_kernel")
print(json.dumps([time.perf_counter() - t, time.process_time() - c]))
"""

IMPORT_ANTHROPIC = """
import json, time
t, c = time.perf_counter(), time.process_time()
import anthropic
print(json.dumps([time.perf_counter() - t, time.process_time() - c]))
"""

IMPORT_IPYTHON = """
import json, time
t, c = time.perf_counter(), time.process_time()
from IPython.core.interactiveshell import InteractiveShell
InteractiveShell.instance()
print(json.dumps([time.perf_counter() - t, time.process_time() - c]))
"""

IMPORT_DUCKDB = """
import json, time
t, c = time.perf_counter(), time.process_time()
import duckdb
print(json.dumps([time.perf_counter() - t, time.process_time() - c]))
"""


def measure(code: str, runs: int) -> tuple[float, float]:
    """Median wall-clock and CPU milliseconds of ``code`` over fresh interpreters."""
    wall, cpu = [], []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        seconds, cpu_seconds = json.loads(out.stdout.strip().splitlines()[-1])
        wall.append(seconds)
        cpu.append(cpu_seconds)
    return statistics.median(wall) * 1000, statistics.median(cpu) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = options(parser, quick={"runs": 2})
    load = measure(LOAD, args.runs)
    anthropic_ms = measure(IMPORT_ANTHROPIC, args.runs)
    duckdb_ms = measure(IMPORT_DUCKDB, args.runs)
    ipython_ms = measure(IMPORT_IPYTHON, args.runs)
    print(f"median of {args.runs} fresh interpreters each     wall        CPU")
    print(f"  %load_ext agent_kernel   {load[0]:8.1f} ms {load[1]:8.1f} ms   (goal <= 50 ms)")
    print(f"  import anthropic         {anthropic_ms[0]:8.1f} ms {anthropic_ms[1]:8.1f} ms   (what loading avoids)")
    print(f"  import duckdb            {duckdb_ms[0]:8.1f} ms {duckdb_ms[1]:8.1f} ms   (what loading avoids)")
    print(
        f"  IPython's shell          {ipython_ms[0]:8.1f} ms {ipython_ms[1]:8.1f} ms   (what every kernel starts with)"
    )
    print(f"  load / import anthropic  {load[0] / anthropic_ms[0]:8.3f}    {load[1] / anthropic_ms[1]:8.3f}")
    write(args, "load_ext", [
        Row("%load_ext agent_kernel, wall (baseline: import anthropic)", load[0], "ms", anthropic_ms[0], goal=50),
        Row("%load_ext agent_kernel, CPU (baseline: import anthropic)", load[1], "ms", anthropic_ms[1]),
        Row("%load_ext agent_kernel, wall (baseline: importing and starting IPython's shell)", load[0], "ms", ipython_ms[0]),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
