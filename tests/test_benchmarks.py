"""Every benchmark runs to its end in its quick mode, and the summary reads what it wrote.

Each benchmark runs as ``make bench`` runs it (``python benchmarks/NAME.py --quick --json
PATH``, a process of its own, real kernels where it uses them), at small sizes: a
benchmark that no longer works with the code fails here, not on the day someone measures.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
TIMEOUT = 300  # seconds; quick runs take 1-40 s on a busy 2-core machine

# name -> (lines its output has, how many result rows it writes)
FIGURES = r"with a figure each, .* largest request [\d,]+ tokens \(within the window\), cache read share turns 2\+ (9\d|100)\.\d%, images in the last request [1-9]"
EXPECTED: dict[str, tuple[tuple[str, ...], int]] = {
    "load_ext": (
        (
            r"%load_ext agent_kernel +[\d.]+ ms +[\d.]+ ms +\(goal <= 50 ms\)",
            r"import anthropic +[\d.]+ ms",
            r"IPython's shell +[\d.]+ ms",
        ),
        3,
    ),
    "loop_overhead": (
        (
            r"overhead per tool round trip +-?[\d.]+ ms +-?[\d.]+ ms +\(goal: CPU <= 3 ms\)",
            r"fixed overhead per turn +-?[\d.]+ ms +-?[\d.]+ ms +\(goal: wall <= 30 ms\)",
        ),
        4,
    ),
    "cold_turn": (
        (
            r"\n  on +[\d.]+ ms +[\d.]+ ms +-?[\d.]+ ms +\(goal <= 300 ms\)",
            r"\n  off +\d+ +[\d.]+ ms",
        ),
        3,
    ),
    "scheduler_overhead": (
        (
            r"papermill +[\d.]+ s",
            r"scheduler +[\d.]+ s +[\d.]+x",
            r"cold --once +[\d.]+ s",
            r"dask 2 workers +[\d.]+ s",
        ),
        3,
    ),
    "sql_dataframe": (
        (
            r"distinct count +[\d.]+ ms +[\d.]+ ms",
            r"worst ratio [\d.]+",
            r"first db_sql call, [\d.]+ s after %load_ext: median \d+ ms",
        ),
        4,
    ),
    "blocks": (
        (r"first page \(25 rows\) +[\d.]+ ms", r"PNG with vl-convert +[\d.]+ ms", r"turn with ask_user .* [\d.]+ ms"),
        4,
    ),
    "redaction": ((r"redact \(2 hits\) +[\d.]+ ms", r"scrub walk +[\d.]+ ms"), 10),
    "context": (
        (
            r"Default prompt now .* = [\d,]+ chars",
            r"\n  now +[\d,]+",
            r"\n  before +[\d,]+",
            r"\n +10 +[\d,]+ +[\d,]+",
            FIGURES,
        ),
        6,
    ),
    "context_budget": ((r"\n +10 +[\d,]+ +[\d,]+", r"compactions: \d+", FIGURES), 3),
    "delegation": ((r"concurrency 16 +[\d.]+", r"\(b\) three 0.2 s isolated steps: .* [\d.]+x faster"), 2),
    "completion": ((r"model call \(SDK, direct\) +[\d.]+ ms", r"server overhead +-?[\d.]+ ms +-?[\d.]+ ms"), 2),
    "chat_latency": ((r"%agent cell +[\d.]+ ms", r"Agent panel chat +[\d.]+ ms +added [-+][\d.]+ ms"), 1),
    "store_scale": (
        (
            r"store of [\d.]+ MB: .*duckdb",
            r"\n  search_sessions +[\d.,]+ +[\d.,]+ +[\d.]+x",
            r"\n  a session's first turn after a restart +[\d.,]+ +[\d.,]+ +[\d.]+x",
        ),
        18,
    ),
}
USES_KERNELS = {"loop_overhead", "cold_turn", "scheduler_overhead", "blocks", "chat_latency"}


def run_quick(name: str, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """Run ``benchmarks/NAME.py --quick``; its output and the result it wrote."""
    result = tmp_path / f"{name}.json"
    env = dict(os.environ, TMPDIR=str(tmp_path))  # its temporary files beside the test's
    env.pop("JPY_SESSION_NAME", None)
    # The scripted model takes any key; a stored key's copy that an earlier test of this worker
    # left in the environment (with its mark) would be dropped by the benchmark as stale.
    env["ANTHROPIC_API_KEY"] = "scripted-benchmark-key"
    env.pop("AGENT_KERNEL_KEY_STORED", None)
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{name}.py"), "--quick", "--json", str(result)],
        check=False, capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, f"benchmarks/{name}.py --quick failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    return done.stdout, json.loads(result.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[pytest.mark.kernel] if n in USES_KERNELS else []) for n in EXPECTED]
)
def test_benchmark_runs_to_its_end_in_quick_mode(name: str, tmp_path: Path) -> None:
    stdout, document = run_quick(name, tmp_path)
    lines, count = EXPECTED[name]
    for line in lines:
        assert re.search(line, stdout), f"benchmarks/{name}.py printed no line like {line!r}:\n{stdout}"
    assert document["benchmark"] == name and document["quick"] is True
    rows = document["rows"]
    assert len(rows) == count, rows
    for row in rows:
        assert row["measure"] and row["unit"] and math.isfinite(row["figure"]), row
        assert row["baseline"] is None or math.isfinite(row["baseline"]), row
        assert row["goal_of"] in ("figure", "ratio") and (row["goal_of"] == "figure" or row["baseline"]), row


def test_every_benchmark_is_run_by_make_bench_and_tested_here() -> None:
    makefile = (BENCHMARKS.parent / "Makefile").read_text(encoding="utf-8")
    listed = re.search(r"^BENCHMARKS := (.+)$", makefile, re.MULTILINE)
    assert listed, "the Makefile lists no BENCHMARKS"
    scripts = {p.stem for p in BENCHMARKS.glob("*.py")} - {"results", "summary"}
    assert set(listed.group(1).split()) == scripts - {"context_budget"}  # context.py runs its session
    assert set(EXPECTED) == scripts


def summary(folder: Path, *names: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(BENCHMARKS / "summary.py"), str(folder), *names, "--gauge-runs", "1"]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=TIMEOUT)


def write_result(folder: Path, name: str, *rows: dict[str, Any], quick: bool = False) -> None:
    full = [{"baseline": None, "goal": None, "goal_of": "figure", "at_most": True, **row} for row in rows]
    (folder / f"{name}.json").write_text(json.dumps({"benchmark": name, "quick": quick, "rows": full}))


def table_row(stdout: str, measure: str) -> list[str]:
    """The cells of the table's line for ``measure``."""
    [line] = [line for line in stdout.splitlines() if f"| {measure} " in line]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_summary_shows_figure_baseline_ratio_goal_and_whether_it_was_met(tmp_path: Path) -> None:
    write_result(
        tmp_path, "speed",
        {"measure": "round trip", "figure": 4.5, "unit": "ms", "baseline": 3.0, "goal": 3},
        {"measure": "query", "figure": 12.0, "unit": "ms", "baseline": 10.0, "goal": 1.3, "goal_of": "ratio"},
        {"measure": "speed-up", "figure": 9.2, "unit": "x", "goal": 8, "at_most": False},
        {"measure": "prompt", "figure": 12671, "unit": "chars", "goal": 12000},
        {"measure": "no goal", "figure": 0.25, "unit": "s"},
    )  # fmt: skip
    done = summary(tmp_path, "speed")
    assert done.returncode == 0, done.stderr
    header = table_row(done.stdout, "measure")
    assert header == ["benchmark", "measure", "figure", "baseline", "ratio", "goal", "met?"]
    assert table_row(done.stdout, "round trip") == [
        "speed",
        "round trip",
        "4.50 ms",
        "3.00 ms",
        "1.50x",
        "<= 3 ms",
        "NO",
    ]
    assert table_row(done.stdout, "query") == [
        "speed",
        "query",
        "12.0 ms",
        "10.0 ms",
        "1.20x",
        "<= 1.3x baseline",
        "yes",
    ]
    assert table_row(done.stdout, "speed-up") == ["speed", "speed-up", "9.20x", "", "", ">= 8x", "yes"]
    assert table_row(done.stdout, "prompt") == ["speed", "prompt", "12,671 chars", "", "", "<= 12,000 chars", "NO"]
    assert table_row(done.stdout, "no goal") == ["speed", "no goal", "0.25 s", "", "", "", ""]
    assert re.search(r"`import anthropic` \d+ ms wall, \d+ ms CPU", done.stdout)
    assert "FAILED" not in done.stdout and "--quick" not in done.stdout


def test_summary_names_a_benchmark_that_did_not_finish_and_fails(tmp_path: Path) -> None:
    write_result(tmp_path, "finished", {"measure": "size", "figure": 10, "unit": "chars"}, quick=True)
    done = summary(tmp_path, "finished", "crashed")
    assert done.returncode == 1
    assert table_row(done.stdout, "size")[:3] == ["finished", "size", "10 chars"]
    assert table_row(done.stdout, "(did not finish: no result)") == [
        "crashed", "(did not finish: no result)", "", "", "", "", "FAILED"
    ]  # fmt: skip
    assert "FAILED: crashed" in done.stdout and "--quick: small sizes" in done.stdout
