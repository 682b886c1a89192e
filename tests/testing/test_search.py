"""The scripted model's tool search: what the API checks, and the searches it runs."""

from __future__ import annotations

import anthropic
import pytest

from agent_kernel.testing import ScriptedModel, reply, say, tool_search, tool_use
from agent_kernel.testing.cache import PromptCache
from agent_kernel.testing.search import MAX_REFERENCES, bm25_search, regex_search


def tool(name: str, description: str, deferred: bool = True, **properties: str) -> dict:
    schema = {"type": "object", "properties": {k: {"type": "string", "description": v} for k, v in properties.items()}}
    spec = {"name": name, "description": description, "input_schema": schema}
    return {**spec, "defer_loading": True} if deferred else spec


TOOLS = [
    tool("run_code", "Run Python in the kernel.", deferred=False, code="The code."),
    tool("create_scheduled_task", "Schedule a job that runs later, once or repeatedly.", cron="A cron expression."),
    tool("set_reminder", "Remind the user of something at a time.", at="When."),
    tool("fetch_url", "Fetch a web page from the user's machine.", url="The address."),
    {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
]


def ask(client, tools=TOOLS, messages=None):
    return client.messages.create(
        model="claude-sonnet-5-5", max_tokens=100, tools=tools, messages=messages or [{"role": "user", "content": "go"}]
    )


def test_a_search_finds_deferred_tools_and_loads_them_for_a_call(client, scripted_model):
    scripted_model.implicit_search = False
    scripted_model.add(reply(*tool_search("schedule a job"), tool_use("create_scheduled_task", {"cron": "0 7 * * *"})))
    message = ask(client)
    use, result, call = message.content
    assert (use.type, use.name, use.input) == ("server_tool_use", "tool_search_tool_bm25", {"query": "schedule a job"})
    assert result.type == "tool_search_tool_result" and result.tool_use_id == use.id
    assert [r.tool_name for r in result.content.tool_references] == ["create_scheduled_task"]
    assert call.name == "create_scheduled_task" and message.stop_reason == "tool_use"
    # Sent back, the search keeps the tool loaded: a later call needs no new search.
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "ok"}]},
    ]
    scripted_model.add(reply(tool_use("create_scheduled_task", {"cron": "0 8 * * *"})))
    assert ask(client, messages=history).content[0].name == "create_scheduled_task"


def test_what_the_api_refuses(client, scripted_model):
    scripted_model.implicit_search = False
    scripted_model.add(reply(tool_use("set_reminder", {"at": "7:00"})))
    with pytest.raises(anthropic.BadRequestError, match="set_reminder, a deferred tool that no tool search"):
        ask(client)
    with pytest.raises(anthropic.BadRequestError, match="need a tool search tool"):
        ask(client, tools=TOOLS[:-1])
    with pytest.raises(anthropic.BadRequestError, match="At least one tool must not have defer_loading"):
        ask(client, tools=[TOOLS[1]])
    found = {
        "type": "tool_search_tool_search_result",
        "tool_references": [{"type": "tool_reference", "tool_name": "gone"}],
    }
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25", "input": {"query": "x"}},
            {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1", "content": found},
        ]},
        {"role": "user", "content": "and now?"},
    ]  # fmt: skip
    with pytest.raises(anthropic.BadRequestError, match="Tool reference 'gone' not found in available tools"):
        ask(client, messages=history)


def test_an_unsearched_call_gets_its_search_unless_turned_off(client, scripted_model):
    scripted_model.add(reply(tool_use("fetch_url", {"url": "https://example.com"})))
    use, result, call = ask(client).content
    assert use.name == "tool_search_tool_bm25" and result.content.tool_references[0].tool_name == "fetch_url"
    assert call.name == "fetch_url"


def test_regex_and_bm25_searches():
    texts = {f"tool_{n}": f"tool number {n} of the set" for n in range(8)}
    texts["schedule_job"] = "Schedule a job that runs every morning."
    assert regex_search(r"(?i)SCHEDULE", texts) == ["schedule_job"]
    assert regex_search("tool number", texts) == [f"tool_{n}" for n in range(MAX_REFERENCES)]
    with pytest.raises(ValueError, match="invalid regular expression"):
        regex_search("([", texts)
    with pytest.raises(ValueError, match="over 200 characters"):
        regex_search("a" * 201, texts)
    assert bm25_search("scheduling jobs each morning", texts)[0] == "schedule_job"
    assert bm25_search("nothing matches", texts) == []


def test_a_bad_pattern_is_an_error_result(client, scripted_model):
    regex = [*TOOLS[:-1], {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}]
    scripted_model.add(reply(*tool_search("([", variant="regex")), say("No luck."))
    _, result = ask(client, tools=regex).content[:2]
    assert result.content.type == "tool_search_tool_result_error" and result.content.error_code == "invalid_tool_input"


def test_loaded_definitions_count_where_the_search_result_is():
    cache = PromptCache(min_tokens=1)
    found = {
        "type": "tool_search_tool_search_result",
        "tool_references": [{"type": "tool_reference", "tool_name": "set_reminder"}],
    }
    searched = {
        "role": "assistant",
        "content": [{"type": "tool_search_tool_result", "tool_use_id": "s", "content": found}],
    }
    bare = {"tools": TOOLS, "messages": [searched]}
    less = {"tools": [t for t in TOOLS if t.get("name") != "fetch_url"], "messages": [searched]}
    assert cache.usage(bare) == cache.usage(less)  # an unreferenced deferred tool is no part of the prompt
    without = {"tools": [t for t in TOOLS if t.get("name") != "set_reminder"], "messages": [searched]}
    assert sum(cache.usage(bare).values()) > sum(PromptCache().usage(without).values())


def test_a_model_made_without_implicit_search_says_so():
    model = ScriptedModel(implicit_search=False)
    assert model.implicit_search is False
