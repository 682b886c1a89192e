"""The %agent magics: parsing, interpolation, the awaited rewrite, and their use in a kernel."""

from __future__ import annotations

import textwrap

import pytest
from IPython.core.error import UsageError

from agent_kernel.magics.agent import FLAGS, AgentMagics, flags_help, interpolate, parse_agent_call, rewrite_agent_cells
from agent_kernel.testing import call, say
from tests.support.calls import texts_of
from tests.support.capabilities import needs_widget_replies

# -- parsing ------------------------------------------------------------------------------


def test_prompt_keeps_its_punctuation():
    parsed = parse_agent_call("load sales.csv, then -- what's the total? (in $)")
    assert parsed.prompt == "load sales.csv, then -- what's the total? (in $)"
    assert parsed.new is None and parsed.session is None


def test_flags_before_the_prompt():
    parsed = parse_agent_call("--session work -o answer --model claude-x --token-limit 5_000 --approve ASK sum it")
    assert (parsed.session, parsed.output, parsed.model, parsed.token_limit, parsed.approve) == (
        "work",
        "answer",
        "claude-x",
        5000,
        "ASK",
    )
    assert parsed.prompt == "sum it"


def test_the_agent_help_names_the_api_key_the_other_magics_and_the_panel(shell):
    doc = shell.find_magic("agent").__doc__
    assert "ANTHROPIC_API_KEY" in doc
    ours = sorted(name for name in shell.magics_manager.magics["line"] if name.startswith("agent_"))
    assert len(ours) >= 10
    for name in ours:
        assert f"%{name} " in doc, name
    assert (
        "Agent chat (the right sidebar)" in doc
        and "Agent dashboard (the left sidebar)" in doc
        and "Schedule this notebook…" in doc
    )
    assert "--approve ask" in doc and 'approve "auto" (the default)' in doc


@pytest.mark.parametrize(
    ("line", "new", "prompt"),
    [
        ("--new clean the data", True, "clean the data"),
        ("--new=cleanup clean the data", "cleanup", "clean the data"),
        ("--new cleanup -- clean the data", "cleanup", "clean the data"),
        ("--new", True, ""),
        ("-- --new is a flag", None, "--new is a flag"),
        ("- first item", None, "- first item"),
        ("-5 degrees is cold", None, "-5 degrees is cold"),
    ],
)
def test_new_and_separator(line, new, prompt):
    parsed = parse_agent_call(line)
    assert (parsed.new, parsed.prompt) == (new, prompt)


def test_cell_magic_line_holds_only_flags():
    parsed = parse_agent_call("--new report -o out", "Write the report.\nUse {df}.")
    assert (parsed.new, parsed.output, parsed.prompt) == ("report", "out", "Write the report.\nUse {df}.")
    with pytest.raises(UsageError, match="prompt goes in the cell body"):
        parse_agent_call("summarise this", "body")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--colour red hi", "Unknown flag '--colour'"),
        ("-o 1x hi", "-o needs a Python variable name"),
        ("--token-limit lots hi", "--token-limit needs a whole number"),
        ("--token-limit 0 hi", "must be positive"),
        ("--approve sometimes hi", "--approve must be one of auto, ask, read-only"),
        ("--session", "--session needs a value"),
    ],
)
def test_bad_flags_are_usage_errors(line, message):
    with pytest.raises(UsageError, match=message):
        parse_agent_call(line)


SAMPLES = {"new": "fresh", "session": "work", "output": "answer", "model": "claude-x", "token_limit": "7",
           "approve": "ask", "thinking": "high"}  # fmt: skip


def test_every_declared_flag_is_parsed_and_documented():
    doc = AgentMagics.agent.__doc__
    assert "{flags}" not in doc and textwrap.indent(flags_help(), " " * 8) in doc
    words = " ".join(doc.split())
    for flag in FLAGS:
        assert " ".join(f"{flag.names[0]} {flag.value} {flag.help}".split()) in words, flag
        for name in flag.names if flag.field else ():
            parsed = parse_agent_call(f"{name}={SAMPLES[flag.field]} do it")
            expected = int(SAMPLES[flag.field]) if flag.field == "token_limit" else SAMPLES[flag.field]
            assert (getattr(parsed, flag.field), parsed.prompt) == (expected, "do it"), name
    assert [f.field for f in FLAGS if f.field] == list(SAMPLES)


