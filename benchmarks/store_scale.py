"""What every per-turn and per-request path costs as the store grows, beside a fresh store.

A person who uses the agent daily keeps every conversation, tool call, run and memory in
one DuckDB file. This benchmark builds stores of months of use (``agent_kernel.testing.
stores``: sessions of turns with tool calls and results, their audit and usage rows,
summaries, compactions, memories, jobs with a year of runs, kept tools and ``ai_*``
tables) at three sizes, fresh, --mid and --big MB, and times the same paths on each, in
one run, one process:

- ``%load_ext agent_kernel`` (fresh interpreters, the store's path set);
- a session's first turn after a restart (a new ``Agent`` continuing a session);
- a turn's fixed cost (a warm agent, a turn with no tool call);
- a tool round trip (``run_code``), the first and a later ``db_sql`` read and write,
  ``search_sessions`` and a memory recall: each the time between the model's tool_use
  reply and the agent's next request, as the scripted model sees it (its replies come
  through the SDK's in-process transport, no sockets);
- ``%agent_sessions``; the REST API's session, job and run lists (the handlers' work
  under one store connection); the scheduler's pass; a write with DuckDB's log fold;
  a session's export to a notebook.

Each figure is a median of --repeat; the baseline of a row is the same path's figure on
the fresh store in the same run, and the goal is at most 1.2 times it. Built stores are
kept in ``agent_kernel.testing.stores.cache_folder()`` and copied before use.

    python benchmarks/store_scale.py [--mid 150] [--big 1500] [--repeat 5] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results import Row, options, write

from agent_kernel.testing.stores import cached, copy_of, fill

GOAL = 1.2
UNITS = {"a turn's system prompt": "chars"}  # the other figures are milliseconds

LOAD = """
import json, time
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
t = time.perf_counter()
shell.run_line_magic("load_ext", "agent_kernel")
print(json.dumps(time.perf_counter() - t))
"""


class Plans:
    """The scripted model's side: a prompt ``PLAN <base64 JSON>`` names the tool calls to
    make, in order, then the turn ends. The time from each tool_use reply to the next
    request is the agent's handling of that call."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self.system_chars = 0  # the system prompt of the latest request
        self._sent: float | None = None
        self._lock = threading.Lock()

    def responder(self, body: Any) -> Any:
        try:
            return self._respond(body)
        except Exception:  # the SDK would see only a connection error
            traceback.print_exc()
            raise

    def _respond(self, body: Any) -> Any:
        from agent_kernel.testing import call, say

        arrived = time.perf_counter()
        system = body.get("system") or ""
        self.system_chars = len(system if isinstance(system, str) else json.dumps(system))
        plan: list[list[Any]] = []
        start = 0
        for at, message in enumerate(body["messages"]):
            content = message["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for block in blocks:
                found = (
                    re.search(r"PLAN ([A-Za-z0-9+/=]+)", block.get("text", "")) if message["role"] == "user" else None
                )
                if found:
                    start, plan = at, json.loads(base64.b64decode(found.group(1)))
        done = sum(
            1
            for message in body["messages"][start:]
            if message["role"] == "user" and isinstance(message["content"], list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        )
        with self._lock:
            if done and self._sent is not None:
                self.gaps.append(arrived - self._sent)
            reply = call(plan[done][0], **plan[done][1]) if done < len(plan) else say("Done.")
            self._sent = time.perf_counter()
        return reply

    def take(self) -> list[float]:
        with self._lock:
            gaps, self.gaps, self._sent = self.gaps, [], None
        return [g * 1000 for g in gaps]


def plan(*calls: tuple[str, dict[str, Any]]) -> str:
    return "PLAN " + base64.b64encode(json.dumps([list(c) for c in calls]).encode()).decode()


def timed(work: Callable[[], Any]) -> float:
    started = time.perf_counter()
    work()
    return (time.perf_counter() - started) * 1000


def load_ext_ms(path: Path, runs: int) -> float:
    env = dict(os.environ, AGENT_KERNEL_DB=str(path))
    times = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, check=True, env=env)
        times.append(float(json.loads(out.stdout.strip().splitlines()[-1])) * 1000)
    return statistics.median(times)


def measure(
    path: Path, run: int, model: Any, plans: Plans, shell: Any, work: Path, *, search: bool = True
) -> dict[str, float]:
    """Every path's milliseconds on the store at ``path``, once (``run``: which repeat);
    ``search``: ``search_sessions`` too."""
    from IPython.utils.capture import capture_output

    from agent_kernel.scheduler.daemon import Scheduler
    from agent_kernel.scheduler.export import export_session
    from agent_kernel.scheduler.service import SchedulerService
    from agent_kernel.server import views
    from agent_kernel.store import Store
    from agent_kernel.turn.agent import Agent

    figures: dict[str, float] = {}
    session = f"resume-{run}"

    def agent() -> Agent:
        return Agent(
            shell=shell, http_client=model.http_client, db_path=str(path), session=session, summary_idle_minutes=0
        )

    def turn(on: Agent, prompt: str) -> float:
        with capture_output():  # the turn's transcript
            return timed(lambda: on.run(prompt, check=True))

    figures["%load_ext agent_kernel"] = load_ext_ms(path, 1)
    code = ("run_code", {"code": "step = 1"})
    # The session the timed turns continue: the same short history in every store.
    turn(agent(), plan(code, code))
    plans.take()
    resumed = agent()
    figures["a session's first turn after a restart"] = turn(resumed, "Continue.")
    figures["a turn's system prompt"] = plans.system_chars
    figures["a turn's fixed cost (no tool call)"] = turn(resumed, "Hello.")
    plans.take()
    table = f"ai_scale_{run + 1}"
    turn(
        resumed,
        plan(
            code,
            code,
            code,
            ("db_sql", {"sql": "SELECT 42 AS answer"}),
            ("db_sql", {"sql": "SELECT 43 AS answer"}),
            ("db_sql", {"sql": f"CREATE TABLE {table} AS SELECT 42 AS answer"}),
            ("db_sql", {"sql": f"INSERT INTO {table} VALUES (43)"}),
            ("memory", {"action": "recall", "query": "sales region preference"}),
            *([("search_sessions", {"query": "revenue forecast by region"})] if search else []),
        ),
    )
    gaps = plans.take()
    figures["a tool round trip (run_code)"] = statistics.median(gaps[1:3])
    names = ("db_sql: first read", "db_sql: later read", "db_sql: first write", "db_sql: later write")
    figures.update(zip((*names, "memory recall", "search_sessions"), gaps[3:]))
    shell.run_line_magic("config", f"AgentKernel.db_path = {str(path)!r}")
    with capture_output():
        figures["%agent_sessions"] = timed(lambda: shell.run_line_magic("agent_sessions", ""))
    store = Store(path)
    service = SchedulerService(store, home=work)
    root = Path("/home/user")

    def sessions_page() -> None:
        with store.connect() as con:
            views.list_sessions(con, root, None)

    def fold() -> None:
        with store.connect() as con:
            con.execute("INSERT OR REPLACE INTO agent_state (key, value) VALUES ('bench', to_json(now()::VARCHAR))")

    figures["REST: sessions list"] = timed(sessions_page)

    def jobs_page() -> None:
        with store.connect() as con:
            views.list_jobs(con, root)

    figures["REST: jobs list"] = timed(jobs_page)
    figures["REST: runs list (first page)"] = timed(
        lambda: [views.run_json(s.run, s.job, root) for s in service.runs()]
    )
    figures["scheduler pass"] = timed(Scheduler(store, home=work).tick)
    figures["a write with DuckDB's log fold"] = timed(fold)
    figures["export a session"] = timed(lambda: export_session(store, session, work / "export.ipynb", overwrite=True))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mid", type=float, default=150.0, help="MB of the middle store (0: none)")
    parser.add_argument("--big", type=float, default=1500.0, help="MB of the big store")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--search-up-to",
        type=float,
        default=500.0,
        help="MB: search_sessions only on stores up to this size (it scans every message: minutes at 1.5 GB)",
    )
    args = options(parser, quick={"mid": 0.0, "big": 20.0, "repeat": 1})
    os.environ.setdefault("ANTHROPIC_API_KEY", "bench")
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.store.schema import migrate
    from agent_kernel.testing import ScriptedModel

    sizes = {"fresh": 0.0, **({"mid": args.mid} if args.mid else {}), "big": args.big}
    built: dict[str, Path] = {}
    for label, megabytes in sizes.items():
        if megabytes:
            started = time.perf_counter()
            source = cached(megabytes, migrate)
            print(f"store of {megabytes:g} MB: {source} ({time.perf_counter() - started:.1f} s to build or find)")
            built[label] = source
    plans = Plans()
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "agent_kernel")
    actual: dict[str, float] = {}
    with (
        ScriptedModel(responder=plans.responder) as model,
        tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp,
    ):
        paths: dict[str, Path] = {}
        for label in sizes:
            work = Path(tmp, label)
            work.mkdir()
            paths[label] = work / "agent.duckdb"
            if label in built:
                copy_of(built[label], paths[label])
            else:
                fill(paths[label], 0, migrate)
            actual[label] = paths[label].stat().st_size / 1e6
        if not args.quick:  # first imports and first connections, on a store of its own
            warm_up = Path(tmp, "warm-up")
            warm_up.mkdir()
            fill(warm_up / "agent.duckdb", 0, migrate)
            measure(warm_up / "agent.duckdb", -1, model, plans, shell, warm_up)
        # Each repeat measures every size in turn, so a machine busier at times slows them alike.
        runs: dict[str, list[dict[str, float]]] = {label: [] for label in sizes}
        for run in range(args.repeat):
            for label, path in paths.items():
                search = actual[label] <= args.search_up_to
                runs[label].append(measure(path, run, model, plans, shell, path.parent, search=search))
                print(f"repeat {run + 1}, {label}: {json.dumps(runs[label][-1])}", flush=True)
    results = {
        label: {name: statistics.median(r[name] for r in found) for name in found[0]} for label, found in runs.items()
    }
    names = list(results["fresh"])
    header = "".join(f"{f'{label} ({actual[label]:,.0f} MB)':>22}" for label in sizes)
    print(f"median of {args.repeat}, ms (the system prompt: chars); ratio: the biggest store / fresh (goal <= {GOAL}x)")
    print(f"  {'path':42}{header}   ratio")
    rows = []
    for name in names:
        unit = UNITS.get(name, "ms")
        cells = "".join(
            f"{results[label][name]:22,.1f}" if name in results[label] else f"{'not measured':>22}" for label in sizes
        )
        largest = [label for label in sizes if name in results[label]][-1]
        print(f"  {name:42}{cells}   {results[largest][name] / results['fresh'][name]:5.2f}x")
        for label in [label for label in sizes if label != "fresh" and name in results[label]]:
            rows.append(
                Row(
                    f"{name} at {actual[label]:,.0f} MB (baseline: fresh store)",
                    results[label][name],
                    unit,
                    results["fresh"][name],
                    goal=GOAL,
                    goal_of="ratio",
                )
            )
    print(f"(search_sessions is measured on stores up to {args.search_up_to:g} MB: it reads every message)")
    write(args, "store_scale", rows)


if __name__ == "__main__":
    os.environ.pop("JPY_SESSION_NAME", None)
    main()
