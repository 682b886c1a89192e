"""One TurnRequest from every way in: the %agent parser and Agent.run/arun build the same one."""

from __future__ import annotations

import pytest

from agent_kernel.magics.agent import parse_agent_call
from agent_kernel.testing import say
from agent_kernel.turn.request import TurnRequest


def test_the_parser_builds_a_checked_request():
    request = parse_agent_call("--session work -o answer --think high sum it")
    assert request == TurnRequest("sum it", session="work", output="answer", thinking="high", check=True)


def test_a_request_with_output_sets_the_variable_once_the_turn_ended(shell_agent, scripted_model):
    import asyncio

    agent = shell_agent.agent

    async def turn():
        try:
            return await agent.arun_request(TurnRequest("sum it", output="answer", check=True))
        finally:
            await agent.model_client.aclose()

    scripted_model.add(say('{"total": 3}'))
    result = asyncio.run(turn())
    assert result.text == '{"total": 3}' and shell_agent.value("answer") == {"total": 3}


def test_run_takes_the_keywords_of_arun_only(shell_agent):
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        shell_agent.agent.run("hi", colour="red")
