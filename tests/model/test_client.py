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


def test_each_request_is_scrubbed_whole_though_repeated_parts_are_scrubbed_once(monkeypatch):
    """The parts a request repeats (tools, earlier messages) are kept scrubbed; a secret
    declared since, or a part changed in place, is redacted in the next request all the same."""
    import asyncio

    from agent_kernel.display.transcript import Transcript
    from agent_kernel.model.client import ModelClient
    from agent_kernel.secrets import Secrets, scrub
    from agent_kernel.testing import ScriptedModel, say

    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    model = ScriptedModel([say("one"), say("two"), say("three"), say("four")])
    client = ModelClient(http_client=model.http_client)
    secrets = Secrets()
    tool = {"name": "look", "description": "Looks at tangerine-42-quartz.", "input_schema": {"type": "object"}}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "the code is tangerine-42-quartz"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "noted"}]},
        {"role": "user", "content": [{"type": "text", "text": "and again?"}]},
    ]
    params = {
        "model": "m",
        "max_tokens": 5,
        "system": "Be brief, tangerine-42-quartz.",
        "tools": [tool],
        "messages": messages,
    }

    async def ask():
        await client.stream(params, Transcript(live=False))

    asyncio.run(ask())
    assert "tangerine-42-quartz" in str(model.requests[-1]["messages"])
    secrets.set("PASSCODE", "tangerine-42-quartz")  # a new secret: what was kept is scrubbed again
    asyncio.run(ask())
    sent = model.requests[-1]
    assert "tangerine-42-quartz" not in str(sent)
    assert sent["messages"][0]["content"][0]["text"] == "the code is [secret PASSCODE]"
    assert sent["tools"][0]["description"] == "Looks at [secret PASSCODE]."
    assert sent["system"] == "Be brief, [secret PASSCODE]."
    messages[1]["content"][0]["text"] = "it was tangerine-42-quartz"  # changed in place
    asyncio.run(ask())
    sent = model.requests[-1]
    assert sent["messages"][1]["content"][0]["text"] == "it was [secret PASSCODE]"
    expected = scrub(params)
    assert {k: sent[k] for k in ("system", "tools", "messages")} == {
        k: expected[k] for k in ("system", "tools", "messages")
    }
    messages[1]["content"][0]["text"] = "noted"  # changed back: nothing to redact, sent as it is
    asyncio.run(ask())
    assert model.requests[-1]["messages"][1]["content"][0]["text"] == "noted"


def test_the_lists_kept_scrubbed_are_bounded_the_least_recently_sent_dropped_first():
    import gc
    import weakref

    from agent_kernel.model.client import ScrubbedParts

    class Message(dict):  # a message that can be watched for being freed
        pass

    parts = ScrubbedParts()
    parts.LISTS = 10
    system = Message(type="text", text="Be brief.")
    watched = []
    for n in range(50):  # fifty conversations, each sent once, the system block with each
        message = Message(role="user", content=f"question {n}")
        watched.append(weakref.ref(message))
        sent = parts.request({"model": "m", "system": [system], "messages": [message]})
        assert sent["messages"] == [{"role": "user", "content": f"question {n}"}]
        del message, sent
    gc.collect()
    alive = [n for n, ref in enumerate(watched) if ref() is not None]
    assert len(alive) <= 9 and alive == list(range(50 - len(alive), 50))  # the latest kept (and the system's)
    assert parts.request({"model": "m", "system": [system], "messages": []})["system"] == [dict(system)]


def test_a_growing_conversation_scrubs_only_the_parts_added_since_the_last_request(monkeypatch):
    """Each round trip sends the last request's messages again and two more: those two are
    scrubbed, the rest reused while it holds, also after a conversation in between."""
    import agent_kernel.redaction as redaction
    import agent_kernel.secrets  # noqa: F401  (bound to the real scrub before it is watched)
    from agent_kernel.model.client import ScrubbedParts

    scrubbed = []
    real = redaction.scrub

    def watched(value, strings, **options):
        scrubbed.append(value)
        return real(value, strings, **options)

    monkeypatch.setattr(redaction, "scrub", watched)
    parts = ScrubbedParts()
    tools = [{"name": f"t{n}", "description": "d", "input_schema": {"type": "object"}} for n in range(5)]
    messages: list = [{"role": "user", "content": "start"}]
    other = [{"role": "user", "content": "a sub-session"}]
    for n in range(4):
        scrubbed.clear()
        sent = parts.request({"model": "m", "tools": tools, "messages": list(messages)})
        assert sent["messages"] == messages and sent["tools"] == tools
        added = [m for m in scrubbed if isinstance(m, dict) and "role" in m]
        assert added == (messages if n == 0 else messages[-2:])
        assert not [t for t in scrubbed if isinstance(t, dict) and "name" in t] or n == 0
        parts.request({"model": "m", "tools": tools, "messages": other})  # another conversation between
        messages += [{"role": "assistant", "content": f"step {n}"}, {"role": "user", "content": f"result {n}"}]
    messages[1]["content"] = "changed in place"
    scrubbed.clear()
    assert parts.request({"model": "m", "messages": messages})["messages"][1]["content"] == "changed in place"
    assert len([m for m in scrubbed if isinstance(m, dict) and "role" in m]) == len(messages)  # all again


def test_threads_sending_through_one_client_each_get_their_own_request_scrubbed():
    """generate_many's threads share the agent's model client: the kept lists stay whole
    while several threads send (and evict each other's) at once."""
    import threading

    from agent_kernel.model.client import ScrubbedParts
    from agent_kernel.secrets import scrub

    parts = ScrubbedParts()
    parts.LISTS = 2  # fewer than the threads: every request may evict another's list
    failures: list[str] = []

    def converse(n: int) -> None:
        messages: list = [{"role": "user", "content": f"thread {n}"}]
        for step in range(60):
            params = {"model": "m", "messages": list(messages)}
            if parts.request(params)["messages"] != scrub(params)["messages"]:
                failures.append(f"thread {n}, step {step}")
            messages.append({"role": "assistant" if step % 2 == 0 else "user", "content": f"{n}.{step}"})

    threads = [threading.Thread(target=converse, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
