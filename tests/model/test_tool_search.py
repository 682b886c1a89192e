"""Tool search: every group on by default, the core tools loaded, the rest found on demand."""

from __future__ import annotations

import json

from agent_kernel.model.tool_search import (
    SEARCH_TOOL_NAME,
    prompt_tools,
    referenced,
    supports_tool_search,
)
from agent_kernel.scheduler.jobs import Jobs
from agent_kernel.store import Store
from agent_kernel.testing import call, reply, say, text, tool_search, tool_use
from tests.support.calls import tool_results


def test_which_models_search_and_what_the_results_loaded():
    for model in (
        "claude-sonnet-5-5",
        "claude-haiku-4-5-20251001",
        "claude-opus-4-5",
        "claude-sonnet-4-6",
        "proxy-model",
    ):
        assert supports_tool_search(model), model
    for model in (
        "claude-opus-4-1",
        "claude-opus-4-20250514",
        "claude-sonnet-4-0",
        "claude-3-7-sonnet-latest",
        "claude-3-haiku",
    ):
        assert not supports_tool_search(model), model
    found = {"type": "tool_search_tool_search_result", "tool_references": [
        {"type": "tool_reference", "tool_name": "b"}, {"type": "tool_reference", "tool_name": "a"},
    ]}  # fmt: skip
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_search_tool_result", "tool_use_id": "s", "content": found}]},
        {"role": "assistant", "content": [{"type": "tool_search_tool_result", "tool_use_id": "t", "content": {
            "type": "tool_search_tool_result_error", "error_code": "unavailable"}}]},
    ]  # fmt: skip
    assert referenced(messages) == ["b", "a"]
    assert prompt_tools([{"name": "a"}, {"name": "b", "defer_loading": True}]) == [{"name": "a"}]


def test_a_fresh_agent_schedules_through_tool_search(kernel, scripted_model, agent_db):
    """%agent schedule ... with default settings: the model searches, the result references
    the schedule tools, the model calls one and the kernel runs it; the next turn sends the
    search back and reads the same cached prefix."""
    scripted_model.implicit_search = False  # the scripted reply must search, as the API requires
    scripted_model.add(
        reply(
            text("I'll find the scheduling tools."),
            *tool_search("create a scheduled task"),
            tool_use(
                "create_scheduled_task",
                {
                    "name": "sales summary",
                    "task": "Summarise sales.csv in three lines.",
                    "cron": "0 7 * * *",
                },
            ),
        ),
        say("Scheduled: every day at 7:00."),
    )
    kernel.ok("%agent schedule a daily summary of sales.csv at 7:00")
    first, second = scripted_model.requests[-2:]
    tools = {t["name"]: t for t in first["tools"]}
    assert tools["create_scheduled_task"]["defer_loading"] is True
    assert {"run_code", "db_sql", "memory", "render_blocks"} <= {t["name"] for t in prompt_tools(first["tools"])}
    assert first["tools"][-1] == {"type": "tool_search_tool_bm25_20251119", "name": SEARCH_TOOL_NAME,
                                  "cache_control": {"type": "ephemeral"}}  # fmt: skip
    # The API's search result, kept in the conversation the kernel sends back.
    sent = second["messages"][-2]["content"]
    assert [b["type"] for b in sent] == ["text", "server_tool_use", "tool_search_tool_result", "tool_use"]
    assert sent[1]["name"] == SEARCH_TOOL_NAME and sent[1]["input"] == {"query": "create a scheduled task"}
    found = referenced([second["messages"][-2]])
    assert "create_scheduled_task" in found and set(found) <= {t for t in tools if tools[t].get("defer_loading")}
    [result] = tool_results(second)
    created = json.loads(result["content"])
    assert not result.get("is_error") and created["name"] == "sales summary" and created["next_run"]
    with Store(agent_db).connect() as con:
        job = Jobs(con).get(created["id"])
    assert job.cron == "0 7 * * *"
    # The next turn replays the stored search; its tools and system prompt are the same bytes.
    scripted_model.add(say("It runs at 7:00."))
    kernel.ok("%agent when does it run?")
    third = scripted_model.requests[-1]
    assert json.dumps(third["tools"]) == json.dumps(first["tools"]) and third["system"] == first["system"]
    assert any(b.get("type") == "tool_search_tool_result" for m in third["messages"] for b in m["content"])
    assert scripted_model.usages[-1]["cache_read_input_tokens"] > 0


