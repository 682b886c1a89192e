"""The llm_generate tool in whole turns (shell_agent) and its input limits (in_process)."""

from __future__ import annotations

import json

import pytest

from agent_kernel.testing import call, reply, say, structured, tool_use
from tests.support.calls import tool_results
from tests.support.inprocess import in_process

LABEL = {"type": "object", "properties": {"label": {"enum": ["spam", "ham"]}}, "required": ["label"]}


@pytest.fixture
def llm_agent(scripted_model, agent_db):
    from tests.support.inprocess import shell_agent

    with shell_agent(scripted_model.http_client, tool_groups=["code", "llm"]) as agent:
        yield agent


def test_llm_generate_with_a_schema_returns_parsed_and_counts_usage(llm_agent, scripted_model):
    scripted_model.add(
        call("llm_generate", prompt="Classify: WIN NOW", schema=LABEL, intelligence="high", max_tokens=50),
        structured({"label": "spam"}),
        say("It is spam."),
    )
    cell = llm_agent.ok("classify it")
    side = scripted_model.requests[1]
    assert side["model"] == "claude-opus-5-5" and side["max_tokens"] == 50  # AgentKernel.large_model
    assert side["output_config"]["format"] == {
        "type": "json_schema",
        "schema": {**LABEL, "additionalProperties": False},
    }
    assert side["messages"] == [{"role": "user", "content": "Classify: WIN NOW"}] and "tools" not in side
    (result,) = tool_results(scripted_model.requests[2])
    assert not result.get("is_error")
    value = json.loads(result["content"])
    assert value["parsed"] == {"label": "spam"} and value["text"] == '{"label": "spam"}'
    assert value["usage"]["input_tokens"] > 0 and value["usage"]["output_tokens"] > 0
    with llm_agent.agent.store.connect() as con:
        rows = con.execute(
            "SELECT input_tokens + cache_read_tokens + cache_write_tokens + output_tokens FROM model_calls"
        ).fetchall()
    assert len(rows) == 3  # two turn calls and the side call, stored
    assert cell.result.tokens == sum(r[0] for r in rows) and cell.result.model_calls == 2


def test_a_reply_not_matching_the_schema_is_an_error_with_the_validation_message(llm_agent, scripted_model):
    scripted_model.add(
        call("llm_generate", prompt="Classify: hi", schema=LABEL),
        structured({"label": "maybe"}),
        say("Could not tell."),
    )
    llm_agent.ok("classify it")
    (result,) = tool_results(scripted_model.requests[2])
    assert result["is_error"] is True
    assert result["content"].startswith(
        "llm_generate: The reply does not match the schema: label must be one of ['spam', 'ham']"
    )
    assert '{"label": "maybe"}' in result["content"]  # what came back, for the model to act on
    with llm_agent.agent.store.connect() as con:
        assert con.execute("SELECT count(*) FROM model_calls").fetchone()[0] == 3  # billed all the same


def test_side_calls_count_toward_the_session_token_limit(scripted_model, agent_db):
    from tests.support.inprocess import shell_agent

    with shell_agent(scripted_model.http_client, tool_groups=["llm"], token_limit=20_000) as agent:
        scripted_model.add(
            reply(tool_use("llm_generate", {"prompt": "long job"}), tool_use("llm_generate", {"prompt": "another"})),
            say("big", usage={"input_tokens": 30_000, "output_tokens": 10}),
        )
        cell = agent.execute("two jobs")
    assert len(scripted_model.requests) == 2  # the second call was refused, and no model call followed
    assert cell.result.state == "token_limit_reached"
    assert cell.result.session_tokens > 20_000
    with agent.agent.store.connect() as con:
        (stored,) = con.execute("SELECT content FROM messages WHERE role = 'user' ORDER BY seq DESC LIMIT 1").fetchone()
    results = [b for b in json.loads(stored) if b.get("type") == "tool_result"]
    assert not results[0].get("is_error") and "big" in results[0]["content"]
    assert results[1]["is_error"] is True and "reached its token limit" in results[1]["content"]


def test_llm_is_a_default_group_found_by_tool_search(shell_agent, scripted_model):
    scripted_model.add(say("hi"))
    shell_agent.ok("hello")
    offered = {t["name"]: t for t in scripted_model.requests[0]["tools"]}
    assert "defer_loading" not in offered["run_code"] and offered["llm_generate"]["defer_loading"] is True


@pytest.mark.parametrize(
    ("tool_input", "message"),
    [
        ({"prompt": ""}, "prompt: String should have at least 1 character"),
        ({"prompt": "x" * 400_001}, "prompt: String should have at most 400000 characters"),
        ({"prompt": "x", "max_tokens": 0}, "max_tokens: Input should be greater than or equal to 1"),
        ({"prompt": "x", "max_tokens": 64_001}, "max_tokens: Input should be less than or equal to 64000"),
        ({"prompt": "x", "temperature": 1.5}, "temperature: Input should be less than or equal to 1"),
        ({"prompt": "x", "intelligence": "genius"}, "intelligence: Input should be 'low', 'medium' or 'high'"),
        (
            {"prompt": "x", "schema": {"type": "object", "description": "d" * 20_000}},
            "schema is over 20,000 characters",
        ),
        ({"prompt": "x", "schema": {"type": "object", "required": "label"}}, "schema is not a valid JSON Schema"),
        ({"prompt": "x", "schema": {"minimum": 3}}, "schema cannot be used for structured output"),
    ],
)
def test_input_limits_are_errors_the_model_can_act_on(tmp_path, scripted_model, tool_input, message):
    with in_process(tmp_path) as caller:
        outcome = caller.call("llm_generate", tool_input)
    assert outcome.is_error and message in outcome.content, outcome.content
    assert scripted_model.requests == []  # refused before any request
