"""The scripted server speaks the Messages API well enough for the official SDK."""

from __future__ import annotations

import anthropic
import pytest

from agent_kernel.testing import ScriptedModel, call, fail, reply, say, text, tool_use


def test_stream_text_and_tool_input(client, scripted_model):
    scripted_model.add(reply(text("Looking."), tool_use("run_code", {"code": "x = [1, 2, 3]\n" * 5})))
    with client.messages.stream(model="m", max_tokens=100, messages=[{"role": "user", "content": "hi"}]) as stream:
        events = [e.type for e in stream]
        final = stream.get_final_message()
    assert "input_json" in events and "text" in events
    assert final.stop_reason == "tool_use"
    assert final.content[0].text == "Looking."
    assert final.content[1].input == {"code": "x = [1, 2, 3]\n" * 5}
    assert scripted_model.requests[0]["messages"] == [{"role": "user", "content": "hi"}]


def test_plain_json_response_and_count_tokens(client, scripted_model):
    scripted_model.add(say("Hello there."))
    message = client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == "Hello there." and message.model == "scripted-model"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    counted = client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hi"}])
    assert counted.input_tokens > 0 and len(scripted_model.count_token_requests) == 1


@pytest.mark.parametrize(
    ("status", "kind", "error"),
    [
        (400, "invalid_request_error", anthropic.BadRequestError),
        (401, "authentication_error", anthropic.AuthenticationError),
        (404, "not_found_error", anthropic.NotFoundError),
        (529, "overloaded_error", anthropic.InternalServerError),
    ],
)
def test_error_responses(client, scripted_model, status, kind, error):
    scripted_model.add(fail(status, kind, "nope"))
    with pytest.raises(error) as caught:
        client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == status and caught.value.type == kind


def test_error_in_the_middle_of_a_stream(client, scripted_model):
    scripted_model.add(reply(text("partial"), stream_error="overloaded_error"))
    with pytest.raises(anthropic.APIStatusError) as caught:
        with client.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]) as s:
            for _ in s:
                pass
    assert caught.value.type == "overloaded_error"


def test_responder_and_exhausted_script(scripted_model):
    with ScriptedModel(
        [call("inspect_namespace")], responder=lambda body: say(f"{len(body['messages'])} messages")
    ) as model:
        with anthropic.Anthropic(base_url=model.url, api_key="k", max_retries=0) as c:
            first = c.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "a"}])
            second = c.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "b"}])
    assert first.content[0].name == "inspect_namespace" and second.content[0].text == "1 messages"
    with (
        anthropic.Anthropic(max_retries=0) as client,
        pytest.raises(anthropic.BadRequestError, match="no reply left for request #1"),
    ):
        client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}])


# -- the same script served in-process, through the SDK's own HTTP client --------------------


def in_process(model: ScriptedModel, calls):
    """Run ``calls(client)`` with an AsyncAnthropic whose requests go to ``model.transport()``."""
    import asyncio

    async def run():
        async with anthropic.AsyncAnthropic(api_key="k", max_retries=0, http_client=model.http_client()) as client:
            return await calls(client)

    return asyncio.run(run())


def test_transport_streams_text_and_tool_input_without_a_server():
    model = ScriptedModel([reply(text("Looking."), tool_use("run_code", {"code": "x = [1, 2, 3]\n" * 5}))])

    async def calls(client):
        async with client.messages.stream(model="m", max_tokens=100, messages=[{"role": "user", "content": "hi"}]) as s:
            events = [e.type async for e in s]
            return events, await s.get_final_message()

    events, final = in_process(model, calls)  # never started: no thread, no socket served
    assert "input_json" in events and "text" in events
    assert final.stop_reason == "tool_use" and final.content[0].text == "Looking."
    assert final.content[1].input == {"code": "x = [1, 2, 3]\n" * 5}
    assert model.requests[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert model.headers[0]["user-agent"].startswith("AsyncAnthropic/")  # the official SDK asked


def test_transport_answers_json_count_tokens_and_errors_like_the_server():
    model = ScriptedModel(
        [
            say("Hello there."),
            fail(529, "overloaded_error", "nope"),
            reply(text("partial"), stream_error="overloaded_error"),
        ]
    )
    hi = [{"role": "user", "content": "hi"}]

    async def calls(client):
        message = await client.messages.create(model="m", max_tokens=10, messages=hi)
        counted = await client.messages.count_tokens(model="m", messages=hi)
        with pytest.raises(anthropic.InternalServerError) as status:
            await client.messages.create(model="m", max_tokens=10, messages=hi)
        with pytest.raises(anthropic.APIStatusError) as mid_stream:
            async with client.messages.stream(model="m", max_tokens=10, messages=hi) as s:
                async for _ in s:
                    pass
        return message, counted, status.value, mid_stream.value

    message, counted, status, mid_stream = in_process(model, calls)
    assert message.content[0].text == "Hello there." and message.usage.output_tokens > 0
    assert counted.input_tokens > 0 and len(model.count_token_requests) == 1
    assert status.status_code == 529 and status.type == "overloaded_error"
    assert status.response.headers["retry-after-ms"] == "20" and status.request_id == "req_scripted_00002"
    assert mid_stream.type == "overloaded_error" and mid_stream.response.status_code == 200
    assert len(model.requests) == 3


def test_transport_paces_streamed_deltas():
    import time

    model = ScriptedModel([say("word " * 20, chunk_size=5, chunk_delay=0.02)])

    async def calls(client):
        started = time.perf_counter()
        async with client.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]) as s:
            texts = [e.text async for e in s if e.type == "text"]
        return texts, time.perf_counter() - started

    texts, seconds = in_process(model, calls)
    assert len(texts) == 20 and "".join(texts) == "word " * 20
    assert seconds >= 20 * 0.02


def test_thinking_streams_with_its_signature_and_must_come_back_unchanged(client, scripted_model):
    from agent_kernel.testing import redacted_thinking, signature_for, thinking

    blocks = [
        thinking("First I check x."),
        redacted_thinking("opaque"),
        tool_use("run_code", {"code": "x"}, id="toolu_1"),
    ]
    scripted_model.add(reply(*blocks), say("ok"), say("never"), say("never"))
    with client.messages.stream(model="m", max_tokens=100, messages=[{"role": "user", "content": "hi"}]) as stream:
        events = [(e.type, getattr(getattr(e, "delta", None), "type", None)) for e in stream]
        final = stream.get_final_message()
    assert ("content_block_delta", "thinking_delta") in events and ("content_block_delta", "signature_delta") in events
    assert final.content[0].thinking == "First I check x." and final.content[0].signature == signature_for(
        "First I check x."
    )
    assert final.content[1].data == "opaque"
    sent = [b.model_dump(exclude_none=True) for b in final.content]
    answer = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1"}]

    def follow_up(assistant):
        history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": assistant}]
        return client.messages.create(
            model="m", max_tokens=10, messages=[*history, {"role": "user", "content": answer}]
        )

    assert follow_up(sent).content[0].text == "ok"
    changed = [dict(sent[0], thinking="First I check y."), *sent[1:]]
    with pytest.raises(
        anthropic.BadRequestError, match=r"messages.1.content.0: Invalid `signature` in `thinking` block"
    ):
        follow_up(changed)
    with pytest.raises(anthropic.BadRequestError, match=r"messages.1.content.1: Invalid `data` in `redacted_thinking`"):
        follow_up([sent[0], {"type": "redacted_thinking", "data": "forged"}, sent[2]])
    assert len(scripted_model.requests) == 4 and scripted_model.remaining == 2  # refused: recorded, not scripted
