"""The one table at the end of ``make bench``: each figure, its baseline, ratio and goal.

    python benchmarks/summary.py DIR NAME... [--gauge-runs 3]

Reads ``DIR/NAME.json`` for each NAME (what ``benchmarks/NAME.py --json DIR/NAME.json``
writes when it finishes) and prints one Markdown table: benchmark, measure, figure,
baseline, ratio (figure / baseline), goal, met?. A benchmark that left no file did not
finish: its line says FAILED, and the exit status is 1 once the table is printed. A goal
not met is a "NO" in the table, not a failure of the run.

Below the table, how busy the machine was: ``import anthropic`` in fresh interpreters
(wall-clock and CPU), to read the figures against.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

COLUMNS = ("benchmark", "measure", "figure", "baseline", "ratio", "goal", "met?")

IMPORT_ANTHROPIC = """
import json, time
t, c = time.perf_counter(), time.process_time()
import anthropic
print(json.dumps([time.perf_counter() - t, time.process_time() - c]))
"""


def number(value: float, unit: str) -> str:
    """``value`` with its unit, to a sensible precision."""
    if unit in ("chars", "tokens") or abs(value) >= 100:
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return text + unit if unit == "x" else f"{text} {unit}"


def ratio_of(row: dict[str, Any]) -> float | None:
    baseline = row.get("baseline")
    return row["figure"] / baseline if baseline else None


def goal_text(row: dict[str, Any]) -> str:
    if row.get("goal") is None:
        return ""
    bound = "<=" if row.get("at_most", True) else ">="
    if row.get("goal_of") == "ratio":
        return f"{bound} {row['goal']:g}x baseline"
    unit = row["unit"]
    return f"{bound} {row['goal']:,g}{unit}" if unit == "x" else f"{bound} {row['goal']:,g} {unit}"


def met(row: dict[str, Any]) -> str:
    """yes / NO against the goal; empty where the row has none."""
    if row.get("goal") is None:
        return ""
    value = ratio_of(row) if row.get("goal_of") == "ratio" else row["figure"]
    if value is None:
        return "NO (no baseline)"
    within = value <= row["goal"] if row.get("at_most", True) else value >= row["goal"]
    return "yes" if within else "NO"


def table_lines(results: dict[str, dict[str, Any] | None]) -> list[str]:
    """The Markdown table of every benchmark's rows; None stands for one that failed."""
    lines: list[tuple[str, ...]] = []
    for name, document in results.items():
        if document is None:
            lines.append((name, "(did not finish: no result)", "", "", "", "", "FAILED"))
            continue
        for row in document["rows"]:
            ratio = ratio_of(row)
            lines.append((
                name,
                row["measure"],
                number(row["figure"], row["unit"]),
                "" if row.get("baseline") is None else number(row["baseline"], row["unit"]),
                "" if ratio is None else f"{ratio:.2f}x",
                goal_text(row),
                met(row),
            ))  # fmt: skip
    widths = [max(len(cells[i]) for cells in [COLUMNS, *lines]) for i in range(len(COLUMNS))]
    right = {2, 3, 4}  # the numbers

    def render(cells: tuple[str, ...]) -> str:
        padded = (c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":" if i in right else "-" * (w + 2)) for i, w in enumerate(widths)) + "|"
    return [render(COLUMNS), rule, *(render(cells) for cells in lines)]


def import_anthropic(runs: int) -> tuple[float, float]:
    """Median wall-clock and CPU milliseconds of ``import anthropic`` in fresh interpreters."""
    wall, cpu = [], []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", IMPORT_ANTHROPIC], capture_output=True, text=True, check=True)
        seconds, cpu_seconds = json.loads(out.stdout.strip().splitlines()[-1])
        wall.append(seconds * 1000)
        cpu.append(cpu_seconds * 1000)
    return statistics.median(wall), statistics.median(cpu)


def read(folder: Path, names: list[str]) -> dict[str, dict[str, Any] | None]:
    results: dict[str, dict[str, Any] | None] = {}
    for name in names:
        path = folder / f"{name}.json"
        results[name] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where the benchmarks wrote NAME.json")
    parser.add_argument("names", nargs="+", help="the benchmarks that were run")
    parser.add_argument("--gauge-runs", type=int, default=3, help="fresh interpreters importing anthropic")
    args = parser.parse_args()
    results = read(args.folder, args.names)
    quick = any(document and document.get("quick") for document in results.values())
    print()
    print("Benchmarks" + (" (--quick: small sizes; the figures show they run, not how fast)" if quick else ""))
    print()
    print("\n".join(table_lines(results)))
    wall, cpu = import_anthropic(args.gauge_runs)
    print()
    print(f"How busy the machine was: `import anthropic` {wall:.0f} ms wall, {cpu:.0f} ms CPU "
          f"(median of {args.gauge_runs} fresh interpreters, after the run)")  # fmt: skip
    failed = [name for name, document in results.items() if document is None]
    if failed:
        print(f"FAILED: {', '.join(failed)} (their output above says why)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
