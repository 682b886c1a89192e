"""Delegation at scale: how much running side calls side by side saves.

(a) ``agent_kernel.llm.generate_many`` over N prompts (default 1,000) against the scripted
    model in a process of its own, each answer taking a fixed latency (default 50 ms, like
    a short model call), at concurrency 1 (the baseline: one call after another) and at
    concurrency 16. The figure is the speed-up; the ideal is 16x.
(b) Sub-sessions: one ``%agent`` turn spawns three sub-sessions, each running one isolated
    ``run_code`` step of ``--step`` seconds (default 2), and waits for them; against one turn
    running the same three steps one after another (in process, scripted model, medians of
    ``--repeat`` runs after a warm-up). The figure is the speed-up; the ideal is 3x.

Each section is a function returning its figures, so more sections can join ``main()``.

    python benchmarks/delegation.py [--prompts 1000] [--latency 0.05] [--concurrency 16] [--step 2] [--repeat 3]
                                    [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results import Row, options, write

SERVER = """
import sys
from agent_kernel.testing import ScriptedModel, say

def answer(body):
    return say("label: " + body["messages"][0]["content"][-8:], delay={latency})

with ScriptedModel(responder=answer) as model:
    print(model.url, flush=True)
    sys.stdin.read()
"""


def generate_many_figures(prompts: int = 1000, latency: float = 0.05, concurrency: int = 16) -> dict[str, float]:
    """Seconds for ``generate_many`` over ``prompts`` prompts at concurrency 1 and ``concurrency``."""
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER.format(latency=latency)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        url = server.stdout.readline().strip()
        assert re.match(r"http://127\.0\.0\.1:\d+", url), url
        os.environ.update(ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="bench")
        from agent_kernel import llm

        texts = [f"Classify ticket number {i:06d}" for i in range(prompts)]
        llm.generate_many(texts[:32], concurrency=concurrency, progress=False)  # warm: imports, connections
        figures: dict[str, float] = {}
        for level in (1, concurrency):
            started = time.perf_counter()
            results = llm.generate_many(texts, concurrency=level, progress=False)
            figures[f"concurrency {level}"] = time.perf_counter() - started
            failed = [r.error for r in results if r.error]
            assert not failed, failed[:3]
            assert [r.text[-6:] for r in results] == [t[-6:] for t in texts], "results out of order"
        return figures
    finally:
        server.communicate("")


def _router(step_s: float) -> Any:
    """Answers each conversation by how it began: the parent, a child ("STEP-n"), the serial turn."""
    from agent_kernel.testing import call, reply, say, tool_use

    code = f"import time; time.sleep({step_s})"

    def results(body: dict[str, Any]) -> list[dict[str, Any]]:
        return [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]

    def respond(body: dict[str, Any]) -> Any:
        content = body["messages"][0]["content"]  # its prompt is the last text (context comes first)
        first = content if isinstance(content, str) else [b["text"] for b in content if b.get("type") == "text"][-1]
        step = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if "STEP-" in first:
            if step == 0:
                return call("run_code", code=code, isolated=True, timeout_s=60)
            return call("report_result", result="step done")
        if "delegate" in first:
            if step == 0:
                return reply(*(tool_use("spawn_session", {"task": f"STEP-{n}: run the step"}) for n in range(3)))
            if step == 1:
                ids = [json.loads(r["content"])["id"] for r in results(body)]
                return call("wait_for_sessions", ids=ids)
            return say("All three steps are done.")
        if "in turn" in first and step < 3:
            return call("run_code", code=code, isolated=True, timeout_s=60)
        return say("done")

    return respond


def subsession_figures(step_s: float = 2.0, repeat: int = 3) -> dict[str, float]:
    """Seconds for three steps in three sub-sessions vs one after another; the speed-up."""
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel import Agent
    from agent_kernel.testing import ScriptedModel

    model = ScriptedModel(responder=_router(step_s))
    os.environ["ANTHROPIC_API_KEY"] = "scripted-benchmark-key"  # requests go to the scripted model
    with tempfile.TemporaryDirectory(prefix="agent-kernel-delegation-") as tmp:
        agent = Agent(
            shell=InteractiveShell.instance(), http_client=model.http_client,
            db_path=str(Path(tmp, "agent.duckdb")), tool_groups=["code", "llm"],
        )  # fmt: skip

        def timed(prompt: str) -> float:
            started = time.perf_counter()
            result = agent.run(prompt, new=True)
            seconds = time.perf_counter() - started
            if result.failed:
                raise RuntimeError(f"{prompt!r} failed: {result.error}")
            return seconds

        timed("warm up")
        side_by_side, in_turn = [], []
        for _ in range(repeat):
            side_by_side.append(timed("delegate the three steps"))
            in_turn.append(timed("run the three steps in turn"))
    parallel, serial = statistics.median(side_by_side), statistics.median(in_turn)
    return {"step_s": step_s, "subsessions_s": parallel, "serial_s": serial, "speedup": serial / parallel}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds each scripted answer takes")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--step", type=float, default=2.0, help="seconds one sub-session step takes")
    parser.add_argument("--repeat", type=int, default=3)
    args = options(parser, quick={"prompts": 32, "latency": 0.01, "step": 0.2, "repeat": 1})

    figures = generate_many_figures(args.prompts, args.latency, args.concurrency)
    serial = figures["concurrency 1"]
    parallel = figures[f"concurrency {args.concurrency}"]
    floor = args.prompts * args.latency
    print(
        f"(a) generate_many, {args.prompts:,} prompts, {args.latency * 1000:.0f} ms per call, scripted model in its own process"
    )
    print("                     seconds   baseline (concurrency 1)   speed-up")
    print(
        f"  concurrency {1:<5d}  {serial:7.2f}   {serial:7.2f} s                  {1.0:5.2f}x   (latency alone: {floor:.2f} s)"
    )
    print(
        f"  concurrency {args.concurrency:<5d}  {parallel:7.2f}   {serial:7.2f} s                  "
        f"{serial / parallel:5.2f}x   (ideal {args.concurrency}x; goal >= 8x)"
    )

    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # the turns' plain-text transcripts
        sub = subsession_figures(args.step, args.repeat)
    print(
        f"(b) three {sub['step_s']:g} s isolated steps: sub-sessions {sub['subsessions_s']:.2f} s, "
        f"one after another {sub['serial_s']:.2f} s: {sub['speedup']:.2f}x faster (ideal 3x; goal >= 2.5x)"
    )
    write(args, "delegation", [
        Row(f"generate_many speed-up, {args.prompts:,} prompts at concurrency {args.concurrency} over 1",
            serial / parallel, "x", goal=8, at_most=False),
        Row(f"three {sub['step_s']:g} s steps in sub-sessions, speed-up over one after another",
            sub["speedup"], "x", goal=2.5, at_most=False),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
