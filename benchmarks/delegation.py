"""Delegation: work that sub-sessions do side by side, beside the same work done in turn.

(b) Sub-sessions. One ``%agent`` turn spawns three sub-sessions; each runs one isolated
``run_code`` step that takes ``--step`` seconds (a fresh Python process sleeping), reports
and ends; the parent waits for all three. Against it: one turn whose model runs the same
three steps one after another. Both are whole turns of an :class:`~agent_kernel.Agent` in
this process on IPython's shell, with a real DuckDB file, the official SDK talking to the
scripted model (in-process transport, so the figures are the agent's, not a network's).
Each is timed ``--repeat`` times after an untimed warm-up turn; medians.

    python benchmarks/delegation.py [--step 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step", type=float, default=2.0, help="seconds one step takes")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # the turns' plain-text transcripts
        figures = subsession_figures(args.step, args.repeat)
    print(
        f"(b) three {figures['step_s']:g} s isolated steps: sub-sessions {figures['subsessions_s']:.2f} s, "
        f"one after another {figures['serial_s']:.2f} s: {figures['speedup']:.2f}x faster"
    )


if __name__ == "__main__":
    main()
