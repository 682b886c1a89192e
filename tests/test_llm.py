"""agent_kernel.llm from Python: generate in a cell and inside a running turn, generate_many
concurrently and as a Message Batch, against the scripted model through the official SDK."""

from __future__ import annotations

import io
import json
import time
from contextlib import redirect_stderr

import pandas as pd
import pytest

from agent_kernel import llm
from agent_kernel.testing import call, fail, say, structured

LABEL = {"type": "object", "properties": {"label": {"enum": ["spam", "ham"]}}, "required": ["label"]}


def echo(body: dict, delay: float = 0.0):
    """Answers each request with its prompt, uppercased; a prompt "boom" fails with a 400."""
    prompt = body["messages"][0]["content"]
    if prompt == "boom":
        return fail(400, "invalid_request_error", "scripted: this prompt is refused")
    return say(prompt.upper(), delay=delay)


def model_calls(shell_agent) -> list[tuple]:
    with shell_agent.agent.store.connect() as con:
        return con.execute(
            "SELECT turn, model, input_tokens + cache_read_tokens + cache_write_tokens, output_tokens "
            "FROM model_calls ORDER BY created_at, call"
        ).fetchall()


def test_generate_in_a_cell_sends_the_json_schema_format_and_returns_parsed(shell_agent, scripted_model):
    scripted_model.add(structured({"label": "spam"}))
    shell_agent.code(
        "from agent_kernel import llm\n"
        f"r = llm.generate('Classify: WIN A PRIZE', system='You label mail.', schema={LABEL!r})\n"
    )
    result = shell_agent.value("r")
    assert result.parsed == {"label": "spam"} and result.text == '{"label": "spam"}'
    assert result.usage["input_tokens"] > 0 and result.usage["output_tokens"] > 0
    sent = scripted_model.requests[-1]
    assert sent["model"] == "claude-haiku-4-5"  # intelligence low: AgentKernel.small_model
    assert sent["system"] == "You label mail." and sent["max_tokens"] == 4096
    assert sent["output_config"]["format"]["type"] == "json_schema"
    assert sent["output_config"]["format"]["schema"]["properties"]["label"] == {"enum": ["spam", "ham"]}
    assert result.to_dict() == {"text": '{"label": "spam"}', "parsed": {"label": "spam"}, "usage": result.usage}


def test_intelligence_picks_the_configured_model(scripted_model, tmp_path):
    from agent_kernel import Agent

    agent = Agent(http_client=scripted_model.http_client, db_path=str(tmp_path / "a.duckdb"),
                  medium_model="model-m", large_model="model-l")  # fmt: skip
    scripted_model.add(say("m"), say("l"))
    assert llm.generate("x", intelligence="medium", agent=agent).text == "m"
    assert llm.generate("x", intelligence="high", agent=agent).text == "l"
    assert [r["model"] for r in scripted_model.requests] == ["model-m", "model-l"]
    with pytest.raises(ValueError, match="intelligence must be one of low, medium, high"):
        llm.generate("x", intelligence="huge", agent=agent)
    scripted_model.add(say("t"))
    with pytest.warns(UserWarning, match="temperature is not sent"):
        llm.generate("x", temperature=0.2, agent=agent)
    assert "temperature" not in scripted_model.requests[-1]  # the API (2026-10-21) refuses it
    with pytest.raises(ValueError, match="temperature must be a number from 0 to 1"):
        llm.generate("x", temperature=3, agent=agent)


def test_a_reply_that_does_not_match_the_schema_raises_with_the_validation_message(scripted_model):
    scripted_model.add(structured({"label": "eggs"}), say("not json at all"))
    with pytest.raises(llm.GenerationError) as caught:
        llm.generate("Classify: hello", schema=LABEL)
    assert "does not match the schema: label must be one of ['spam', 'ham']" in str(caught.value)
    assert caught.value.result.usage["output_tokens"] > 0  # it was billed all the same
    with pytest.raises(llm.GenerationError, match="The reply is not JSON"):
        llm.generate("Classify: hello", schema=LABEL)
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        llm.generate("x", schema={"type": "object", "required": "label"})
    assert len(scripted_model.requests) == 2  # an invalid schema sends nothing


def test_prompts_pass_the_redaction_boundary(scripted_model):
    scripted_model.add(say("ok"))
    llm.generate("my key is scripted-test-key, keep it safe")  # the API key is always a secret
    assert scripted_model.requests[-1]["messages"][0]["content"] == "my key is [secret ANTHROPIC_API_KEY], keep it safe"