@pytest.fixture
def shell():
    """IPython's own shell in this process with the extension loaded (no kernel needed)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "agent_kernel")
    yield shell
    shell.run_line_magic("unload_ext", "agent_kernel")


@pytest.mark.parametrize(
    ("magic", "line", "message"),
    [
        ("agent_history", "lots", "argument N: invalid int value: 'lots'. Usage: %agent_history [--session NAME] [N]"),
        ("agent_history", "-3", "N must be a number of messages (0 or more)."),
        ("agent_history", "--session", "argument --session: expected one argument"),
        ("agent_history", "2 3", "unrecognized arguments: 3"),
        ("agent_secret", "", "the following arguments are required: NAME. Usage: %agent_secret [--host HOST] NAME"),
        ("agent_secret", "A B", "unrecognized arguments: B"),
        ("agent_secret", "1x", "Usage: %agent_secret NAME [--host HOST ...] (NAME: a valid environment variable name)"),
        ("agent_secret", "A --host", "argument --host: expected one argument"),
        (
            "agent_secret",
            "A --host https://api.example.com",
            "--host: 'https://api.example.com' is not a host: give the name alone",
        ),
        ("agent_secret", "A --host a.example --host *.example", "--host: '*.example' is not a host"),
        ("agent_secret", "A --host a.example:99999", "--host: 'a.example:99999' has no valid port"),
        ("agent_sessions", "--colour", "unrecognized arguments: --colour. Usage: %agent_sessions [--all]"),
    ],
)
def test_bad_arguments_of_the_companion_magics_are_usage_errors(shell, magic, line, message):
    with pytest.raises(UsageError) as raised:
        shell.run_line_magic(magic, line)
    assert str(raised.value).startswith(message)
    assert shell.find_magic("agent").__self__._agent is None  # refused before the agent was made


def test_binding_a_secret_from_code_inside_a_turn_is_refused_before_anything_is_asked(shell):
    from agent_kernel.authority import turn_running

    with turn_running(), pytest.raises(UsageError) as raised:
        shell.run_line_magic("agent_secret", "TOK --host evil.example")
    assert str(raised.value).startswith(
        "%agent_secret is refused here: Trust changes (clearing a taint, trusting a tool, binding a secret"
    )
    assert shell.find_magic("agent").__self__._agent is None  # refused before the agent (or getpass) was reached


def test_companion_magics_help_shows_their_arguments(shell):
    history = shell.find_magic("agent_history").__doc__
    assert "%agent_history [--session NAME] [N]" in history and "The last N messages" in history
    secret = shell.find_magic("agent_secret").__doc__
    assert (
        "%agent_secret [--host HOST] NAME" in secret
        and "binds the secret to its hosts" in secret
        and "AgentKernel.secret_hosts" in secret
    )


# -- interpolation ------------------------------------------------------------------------


def test_interpolation_like_jupyter_ai():
    ns = {"name": "sales", "n": 3, "df": type("F", (), {"shape": (10, 2)})(), "Out": {3: "forty"}}
    assert interpolate("use {name} ({n} rows)", ns) == "use sales (3 rows)"
    assert interpolate("shape {df.shape}, out {Out[3]}", ns) == "shape (10, 2), out forty"
    assert interpolate('literal {{name}} and json {"a": 1}', ns) == 'literal {name} and json {"a": 1}'
    assert interpolate("unknown {missing} stays", ns) == "unknown {missing} stays"


# -- the awaited rewrite ------------------------------------------------------------------


def test_rewrite_line_and_cell():
    lines = ["x = 1\n", "%agent look at {x}\n", "%agent_sessions\n", "print(x)\n"]
    out = rewrite_agent_cells(lines)
    assert out[0] == "x = 1\n" and out[2] == "%agent_sessions\n" and out[3] == "print(x)\n"
    assert out[1].startswith("await ") and "run_agent_magic('look at {x}')" in out[1]
    cell = rewrite_agent_cells(["%%agent --new r\n", "line one\n", "line 'two'\n"])
    assert cell == [
        "await __import__('agent_kernel.magics.agent', fromlist=['run_agent_magic'])"
        ".run_agent_magic('--new r', \"line one\\nline 'two'\\n\")\n"
    ]


def test_rewrite_leaves_other_cells_and_help_alone():
    assert rewrite_agent_cells(["%%bash\n", "%agent hi\n"]) == ["%%bash\n", "%agent hi\n"]
    assert rewrite_agent_cells(["%agent?\n"]) == ["%agent?\n"]
    assert rewrite_agent_cells(["    %agent indented\n"]) == ["    %agent indented\n"]


# -- in a kernel --------------------------------------------------------------------------


def test_output_variable_and_interpolation(kernel, scripted_model):
    scripted_model.add(say('```json\n{"total": 42, "unit": "EUR"}\n```'), say("plain answer"))
    kernel.ok("region = 'North'")
    kernel.ok("%agent -o result total for {region}, as JSON")
    assert scripted_model.requests[0]["messages"][-1]["content"][-1]["text"] == "total for North, as JSON"
    assert kernel.value("result") == {"total": 42, "unit": "EUR"}
    kernel.ok("%%agent -o text_result\nSay something about {{braces}}.")
    assert scripted_model.requests[1]["messages"][-1]["content"][-1]["text"] == "Say something about {braces}."
    assert kernel.value("text_result") == "plain answer"


def test_usage_errors_show_no_traceback(kernel):
    # IPython prints a UsageError as one line on stderr, with no traceback.
    result = kernel.execute("%agent --colour red hi")
    assert result.status == "error" and result.errors == []
    assert result.stderr.strip().splitlines() == [
        "UsageError: Unknown flag '--colour' for %agent. Flags: --new [NAME], --session NAME, "
        "-o VAR, --model M, --token-limit N, --approve MODE, --think [LEVEL]."
    ]
    empty = kernel.execute("%agent")
    assert empty.stderr.startswith("UsageError: Give the agent a prompt")


def test_agent_inside_a_block_explains_itself(kernel):
    result = kernel.execute("if True:\n    %agent hello")
    assert result.stderr.startswith("UsageError: %agent must be awaited")
    assert "top level of a cell" in result.stderr


def test_new_session_without_prompt(kernel, scripted_model):
    kernel.ok("%agent --new=notes")
    scripted_model.add(say("hi"))
    kernel.ok("%agent hello")
    assert "notes" in kernel.ok("%agent_sessions").final_texts()[-1]
    again = kernel.ok("%agent --new=notes").stdout
    assert "Started session 'notes'" in again and "The earlier 'notes' is kept as 'notes~1'." in again


def test_tool_called_through_run_code_sees_variables(kernel, scripted_model):
    scripted_model.add(call("run_code", code="answer = 6 * 7"), say("done"))
    kernel.ok("%agent compute")
    assert kernel.value("answer") == 42


def test_agent_cannot_start_a_turn_inside_its_own_turn(kernel, scripted_model):
    scripted_model.add(call("run_code", code="%agent start another turn"), say("understood"))
    kernel.execute("%agent nest")
    result = scripted_model.requests[1]["messages"][-1]["content"][0]["content"]
    assert '"success": false' in result and "already running" in result
    assert len(scripted_model.requests) == 2  # the inner %agent never reached the model


# -- managing sessions ----------------------------------------------------------------------


def stored_counts(name):
    """Rows the agent's DuckDB file holds for the session called ``name`` (None: no session)."""
    import os

    from agent_kernel.store import Store
    from agent_kernel.store.sessions import Sessions

    with Store(os.environ["AGENT_KERNEL_DB"]).connect() as con:
        sessions = Sessions(con)
        found = sessions.by_name(name)
        return None if found is None else (found.state, sessions.stored_rows(found.id))


