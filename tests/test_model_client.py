"""One-line API errors: what failed, the API's message, and a hint that fits the message."""

from __future__ import annotations

import anthropic
import httpx
import pytest

from agent_kernel.model.client import describe_api_error


def bad_request(message: str) -> anthropic.BadRequestError:
    """A 400 as the SDK raises it for the API's error body."""
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    response = httpx.Response(400, json=body, request=httpx.Request("POST", "https://api.anthropic.com/v1/messages"))
    return anthropic.BadRequestError(message, response=response, body=body)


@pytest.mark.parametrize(
    "message",
    [
        "prompt is too long: 215000 tokens > 200000 maximum",
        "input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000, decrease input length or `max_tokens` and try again",
    ],
)
def test_a_400_about_the_prompts_length_suggests_a_new_session(message):
    line = describe_api_error(bad_request(message), "claude-x")
    assert line.startswith(f"Model request failed (400 invalid_request_error): {message}.")
    assert "start a new one with %agent --new" in line and "\n" not in line


@pytest.mark.parametrize(
    "message",
    ["max_tokens: must be at most 64000", "tools.0.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'"],
)
def test_any_other_400_does_not_blame_the_conversations_length(message):
    line = describe_api_error(bad_request(message), "claude-x")
    assert line.startswith(f"Model request failed (400 invalid_request_error): {message}.")
    assert "%agent --new" not in line and "too long" not in line
    assert "Change what the message names" in line


def test_an_http_client_factory_gives_each_event_loop_its_own_client(monkeypatch):
    import asyncio

    from agent_kernel.model.client import ModelClient
    from agent_kernel.testing import ScriptedModel, say

    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    model = ScriptedModel([say("one"), say("two")])
    made = []

    def factory():
        made.append(model.http_client())
        return made[-1]

    client = ModelClient(http_client=factory)

    async def ask():
        sdk = client.client()
        assert client.client() is sdk  # one per loop
        answer = await sdk.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        await client.aclose()
        return answer.content[0].text

    assert [asyncio.run(ask()), asyncio.run(ask())] == ["one", "two"]
    assert len(made) == 2 and all(c.is_closed for c in made)
    assert len(model.requests) == 2


def test_a_client_given_as_such_is_left_open_for_its_owner(monkeypatch):
    import asyncio

    from agent_kernel.model.client import ModelClient
    from agent_kernel.testing import ScriptedModel, say

    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    model = ScriptedModel([say("one")])

    async def ask():
        given = model.http_client()
        client = ModelClient(http_client=given)
        sdk = client.client()
        answer = await sdk.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        await client.aclose()
        still_open = not given.is_closed
        await given.aclose()
        return answer.content[0].text, still_open

    assert asyncio.run(ask()) == ("one", True)


def test_the_sdk_clients_share_one_ssl_context_until_the_certificate_settings_change(monkeypatch, tmp_path):
    import asyncio

    from agent_kernel.model.client import ModelClient, ssl_context

    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    client = ModelClient()

    async def context_of_a_new_client():
        sdk = client.client()  # one per event loop: each asyncio.run makes a new one
        context = sdk._client._transport._pool._ssl_context
        await client.aclose()
        return context

    first, second = asyncio.run(context_of_a_new_client()), asyncio.run(context_of_a_new_client())
    assert first is second is ssl_context()  # the certificates were loaded once
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))  # other certificates: a context that uses them
    third = asyncio.run(context_of_a_new_client())
    assert third is not first and third is ssl_context()
