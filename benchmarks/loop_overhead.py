"""What the agent loop adds per tool round trip, beside the same work done by hand.

In one real kernel, against the scripted model on 127.0.0.1 (in a process of its own, so
the benchmark's own iopub reading does not slow the server):

- agent:    ``%agent`` turn whose model calls ``run_code`` N times, then ends its turn
            (N + 1 model calls: streaming, tool cards, run_cell_async, DuckDB writes).
- baseline: the same N + 1 streamed SDK calls carrying the same request (the agent's
            system prompt and tool definitions, the same growing conversation), and the
            same N snippets run with ``exec``, in one cell.

Both are timed at two sizes (--small and --trips round trips). The overhead per round
trip is the slope, ((agent - baseline) at N - (agent - baseline) at small) / (N - small);
the fixed overhead of a turn (loading the session, the Stop button, the final save) is
what is left at small. Medians over repeated runs (the extra time of each agent run
over the baseline run right after it).

Each timed turn continues a session that ``%agent --new`` (an untimed cell before it)
started, as a notebook's turns continue its session. The cells are sent as nbclient
sends them (``allow_stdin=False``): a client that applies display updates, so the turn
does not wait for a Stop button acknowledgement that this client could not send.

The raw SDK round trip (the baseline's own slope) is the baseline of the summary rows.

    python benchmarks/loop_overhead.py [--trips 45] [--small 5] [--repeat 9] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results import Row, options, write

from tests.support.kernel import Kernel

SERVER = """
import re, sys, time
from agent_kernel.testing import ScriptedModel, call, say

