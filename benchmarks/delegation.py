"""Delegation at scale: how much running side calls side by side saves.

(a) ``agent_kernel.llm.generate_many`` over N prompts (default 1,000) against the scripted
    model in a process of its own, each answer taking a fixed latency (default 50 ms, like
    a short model call), at concurrency 1 (the baseline: one call after another) and at
    concurrency 16. The figure is the speed-up; the ideal is 16x.

Each section is a function returning its figures, so more sections can join ``main()``.

    python benchmarks/delegation.py [--prompts 1000] [--latency 0.05] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds each scripted answer takes")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()

    figures = generate_many_figures(args.prompts, args.latency, args.concurrency)
    serial = figures["concurrency 1"]
    parallel = figures[f"concurrency {args.concurrency}"]
    floor = args.prompts * args.latency
    print(f"(a) generate_many, {args.prompts:,} prompts, {args.latency * 1000:.0f} ms per call, scripted model in its own process")
    print("                     seconds   baseline (concurrency 1)   speed-up")
    print(f"  concurrency {1:<5d}  {serial:7.2f}   {serial:7.2f} s                  {1.0:5.2f}x   (latency alone: {floor:.2f} s)")
    print(
        f"  concurrency {args.concurrency:<5d}  {parallel:7.2f}   {serial:7.2f} s                  "
        f"{serial / parallel:5.2f}x   (ideal {args.concurrency}x; goal >= 8x)"
    )


if __name__ == "__main__":
    main()
