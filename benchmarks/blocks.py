"""What the table and chart blocks cost, each beside its baseline, in one run.

- Table: a DataFrame of N rows shown as the paged table block (the first page; a page
  sorted by a column, then the next page of that order) vs ``DataFrame.to_html()`` of
  the whole frame, which is what rendering every row at once costs and sends.
- Chart: the Vega-Lite spec of a 12-month, 3-series bar chart vs rendering its PNG
  offline with vl-convert (the static copy every chart leaves in the notebook).
- Unattended wait: how long ``ask_user`` takes to say "no user present" in a kernel
  driven like nbclient (``allow_stdin: false``) vs a turn that only answers in text.

    python benchmarks/blocks.py [--rows 200000] [--runs 7] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results import Row, options, write


def median_ms(action: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def table(rows: int, runs: int) -> list[Row]:
    import pandas as pd

    from agent_kernel.display.table_widget import TableSource

    frame = pd.DataFrame(
        {
            "order": range(rows),
            "region": [("North", "South", "East", "West")[i % 4] for i in range(rows)],
            "amount": [(i * 7919) % 10007 / 7.0 for i in range(rows)],
        }
    )
    source = TableSource({"variable": "orders"}, {"orders": frame})
    first = median_ms(lambda: source.page(0, 25), runs)

    def sorted_pages() -> None:
        source._order = None  # a fresh sort each run
        source.page(0, 25, "amount", descending=True)
        source.page(1, 25, "amount", descending=True)

    sort = median_ms(sorted_pages, runs)
    page_bytes = len(json.dumps(source.page(0, 25)))
    html_runs = max(1, runs // 3)
    whole = median_ms(lambda: frame.to_html(), html_runs)
    html_bytes = len(frame.to_html())
    print(f"table block, DataFrame of {rows:,} rows (median of {runs}; to_html: {html_runs})")
    print(f"  first page (25 rows)                 {first:10.2f} ms   {page_bytes:>12,} bytes sent")
    print(f"  sort by a column + 2 pages           {sort:10.2f} ms")
    print(f"  baseline: whole frame to_html()      {whole:10.2f} ms   {html_bytes:>12,} bytes")
    print(
        f"  first page / to_html                 {first / whole:10.5f}      bytes ratio {page_bytes / html_bytes:.6f}"
    )
    return [
        Row(f"table block, first page of {rows:,} rows (baseline: to_html of all)", first, "ms", whole),
        Row(f"table block, sort + 2 pages of {rows:,} rows (baseline: to_html of all)", sort, "ms", whole),
    ]


def chart(runs: int) -> list[Row]:
    from agent_kernel.display.charts import chart_png, chart_spec

    block = {
        "chartType": "bar",
        "title": "Revenue",
        "data": {
            "labels": ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"],
            "datasets": [
                {"label": name, "data": [(i * 37 + k * 11) % 97 for i in range(12)]} for k, name in enumerate("ABC")
            ],
        },
    }
    spec = chart_spec(block, {})
    chart_png(spec)  # the first call starts vl-convert's engine
    spec_ms = median_ms(lambda: chart_spec(block, {}), runs)
    png_ms = median_ms(lambda: chart_png(spec), runs)
    print(f"chart block, 12 x 3 bars (median of {runs}, after one warm-up render)")
    print(f"  Vega-Lite spec                       {spec_ms:10.2f} ms")
    print(f"  PNG with vl-convert                  {png_ms:10.2f} ms")
    print(f"  PNG / spec                           {png_ms / spec_ms:10.1f}")
    return [Row("chart block, Vega-Lite spec (baseline: its PNG with vl-convert)", spec_ms, "ms", png_ms)]


def unattended(runs: int) -> list[Row]:
    from agent_kernel.testing import ScriptedModel, call, say
    from tests.support.kernel import Kernel

    with tempfile.TemporaryDirectory() as tmp, ScriptedModel() as model:
        env = dict(model.env(), AGENT_KERNEL_DB=str(Path(tmp, "bench.duckdb")), AGENT_KERNEL_HOME=tmp)
        kernel = Kernel(env, cwd=tmp)
        try:
            kernel.ok("%load_ext agent_kernel\n%config AgentKernel.presence_timeout = 30")
            model.add(say("ok"))
            kernel.ok("%agent warm up", allow_stdin=False)

            def asked() -> None:
                model.add(call("ask_user", question="Which region?", options=["North", "South"]), say("North, then."))
                kernel.ok("%agent pick a region", allow_stdin=False)

            def answered() -> None:
                model.add(say("North."))
                kernel.ok("%agent pick a region", allow_stdin=False)

            ask_ms = median_ms(asked, runs)
            text_ms = median_ms(answered, runs)
        finally:
            kernel.shutdown()
    print(f"unattended turn, kernel driven like nbclient (median of {runs}; presence_timeout 30 s)")
    print(f"  turn with ask_user (2 model calls)   {ask_ms:10.1f} ms")
    print(f"  baseline: text-only turn (1 call)    {text_ms:10.1f} ms")
    print(f"  ratio                                {ask_ms / text_ms:10.2f}   (no wait: far below the 30 s timeout)")
    return [Row("unattended turn with ask_user (baseline: a text-only turn)", ask_ms, "ms", text_ms)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=7)
    args = options(parser, quick={"rows": 2_000, "runs": 1})
    os.environ.setdefault("ANTHROPIC_API_KEY", "benchmark")
    write(args, "blocks", table(args.rows, args.runs) + chart(args.runs) + unattended(args.runs))


if __name__ == "__main__":
    main()
