"""What every benchmark shares: the ``--quick`` and ``--json`` options, and its result rows.

A row is one line of the summary table that ``benchmarks/summary.py`` prints after
``make bench``: what was measured, the figure and its unit, the baseline measured beside
it in the same run (in the same unit; none where the figure is itself a comparison, a
speed-up or a size), and the goal: at most (or at least) a value, either of the figure or
of the ratio figure / baseline.

``--quick`` runs the benchmark at small sizes with 1-3 repeats, through the same code
(real kernels where the benchmark uses them): seconds, for ``make test``, which runs every
benchmark that way so one that breaks fails the suite. Its figures say that the benchmark
works, not how fast anything is.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal


@dataclass(frozen=True)
class Row:
    """One figure of a benchmark, with its baseline and goal."""

    measure: str
    figure: float
    unit: str
    baseline: float | None = None
    goal: float | None = None
    goal_of: Literal["figure", "ratio"] = "figure"
    at_most: bool = True  # the goal is an upper bound (False: a lower bound, e.g. a speed-up)


def options(parser: argparse.ArgumentParser, quick: dict[str, Any]) -> argparse.Namespace:
    """Add ``--quick`` and ``--json`` to ``parser`` and parse the command line.

    With ``--quick``, every option named in ``quick`` that was left at its default takes
    the quick value instead (an option given on the command line wins).
    """
    parser.add_argument("--quick", action="store_true", help="small sizes, 1-3 repeats: seconds (make test runs this)")
    parser.add_argument(
        "--json", type=Path, metavar="PATH", help="write the result rows to PATH (benchmarks/summary.py reads them)"
    )
    args = parser.parse_args()
    if args.quick:
        for name, value in quick.items():
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)
    return args


def write(args: argparse.Namespace, benchmark: str, rows: list[Row]) -> None:
    """Write ``rows`` to the ``--json`` path, if one was given; only a finished run writes."""
    for row in rows:
        if not math.isfinite(row.figure):
            raise ValueError(f"{benchmark}: {row.measure} is {row.figure}")
    if args.json is None:
        return
    document = {"benchmark": benchmark, "quick": bool(args.quick), "rows": [asdict(row) for row in rows]}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