def test_a_deferred_tool_is_gated_like_a_loaded_one(shell_agent, scripted_model):
    scripted_model.add(call("run_code", code="touched = True"), say("Could not."))
    shell_agent.ok("schedule something", approve="read-only")
    offered = {t["name"]: t for t in scripted_model.requests[-2]["tools"]}
    assert "create_scheduled_task" not in offered and offered["list_scheduled_tasks"]["defer_loading"] is True
    scripted_model.add(
        reply(
            *tool_search("scheduled tasks"),
            tool_use("create_scheduled_task", {"name": "t", "task": "x", "cron": "0 7 * * *"}),
            tool_use("run_code", {"code": "touched = True"}),
            tool_use("list_scheduled_tasks", {}),
        ),
        say("ok"),
    )
    shell_agent.ok("schedule something", approve="ask")  # no front end to approve
    created, ran, listed = tool_results(scripted_model.requests[-1])
    assert created["is_error"] and ran["is_error"]
    assert "needs the user's approval" in created["content"] and "needs the user's approval" in ran["content"]
    assert not listed.get("is_error")
    assert "touched" not in shell_agent.shell.user_ns


def test_without_tool_search_every_tool_is_loaded(shell_agent, scripted_model):
    scripted_model.add(say("ok"), say("ok"))
    shell_agent.ok("hello", model="claude-opus-4-1")  # a model the API's tool search does not serve
    shell_agent.agent.config.tool_search = False
    shell_agent.ok("hello again")
    for request in scripted_model.requests[-2:]:
        names = [t["name"] for t in request["tools"]]
        assert "create_scheduled_task" in names and SEARCH_TOOL_NAME not in names
        assert not any(t.get("defer_loading") for t in request["tools"])
    # The system prompt follows the setting, not the model (it stays the same across --model).
    with_setting, without = (r["system"][0]["text"] for r in scripted_model.requests[-2:])
    assert SEARCH_TOOL_NAME in with_setting and SEARCH_TOOL_NAME not in without


def test_a_call_of_a_deferred_tool_nobody_searched_is_refused_as_the_api_refuses_it(shell_agent, scripted_model):
    scripted_model.implicit_search = False
    scripted_model.add(call("list_scheduled_tasks"))
    cell = shell_agent.execute("what is scheduled?")
    assert "list_scheduled_tasks, a deferred tool that no tool search in this conversation found" in str(cell.error)


def test_a_tool_found_earlier_and_not_offered_now_stays_resolvable(shell_agent, scripted_model, tmp_path, monkeypatch):
    from agent_kernel.tools import NOT_OFFERED

    monkeypatch.chdir(tmp_path)
    scripted_model.implicit_search = False
    scripted_model.add(
        reply(
            *tool_search("create a scheduled task"),
            tool_use(
                "create_scheduled_task",
                {
                    "name": "t",
                    "task": "x",
                    "cron": "0 7 * * *",
                },
            ),
        ),
        say("Scheduled."),
        call("create_scheduled_task", name="u", task="y", cron="0 8 * * *"),
        say("Read-only now."),
    )
    shell_agent.ok("schedule it")
    shell_agent.ok("schedule another", approve="read-only")  # the API would refuse a dangling reference
    request = scripted_model.requests[-1]
    stub = next(t for t in request["tools"] if t["name"] == "create_scheduled_task")
    assert stub["description"] == NOT_OFFERED and stub["defer_loading"] is True
    [refused] = tool_results(request)
    assert refused["is_error"] and "Unknown tool 'create_scheduled_task'" in refused["content"]


def test_a_search_query_is_redacted_where_it_is_stored_and_resent(shell_agent, scripted_model, agent_db, monkeypatch):
    secret = "tok-5f1b9c2d7e8a4b3c"
    monkeypatch.setenv("REPORTS_TOKEN", secret)
    shell_agent.agent.config.secret_env = ["REPORTS_TOKEN"]
    scripted_model.add(reply(*tool_search(f"upload with {secret}"), text("None found.")), say("ok"))
    shell_agent.ok("upload the report")
    shell_agent.ok("again")
    resent = json.dumps(scripted_model.requests[-1]["messages"])
    assert secret not in resent and "[secret REPORTS_TOKEN]" in resent
    with Store(agent_db).connect(read_only=True) as con:
        stored = con.execute("SELECT string_agg(content::VARCHAR, '') FROM messages").fetchone()[0]
    assert secret not in stored and "tool_search_tool_result" in stored
