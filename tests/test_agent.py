"""Agent: sessions that outlive kernels, and the Python API outside a notebook."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from agent_kernel.testing import call, fail, say

from .kernel import Kernel


def texts_of(request):
    return [
        (m["role"], b.get("text") or b.get("type"))
        for m in request["messages"]
        for b in m["content"]
    ]


def test_session_continues_in_a_second_kernel(scripted_model, agent_db, tmp_path):
    notebook = {"JPY_SESSION_NAME": str(tmp_path / "analysis.ipynb")}
    scripted_model.add(call("run_code", code="first = 1"), say("Set first."))
    k1 = Kernel(notebook, cwd=str(tmp_path))
    try:
        k1.ok("%load_ext agent_kernel")
        k1.ok("%agent set first")
    finally:
        k1.shutdown()
    scripted_model.add(say("I remember."))
    k2 = Kernel(notebook, cwd=str(tmp_path))
    try:
        k2.ok("%load_ext agent_kernel")
        k2.ok("%agent what did you do?")
        sessions = k2.ok("%agent_sessions").final_texts()[-1]
    finally:
        k2.shutdown()
    assert texts_of(scripted_model.requests[-1]) == [
        ("user", "set first"),
        ("assistant", "tool_use"),
        ("user", "tool_result"),
        ("assistant", "Set first."),
        ("user", "what did you do?"),
    ]
    assert "* analysis" in sessions  # named after the notebook, marked current


def test_named_sessions_across_kernels_and_new(kernel, scripted_model, tmp_path):
    scripted_model.add(say("one"), say("two"), say("three"))
    kernel.ok("%agent --new=project-x remember the colour blue")
    kernel.ok("%agent --new fresh start")
    assert texts_of(scripted_model.requests[-1]) == [("user", "fresh start")]
    other = Kernel({}, cwd=str(tmp_path))
    try:
        other.ok("%load_ext agent_kernel")
        other.ok("%agent --session project-x which colour?")
        missing = other.execute("%agent --session nope hello")
    finally:
        other.shutdown()
    assert texts_of(scripted_model.requests[-1])[0] == ("user", "remember the colour blue")
    assert missing.stderr.startswith("UsageError: No session named 'nope'")


def test_history_magic_shows_the_transcript(kernel, scripted_model):
    scripted_model.add(call("run_code", code="total = 40 + 2"), say("The total is **42**."))
    kernel.ok("%agent add it up")
    history = kernel.ok("%agent_history").final_texts("text/markdown")[-1]
    assert "**You**" in history and "add it up" in history
    assert "total = 40 + 2" in history and "The total is **42**." in history
    last = kernel.ok("%agent_history 1").final_texts("text/markdown")[-1]
    assert "showing 1" in last and "add it up" not in last


SCRIPT = textwrap.dedent(
    """
    from agent_kernel import Agent
    agent = Agent(token_limit=50_000)
    result = agent.run("compute in a script")
    print("RESULT", repr(result.text), result.tool_calls, result.state)
    print("VALUE", agent.shell.user_ns["script_value"])
    """
)


def test_agent_run_in_a_plain_script(scripted_model, agent_db, tmp_path):
    scripted_model.add(call("run_code", code="script_value = 7 * 6\nprint('inside', script_value)"), say("Done: 42."))
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "inside 42" in out.stdout
    assert "RESULT 'Done: 42.' 1 idle" in out.stdout
    assert "VALUE 42" in out.stdout
    assert "\nDone: 42.\nscripted-model (offline" in out.stdout  # the footer starts its own line


FAILING_SCRIPT = textwrap.dedent(
    """
    from agent_kernel import Agent
    from agent_kernel.errors import TurnFailedError
    # One Agent per run(): each asyncio.run needs a client of its own event loop.
    result = Agent().run("first")
    print("RESULT", result.failed, result.ending, result.state, repr(result.error))
    try:
        Agent().run("second", check=True)
    except TurnFailedError as exc:
        print("RAISED", exc.ending, str(exc))
    print("THIRD", Agent().run("third").failed)
    """
)


def test_agent_run_returns_a_failed_turn_and_raises_it_with_check(scripted_model, agent_db, tmp_path):
    scripted_model.add(
        fail(400, "invalid_request_error", "prompt is too long: 215000 tokens > 200000 maximum"),
        fail(401, "authentication_error", "invalid x-api-key"),
        say("Fine again."),
    )
    out = subprocess.run([sys.executable, "-c", FAILING_SCRIPT], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    [result] = [line for line in out.stdout.splitlines() if line.startswith("RESULT")]
    assert result.startswith("RESULT True model_error error 'Model request failed (400 invalid_request_error): prompt is too long")
    assert "start a new one with %agent --new" in result  # this 400 is about the prompt's length
    assert "RAISED model_error Model request failed (401 authentication_error): invalid x-api-key." in out.stdout
    assert "THIRD False" in out.stdout
