"""The Anthropic API key: the environment's, else the one stored outside every notebook in a
file only its owner can read (no keyring library is installed here, so the file is the store)."""

from __future__ import annotations

import os
import stat

import pytest

from agent_kernel.errors import MissingKeyError
from agent_kernel.model import keys
from agent_kernel.model.client import api_key

KEY = "sk-ant-api03-" + "k" * 40


@pytest.fixture
def keyless(tmp_path, monkeypatch):
    """No key in the environment, and a store of this test's own (AGENT_KERNEL_HOME)."""
    monkeypatch.setenv("AGENT_KERNEL_HOME", str(tmp_path / "home"))
    for name in (keys.KEY_ENV, keys.STORED_MARK_ENV, "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    yield tmp_path / "home"
    for name in (keys.KEY_ENV, keys.STORED_MARK_ENV):
        os.environ.pop(name, None)


def test_without_a_key_the_message_offers_the_three_ways_never_a_cell(keyless):
    with pytest.raises(MissingKeyError) as raised:
        api_key()
    message = str(raised.value)
    assert message.startswith("No Anthropic API key: set ANTHROPIC_API_KEY")
    for way in ("%agent_key", "the bottom of the Agent chat", "agent-kernel key set"):
        assert way in message
    assert "%env" not in message
    assert keys.key_status() == keys.KeyStatus("none", "")


def test_a_stored_key_is_kept_in_a_file_only_its_owner_reads_and_is_found(keyless):
    stored = keys.store_key(f"  {KEY}\n")
    path = keyless / keys.FILE_NAME
    assert stored == keys.KeyStatus("file", str(path))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == KEY + "\n"
    assert [p.name for p in keyless.iterdir()] == [keys.FILE_NAME]  # no temporary file left
    assert api_key() == KEY
    # This process has it under the name the redaction boundary always treats as a secret.
    assert os.environ[keys.KEY_ENV] == KEY and os.environ[keys.STORED_MARK_ENV] == "1"
    from agent_kernel.secrets import redact

    assert KEY not in redact(f"the key is {KEY}")
    status = keys.key_status()
    assert status.source == "file" and KEY not in status.line() and "readable by you only" in status.line()


def test_the_environment_wins_over_the_stored_key(keyless, monkeypatch):
    keys.store_key(KEY)
    monkeypatch.setenv(keys.KEY_ENV, "sk-from-the-environment")
    monkeypatch.delenv(keys.STORED_MARK_ENV)
    assert api_key() == "sk-from-the-environment"
    assert keys.key_status().source == "environment"


def test_another_process_changing_or_forgetting_the_key_is_followed(keyless):
    keys.store_key(KEY)
    assert api_key() == KEY
    # As `agent-kernel key set` in a terminal would: the file changes under this process.
    keys._write_file("sk-ant-api03-" + "n" * 40)
    assert api_key() == "sk-ant-api03-" + "n" * 40 == os.environ[keys.KEY_ENV]
    (keyless / keys.FILE_NAME).unlink()
    with pytest.raises(MissingKeyError):
        api_key()
    assert keys.KEY_ENV not in os.environ and keys.STORED_MARK_ENV not in os.environ


def test_a_key_file_others_can_read_is_refused_with_the_reason(keyless):
    keys.store_key(KEY)
    path = keyless / keys.FILE_NAME
    path.chmod(0o644)
    os.environ.pop(keys.KEY_ENV)
    os.environ.pop(keys.STORED_MARK_ENV)
    with pytest.raises(MissingKeyError) as raised:
        api_key()
    assert "can be read by others (mode 0644)" in str(raised.value) and KEY not in str(raised.value)
    assert keys.key_status().source == "none" and "mode 0644" in (keys.key_status().problem or "")
    keys.store_key(KEY)  # storing again writes a private file
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and api_key() == KEY


def test_forget_removes_the_file_and_this_process_copy(keyless):
    keys.store_key(KEY)
    assert api_key() == KEY
    assert keys.forget_key() == [str(keyless / keys.FILE_NAME)]
    assert keys.KEY_ENV not in os.environ
    assert keys.forget_key() == []
    with pytest.raises(MissingKeyError):
        api_key()


@pytest.mark.parametrize(
    ("value", "why"),
    [("", "No key was given"), ("   \n", "No key was given"), ("sk-ant one", "spaces"), ("x" * 501, "longer than")],
)
def test_what_cannot_be_a_key_is_not_stored(keyless, value, why):
    with pytest.raises(keys.UnusableKey, match=why):
        keys.store_key(value)
    assert not (keyless / keys.FILE_NAME).exists()
