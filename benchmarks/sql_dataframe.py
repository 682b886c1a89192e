"""db_sql on a 10M-row kernel DataFrame, beside plain DuckDB on the same frame.

- db_sql: the whole tool call through the registry, as a turn makes it: input
  validation, parsing, the check that it reads only kernel frames, the query in a fork
  of the process on a sandboxed in-memory database (watched for its time and memory),
  rows made JSON. Calls one after another, as in a turn, run in the fork the first made
  (kept while the frame is unchanged); "after a cell" times a call that makes its fork,
  as the first call of a turn, or one after run_code, does.
- duckdb: ``con.execute(sql).fetchall()`` on an in-memory connection opened once, reading
  the frame by name (DuckDB's replacement scan), on as many threads as db_sql's sandbox
  (``AgentKernel.sql_threads``, at most the machine's cores): the same work, not a wider one.

Both read the pandas frame in place. Medians over repeated runs, in one process.

The first db_sql call is timed apart, in fresh interpreters, as a user meets it: the frame
made, ``%load_ext agent_kernel`` run, ``--wait`` seconds later a turn starts (it waits for
the warm-up's step in progress, and its own imports are done) and its first tool call
is db_sql on the frame (an existing store file, as on every day but the first).

    python benchmarks/sql_dataframe.py [--rows 10000000] [--repeat 7] [--wait 2] [--first-calls 3] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results import Row, options, write

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


async def first_call(rows: int, wait: float, store_path: str) -> float:
    """In a fresh interpreter: the first db_sql call, ``wait`` s after ``%load_ext``."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.user_ns["sales"] = make_frame(rows)
    shell.run_cell(f"%load_ext agent_kernel\n%config AgentKernel.db_path = {store_path!r}")
    time.sleep(wait)
    from agent_kernel.turn import warmup

    await warmup.wait_for_step()  # what a turn does first
    from agent_kernel.config import AgentKernel
    from agent_kernel.store import Store
    from agent_kernel.store.writer import WriteBehind
    from agent_kernel.tools.builtin import builtin_registry
    from agent_kernel.tools.context import ToolContext

    settings = next(c for c in shell.configurables if isinstance(c, AgentKernel))
    store = Store(store_path)
    context = ToolContext(
        shell=shell,
        settings=settings,
        store=store,
        writer=WriteBehind(store),
        session_id="bench",
        session_name="bench",
        turn=1,
        prompt="bench",
        transcript=None,
        interrupts=None,  # type: ignore[arg-type] - db_sql uses neither
    )
    started = time.perf_counter()
    outcome = await builtin_registry().dispatch("db_sql", {"sql": QUERIES["filter + top 1000"]}, context)
    seconds = time.perf_counter() - started
    assert not outcome.is_error, outcome.content
    return seconds


def first_calls(rows: int, wait: float, count: int, store_path: str) -> list[float]:
    """:func:`first_call` in ``count`` fresh interpreters, one after another."""
    seconds = []
    for _ in range(count):
        done = subprocess.run(
            [sys.executable, __file__, "--rows", str(rows), "--wait", str(wait), "--first-call-on", store_path],
            capture_output=True,
            text=True,
            check=True,
        )
        seconds.append(float(done.stdout.strip().splitlines()[-1]))
    return seconds


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--wait", type=float, default=2.0, help="seconds from %%load_ext to the first call")
    parser.add_argument("--first-calls", type=int, default=3, help="fresh interpreters timing a first call")
    parser.add_argument("--first-call-on", help=argparse.SUPPRESS)  # the inner run of first_calls
    args = options(parser, quick={"rows": 100_000, "repeat": 1, "wait": 0.0, "first_calls": 1})
    if args.first_call_on:
        print(await first_call(args.rows, args.wait, args.first_call_on))
        return

    import duckdb
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.config import AgentKernel
    from agent_kernel.sql.sandbox import Limits
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
            shell=shell,
            settings=AgentKernel(),
            store=store,
            writer=WriteBehind(store),
            session_id="bench",
            session_name="bench",
            turn=1,
            prompt="bench",
            transcript=None,
            interrupts=None,  # type: ignore[arg-type] - db_sql uses neither
        )
        with store.connect():  # the file exists, its tables made
            pass
        threads = Limits.from_settings(context.settings).config()["threads"]
        plain = duckdb.connect(config={"threads": threads})
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

        print(
            f"{args.rows:,}-row pandas DataFrame, median of {args.repeat} runs, one process, DuckDB on {threads} threads"
        )
        print(f"  {'query':20} {'db_sql':>10} {'duckdb':>10}   ratio")
        ratios = []
        rows: list[Row] = []
        for name, sql in QUERIES.items():
            await tool(sql)  # warm up both (imports, first open of the file, caches)
            baseline(sql)
            ours, theirs = [], []
            for _ in range(args.repeat):
                ours.append(await tool(sql))
                theirs.append(baseline(sql))
            a, b = statistics.median(ours) * 1000, statistics.median(theirs) * 1000
            ratios.append(a / b)
            print(f"  {name:20} {a:7.1f} ms {b:7.1f} ms   {a / b:5.2f}")
            rows.append(
                Row(
                    f"db_sql {name}, {args.rows:,} rows (baseline: plain DuckDB)", a, "ms", b, goal=1.3, goal_of="ratio"
                )
            )
        print(f"  worst ratio {max(ratios):.2f}   (goal <= 1.3)")
        sql = QUERIES["filter + top 1000"]
        ours, theirs = [], []
        for _ in range(args.repeat):
            shell.run_cell("pass")  # a cell lets the kept fork go: the call makes its own
            ours.append(await tool(sql))
            theirs.append(baseline(sql))
        a, b = statistics.median(ours) * 1000, statistics.median(theirs) * 1000
        print(
            f"  {'filter + top 1000 after a cell (a new fork)':20} {a:7.1f} ms {b:7.1f} ms   {a / b:5.2f}   (no goal)"
        )
        del sales, shell.user_ns["sales"]  # the fresh interpreters make their own
        firsts = first_calls(args.rows, args.wait, args.first_calls, str(store.path))
        first = statistics.median(firsts)
        print(
            f"  first db_sql call, {args.wait:g} s after %load_ext: median {first * 1000:.0f} ms "
            f"of {args.first_calls} fresh interpreters ({', '.join(f'{f * 1000:.0f}' for f in firsts)})   (goal <= 300 ms)"
        )
        rows.append(Row(f"first db_sql call, {args.wait:g} s after %load_ext (baseline: the same query warm)",
                        first * 1000, "ms", rows[0].figure, goal=300))  # fmt: skip
        write(args, "sql_dataframe", rows)


if __name__ == "__main__":
    asyncio.run(main())
