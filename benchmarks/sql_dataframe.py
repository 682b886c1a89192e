"""db_sql on a 10M-row kernel DataFrame, beside plain DuckDB on the same frame.

- db_sql: the whole tool call through the registry, as a turn makes it: input
  validation, parsing, the check that it reads only kernel frames, the query in a fork
  of the process on a sandboxed in-memory database (watched for its time and memory),
  rows made JSON.
- duckdb: ``con.execute(sql).fetchall()`` on an in-memory connection opened once, reading
  the frame by name (DuckDB's replacement scan).

Both read the pandas frame in place. Medians over repeated runs, in one process; the
first db_sql call (the file's tables read, the fork's database made) is timed apart, made
``--wait`` seconds after the frame and the tools are ready, as a user's first question
comes a while after loading (what can be prepared meanwhile, is).

    python benchmarks/sql_dataframe.py [--rows 10000000] [--repeat 7] [--wait 2] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results import Row, options, write  # noqa: E402

QUERIES = {
    "group by": "SELECT region, count(*) AS n, sum(amount) AS total, avg(qty) AS mean_qty "
    "FROM sales GROUP BY region ORDER BY region",
    "filter + top 1000": "SELECT id, region, amount FROM sales WHERE qty = 7 ORDER BY amount DESC LIMIT 1000",
    "distinct count": "SELECT count(DISTINCT customer) AS customers FROM sales WHERE amount > 50",
}


def make_frame(rows: int):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    regions = pd.Categorical.from_codes(rng.integers(0, 8, rows), ["AF", "AS", "EU", "LA", "ME", "NA", "OC", "XX"])
    return pd.DataFrame(
        {
            "id": np.arange(rows),
            "region": regions,
            "customer": rng.integers(0, 200_000, rows),
            "qty": rng.integers(1, 20, rows),
            "amount": rng.random(rows) * 100,
        }
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--wait", type=float, default=2.0, help="seconds between getting ready and the first call")
    args = options(parser, quick={"rows": 100_000, "repeat": 1, "wait": 0.0})

    import duckdb
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.config import AgentKernel
    from agent_kernel.store import Store
    from agent_kernel.store.writer import WriteBehind
    from agent_kernel.tools.builtin import builtin_registry
    from agent_kernel.tools.context import ToolContext

    sales = make_frame(args.rows)
    shell = InteractiveShell.instance()
    shell.user_ns["sales"] = sales
    registry = builtin_registry()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp, "bench.duckdb"))
        context = ToolContext(
            shell=shell, settings=AgentKernel(), store=store, writer=WriteBehind(store),
            session_id="bench", session_name="bench", turn=1, prompt="bench",
            transcript=None, interrupts=None,  # type: ignore[arg-type] - db_sql uses neither
        )
        plain = duckdb.connect()
        plain.register("sales", sales)  # what a replacement scan does, by name

        async def tool(sql: str) -> float:
            started = time.perf_counter()
            outcome = await registry.dispatch("db_sql", {"sql": sql}, context)
            seconds = time.perf_counter() - started
            assert not outcome.is_error, outcome.content
            return seconds

        def baseline(sql: str) -> float:
            started = time.perf_counter()
            plain.execute(sql).fetchall()
            return time.perf_counter() - started

        print(f"{args.rows:,}-row pandas DataFrame, median of {args.repeat} runs, one process")
        print(f"  {'query':20} {'db_sql':>10} {'duckdb':>10}   ratio")
        ratios = []
        rows: list[Row] = []
        first_call = None
        await asyncio.sleep(args.wait)
        for name, sql in QUERIES.items():
            warm_up = await tool(sql)  # warm up both (imports, first open of the file, caches)
            first_call = warm_up if first_call is None else first_call
            baseline(sql)
            ours, theirs = [], []
            for _ in range(args.repeat):
                ours.append(await tool(sql))
                theirs.append(baseline(sql))
            a, b = statistics.median(ours) * 1000, statistics.median(theirs) * 1000
            ratios.append(a / b)
            print(f"  {name:20} {a:7.1f} ms {b:7.1f} ms   {a / b:5.2f}")
            rows.append(Row(f"db_sql {name}, {args.rows:,} rows (baseline: plain DuckDB)", a, "ms", b, goal=1.3, goal_of="ratio"))
        print(f"  worst ratio {max(ratios):.2f}   (goal <= 1.3)")
        print(f"  first db_sql call {first_call * 1000:.0f} ms, {args.wait:g} s after getting ready   (goal <= 300 ms)")
        rows.append(Row(f"first db_sql call, {args.wait:g} s after getting ready (baseline: the same query warm)",
                        first_call * 1000, "ms", rows[0].figure, goal=300))  # fmt: skip
        write(args, "sql_dataframe", rows)


if __name__ == "__main__":
    asyncio.run(main())
