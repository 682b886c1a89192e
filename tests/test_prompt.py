"""The system prompt and tools of a fresh session stay small; the per-turn context is marked."""

from __future__ import annotations

import json

from IPython.core.interactiveshell import InteractiveShell

from agent_kernel import Agent
from agent_kernel.conversation import context_texts, is_turn_context
from agent_kernel.namespace import known_variables
from agent_kernel.prompt import turn_context


def test_default_tools_and_system_prompt_fit_in_12750_characters(tmp_path):
    agent = Agent(shell=InteractiveShell.instance(), db_path=str(tmp_path / "agent.duckdb"))
    tools = [t.definition() for t in agent._offered(agent.config.approve)]
    sent = len(json.dumps(tools, ensure_ascii=False, separators=(",", ":"))) + len(agent.system_prompt())
    assert sent <= 12_750, sent  # search_sessions and session_timeline take about 810
    assert {"run_code", "db_sql", "memory", "render_blocks"} <= {t["name"] for t in tools}
    assert all("title" not in p for t in tools for p in t["input_schema"].get("properties", {}).values())


def test_turn_context_is_marked_and_lists_variables_once(tmp_path):
    agent = Agent(shell=InteractiveShell.instance(), db_path=str(tmp_path / "agent.duckdb"))
    shell = agent.shell
    shell.reset(new_session=False)
    shell.run_cell("answer = 42")
    block = turn_context(None, settings=agent.config, shell=shell, groups={"code"})
    assert is_turn_context(block) and "`answer` (int): 42" in block["text"]
    history = [{"role": "user", "content": [block, {"type": "text", "text": "hi"}]}]
    known = known_variables(context_texts(history))
    again = turn_context(known, settings=agent.config, shell=shell, groups={"code"})
    assert "unchanged since the last list" in again["text"] and "answer" not in again["text"]
    assert not is_turn_context({"type": "text", "text": "hi"})