def test_rename_and_archive_sessions(kernel, scripted_model):
    scripted_model.add(say("noted"), say("again"), say("fresh"), say("reopened"))
    kernel.ok("%agent --session draft remember 7")
    renamed = kernel.ok("%agent_sessions --rename draft 'final plan'")
    assert renamed.stdout.strip() == "Renamed session 'draft' to 'final plan'."
    assert stored_counts("draft") is None and stored_counts("final plan")[1]["messages"] == 2
    kernel.ok("%agent and now?")  # the renamed session is still the current one
    assert texts_of(scripted_model.requests[-1])[0] == ("user", "remember 7")
    archived = kernel.ok('%agent_sessions --archive "final plan"')
    assert "Archived session 'final plan' (state completed)" in archived.stdout
    assert stored_counts("final plan")[0] == "completed"
    kernel.ok("%agent start over")  # an archived session is not continued by default
    assert texts_of(scripted_model.requests[-1]) == [("user", "start over")]
    listed = kernel.ok("%agent_sessions").final_texts()[-1]
    assert "completed" in listed and "final plan" in listed
    kernel.ok('%agent --session "final plan" reopen it')  # naming it reopens it
    assert texts_of(scripted_model.requests[-1])[0] == ("user", "remember 7")
    assert stored_counts("final plan")[0] == "idle"

    for line, message in [
        ("--rename nope other", "No session named 'nope'"),
        ("--rename 'final plan'", "argument --rename: expected 2 arguments"),
        ("--archive missing", "No session named 'missing'"),
        ("--archive a --delete b", "one of --rename, --archive and --delete at a time"),
        ("--all --archive a", "--all lists sessions"),
        ("--yes", "--yes goes with --delete NAME"),
        ("--colour", "unrecognized arguments: --colour"),
    ]:
        bad = kernel.execute(f"%agent_sessions {line}")
        assert bad.status == "error" and bad.errors == [], line
        assert bad.stderr.startswith("UsageError: ") and message in bad.stderr, (line, bad.stderr)
    kernel.ok("%agent --new=other")
    taken = kernel.execute("%agent_sessions --rename 'final plan' other")
    assert taken.stderr.startswith("UsageError: A session named 'other' already exists")
    empty = kernel.execute("%agent_sessions --rename other '  '")
    assert empty.stderr.startswith("UsageError: The new session name is empty.")


