"""``%agent_key`` in a real kernel: the key typed at a getpass prompt is stored outside the
notebook, turns use it, and neither the cell's outputs, the model's requests nor the store
hold it; without a key a turn fails at once with the ways to store one and leaves no session."""

from __future__ import annotations

import json

import duckdb
import pytest

from agent_kernel.testing import call, say
from tests.support.kernel import Kernel

KEY = "sk-ant-api03-" + "s" * 24 + "-typed-at-the-prompt"
NO_KEY = {"ANTHROPIC_API_KEY": "", "ANTHROPIC_AUTH_TOKEN": ""}


@pytest.fixture
def keyless_kernel(scripted_model, agent_db, tmp_path):
    """A kernel with no key in its environment (the scripted model's address, the test's store)."""
    k = Kernel(NO_KEY, cwd=str(tmp_path))
    try:
        k.ok("%load_ext agent_kernel")
        yield k
    finally:
        k.shutdown()


def outputs(execution) -> str:
    return json.dumps([m["content"] for m in execution.messages])


def sent_key(headers: dict[str, str]) -> str | None:
    """The key a request carried (``x-api-key``, or ``Authorization: Bearer`` as SDK 2 sends it)."""
    lower = {name.lower(): value for name, value in headers.items()}
    return lower.get("x-api-key") or lower.get("authorization", "").removeprefix("Bearer ") or None


def stored_text(agent_db) -> str:
    """Every row of every table of the agent's DuckDB file, as text."""
    with duckdb.connect(str(agent_db), read_only=True) as con:
        tables = [t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        return "\n".join(repr(con.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables)


def test_a_typed_key_is_used_by_turns_and_held_by_no_output_request_or_row(
    keyless_kernel, scripted_model, agent_db, home
):
    k = keyless_kernel
    asked = k.execute("%agent_key", answer=KEY)
    assert asked.status == "ok", asked.errors
    [prompt] = [m for m in asked.messages if m["msg_type"] == "input_request"]
    assert prompt["content"]["password"] is True  # typed, not echoed
    assert "Key stored in the file" in asked.stdout and KEY not in outputs(asked)
    assert (home / "anthropic-api-key").read_text().strip() == KEY
    scripted_model.add(call("run_code", code="import os\nprint(os.environ['ANTHROPIC_API_KEY'])"), say("Printed."))
    turn = k.ok("%agent print the key")
    assert scripted_model.headers and all(sent_key(h) == KEY for h in scripted_model.headers)
    assert KEY not in json.dumps(scripted_model.requests)  # the printed key reached the model redacted
    assert "[secret ANTHROPIC_API_KEY]" in json.dumps(scripted_model.requests[-1])
    status = k.ok("%agent_key --status")
    assert "Key stored in the file" in status.stdout and KEY not in outputs(status)
    k.shutdown()
    assert KEY not in stored_text(agent_db)
    assert turn.status == "ok"


def test_status_and_forget(keyless_kernel, home):
    k = keyless_kernel
    assert "No key" in k.ok("%agent_key --status").stdout
    k.ok("%agent_key", answer=KEY)
    forgot = k.ok("%agent_key --forget")
    assert "Removed the stored key" in forgot.stdout and not (home / "anthropic-api-key").exists()
    assert "No key was stored" in k.ok("%agent_key --forget").stdout
    wrong = k.execute("%agent_key --show")
    assert wrong.status == "error" and "Usage: %agent_key" in wrong.stderr


def test_without_a_key_a_turn_fails_at_once_and_leaves_no_session(keyless_kernel, scripted_model, agent_db):
    failed = keyless_kernel.execute("%agent hello")
    assert failed.status == "error" and failed.stderr.startswith("UsageError: No Anthropic API key")
    assert "%agent_key" in failed.stderr and "agent-kernel key set" in failed.stderr and "%env" not in failed.stderr
    assert scripted_model.requests == []
    keyless_kernel.shutdown()
    if not agent_db.exists():
        return  # the store was never opened
    with duckdb.connect(str(agent_db), read_only=True) as con:
        tables = {t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        states = con.execute("SELECT state FROM sessions").fetchall() if "sessions" in tables else []
    assert ("error",) not in states


def test_under_papermill_it_says_to_use_the_command(keyless_kernel, home):
    refused = keyless_kernel.execute("%agent_key", allow_stdin=False)
    assert refused.status == "error" and "agent-kernel key set" in refused.stderr
    assert not (home / "anthropic-api-key").exists()


def test_code_in_a_turn_cannot_store_or_forget_the_key(kernel, scripted_model, home):
    scripted_model.add(
        call("run_code", code="get_ipython().run_line_magic('agent_key', '--forget')"), say("Could not.")
    )
    kernel.ok("%agent forget the key")
    result = json.loads(scripted_model.requests[1]["messages"][-1]["content"][0]["content"])
    assert result["success"] is False and "%agent_key is refused here" in result["error"]["message"]


def test_help_is_the_docstring(keyless_kernel):
    helped = keyless_kernel.ok("print(get_ipython().find_line_magic('agent_key').__doc__)")
    assert "outside every notebook" in helped.stdout and "agent-kernel key set" in helped.stdout


def test_papermill_runs_use_the_key_stored_from_a_terminal_and_their_outputs_hold_it_nowhere(
    scripted_model, agent_db, home, tmp_path, monkeypatch
):
    """As the scheduler runs a notebook: papermill, no stdin, no key in the environment."""
    import subprocess
    import sys

    import papermill

    from tests.support.notebooks import write_notebook

    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    command = [sys.executable, "-m", "agent_kernel.cli", "key", "set"]
    subprocess.run(command, input=KEY, text=True, check=True, capture_output=True, timeout=120)
    notebook = write_notebook(tmp_path / "report.ipynb", "%load_ext agent_kernel", "%agent summarise the report")
    scripted_model.add(say("The report is fine."))
    out = tmp_path / "report-out.ipynb"
    papermill.execute_notebook(str(notebook), str(out), kernel_name="python3", progress_bar=False, cwd=str(tmp_path))
    assert "The report is fine." in out.read_text() and KEY not in out.read_text()
    assert scripted_model.headers and all(sent_key(h) == KEY for h in scripted_model.headers)