def test_generate_from_run_code_inside_a_turn_uses_the_turn_and_counts_its_usage(shell_agent, scripted_model):
    code = "from agent_kernel import llm\nanswer = llm.generate('say hi', intelligence='medium').text\n"
    scripted_model.add(call("run_code", code=code), say("hi there"), say("The model said hi there."))
    cell = shell_agent.ok("ask a small model")  # sync generate while the turn's loop awaits run_code
    assert shell_agent.value("answer") == "hi there"
    assert [r.get("output_config") for r in scripted_model.requests] == [None, None, None]
    side = scripted_model.requests[1]
    assert side["model"] == "claude-sonnet-5-5" and "tools" not in side  # medium_model; no tools
    calls = model_calls(shell_agent)
    assert [c[1] for c in calls] == ["scripted-model"] * 3 and {c[0] for c in calls} == {1}
    assert cell.result.tokens == sum(c[2] + c[3] for c in calls)  # the side call counts toward the turn
    assert cell.result.model_calls == 2  # ... but is not one of its own calls


def test_generate_from_a_sync_tool_and_await_agenerate_from_an_async_one(shell_agent, scripted_model):
    shell_agent.code(
        "from agent_kernel import tool, llm\n"
        "@tool\n"
        "def shout(text: str) -> str:\n"
        '    """Shout text."""\n'
        "    return llm.generate(text).text\n"
        "@tool\n"
        "async def whisper(text: str) -> str:\n"
        '    """Whisper text."""\n'
        "    return (await llm.agenerate(text)).text.lower()\n"
    )
    scripted_model.add(call("shout", text="hey"), echo, call("whisper", text="HEY"), echo, say("done"))
    shell_agent.ok("shout then whisper")
    results = [b for r in scripted_model.requests for m in r["messages"][-1:] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]  # fmt: skip
    assert [r["content"] for r in results] == ["HEY", "hey"]
    assert len(model_calls(shell_agent)) == 5


def test_generate_many_over_a_dataframe_column_keeps_order_and_fails_per_item(scripted_model):
    frame = pd.DataFrame({"text": ["alpha", "boom", None, "delta"]}, index=[10, 11, 12, 13])
    # Later prompts answer sooner: the results still come back in input order.
    scripted_model.responder = lambda body: echo(
        body, delay={"ALPHA": 0.3}.get(body["messages"][0]["content"].upper(), 0.0)
    )
    err = io.StringIO()
    with redirect_stderr(err):
        out = llm.generate_many(frame["text"], concurrency=4)
    assert isinstance(out, pd.Series) and list(out.index) == [10, 11, 12, 13] and out.name == "text"
    assert [r.text for r in out] == ["ALPHA", "", "", "DELTA"]
    assert out[10].ok and out[13].ok
    assert "scripted: this prompt is refused" in out[11].error and out[11].error.startswith("Model request failed (400")
    assert out[12].error == "Item 2 has no prompt (NaN)."  # pandas holds None as NaN
    assert "4/4" in err.getvalue()  # the progress bar, as text outside a notebook
    frame["label"] = out.map(lambda r: r.text)
    assert frame.loc[13, "label"] == "DELTA"
    with pytest.raises(TypeError, match="one column"):
        llm.generate_many(frame)


def test_generate_many_runs_concurrently_up_to_the_limit(scripted_model):
    scripted_model.responder = lambda body: echo(body, delay=0.25)
    started = time.perf_counter()
    out = llm.generate_many([f"p{i}" for i in range(16)], concurrency=16, progress=False)
    elapsed = time.perf_counter() - started
    assert [r.text for r in out] == [f"P{i}" for i in range(16)]
    assert elapsed < 2.0, elapsed  # one after another: 4 s
    with pytest.raises(ValueError, match="concurrency must be"):
        llm.generate_many(["a"], concurrency=0)


def test_generate_many_with_a_schema_validates_each_item(scripted_model):
    scripted_model.add(structured({"label": "ham"}), structured({"label": 3}))
    out = llm.generate_many(["a", "b"], schema=LABEL, concurrency=1, progress=False)
    assert out[0].parsed == {"label": "ham"}
    assert out[1].parsed is None and "label must be one of ['spam', 'ham']" in out[1].error


def test_batch_completes_through_the_batches_api_with_progress(scripted_model):
    scripted_model.batches.polls = 3
    scripted_model.responder = echo
    err = io.StringIO()
    with redirect_stderr(err):
        out = llm.generate_many(["one", "boom", float("nan"), "scripted-test-key four"], batch=True, poll_s=0.01)
    assert [r.text for r in out] == ["ONE", "", "", "[SECRET ANTHROPIC_API_KEY] FOUR"]
    assert "The batch request failed (invalid_request_error: scripted: this prompt is refused)" in out[1].error
    assert out[2].error == "Item 2 has no prompt (NaN)."
    created = scripted_model.batches.created
    assert len(created) == 1 and [r["custom_id"] for r in created[0]["requests"]] == ["item-0", "item-1", "item-3"]
    assert created[0]["requests"][2]["params"]["messages"][0]["content"] == "[secret ANTHROPIC_API_KEY] four"
    shown = err.getvalue()
    assert "in_progress" in shown and "ended" in shown and "4/4" in shown


