"""Inline completion: what the server extension adds to each completion over the model call.

The scripted model runs in a process of its own; a real Jupyter server with agent-kernel's
server extension runs in another, its model behind the scripted one. Two ways to get the
same completion, one after the other, ``--n`` times each after a warm-up:

- baseline: the model call itself, as the server makes it: the official SDK streaming
  the same request (the one :func:`agent_kernel.server.completion.model_request` builds)
  straight to the scripted model, read to its end;
- figure: ``POST /agent-kernel/api/completion`` to the Jupyter server (token auth, body
  checks, redaction, the SDK call, the streamed lines), read to its end.

The figure is the overhead: the server's time less the direct call's, median and p95
(each percentile of the server's times less the same percentile of the direct times).
The usage rows go through a write-behind queue after each answer ends (in batches, in a
thread), so the DuckDB writes are in the figure only as far as they slow the server down.

    python benchmarks/completion.py [--n 100] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results import Row, options, write

MODEL = """
import sys
from agent_kernel.testing import ScriptedModel, say

with ScriptedModel(responder=lambda body: say("sum(values) / len(values)")) as model:
    print(model.url, flush=True)
    sys.stdin.read()
"""
BODY = {
    "before": "mean = ",
    "after": "\nprint(mean)",
    "cells_above": ["import statistics", "values = [3, 5, 8, 13]"],
    "language": "python",
}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def direct_times(n: int, warm: int) -> list[float]:
    """Seconds of each direct SDK call of the completion's request, streamed to its end."""
    import anthropic

    from agent_kernel.server.completion import CompletionRequest, model_request

    params = model_request(CompletionRequest.from_body(BODY), model="claude-haiku-4-5", max_tokens=256)

    async def run() -> list[float]:
        client = anthropic.AsyncAnthropic(max_retries=0)
        times: list[float] = []
        for i in range(warm + n):
            started = time.perf_counter()
            stream = await client.messages.create(**params, stream=True)
            async with stream:
                text = "".join([e.delta.text async for e in stream if e.type == "content_block_delta"])
            assert text == "sum(values) / len(values)", text
            if i >= warm:
                times.append(time.perf_counter() - started)
        await client.close()
        return times

    return asyncio.run(run())


def server_times(lab: Any, n: int, warm: int) -> list[float]:
    """Seconds of each completion through the Jupyter server, its response read to its end."""
    data = json.dumps(BODY).encode()
    headers = {"Authorization": f"token {lab.token}", "Content-Type": "application/json"}
    opener = urllib.request.build_opener()
    times: list[float] = []
    for i in range(warm + n):
        request = urllib.request.Request(lab.url + "/agent-kernel/api/completion", data=data, headers=headers)
        started = time.perf_counter()
        with opener.open(request, timeout=30) as response:
            lines = [json.loads(line) for line in response.read().splitlines()]
        elapsed = time.perf_counter() - started
        text = "".join(line.get("text", "") for line in lines)
        assert text == "sum(values) / len(values)" and lines[-1].get("done"), lines
        if i >= warm:
            times.append(elapsed)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100, help="completions measured each way (default 100)")
    parser.add_argument("--warm", type=int, default=5, help="completions each way before measuring (default 5)")
    args = options(parser, {"n": 5, "warm": 1})
    from tests.support.jupyterlab import JupyterLab

    model = subprocess.Popen([sys.executable, "-c", MODEL], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url = (model.stdout.readline() if model.stdout else "").strip()
        assert re.match(r"http://127\.0\.0\.1:\d+", url), url
        env = {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "bench-key"}
        os.environ.update(env)
        with tempfile.TemporaryDirectory(prefix="completion-bench-") as folder:
            root = Path(folder) / "notebooks"
            root.mkdir()
            env |= {
                "AGENT_KERNEL_DB": str(Path(folder) / "agent.duckdb"),
                "AGENT_KERNEL_HOME": str(Path(folder) / "home"),
            }
            config = {
                "ServerApp": {"jpserver_extensions": {"agent_kernel": True}},
                "AgentKernelServer": {"scheduler": False},
            }
            lab = JupyterLab(root, env, config=config)
            try:
                direct = direct_times(args.n, args.warm)
                served = server_times(lab, args.n, args.warm)
            finally:
                lab.stop()
    finally:
        model.communicate("")
    rows = report(direct, served, args.n)
    write(args, "completion", rows)


def report(direct: list[float], served: list[float], n: int) -> list[Row]:
    ms = 1000
    median_direct, median_served = statistics.median(direct) * ms, statistics.median(served) * ms
    p95_direct, p95_served = percentile(direct, 0.95) * ms, percentile(served, 0.95) * ms
    print(f"Inline completion, {n} each way (scripted model in its own process)")
    print(f"{'':28}{'median':>10}{'p95':>10}")
    print(f"{'model call (SDK, direct)':28}{median_direct:>7.1f} ms{p95_direct:>7.1f} ms")
    print(f"{'through the server':28}{median_served:>7.1f} ms{p95_served:>7.1f} ms")
    print(
        f"{'server overhead':28}{median_served - median_direct:>7.1f} ms{p95_served - p95_direct:>7.1f} ms"
        "  (goal: median <= 10 ms, p95 <= 25 ms)"
    )
    return [
        Row("server overhead per completion, median", median_served - median_direct, "ms", median_direct, 10),
        Row("server overhead per completion, p95", p95_served - p95_direct, "ms", p95_direct, 25),
    ]


if __name__ == "__main__":
    main()
