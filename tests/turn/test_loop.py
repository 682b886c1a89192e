"""The turn loop against the scripted model: tools, errors, limits, display.

Most tests run whole turns in this process (``shell_agent``: an Agent on IPython's shell);
those about what a front end shows, or run_code's output in a kernel, run in a real kernel.
"""

from __future__ import annotations

import json
import re

from agent_kernel.errors import TurnFailedError
from agent_kernel.testing import call, fail, reply, say, text, tool_use
from tests.support.calls import tool_results
from tests.support.frontend import FrontEnd


def test_tool_failures_are_is_error_results_and_the_turn_goes_on(shell_agent, scripted_model):
    shell_agent.code(
        "from agent_kernel import tool\n"
        "@tool\n"
        "def divide(a: float, b: float) -> float:\n"
        '    """Divide a by b."""\n'
        "    return a / b\n"
    )
    scripted_model.add(
        reply(
            tool_use("divide", {"a": 1, "b": 0}),
            tool_use("no_such_tool", {}),
            tool_use("run_code", {"timeout_s": 5}),
            tool_use("divide", {"a": 9, "b": 3}),
        ),
        say("Handled all four."),
    )
    result = shell_agent.ok("try the tools")
    results = tool_results(scripted_model.requests[1])
    assert [r.get("is_error", False) for r in results] == [True, True, True, False]
    assert "divide failed with ZeroDivisionError: float division by zero" in results[0]["content"]
    assert "Unknown tool 'no_such_tool'" in results[1]["content"] and "run_code" in results[1]["content"]
    assert results[2]["content"].startswith("Invalid input for run_code: code: Missing required argument")
    assert results[3]["content"] == "3.0"
    assert "Handled all four." in result.lines
    definitions = {t["name"]: t for t in scripted_model.requests[0]["tools"]}
    assert definitions["divide"]["input_schema"]["required"] == ["a", "b"]
    assert definitions["divide"]["description"] == "Divide a by b."


def test_overloaded_529_is_retried_by_the_sdk(shell_agent, scripted_model):
    scripted_model.add(fail(529, "overloaded_error", "Overloaded"), say("Second time lucky."))
    result = shell_agent.ok("hello")
    assert len(scripted_model.requests) == 2
    assert "Second time lucky." in result.lines


def test_overloaded_mid_stream_is_retried_by_the_loop(kernel, scripted_model):
    scripted_model.add(reply(text("Half an ans"), stream_error="overloaded_error"), say("A whole answer."))
    result = kernel.ok("%agent hello")
    shown = result.final_texts()
    assert "A whole answer." in shown
    assert not any("Half an ans" in s for s in shown)  # the failed attempt's text was taken back
    assert any("retrying (1/3)" in s for s in shown)


def test_a_400_is_one_clear_line_and_fails_the_cell(shell_agent, scripted_model):
    scripted_model.add(fail(400, "invalid_request_error", "max_tokens: must be at most 64000"))
    result = shell_agent.execute("hello")
    error = result.error
    assert isinstance(error, TurnFailedError)
    line = str(error)
    assert line.startswith("Model request failed (400 invalid_request_error): max_tokens: must be at most 64000.")
    assert "\n" not in line and "%agent --new" not in line  # not about the prompt's length
    traceback = error._render_traceback_()  # what IPython shows for the cell
    assert len(traceback) == 1 and line in traceback[0]
    assert "Model request failed" not in result.shown  # shown once, as the error
    # The failed prompt is not kept, so the next turn does not resend it.
    scripted_model.add(say("fine now"))
    shell_agent.ok("again")
    assert [m["content"][-1]["text"] for m in scripted_model.requests[-1]["messages"]] == ["again"]


