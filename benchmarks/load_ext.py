"""How long ``%load_ext agent_kernel`` takes, beside ``import anthropic``, in fresh interpreters.

Each figure is the median of several fresh ``python`` processes, so no import is cached.

    python benchmarks/load_ext.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

LOAD = """
import json, time
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
t = time.perf_counter()
shell.run_line_magic("load_ext", "agent_kernel")
print(json.dumps(time.perf_counter() - t))
"""

IMPORT_ANTHROPIC = """
import json, time
t = time.perf_counter()
import anthropic
print(json.dumps(time.perf_counter() - t))
"""

IMPORT_DUCKDB = """
import json, time
t = time.perf_counter()
import duckdb
print(json.dumps(time.perf_counter() - t))
"""


def measure(code: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        times.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    load = measure(LOAD, args.runs)
    anthropic_ms = measure(IMPORT_ANTHROPIC, args.runs)
    duckdb_ms = measure(IMPORT_DUCKDB, args.runs)
    print(f"median of {args.runs} fresh interpreters each")
    print(f"  %load_ext agent_kernel   {load:8.1f} ms   (goal <= 50 ms)")
    print(f"  import anthropic         {anthropic_ms:8.1f} ms   (what loading avoids)")
    print(f"  import duckdb            {duckdb_ms:8.1f} ms   (what loading avoids)")
    print(f"  load / import anthropic  {load / anthropic_ms:8.3f}")


if __name__ == "__main__":
    main()
