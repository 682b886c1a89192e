"""Agent: sessions that outlive kernels, and the Python API outside a notebook."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from agent_kernel.testing import call, fail, say
from tests.support.calls import system_text, texts_of
from tests.support.kernel import Kernel


def shown(execution):
    """Everything a cell shows as text: its displays' last states and its printed output."""
    return "\n".join(execution.final_texts()) + execution.stdout


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
    scripted_model.add(say("one"), say("two"), say("three"), say("four"))
    kernel.ok("%agent --new=project-x remember the colour blue")
    kernel.ok("%agent --new fresh start")
    assert texts_of(scripted_model.requests[-1]) == [("user", "fresh start")]
    other = Kernel({}, cwd=str(tmp_path))
    try:
        other.ok("%load_ext agent_kernel")
        other.ok("%agent --session project-x which colour?")
        assert texts_of(scripted_model.requests[-1])[0] == ("user", "remember the colour blue")
        started = shown(other.ok("%agent --session nope hello"))
        listed = other.ok("%agent_sessions --all").final_texts()[-1]
    finally:
        other.shutdown()
    assert texts_of(scripted_model.requests[-1]) == [("user", "hello")]
    assert "(new session 'nope':" in started
    assert "nope" in listed and "project-x" in listed


def test_session_flag_starts_a_missing_session_then_continues_it(kernel, scripted_model):
    scripted_model.add(say("first answer"), say("second answer"))
    first = shown(kernel.ok("%agent --session daily what is new?"))
    second = shown(kernel.ok("%agent --session daily and now?"))
    assert "(new session 'daily':" in first
    assert "(session 'daily':" in second and "new session" not in second
    missing = kernel.execute("%agent_history --session nope")  # looking does not start one
    assert missing.stderr.startswith("UsageError: No session named 'nope'")
    assert "nope" not in kernel.ok("%agent_sessions --all").final_texts()[-1]
    assert texts_of(scripted_model.requests[-1]) == [
        ("user", "what is new?"),
        ("assistant", "first answer"),
        ("user", "and now?"),
    ]


def test_new_with_a_taken_name_keeps_the_earlier_session(kernel, scripted_model):
    scripted_model.add(say("a"), say("b"), say("c"), say("d"))
    kernel.ok("%agent --new=report first report")
    kernel.ok("%agent --new=report second report")
    assert texts_of(scripted_model.requests[-1]) == [("user", "second report")]
    third = shown(kernel.ok("%agent --new=report third report"))
    assert texts_of(scripted_model.requests[-1]) == [("user", "third report")]
    assert "the earlier one is kept as 'report~2'" in third
    kernel.ok("%agent --session report~1 what did I ask?")
    assert texts_of(scripted_model.requests[-1])[0] == ("user", "first report")
    listed = kernel.ok("%agent_sessions --all").final_texts()[-1]
    assert "report~1" in listed and "report~2" in listed
    both = kernel.execute("%agent --new=x --session y hi")
    assert both.stderr.startswith("UsageError: Use either --new")


def test_history_magic_shows_the_transcript(kernel, scripted_model):
    scripted_model.add(call("run_code", code="total = 40 + 2"), say("The total is **42**."))
    kernel.ok("%agent add it up")
    history = kernel.ok("%agent_history").final_texts("text/plain")[-1]
    assert "**You**" in history and "add it up" in history
    assert "total = 40 + 2" in history and "The total is **42**." in history
    last = kernel.ok("%agent_history 1").final_texts("text/plain")[-1]
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


SEVERAL_RUNS = textwrap.dedent(
    """
    import asyncio
    from agent_kernel import Agent
    agent = Agent()
    for prompt in ["first", "second", "third"]:
        result = agent.run(prompt)
        print("TURN", prompt, result.state, result.model_calls)
    result = asyncio.run(agent.arun("fourth"))  # a loop the caller made, not run()'s
    print("TURN fourth", result.state, result.model_calls)
    result = agent.run("fifth")
    print("TURN fifth", result.state, result.model_calls)
    """
)