def test_missing_key_says_how_to_set_it(shell_agent, scripted_model, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    result = shell_agent.execute("hello")
    assert isinstance(result.error, TurnFailedError)
    assert str(result.error).startswith("No Anthropic API key: set ANTHROPIC_API_KEY")
    assert len(result.error._render_traceback_()) == 1
    assert scripted_model.requests == []


def test_token_limit_stops_and_a_higher_limit_continues(shell_agent, scripted_model):
    usage = {"input_tokens": 600, "output_tokens": 100}
    scripted_model.add(
        reply(tool_use("run_code", {"code": "step = 1"}), usage=usage),
        reply(tool_use("run_code", {"code": "step = 2"}), usage=usage),
    )
    first = shell_agent.execute("work in steps", token_limit=1000)  # no front end: no Continue
    assert isinstance(first.error, TurnFailedError)
    # The second call (about 600 input tokens and what the first added) would pass the
    # limit: it is not started, and the session ends within its limit.
    line = str(first.error)
    assert "stopped before a model call that would pass its token limit" in line
    needed = int(re.search(r"about ([\d,]+) input tokens", line).group(1).replace(",", ""))
    assert 600 < needed < 800 and "; 700 of 1,000 used)" in line
    assert shell_agent.value("step") == 1
    assert len(scripted_model.requests) == 1
    assert shell_agent.agent.session(create=False).state == "token_limit_reached"
    assert shell_agent.agent.session(create=False).tokens_used == 700
    scripted_model.script.clear()
    scripted_model.add(say("Finished the steps."))
    second = shell_agent.ok("continue", token_limit=5000)
    assert "Finished the steps." in second.lines
    last = scripted_model.requests[-1]["messages"]
    # The stored conversation ended on tool results; the new prompt joins that user message.
    assert last[-1]["content"][0]["type"] == "tool_result" and last[-1]["content"][-1]["text"] == "continue"


def test_model_call_cap_per_turn(shell_agent, scripted_model):
    shell_agent.agent.config.max_model_calls = 2
    scripted_model.add(*[call("run_code", code=f"n = {i}") for i in range(3)])
    result = shell_agent.execute("loop forever")
    assert len(scripted_model.requests) == 2
    assert isinstance(result.error, TurnFailedError) and str(result.error).startswith("Stopped after 2 model calls")


def test_streaming_display_is_throttled(kernel, scripted_model):
    # 1,200 characters in 5-character deltas, 10 ms apart: ~240 deltas over ~2.4 s.
    scripted_model.add(say("word " * 240, chunk_size=5, chunk_delay=0.01))
    result = kernel.ok("%agent talk", on_message=FrontEnd(kernel).hook)  # a front end that draws widgets
    updates = [
        m
        for m in result.of_type("update_display_data")
        if m["content"]["data"].get("text/plain", "").startswith("word")
    ]
    [shown] = [t for t in result.final_texts() if t.startswith("word")]
    assert shown.strip() == ("word " * 240).strip()
    assert result.seconds > 2
    assert len(updates) <= 15 * result.seconds + 2
    assert len(updates) >= 5  # it did stream, not only show the end


def test_request_carries_system_prompt_tools_and_caching(shell_agent, scripted_model):
    shell_agent.code(
        "import pandas as pd\nsales = pd.DataFrame({'month': ['2024-01', '2024-02'], 'revenue': [10.5, 20.0]})"
    )
    scripted_model.add(say("ok"))
    shell_agent.ok("describe my data")
    request = scripted_model.requests[0]
    assert request["stream"] is True
    assert {t["name"] for t in request["tools"]} >= {"run_code", "inspect_namespace"}
    # Breakpoints: the last tool, the system prompt, the end of the conversation.
    assert request["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    [system] = request["system"]
    assert system["cache_control"] == {"type": "ephemeral"} and "Current date" not in system["text"]
    context, asked = request["messages"][-1]["content"]
    assert asked == {"type": "text", "text": "describe my data", "cache_control": {"type": "ephemeral"}}
    assert context["text"].startswith("<turn-context>\nCurrent date and time:")
    line = "`sales` (pandas.DataFrame, shape (2, 2)) columns month: object, revenue: float64"
    assert line in context["text"].replace("str", "object")
    assert json.dumps(request).count("2024-01") <= 1  # data is summarised, never copied


def test_approval_modes_without_an_approver(shell_agent, scripted_model):
    scripted_model.add(call("run_code", code="touched = True"), say("Could not run it."))
    shell_agent.ok("change something", approve="read-only")
    offered = {t["name"] for t in scripted_model.requests[0]["tools"]}
    assert "inspect_namespace" in offered and "run_code" not in offered
    refusal = tool_results(scripted_model.requests[1])[0]
    assert refusal["is_error"] is True and "Unknown tool 'run_code'" in refusal["content"]
    scripted_model.add(
        reply(tool_use("run_code", {"code": "touched = True"}), tool_use("inspect_namespace", {})), say("ok")
    )
    shell_agent.ok("change something", approve="ask")  # no front end, as under papermill
    asked, inspected = tool_results(scripted_model.requests[-1])
    assert asked["is_error"] is True and "needs the user's approval" in asked["content"]
    assert not inspected.get("is_error")
    assert "touched" not in shell_agent.shell.user_ns


# -- text no encoder accepts, nesting no parser survives ---------------------------------------


def _stored_messages(db_path) -> list[tuple[str, list]]:
    import duckdb

    with duckdb.connect(str(db_path), read_only=True) as con:
        rows = con.execute("SELECT role, content FROM messages ORDER BY seq").fetchall()
    return [(role, json.loads(content)) for role, content in rows]


def test_lone_surrogates_in_tool_input_and_output_leave_a_valid_stored_conversation(kernel, scripted_model, agent_db):
    kernel.ok(
        "from agent_kernel import tool\n"
        "@tool\n"
        "def broken_text(x: str) -> dict:\n"
        '    """Returns text with a lone surrogate."""\n'
        "    return {'echo': x, 'bad': 'a\\udc80b'}\n"
    )
    scripted_model.add(
        reply(
            tool_use("run_code", {"code": "print('out \\udcff here')\n'val \\ud800'"}),
            tool_use("broken_text", {"x": "in \ud83d put"}),
        ),
        say("Survived."),
        say("Next turn fine."),
    )
    result = kernel.ok("%agent surrogates")
    assert "Survived." in result.final_texts()
    results = tool_results(scripted_model.requests[1])
    assert [r.get("is_error", False) for r in results] == [False, False]
    ran = json.loads(results[0]["content"])
    assert ran["stdout"] == "out \ufffd here\n" and ran["result"] == "'val \\ud800'"  # repr escapes it
    assert json.loads(results[1]["content"]) == {"echo": "in \ufffd put", "bad": "a\ufffdb"}
    sent_back = scripted_model.requests[1]["messages"][-2]["content"]
    assert sent_back[1]["input"] == {"x": "in \ufffd put"}  # the tool_use, encodable
    kernel.ok("%agent again")  # the next turn loads the stored conversation and goes on
    assert len(scripted_model.requests) == 3
    stored = _stored_messages(agent_db)
    assert [role for role, _ in stored] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert stored[2][1][1]["content"] == results[1]["content"]


def test_absurdly_deep_tool_input_is_bounded_and_the_turn_goes_on(shell_agent, scripted_model, agent_db):
    deep: list = []
    inner = deep
    for _ in range(900):
        inner.append([])
        inner = inner[0]
    scripted_model.add(
        reply(tool_use("inspect_namespace", {"names": deep})),
        say("Still here."),
        say("And here."),
    )
    result = shell_agent.ok("deep")
    assert "Still here." in result.lines
    (answer,) = tool_results(scripted_model.requests[1])
    assert answer["is_error"] and "nested more than 32 levels deep" in answer["content"]
    sent_back = json.dumps(scripted_model.requests[1]["messages"][-2]["content"])
    assert "[nested deeper than 64 levels]" in sent_back and sent_back.count("[") < 200
    shell_agent.ok("again")
    assert len(scripted_model.requests) == 3
    assert [role for role, _ in _stored_messages(agent_db)][-2:] == ["user", "assistant"]


def test_a_ten_megabyte_tool_input_is_refused_quickly_and_the_turn_goes_on(shell_agent, scripted_model):
    import time

    huge = {"code": "x = 1\n" * 1_750_000}  # 10.5 MB of JSON, streamed in the usual small pieces
    scripted_model.add(reply(tool_use("run_code", huge)), say("Sent less."))
    started = time.perf_counter()
    result = shell_agent.ok("go", token_limit=100_000_000)  # the scripted model counts the input as output
    elapsed = time.perf_counter() - started
    assert len(scripted_model.requests) == 2, result.shown
    [refused] = tool_results(scripted_model.requests[1])
    assert refused["is_error"] and "1,000,000 bytes" in refused["content"]
    assert "Sent less." in result.lines
    # Neither the stored nor the re-sent conversation carries the 10 MB.
    [kept] = [b for b in scripted_model.requests[1]["messages"][-2]["content"] if b["type"] == "tool_use"]
    assert kept["input"] == {"oversized_input_bytes": len(json.dumps(huge))}
    assert elapsed < 20, f"{elapsed:.1f} s"
