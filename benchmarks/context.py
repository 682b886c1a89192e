"""What a long session sends and what the prompt cache saves, one figure a function.

- Default prompt size: what the model reads of every request of a fresh session with the
  default settings (the loaded tool definitions, as the SDK sends them: compact JSON,
  the tool search tool, the system prompt); the goal is at most 12,000 characters. Beside
  it, "before": the earlier defaults (groups code, data, memory, ui, user; every
  definition loaded, no tool search), and the definitions each request carries (the
  deferred ones too, which the model reads only once a search found them).
- Cache billing: a scripted 20-turn session in one kernel namespace (variables change
  between turns, every third turn calls tools), accounted by the scripted model's prompt
  cache (agent_kernel.testing.cache). Side by side: the requests as sent with the default
  settings, the same session with the earlier defaults, and the default session's
  conversation in the earlier layout (date, time and the full variable list at the end
  of the system prompt; one automatic breakpoint at the end of the request), with the
  same tools. Tokens are the scripted model's estimate (a quarter of the JSON characters).

- The context budget (benchmarks/context_budget.py): request size at turns 10, 100 and
  500 with and without the budget, and the time a compaction costs.

    python benchmarks/context.py [--turns 20] [--budget-turns 500] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results import Row, options, write

PROMPT_LIMIT = 12_000
# The defaults before every group was offered behind tool search.
BEFORE = {"tool_groups": ["code", "data", "memory", "ui", "user"], "tool_search": False}


def sent_chars(value: Any) -> int:
    """Characters of ``value`` as the SDK encodes a request body."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def default_prompt_size(label: str, **settings: Any) -> dict[str, int]:
    """What the model reads of a fresh session's requests (``settings`` over the defaults):
    loaded tool definitions + system prompt; and the definitions sent, deferred included."""
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel import Agent
    from agent_kernel.model.tool_search import prompt_tools
    from agent_kernel.tools import definitions

    with tempfile.TemporaryDirectory() as tmp:
        agent = Agent(shell=InteractiveShell.instance(), db_path=str(Path(tmp) / "agent.duckdb"), **settings)
        offered = agent._offered(agent.config.approve)
        tools = definitions(offered, agent.config, model=agent.config.model)
        system = agent.system_prompt()
    loaded = prompt_tools(tools)
    figures = {"tools": sent_chars(loaded), "system": len(system), "sent": sent_chars(tools)}
    figures["total"] = figures["tools"] + figures["system"]
    groups: dict[str, int] = {}
    for item in loaded:
        group = next((t.group for t in offered if t.name == item.get("name")), "search")
        groups[group] = groups.get(group, 0) + sent_chars(item)
    deferred = len(tools) - len(loaded)
    print(
        f"Default prompt {label} ({', '.join(agent.config.tool_groups)}; {len(loaded)} definitions loaded, "
        f"{deferred} deferred): tools {figures['tools']:,} chars ({', '.join(f'{g} {n:,}' for g, n in groups.items())}) "
        f"+ system prompt {figures['system']:,} = {figures['total']:,} chars (limit {PROMPT_LIMIT:,}: "
        f"{'ok' if figures['total'] <= PROMPT_LIMIT else 'OVER'}); definitions sent {figures['sent']:,} chars"
    )
    return figures


def scripted_session(turns: int, **settings: Any) -> tuple[list[dict[str, Any]], list[str], list[int]]:
    """Run ``turns`` scripted turns (``settings`` over the defaults); the requests, each
    turn's full variable list, and the index of each turn's first request."""
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel import Agent
    from agent_kernel.kernel import namespace
    from agent_kernel.testing import ScriptedModel, call, say

    os.environ.setdefault("ANTHROPIC_API_KEY", "scripted-benchmark-key")
    model = ScriptedModel()
    shell = InteractiveShell.instance()
    shell.reset(new_session=False)
    briefings, firsts = [], []
    with tempfile.TemporaryDirectory() as tmp:
        agent = Agent(shell=shell, http_client=model.http_client, db_path=str(Path(tmp) / "agent.duckdb"), **settings)
        shell.run_cell("import pandas as pd\nsales = pd.DataFrame({'month': range(12), 'revenue': range(12)})")
        for turn in range(1, turns + 1):
            shell.run_cell(f"value_{turn % 4} = {turn}\ntotal = {turn * 10}\nnotes = 'turn {turn}'")
            if turn % 3 == 0:
                model.add(
                    call("run_code", code=f"step = {turn}\nprint(total)"),
                    call("inspect_namespace"),
                    say(f"Done {turn}."),
                )
            else:
                model.add(say(f"Answer {turn}: " + "words " * 40))
            briefings.append(namespace.briefing(shell.user_ns, set(shell.user_ns_hidden)))
            firsts.append(len(model.requests))
            with contextlib.redirect_stdout(io.StringIO()):
                agent.run(f"Turn {turn}: what changed in my data?")
    return model.requests, briefings, firsts