def test_batch_results_count_toward_the_turn(shell_agent, scripted_model):
    code = (
        "from agent_kernel import llm\n"
        f"labels = [r.parsed['label'] for r in llm.generate_many(['a', 'b'], schema={LABEL!r}, batch=True, poll_s=0.01, progress=False)]\n"
    )
    scripted_model.add(
        call("run_code", code=code), structured({"label": "spam"}), structured({"label": "ham"}), say("Labelled.")
    )
    cell = shell_agent.ok("label these")
    assert shell_agent.value("labels") == ["spam", "ham"]
    assert len(model_calls(shell_agent)) == 4 and cell.result.model_calls == 2
    assert json.dumps(scripted_model.batches.created[0]["requests"][0]["params"]["output_config"]["format"]["schema"])


def test_in_a_notebook_calls_use_the_kernels_settings_and_its_loop(kernel, scripted_model):
    scripted_model.responder = echo
    kernel.ok("%config AgentKernel.small_model = 'tiny-model'")
    # A cell's code runs while the kernel's event loop is running: generate must not need it.
    shown = kernel.ok("from agent_kernel import llm\nprint(llm.generate('hello').text)")
    assert shown.stdout.strip() == "HELLO"
    shown = kernel.ok(
        "rs = await llm.agenerate_many(['a', 'boom', 'c'], progress=False)\nprint([r.text for r in rs], rs[1].ok)"
    )
    assert shown.stdout.strip() == "['A', '', 'C'] False"
    shown = kernel.ok("print([r.text for r in llm.generate_many(['x', 'y'])])")
    assert shown.stdout.strip() == "['X', 'Y']" and "Traceback" not in shown.stderr
    # Its progress bar is one display, updated in place, that ends at 2/2.
    assert shown.final_texts()[-1].startswith("llm: 100%") and "2/2" in shown.final_texts()[-1]
    assert {r["model"] for r in scripted_model.requests} == {"tiny-model"}


def test_a_notebook_run_by_papermill_keeps_the_progress_bar_as_it_ended(scripted_model, agent_db, tmp_path):
    import nbformat
    import papermill

    from tests.support.notebooks import write_notebook

    scripted_model.responder = echo
    write_notebook(
        tmp_path / "in.ipynb",
        "%load_ext agent_kernel",
        "import pandas as pd\nfrom agent_kernel import llm\n"
        "reviews = pd.DataFrame({'text': [f'review {i}' for i in range(20)]})\n"
        "reviews['answer'] = llm.generate_many(reviews['text'], concurrency=4).map(lambda r: r.text)\n"
        "print(reviews['answer'].iloc[19])",
    )
    papermill.execute_notebook(str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"), kernel_name="python3",
                               progress_bar=False, cwd=str(tmp_path))  # fmt: skip
    outputs = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[1].outputs
    shown = [o for o in outputs if o.output_type == "display_data"]
    assert len(shown) == 1 and list(shown[0].data) == ["text/plain"]  # no widget, whose saved form is "0/20"
    assert shown[0].data["text/plain"].startswith("llm: 100%") and "20/20" in shown[0].data["text/plain"]
    assert [o.text for o in outputs if o.output_type == "stream"] == ["REVIEW 19\n"]


def test_a_time_limit_stops_generate_many_and_what_ran_is_counted(shell_agent, scripted_model):
    code = "from agent_kernel import llm\nout = llm.generate_many([f'p{i}' for i in range(40)], concurrency=2, progress=False)\n"
    scripted_model.add(call("run_code", code=code, timeout_s=1))
    # The turn's next request ends it; each side call takes 0.2 s (40, 2 at a time: 4 s).
    scripted_model.responder = lambda body: say("It timed out.") if "tools" in body else echo(body, delay=0.2)
    cell = shell_agent.ok("label forty")
    result = json.loads(scripted_model.requests[-1]["messages"][-1]["content"][0]["content"])
    assert result["error"]["type"] == "TimeoutError"
    time.sleep(0.5)  # the calls in flight when it stopped have answered by now
    side = [r for r in scripted_model.requests if "tools" not in r]
    assert 2 <= len(side) <= 14  # the rest were never sent
    recorded = model_calls(shell_agent)
    answered = len(recorded) - 2  # the turn's own two calls aside
    assert len(side) - 2 <= answered <= len(side) and answered >= 2  # at most 2 were in flight, cancelled
    assert cell.result.tokens == sum(c[2] + c[3] for c in recorded)
