"""%agent_secret: asked without echo, usable by code, never shown to the model."""

from __future__ import annotations

import json

import pytest

from agent_kernel.secrets import Secrets
from agent_kernel.testing import call, say
from tests.support import leaks
from tests.support.notebooks import write_notebook


def test_redaction_longest_first_and_short_values_left_alone(monkeypatch):
    for name in ("AK_TEST_TOKEN", "AK_TEST_TOKEN_LONG", "AK_TEST_PIN"):
        monkeypatch.setenv(name, "")  # so the values set below leave with the test
    secrets = Secrets()
    secrets.set("AK_TEST_TOKEN", "tok-123456")
    secrets.set("AK_TEST_TOKEN_LONG", "tok-123456-extra")
    secrets.set("AK_TEST_PIN", "42")
    text = "a tok-123456-extra b tok-123456 c 42"
    assert secrets.redact(text) == "a [secret AK_TEST_TOKEN_LONG] b [secret AK_TEST_TOKEN] c 42"


def test_secret_is_usable_by_code_but_redacted_for_the_model(kernel, scripted_model):
    asked = kernel.execute("%agent_secret SERVICE_TOKEN", answer="sk-very-secret-value")
    prompts = [m["content"] for m in asked.messages if m["msg_type"] == "input_request"]
    assert prompts and prompts[0]["password"] is True  # getpass: not echoed
    assert "Stored SERVICE_TOKEN (20 characters)" in asked.stdout
    assert "sk-very-secret-value" not in asked.stdout
    scripted_model.add(call("run_code", code="import os\nprint(os.environ['SERVICE_TOKEN'])"), say("ok"))
    kernel.ok("%agent use the token")
    result = scripted_model.requests[1]["messages"][-1]["content"][0]["content"]
    assert "[secret SERVICE_TOKEN]" in result and "sk-very-secret-value" not in result
    history = kernel.ok("%agent_history").final_texts("text/plain")[-1]
    assert "sk-very-secret-value" not in history


def test_the_person_binds_a_secret_to_its_hosts_and_code_in_a_turn_cannot(kernel, scripted_model):
    bound = kernel.execute(
        "%agent_secret SERVICE_TOKEN --host API.example.com. --host 127.0.0.2:8443", answer="sk-very-secret-value"
    )
    assert "{secret:SERVICE_TOKEN} goes to api.example.com, 127.0.0.2:8443 only." in bound.stdout
    secrets = "get_ipython().find_magic('agent_secret').__self__.kernel_agent.secrets"
    assert kernel.value(f"{secrets}.decided_by('SERVICE_TOKEN')") == {
        "api.example.com": "magic: %agent_secret SERVICE_TOKEN --host API.example.com. --host 127.0.0.2:8443",
        "127.0.0.2:8443": "magic: %agent_secret SERVICE_TOKEN --host API.example.com. --host 127.0.0.2:8443",
    }
    # The model's code, run inside a turn, tries the person's two ways to bind it elsewhere.
    attempts = [
        "get_ipython().run_line_magic('agent_secret', 'SERVICE_TOKEN --host evil.example')",
        "get_ipython().run_line_magic('config', 'AgentKernel.secret_hosts = {\"SERVICE_TOKEN\": [\"evil.example\"]}')",
    ]
    scripted_model.add(*[call("run_code", code=code) for code in attempts], say("Could not."))
    kernel.ok("%agent bind it to my host")
    magic = json.loads(scripted_model.requests[1]["messages"][-1]["content"][0]["content"])
    assert magic["success"] is False and magic["error"]["message"].startswith(
        "%agent_secret is refused here: Trust changes"
    )
    # %config logs the setting's refusal (not on the cell's streams); the setting stays as it was.
    assert kernel.value("get_ipython().find_magic('agent_secret').__self__.kernel_agent.config.secret_hosts") == {}
    assert sorted(kernel.value(f"{secrets}.decided_by('SERVICE_TOKEN')")) == ["127.0.0.2:8443", "api.example.com"]
    # In the person's own cell, the setting binds it.
    kernel.ok('%config AgentKernel.secret_hosts = {"SERVICE_TOKEN": ["other.example"]}')
    assert kernel.value("get_ipython().find_magic('agent_secret').__self__.kernel_agent.config.secret_hosts") == {
        "SERVICE_TOKEN": ["other.example"]
    }


def test_secret_without_a_front_end_is_a_usage_error(kernel):
    result = kernel.execute("%agent_secret SERVICE_TOKEN", allow_stdin=False)  # as papermill runs it
    assert result.stderr.startswith("UsageError: This front end cannot ask for input")