def earlier_layout(request: dict[str, Any], briefing: str) -> dict[str, Any]:
    """``request`` as the earlier layout sent it: the date and the whole variable list in
    the system prompt, no turn context in the messages, one top-level breakpoint."""
    from agent_kernel.model.conversation import is_turn_context
    from agent_kernel.turn.prompt import BASE_INSTRUCTION

    def bare(block: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in block.items() if k != "cache_control"}

    messages, date = [], ""
    for message in request["messages"]:
        content = []
        for block in message["content"]:
            if message["role"] == "user" and is_turn_context(block):
                date = block["text"].splitlines()[1]  # the latest context is this turn's
            else:
                content.append(bare(block))
        messages.append({**message, "content": content})
    system = request["system"][0]["text"].replace(BASE_INSTRUCTION, BASE_INSTRUCTION + "\n\n" + date, 1)
    system += f"\n\n## Variables in the kernel\n{briefing}\n(This list was taken when the turn started.)"
    tools = [bare(t) for t in request.get("tools", [])]
    return {**request, "tools": tools, "system": system, "messages": messages, "cache_control": {"type": "ephemeral"}}


def cache_billing(turns: int = 20) -> dict[str, dict[str, int]]:
    """Input tokens read from the cache vs billed in full, now and in the earlier layout."""
    from agent_kernel.testing.cache import PromptCache

    requests, briefings, firsts = scripted_session(turns)
    before, _, before_firsts = scripted_session(turns, **BEFORE)
    turn_of = [max(t for t, first in enumerate(firsts) if first <= i) for i in range(len(requests))]
    before_turn_of = [max(t for t, first in enumerate(before_firsts) if first <= i) for i in range(len(before))]
    layouts = {
        "now": (requests, turn_of),
        "before": (before, before_turn_of),
        "earlier layout": ([earlier_layout(r, briefings[turn_of[i]]) for i, r in enumerate(requests)], turn_of),
    }
    figures = {}
    for name, (sent, turns_of) in layouts.items():
        cache = PromptCache()
        usages = [cache.usage(r) for r in sent]
        later = [u for i, u in enumerate(usages) if turns_of[i] >= 1]  # turns 2..N
        read = sum(u["cache_read_input_tokens"] for u in later)
        written = sum(u["cache_creation_input_tokens"] for u in later)
        fresh = sum(u["input_tokens"] for u in later)
        figures[name] = {"read": read, "written": written, "uncached": fresh, "total": read + written + fresh}
    print(
        f"Cache billing, turns 2-{turns} of a {turns}-turn session ({len(requests)} requests), input tokens "
        "(now: the default settings; before: the earlier defaults, every definition loaded):"
    )
    print(
        f"  {'layout':<16}{'read (0.1x)':>14}{'written (1.25x)':>17}{'uncached (1x)':>15}{'full price':>12}{'read share':>12}"
    )
    for name, f in figures.items():
        print(
            f"  {name:<16}{f['read']:>14,}{f['written']:>17,}{f['uncached']:>15,}"
            f"{f['written'] + f['uncached']:>12,}{f['read'] / f['total']:>12.1%}"
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--budget-turns", type=int, default=500, help="turns of the context-budget session")
    parser.add_argument("--figure-turns", type=int, default=200, help="turns of the session drawing a figure each")
    args = options(parser, quick={"turns": 3, "budget_turns": 10, "figure_turns": 10})
    before = default_prompt_size("before", **BEFORE)
    prompt = default_prompt_size("now")
    billing = cache_billing(args.turns)
    from context_budget import budget_figures, figure_figures  # the same folder

    share = {name: f["read"] / f["total"] * 100 for name, f in billing.items()}
    rows = [
        Row("default system prompt + loaded tool definitions, every group offered (baseline: the earlier "
            "defaults, 5 groups all loaded)", prompt["total"], "chars", before["total"], goal=PROMPT_LIMIT),
        Row(f"input read from the prompt cache, turns 2-{args.turns} (baseline: the earlier layout)",
            share["now"], "%", share["earlier layout"]),
        Row(f"input read from the prompt cache, turns 2-{args.turns} (baseline: the earlier defaults)",
            share["now"], "%", share["before"]),
    ]  # fmt: skip
    write(args, "context", rows + budget_figures(args.budget_turns) + figure_figures(args.figure_turns))


if __name__ == "__main__":
    main()