def test_several_runs_in_a_script_send_one_request_per_model_call(scripted_model, agent_db, tmp_path):
    scripted_model.add(
        say("one"),
        say("two"),
        call("run_code", code="x = 3"),
        say("three"),
        say("four"),
        call("run_code", code="y = 5"),
        say("five"),
    )
    out = subprocess.run(
        [sys.executable, "-c", SEVERAL_RUNS], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert out.returncode == 0, out.stderr
    turns = [line.split() for line in out.stdout.splitlines() if line.startswith("TURN")]
    assert turns == [
        ["TURN", "first", "idle", "1"],
        ["TURN", "second", "idle", "1"],
        ["TURN", "third", "idle", "2"],
        ["TURN", "fourth", "idle", "1"],
        ["TURN", "fifth", "idle", "2"],
    ]
    last_said = [texts_of(request)[-1] for request in scripted_model.requests]
    assert last_said == [
        ("user", "first"),
        ("user", "second"),
        ("user", "third"),
        ("user", "tool_result"),
        ("user", "fourth"),
        ("user", "fifth"),
        ("user", "tool_result"),
    ]


FAILING_SCRIPT = textwrap.dedent(
    """
    from agent_kernel import Agent
    from agent_kernel.errors import TurnFailedError
    agent = Agent()
    result = agent.run("first")
    print("RESULT", result.failed, result.ending, result.state, repr(result.error))
    try:
        agent.run("second", check=True)
    except TurnFailedError as exc:
        print("RAISED", exc.ending, str(exc))
    print("THIRD", agent.run("third").failed)
    """
)


def test_agent_run_returns_a_failed_turn_and_raises_it_with_check(scripted_model, agent_db, tmp_path):
    scripted_model.add(
        fail(400, "invalid_request_error", "prompt is too long: 215000 tokens > 200000 maximum"),
        fail(401, "authentication_error", "invalid x-api-key"),
        say("Fine again."),
    )
    out = subprocess.run(
        [sys.executable, "-c", FAILING_SCRIPT], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert out.returncode == 0, out.stderr
    [result] = [line for line in out.stdout.splitlines() if line.startswith("RESULT")]
    assert result.startswith(
        "RESULT True model_error error 'Model request failed (400 invalid_request_error): prompt is too long"
    )
    assert "start a new one with %agent --new" in result  # this 400 is about the prompt's length
    assert "RAISED model_error Model request failed (401 authentication_error): invalid x-api-key." in out.stdout
    assert "THIRD False" in out.stdout


def test_a_turn_starts_from_memory_while_the_store_is_unchanged_and_rereads_it_after_a_write(
    shell_agent, scripted_model, agent_db
):
    from agent_kernel.store import Store
    from agent_kernel.store.memories import Memories
    from agent_kernel.store.sessions import Sessions

    scripted_model.add(say("One."), say("Two."), say("Three."))
    shell_agent.ok("first")
    store = shell_agent.agent.store
    changes = store.changes
    shell_agent.ok("second")
    # The second turn opened the file only for its own (mirrored) writes ...
    assert store.changes == changes
    assert texts_of(scripted_model.requests[1]) == [("user", "first"), ("assistant", "One."), ("user", "second")]
    # ... and they are on disk when the turn has ended.
    with Store(agent_db).connect(read_only=True) as con:
        sessions = Sessions(con)
        (session,) = sessions.list()
        assert [m.role for m in sessions.messages(session.id)] == ["user", "assistant"] * 2
        assert session.tokens_used == shell_agent.agent.last_result.session_tokens
    # Another writer (a second kernel, a script) changes the file: the next turn reads it again.
    with Store(agent_db).connect() as con:
        Memories(con).remember("The user likes short answers.")
    shell_agent.ok("third")
    assert store.changes > changes
    assert "likes short answers" in system_text(scripted_model.requests[2])


def test_a_new_session_leaves_the_agent_tools_as_read_until_another_writer_stores_one(
    shell_agent, scripted_model, agent_db
):
    from agent_kernel.store import Store
    from agent_kernel.store.agent_tools import AgentTools, ToolVersion
    from tests.support.calls import offered

    agent = shell_agent.agent
    agent.config.tool_groups = ["code", "tools"]
    agent.config.summary_idle_minutes = 0  # no summary of the first session (a write of its own)
    scripted_model.add(say("One."), say("Two."), say("Three."))
    shell_agent.ok("first")
    agent.start_session("second")  # what %agent --new does: a write, the session's start read
    store = agent.store
    opened: list[dict] = []
    connect = store.connect

    def counted(**options):
        opened.append(options)
        return connect(**options)

    store.connect = counted  # type: ignore[method-assign]
    shell_agent.ok("in the new session")
    # Neither the session's start nor the agent's tools were read again: only the turn's
    # own (mirrored) writes opened the file.
    assert opened and all(options.get("mirrored") for options in opened)
    # Another writer stores a tool: the next turn reads the tools again and offers it.
    with Store(agent_db).connect() as con:
        AgentTools(con).save(ToolVersion("double", 1, "Doubles x.", {"type": "object"}, "return 2", False, False))
    shell_agent.ok("third")
    assert "double" in offered(scripted_model.requests[-1])
    assert "double" not in offered(scripted_model.requests[-2])


def test_a_skill_added_to_the_folder_between_turns_is_in_the_next_prompt(shell_agent, scripted_model, tmp_path):
    shell_agent.agent.config.skills_dir = str(tmp_path / "skills")
    scripted_model.add(say("One."), say("Two."), say("Three."))
    shell_agent.ok("first")
    store = shell_agent.agent.store
    changes = store.changes
    shell_agent.ok("second")
    assert store.changes == changes  # the folder did not change: the turn started from memory
    folder = tmp_path / "skills" / "charts"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: charts\ndescription: House chart style\n---\nUse plotly.\n")
    shell_agent.ok("third")
    assert "- charts: House chart style" in system_text(scripted_model.requests[-1])


NO_KEY_SCRIPT = textwrap.dedent(
    """
    import os, subprocess, sys
    from agent_kernel import Agent
    from agent_kernel.errors import AgentKernelError
    from agent_kernel.store import Store
    from agent_kernel.store.sessions import Sessions

    def sessions():
        with Store(os.environ["AGENT_KERNEL_DB"]).connect(read_only=True) as con:
            found = Sessions(con)
            return [(s.name, s.state, len(found.messages(s.id))) for s in found.list()]

    agent = Agent()
    try:
        agent.run("first")
    except AgentKernelError as exc:
        print("REFUSED", type(exc).__name__, str(exc))
    print("SESSIONS", sessions())
    # The person follows the sentence: `agent-kernel key set` in a terminal, then runs again.
    key_set = [sys.executable, "-m", "agent_kernel.cli", "key", "set"]
    stored = subprocess.run(key_set, input="sk-ant-api03-" + "k" * 30, capture_output=True, text=True)
    print("STORED", stored.returncode, stored.stderr.strip())
    result = agent.run("second")
    print("RESULT", result.state, repr(result.text))
    print("SESSIONS", sessions())
    """
)


def test_agent_run_without_a_key_refuses_with_one_sentence_and_runs_once_a_key_is_stored(
    scripted_model, agent_db, tmp_path
):
    scripted_model.add(say("Now with a key."))
    home = tmp_path / "person"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")}
    env.pop("AGENT_KERNEL_KEY_STORED", None)
    # A person's machine with no key anywhere: none in the environment, none stored, no keyring.
    env |= {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local")}
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
    out = subprocess.run(
        [sys.executable, "-c", NO_KEY_SCRIPT], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    [refused] = [line for line in lines if line.startswith("REFUSED")]
    assert refused.startswith("REFUSED MissingKeyError No Anthropic API key: set ANTHROPIC_API_KEY")
    assert "%agent_key" in refused and "`agent-kernel key set`" in refused
    assert "Traceback" not in out.stderr
    # Nothing of the refused turn is stored: no session, no message, no error state.
    before, after = (line for line in lines if line.startswith("SESSIONS"))
    assert before == "SESSIONS []"
    assert "STORED 0" in out.stdout
    assert "RESULT idle 'Now with a key.'" in out.stdout
    assert after.endswith(", 'idle', 2)]"), after  # one session: the second prompt and its answer
    [request] = scripted_model.requests
    assert texts_of(request) == [("user", "second")]