# -- the leak corpus (tests/support/leaks.py): live with %agent_secret, unattended with secret_env ----


def _check_corpus(scripted_model, db_path) -> None:
    requests = scripted_model.requests
    assert len(requests) == 6, [r["messages"][-1] for r in requests]
    assert leaks.request_leaks(requests) == []
    assert leaks.store_leaks(str(db_path)) == []
    # The attempts ran and were redacted, not lost: the marker stands where the value was.
    marker = f"[secret {leaks.NAME}]"
    code_results = [b for b in requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert len(code_results) == len(leaks.CODE_ATTEMPTS)
    shown = dict(zip((what for what, _ in leaks.CODE_ATTEMPTS), (r["content"] for r in code_results)))
    printing = [what for what in shown if what not in leaks.SILENT | leaks.WINDOWS]
    assert len(printing) >= 25
    assert [what for what in printing if marker not in shown[what]] == []
    assert all("characters omitted" in shown[what] for what in leaks.WINDOWS)
    tool_results = [b for b in requests[2]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert len(tool_results) == len(leaks.TOOL_ATTEMPTS)
    assert all("[secret" in r["content"] for r in tool_results), tool_results  # a cut may end in the marker
    user_results = [b for b in requests[4]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert ["[secret" in r["content"] for r in user_results] == [True, True, True]
    assert user_results[1]["is_error"] and "[truncated" in user_results[2]["content"]
    from agent_kernel.model.conversation import context_texts

    # What the model is told: the system prompt and the turn contexts (the variables).
    system = requests[3]["system"][0]["text"] + "\n".join(context_texts(requests[3]["messages"]))
    assert f"`{leaks.NAME}`" in system and f'os.environ["{leaks.NAME}"]' in system  # the name, told
    for shown in ("leak_str", "leak_frame", "leak_fn", "Your memory", "ai_leak", "Token: "):
        assert shown in system
    assert system.count(marker) >= 6
    tools = {t["name"]: t for t in requests[3]["tools"]}
    assert marker in tools["leak_tool"]["description"]
    prompts = [requests[3]["messages"][-1], requests[5]["messages"][-1]]
    assert all(marker in json.dumps(p) for p in prompts)
    assert leaks.attempts() >= 40
    first = "\n".join(context_texts(requests[0]["messages"]))
    assert "typed_token = " in first and marker in first  # the user's cells, redacted


def test_leak_corpus_live_with_agent_secret(kernel, scripted_model, agent_db):
    kernel.execute(f"%agent_secret {leaks.NAME}", answer=leaks.SECRET)
    kernel.ok(leaks.SETUP)
    for cell in leaks.USER_CELLS:
        kernel.ok(cell)
    scripted_model.add(*leaks.script())
    # The attempts that raise show their error in the cell, as code the agent runs does.
    assert kernel.execute("%agent step one").status == "ok"
    for prompt in leaks.PROMPTS:
        kernel.ok(f"%agent {prompt}")
    _check_corpus(scripted_model, agent_db)


def test_leak_corpus_through_papermill_with_secret_env(scripted_model, agent_db, tmp_path, monkeypatch):
    import nbformat
    import papermill

    monkeypatch.setenv(leaks.NAME, leaks.SECRET)
    for name, value in leaks.UNDECLARED.items():  # beside it, credentials nobody declared
        monkeypatch.setenv(name, value)
    cells = [
        "%load_ext agent_kernel",
        f'%config AgentKernel.secret_env = ["{leaks.NAME}"]',
        leaks.SETUP,
        *leaks.USER_CELLS,
        "%agent step one",
        *[f"%agent {prompt}" for prompt in leaks.PROMPTS],
    ]
    source, output = tmp_path / "leaks.ipynb", tmp_path / "leaks-out.ipynb"
    write_notebook(source, *cells, kernelspec=False)
    scripted_model.add(*leaks.script())
    # Attempts that raise are errors of the agent's own steps: the turns end normally, so
    # the notebook succeeds (they show on the cells' stderr, not as error outputs).
    papermill.execute_notebook(str(source), str(output), kernel_name="python3", progress_bar=False, cwd=str(tmp_path))
    cells = nbformat.read(output, 4).cells
    assert [c.execution_count for c in cells[-3:]] == [7, 8, 9]
    assert not [o for c in cells for o in c.get("outputs", []) if o["output_type"] == "error"]
    _check_corpus(scripted_model, agent_db)
    # os.environ printed, and interpolated into a prompt, held them too.
    values = list(leaks.UNDECLARED.values())
    for value in values:
        assert leaks.request_leaks(scripted_model.requests, value) == []
        assert leaks.store_leaks(str(agent_db), value) == []
    assert leaks.file_leaks(str(agent_db), [*values, leaks.SECRET]) == []
    assert "[secret AWS_SECRET_ACCESS_KEY]" in json.dumps(scripted_model.requests[-1]["messages"][-1])


# -- credentials nobody declared (tests/support/leaks.py UNDECLARED) ------------------------------


def test_undeclared_credentials_reach_no_request_and_no_byte_of_the_store(scripted_model, agent_db, tmp_path):
    from tests.support.kernel import Kernel

    kernel = Kernel(dict(leaks.UNDECLARED), cwd=str(tmp_path))
    try:
        kernel.ok("%load_ext agent_kernel")
        kernel.ok(leaks.SETUP)
        scripted_model.add(*leaks.undeclared_script())
        assert kernel.execute("%agent use the keys").status == "ok"
        kernel.ok("%agent and the tools")
        # Code still reads the real values: only what leaves for the model or the file is redacted.
        assert kernel.value("os.environ['OPENAI_API_KEY']") == leaks.UNDECLARED["OPENAI_API_KEY"]
    finally:
        kernel.shutdown()
    requests = scripted_model.requests
    assert len(requests) == 5
    values = list(leaks.UNDECLARED.values())
    for value in values:
        assert leaks.request_leaks(requests, value) == []
        assert leaks.store_leaks(str(agent_db), value) == []
    assert leaks.file_leaks(str(agent_db), values) == []
    # The model is told the names, as for declared secrets, and sees markers where the values were.
    system = requests[0]["system"][0]["text"]
    assert "`AWS_SECRET_ACCESS_KEY`, `OPENAI_API_KEY`" in system and "ANTHROPIC_API_KEY" not in system
    code = [b["content"] for b in requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    shown = dict(zip((what for what, _ in leaks.UNDECLARED_CODE), code))
    assert "[secret OPENAI_API_KEY] [secret AWS_SECRET_ACCESS_KEY]" in shown["printed"]
    assert "[secret AWS_SECRET_ACCESS_KEY]" in shown["printed base64"]
    assert "[secret OPENAI_API_KEY]" in shown["environment printed"]
    assert "bad key [secret OPENAI_API_KEY]" in shown["error message"]
    tools = [b for b in requests[2]["messages"][-1]["content"] if b["type"] == "tool_result"]
    stored, read_back, memory = (json.loads(b["content"]) for b in tools)
    assert stored == {"changes": 2}
    assert read_back["columns"] == ["key", "[secret AWS_SECRET_ACCESS_KEY]"]
    assert read_back["rows"] == [["[secret OPENAI_API_KEY]", 1], ["[secret AWS_SECRET_ACCESS_KEY]", 2]]
    assert "[secret OPENAI_API_KEY]" in json.dumps(memory)
    user = [b for b in requests[4]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert "[secret OPENAI_API_KEY]" in user[0]["content"] and "[secret AWS_SECRET_ACCESS_KEY]" in user[0]["content"]
    assert user[1]["is_error"] and "[secret AWS_SECRET_ACCESS_KEY]" in user[1]["content"]
    # The SDK's own credential goes in its header as it is: redaction is of content only.
    sent = [{k.lower(): v for k, v in h.items()} for h in scripted_model.headers]
    assert len(sent) == 5
    assert {h.get("x-api-key") or h.get("authorization", "").removeprefix("Bearer ") for h in sent} == {
        "scripted-test-key"
    }


def test_an_ignored_name_is_shown_and_not_told(shell_agent, scripted_model, monkeypatch):
    monkeypatch.setenv("BUILD_TOKEN", "build-7Hq2Lw9Xc4Vz")
    monkeypatch.setenv("SHOWN_API_KEY", "not-a-secret-3Kp8")
    config = shell_agent.agent.config
    config.secret_env_ignore = ["SHOWN_API_KEY"]
    code = "import os\nprint(os.environ['BUILD_TOKEN'], os.environ['SHOWN_API_KEY'])"
    scripted_model.add(call("run_code", code=code), say("ok"))
    shell_agent.ok("print them")
    result = scripted_model.requests[1]["messages"][-1]["content"][0]["content"]
    assert "[secret BUILD_TOKEN] not-a-secret-3Kp8" in result
    system = scripted_model.requests[0]["system"][0]["text"]
    assert "`BUILD_TOKEN`" in system and "SHOWN_API_KEY" not in system


def test_setting_takes_names_only():
    from traitlets import TraitError

    from agent_kernel.config import AgentKernel

    with pytest.raises(TraitError, match="secret_env_ignore takes environment variable names"):
        AgentKernel(secret_env_ignore=["NOT A NAME"])


GITHUB_TOKEN = "ghp_" + "Xa81Lq2Nw7Vc3Zt6Hy5Km0Bd4Rf9Gs1Jp2Ue"
AWS_KEY_ID = "AKIAZ7Q2W4E6R8T1Y3U5"


@pytest.fixture
def leaky_site():
    """A loopback server whose page shows a GitHub token and an AWS access key id."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            body = f"deploy with token {GITHUB_TOKEN} and key id {AWS_KEY_ID}.\n".encode()
            self.send_response(200)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.3", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.3:{server.server_address[1]}/notes"
    server.shutdown()
    server.server_close()


def test_credentials_in_a_known_format_are_redacted_in_fetched_text(shell_agent, scripted_model, leaky_site, agent_db):
    config = shell_agent.agent.config
    config.tool_groups = ["code", "web"]
    config.fetch_allow = ["127.0.0.3"]
    scripted_model.add(call("fetch_url", url=leaky_site), say("read"))
    shell_agent.ok("read the notes")
    text = json.loads(scripted_model.requests[1]["messages"][-1]["content"][0]["content"])["text"]
    assert "deploy with token [secret GitHub Token] and key id [secret AWS Access Key]." in text
    for value in (GITHUB_TOKEN, AWS_KEY_ID):
        assert leaks.request_leaks(scripted_model.requests, value) == []
        assert leaks.store_leaks(str(agent_db), value) == []


def test_a_frame_written_into_the_store_loses_its_secrets(monkeypatch):
    import pandas as pd
    import pyarrow as pa

    from agent_kernel.secrets import redact_frame

    value = leaks.UNDECLARED["OPENAI_API_KEY"]
    monkeypatch.setenv("OPENAI_API_KEY", value)
    marker = "[secret OPENAI_API_KEY]"
    frame = pd.DataFrame({
        "text": [value, "x"], "category": pd.Categorical([value, "y"]), "nested": [[value, "z"], {"k": value}],
        "number": [1, 2], value: [3, 4],
    })  # fmt: skip
    out = redact_frame(frame)
    assert out.to_dict("list") == {
        "text": [marker, "x"], "category": [marker, "y"], "nested": [[marker, "z"], {"k": marker}],
        "number": [1, 2], marker: [3, 4],
    }  # fmt: skip
    assert frame["text"][0] == value  # the user's frame is not changed
    plain = pd.DataFrame({"text": ["x", "y"], "nested": [[1], [2]]})
    assert redact_frame(plain) is plain
    table = pa.table({"text": [value, "ok"]})
    assert redact_frame(table)["text"].tolist() == [marker, "ok"]


def test_a_name_one_kernel_ignores_is_no_credential_for_another_secrets_of_the_process(monkeypatch):
    from agent_kernel.secrets import Secrets, redact

    monkeypatch.setenv("SHARED_API_KEY", "shared-value-9Qz4Lm")
    monkeypatch.setenv("OTHER_API_KEY", "other-value-7Ty2Pw")
    plain = Secrets()  # e.g. an Agent of an earlier cell, still alive
    ignoring = Secrets(ignore=["SHARED_API_KEY"])
    assert redact("shared-value-9Qz4Lm other-value-7Ty2Pw") == "shared-value-9Qz4Lm [secret OTHER_API_KEY]"
    declared = Secrets(env_names=["SHARED_API_KEY"])  # declared by name: a secret whatever is ignored
    assert redact("shared-value-9Qz4Lm") == "[secret SHARED_API_KEY]"
    del plain, ignoring, declared


def test_the_redactor_follows_the_environment_and_the_settings_it_was_made_from(monkeypatch):
    """redactor() keeps the last redactor only while what it reads is unchanged."""
    from agent_kernel.secrets import Secrets, redact, redactor

    names: list[str] = []
    secrets = Secrets(env_names=lambda: names)  # read each time, as AgentKernel.secret_env is
    text = "plain-value-3Kd9 env-cred-8Hq2Zx"
    first = redactor()
    assert redact(text) == text and redactor() is first  # nothing changed: the same one
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "env-cred-8Hq2Zx")  # a credential appears in os.environ
    assert redact(text) == "plain-value-3Kd9 [secret SOME_SERVICE_TOKEN]"
    monkeypatch.setenv("PLAIN_SETTING", "plain-value-3Kd9")
    names.append("PLAIN_SETTING")  # the setting now names it
    assert redact(text) == "[secret PLAIN_SETTING] [secret SOME_SERVICE_TOKEN]"
    monkeypatch.delenv("SOME_SERVICE_TOKEN")
    assert redact(text) == "[secret PLAIN_SETTING] env-cred-8Hq2Zx"
    del secrets
