"""%agent_secret: asked without echo, usable by code, never shown to the model."""

from __future__ import annotations

from agent_kernel.secrets import Secrets
from agent_kernel.testing import call, say


def test_redaction_longest_first_and_short_values_left_alone():
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


def test_secret_without_a_front_end_is_a_usage_error(kernel):
    result = kernel.execute("%agent_secret SERVICE_TOKEN", allow_stdin=False)  # as papermill runs it
    assert result.stderr.startswith("UsageError: This front end cannot ask for input")