def steps(body):
    # "run N steps": answer with run_code until N tool results came back, then end the turn.
    # The turn's prompt: the last user text saying "run N steps" (a context block leads it).
    for at, m in enumerate(body["messages"]):
        blocks = [{"type": "text", "text": m["content"]}] if isinstance(m["content"], str) else m["content"]
        for b in blocks:
            found = re.search(r"run (\\d+) steps", b.get("text", "")) if m["role"] == "user" else None
            if found:
                start, wanted = at, int(found.group(1))
    done = sum(1 for m in body["messages"][start:] if m["role"] == "user" and isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result")
    return call("run_code", code=f"step_{done} = {done} * 2") if done < wanted else say("All steps done.")

with ScriptedModel(responder=steps) as model:
    print(model.url, flush=True)
    sys.stdin.read()
"""

BASELINE = """
import json, time, anthropic
_client = anthropic.AsyncAnthropic()
_agent = get_ipython().find_magic("agent").__self__.kernel_agent
_system = _agent.system_prompt()
_tools = [t.definition() for t in _agent.registry.offered(_agent.config.tool_groups)]
_ns = {{}}
_messages = [{{"role": "user", "content": "run {trips} steps"}}]
_t0, _c0 = time.perf_counter(), time.process_time()
for _i in range({calls}):
    async with _client.messages.stream(model="m", max_tokens=1024, messages=_messages, system=_system,
                                       tools=_tools, cache_control={{"type": "ephemeral"}}) as _s:
        async for _event in _s:
            pass
        _m = await _s.get_final_message()
    _blocks = [b.model_dump(mode="json", exclude_none=True) for b in _m.content]
    _messages.append({{"role": "assistant", "content": _blocks}})
    if _m.stop_reason == "tool_use":
        _use = _blocks[-1]
        exec(_use["input"]["code"], _ns)
        _messages.append({{"role": "user", "content": [{{"type": "tool_result", "tool_use_id": _use["id"], "content": json.dumps({{"success": True}})}}]}})
baseline_seconds = time.perf_counter() - _t0
print(repr((baseline_seconds, time.process_time() - _c0)))
"""

AGENT = """
import time
_t0, _c0 = time.perf_counter(), time.process_time()
%agent run {trips} steps
agent_seconds = time.perf_counter() - _t0
print(repr((agent_seconds, time.process_time() - _c0)))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trips", type=int, default=45)
    parser.add_argument("--small", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=9)
    args = options(parser, quick={"trips": 3, "small": 1, "repeat": 1})
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()
    assert re.match(r"http://127\.0\.0\.1:\d+", url), url
    sizes = (args.small, args.trips)
    agent: dict[int, list[tuple[float, float]]] = {n: [] for n in sizes}
    baseline: dict[int, list[tuple[float, float]]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": "bench",
            "AGENT_KERNEL_DB": str(Path(tmp, "bench.duckdb")),
        }
        kernel = Kernel(env, cwd=tmp)
        try:
            kernel.ok("%load_ext agent_kernel")
            kernel.ok(f"%config AgentKernel.max_model_calls = {args.trips + 10}")
            # Each timed turn starts a new session; the summary of the one before it (a model
            # call of its own, see session_summary.py) is not the loop's cost.
            kernel.ok("%config AgentKernel.summary_idle_minutes = 0")
            # Warm up both paths (imports, first DuckDB open, first connection).
            kernel.ok("%agent --new", allow_stdin=False)
            kernel.ok(AGENT.format(trips=2), allow_stdin=False)
            kernel.ok(BASELINE.format(trips=2, calls=3), allow_stdin=False)
            for _ in range(args.repeat):
                for n in sizes:
                    kernel.ok("%agent --new", allow_stdin=False)  # each timed turn continues a fresh session
                    agent[n].append(_seconds(kernel.ok(AGENT.format(trips=n), allow_stdin=False)))
                    baseline[n].append(_seconds(kernel.ok(BASELINE.format(trips=n, calls=n + 1), allow_stdin=False)))
        finally:
            kernel.shutdown()
            server.communicate("")
    # Wall-clock times; index 1 of each pair is the CPU time the kernel process spent.
    med = {
        (kind, n): statistics.median(t[0] for t in times[n]) * 1000
        for kind, times in (("agent", agent), ("baseline", baseline))
        for n in sizes
    }
    print(f"median of {args.repeat} runs, one kernel, scripted model in its own process")
    print("  round trips   %agent turn   raw SDK + exec   ratio")
    for n in sizes:
        print(
            f"  {n:11d}   {med['agent', n]:8.1f} ms   {med['baseline', n]:11.1f} ms   {med['agent', n] / med['baseline', n]:5.2f}"
        )
    print("                                  wall        CPU (the kernel's: less inflated by a busy machine)")
    figures = [_overheads(agent, baseline, sizes, which) for which in (0, 1)]
    print(f"  overhead per tool round trip   {figures[0][0]:6.2f} ms  {figures[1][0]:6.2f} ms   (goal: CPU <= 3 ms)")
    print(f"  fixed overhead per turn        {figures[0][1]:6.1f} ms  {figures[1][1]:6.1f} ms   (goal: wall <= 30 ms)")
    print("                                 (the fixed overhead: session load, Stop button, final save)")
    raw = [_slope(baseline, sizes, which) for which in (0, 1)]
    write(args, "loop_overhead", [
        Row("overhead per tool round trip, kernel CPU (baseline: raw SDK round trip)", figures[1][0], "ms", raw[1], goal=3),
        Row("overhead per tool round trip, wall (baseline: raw SDK round trip)", figures[0][0], "ms", raw[0]),
        Row("fixed cost of a turn, wall", figures[0][1], "ms", goal=30),
        Row("fixed cost of a turn, kernel CPU", figures[1][1], "ms"),
    ])  # fmt: skip


def _overheads(agent: dict, baseline: dict, sizes: tuple[int, int], which: int) -> tuple[float, float]:
    """Per round trip and fixed overhead (ms) of wall-clock (``which`` 0) or CPU (1) time."""
    small, trips = sizes
    # Each agent run is paired with the baseline run right after it, so a machine that is
    # busier during some runs than others shifts both.
    extra = {n: statistics.median(a[which] - b[which] for a, b in zip(agent[n], baseline[n])) * 1000 for n in sizes}
    per_trip = (extra[trips] - extra[small]) / (trips - small)
    return per_trip, extra[small] - per_trip * small


def _slope(times: dict, sizes: tuple[int, int], which: int) -> float:
    """Milliseconds a round trip adds to the medians of ``times`` between the two sizes."""
    small, trips = sizes
    med = {n: statistics.median(t[which] for t in times[n]) * 1000 for n in sizes}
    return (med[trips] - med[small]) / (trips - small)


def _seconds(execution) -> tuple[float, float]:
    """The cell's wall-clock and CPU seconds (the kernel process's, all its threads)."""
    wall, cpu = ast.literal_eval(execution.stdout.strip().splitlines()[-1])
    return float(wall), float(cpu)


if __name__ == "__main__":
    os.environ.pop("JPY_SESSION_NAME", None)
    main()
