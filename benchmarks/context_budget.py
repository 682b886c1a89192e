"""Request size with and without the context budget, and what a compaction costs.

One scripted session in this process (an Agent on IPython's shell; the official SDK
talking to the scripted model's in-process transport; a DuckDB file): every turn the
model calls ``run_code`` to print 5,000 characters, then answers. The budget is
``--window`` tokens (compact_at 0.7, the default).

- request size at turns 10, 100 and 500: the first request of the turn as the agent sent
  it, beside the request without a budget, which carries the whole stored conversation
  (what the agent sent before the budget existed); tokens as a token per four characters
  of system prompt, tool definitions and messages.
- compaction cost: the time each compaction took inside the turn (shortening old tool
  results, choosing the cut, the summary request to the scripted small model, storing
  the summary), from the ``context_summaries`` table. A real small model adds its own
  answer time (seconds) to the ones that summarise.

    python benchmarks/context_budget.py [--turns 500] [--window 30000] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results import Row, options, write

AT_TURNS = (10, 100, 500)


def _tokens(system: Any, tools: Any, messages: Any) -> int:
    return -(-len(json.dumps([system, tools or [], messages])) // 4)


def _long_print(body: dict[str, Any]) -> Any:
    from agent_kernel.testing import call, say

    last = body["messages"][-1]["content"]
    if any(b.get("type") == "tool_result" for b in last):
        return say("Printed it.")
    return call("run_code", code=f"print('line {len(body['messages'])} '.ljust(5000, 'x'), end='')")


FIGURE = """
import io, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from IPython.display import Image, display
fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=100)
ax.plot(range(50), [(i * {n}) % 17 for i in range(50)])
ax.set_title("turn {n}")
buffer = io.BytesIO()
fig.savefig(buffer, format="png")
plt.close(fig)
display(Image(data=buffer.getvalue()))
"""


def _figure(body: dict[str, Any]) -> Any:
    from agent_kernel.testing import call, say

    last = body["messages"][-1]["content"]
    if any(b.get("type") == "tool_result" for b in last):
        return say("The figure shows a sawtooth.")
    return call("run_code", code=FIGURE.format(n=len(body["messages"])))


def run_session(
    turns: int, window: int, responder: Any = _long_print, prompt: str = "print a long line"
) -> dict[str, Any]:
    """Run the session; return the requests, the stored conversation and the compactions."""
    os.environ.setdefault("ANTHROPIC_API_KEY", "scripted-benchmark-key")
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel import Agent
    from agent_kernel.testing import ScriptedModel

    model = ScriptedModel(responder=responder)
    folder = tempfile.mkdtemp(prefix="context-budget-")
    agent = Agent(
        shell=InteractiveShell.instance(),
        http_client=model.http_client,
        db_path=str(Path(folder) / "agent.duckdb"),
        context_window=window,
        tool_groups=["code"],
        token_limit=10**12,
    )

    async def run() -> None:
        for n in range(1, turns + 1):
            result = await agent.arun(f"turn {n}: {prompt}")
            assert not result.failed, result.error
        await agent._model_client.aclose()

    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        asyncio.run(run())
    seconds = time.perf_counter() - started
    with agent.store.connect() as con:
        session_id = con.execute("SELECT id FROM sessions").fetchone()[0]
        stored = con.execute(
            "SELECT turn, role, content FROM messages WHERE session_id = ? ORDER BY seq", [session_id]
        ).fetchall()
        compactions = con.execute(
            "SELECT summary IS NOT NULL, duration_ms FROM context_summaries WHERE session_id = ?", [session_id]
        ).fetchall()
    summaries = [r for r in model.requests if any(r is s for s in model.summary_requests)]
    main = [r for r in model.requests if not any(r is s for s in summaries)]
    return {"requests": main, "stored": stored, "compactions": compactions, "seconds": seconds}


def request_sizes(session: dict[str, Any], turns: int) -> list[tuple[int, int, int]]:
    """(turn, tokens with the budget, tokens without) for the turns in AT_TURNS."""
    from agent_kernel.model.conversation import repair

    rows = []
    first_requests = session["requests"][::2]  # each turn: the tool call, then the answer
    for n in AT_TURNS:
        if n > turns:
            continue
        sent = first_requests[n - 1]
        before = [{"role": role, "content": json.loads(c)} for turn, role, c in session["stored"] if turn < n]
        prompt = {"role": "user", "content": [{"type": "text", "text": f"turn {n}: print a long line"}]}
        whole = repair(before + [prompt])
        rows.append(
            (
                n,
                _tokens(sent["system"], sent.get("tools"), sent["messages"]),
                _tokens(sent["system"], sent.get("tools"), whole),
            )
        )
    return rows


def compaction_cost(session: dict[str, Any]) -> dict[str, Any]:
    """How many compactions, of which summaries, and their time in ms (median, max)."""
    summaries = [ms for summary, ms in session["compactions"] if summary]
    trims = [ms for summary, ms in session["compactions"] if not summary]
    return {
        "compactions": len(session["compactions"]),
        "summaries": len(summaries),
        "summary_ms": (statistics.median(summaries), max(summaries)) if summaries else None,
        "trim_ms": (statistics.median(trims), max(trims)) if trims else None,
    }


def budget_figures(turns: int = 500, window: int = 30_000) -> list[Row]:
    """Print request sizes with and without the budget, and what the compactions cost;
    the figures of the last turn measured and of the compactions, as result rows."""
    session = run_session(turns, window)
    limit = int(window * 0.7)
    print(f"{turns} turns, context_window {window:,} (budget {limit:,} tokens), {session['seconds']:.1f} s")
    print(f"{'turn':>6} {'with budget':>14} {'without':>14}")
    sizes = request_sizes(session, turns)
    for n, with_budget, without in sizes:
        print(f"{n:>6} {with_budget:>14,} {without:>14,}")
    cost = compaction_cost(session)
    print(f"compactions: {cost['compactions']} ({cost['summaries']} with a summary)")
    if cost["summary_ms"]:
        print("  summarising: median {:.1f} ms, max {:.1f} ms".format(*cost["summary_ms"]))
    if cost["trim_ms"]:
        print("  shortening tool results only: median {:.1f} ms, max {:.1f} ms".format(*cost["trim_ms"]))
    rows = [
        Row(
            f"request at turn {n}, context budget {limit:,} tokens (baseline: no budget)",
            with_budget,
            "tokens",
            without,
        )
        for n, with_budget, without in sizes[-1:]
    ]
    if cost["summary_ms"]:
        rows.append(Row("a compaction that summarises, median", cost["summary_ms"][0], "ms"))
    if cost["trim_ms"]:
        rows.append(Row("a compaction that shortens tool results only, median", cost["trim_ms"][0], "ms"))
    return rows


def figure_figures(turns: int = 200, window: int = 30_000) -> list[Row]:
    """A session whose every turn draws a figure the model sees: the largest request
    against ``context_window`` and the share of input read from the prompt cache on turns
    2 and later (the scripted model's cache; an image counted as the API counts one)."""
    from agent_kernel.testing.cache import PromptCache, blocks_of

    session = run_session(turns, window, _figure, "draw the figure")
    requests = session["requests"]
    largest = max(sum(b.tokens for b in blocks_of(r)) for r in requests)
    cache = PromptCache()
    usages = [cache.usage(r) for r in requests]
    later = usages[2:]  # each turn: the tool call, then the answer
    read = sum(u["cache_read_input_tokens"] for u in later)
    total = read + sum(u["cache_creation_input_tokens"] + u["input_tokens"] for u in later)
    share = read / total if total else 0.0
    images = sum(
        1
        for r in requests[-1:]
        for m in r["messages"]
        for b in m["content"]
        if b.get("type") == "tool_result"
        and isinstance(b.get("content"), list)
        and any(c.get("type") == "image" for c in b["content"])
    )
    print(
        f"{turns} turns with a figure each, context_window {window:,}: largest request {largest:,} tokens "
        f"({'within' if largest <= window else 'OVER'} the window), cache read share turns 2+ {share:.1%}, "
        f"images in the last request {images}, compactions {len(session['compactions'])}"
    )
    return [
        Row(f"largest request of a {turns}-turn session with a figure a turn", largest, "tokens", goal=window),
        Row(
            "input read from the prompt cache, turns 2+ of the figure session", share * 100, "%", goal=90, at_most=False
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--window", type=int, default=30_000)
    parser.add_argument("--figure-turns", type=int, default=200)
    args = options(parser, quick={"turns": 10, "figure_turns": 10})
    write(
        args, "context_budget", budget_figures(args.turns, args.window) + figure_figures(args.figure_turns, args.window)
    )


if __name__ == "__main__":
    main()