def test_delete_asks_refuses_headless_and_removes_the_rows(kernel, scripted_model):
    scripted_model.add(call("run_code", code="n = 1"), say("done"), say("second"))
    kernel.ok("%agent --session scratch set n")
    kernel.ok("%agent --session keep hello")
    before = {"messages": 4, "tool_calls": 1, "code_executions": 1, "model_calls": 2}
    assert stored_counts("scratch") == ("idle", before)

    headless = kernel.execute("%agent_sessions --delete scratch", allow_stdin=False)
    assert headless.status == "error" and headless.errors == []
    assert "nobody can answer here" in headless.stderr and "add --yes" in headless.stderr
    declined = kernel.ok("%agent_sessions --delete scratch", answer="n")
    asked = declined.of_type("input_request")[0]["content"]["prompt"]
    assert asked.startswith("Delete session 'scratch' with 4 messages, 1 tool call and 1 code run?")
    assert "Kept session 'scratch'." in declined.stdout
    assert stored_counts("scratch") == ("idle", before)

    confirmed = kernel.ok("%agent_sessions --delete scratch", answer="yes")
    assert "Deleted session 'scratch'" in confirmed.stdout
    assert stored_counts("scratch") is None
    # keep's first turn also summarised the notebook's previous session (scratch): two calls.
    assert stored_counts("keep") == ("idle", {"messages": 2, "tool_calls": 0, "code_executions": 0, "model_calls": 2})

    kernel.ok("%agent --new=gone")
    forced = kernel.ok("%agent_sessions --delete gone --yes", allow_stdin=False)
    assert "Deleted session 'gone'" in forced.stdout and stored_counts("gone") is None
    missing = kernel.execute("%agent_sessions --delete gone --yes")
    assert missing.stderr.startswith("UsageError: No session named 'gone'")


def test_agent_sessions_shows_sub_sessions_indented_under_their_parent(shell_agent):
    from agent_kernel.store.sessions import Sessions

    with shell_agent.agent.store.connect() as con:
        sessions = Sessions(con)
        first = sessions.create("first", notebook="a.ipynb")
        child = sessions.create("first/sub-1", notebook="a.ipynb", parent_id=first.id)
        sessions.create("first/sub-1/sub-2", notebook="a.ipynb", parent_id=child.id)
        sessions.create("other", notebook="a.ipynb")
        sessions.create("first/sub-3", notebook="a.ipynb", parent_id=first.id)
    listed = repr(AgentMagics(shell_agent.shell, shell_agent.agent.config).agent_sessions("--all"))
    names = [line.split("  a.ipynb")[0].rstrip() for line in listed.splitlines()[2:]]
    assert names == [
        "other",
        "first",
        "    ↳ first/sub-3",
        "    ↳ first/sub-1",
        "        ↳ first/sub-1/sub-2",
    ]


@needs_widget_replies
def test_stop_clicked_as_the_cell_starts_stops_the_turn_before_the_model_answers(kernel, scripted_model):
    """The Stop button is there before the turn reads its session or imports the SDK; a
    click then is kept and stops the turn as soon as it can be stopped."""
    import time

    from tests.support.frontend import FrontEnd

    scripted_model.add(say("Too late.", delay=20))
    front = FrontEnd(kernel)
    front.answer["StopButton"] = lambda f, button: f.custom(button, type="stop")
    started = time.monotonic()
    result = kernel.execute("%agent take your time", on_message=front.hook)
    assert time.monotonic() - started < 15  # not the model's 20 s
    assert [e["evalue"] for e in result.errors] == ["■ Stopped."]
    assert scripted_model.requests == []  # stopped before its first model call
    assert "Too late." not in "\n".join(result.final_texts())
    # The button was told the turn stopped, so it does not interrupt the kernel as well.
    [button] = front.of_kind("StopButton")
    assert {"type": "stopped"} in button.messages
