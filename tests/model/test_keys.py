"""The Anthropic API key: the environment's, else the one stored outside every notebook: in the
OS keyring when keyring has a usable backend (here tests/support/keyring_backend.py's, chosen
with keyring.set_keyring), else in a file only its owner can read."""

from __future__ import annotations

import os
import stat

import keyring
import pytest
from keyring.backends import fail

from agent_kernel.errors import MissingKeyError
from agent_kernel.model import keys
from agent_kernel.model.client import api_key
from tests.support.keyring_backend import BACKEND, PATH_ENV, FileKeyring, RefusingKeyring

KEY = "sk-ant-api03-" + "k" * 40


@pytest.fixture
def keyless(tmp_path, monkeypatch):
    """No key in the environment, and a store of this test's own (AGENT_KERNEL_HOME); no
    usable keyring (keyring's ``fail`` backend), whatever this machine has."""
    monkeypatch.setenv("AGENT_KERNEL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv(PATH_ENV, str(tmp_path / "keyring.json"))
    for name in (keys.KEY_ENV, keys.STORED_MARK_ENV, "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    before = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    yield tmp_path / "home"
    keyring.set_keyring(before)
    for name in (keys.KEY_ENV, keys.STORED_MARK_ENV):
        os.environ.pop(name, None)


@pytest.fixture
def in_keyring(keyless, tmp_path):
    """The test keyring in use; the JSON file that holds its passwords."""
    keyring.set_keyring(FileKeyring())
    return tmp_path / "keyring.json"


def in_the_keyring(path) -> str | None:
    return FileKeyring().get_password(keys.KEYRING_SERVICE, keys.KEYRING_USER) if path.exists() else None


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
    assert os.environ[keys.KEY_ENV] == KEY and os.environ[keys.STORED_MARK_ENV] == keys._mark(KEY)
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


def test_a_key_stored_where_a_keyring_is_usable_goes_there_and_into_no_file(keyless, in_keyring):
    stored = keys.store_key(f" {KEY}\n")
    assert stored == keys.KeyStatus("keyring", BACKEND)
    assert in_the_keyring(in_keyring) == KEY
    assert not (keyless / keys.FILE_NAME).exists()
    assert api_key() == KEY == os.environ[keys.KEY_ENV] and os.environ[keys.STORED_MARK_ENV] == keys._mark(KEY)
    status = keys.key_status()
    assert status == keys.KeyStatus("keyring", BACKEND)
    assert status.line() == f"Key stored in the OS keyring ({BACKEND})." and KEY not in status.line()


def test_a_key_another_process_put_in_the_keyring_is_found_and_exported(keyless, in_keyring):
    FileKeyring().set_password(keys.KEYRING_SERVICE, keys.KEYRING_USER, KEY)  # another process's backend
    assert keys.find_key() == KEY
    assert os.environ[keys.KEY_ENV] == KEY and os.environ[keys.STORED_MARK_ENV] == keys._mark(KEY)
    assert keys.key_status().source == "keyring"


def test_forget_removes_the_key_from_the_keyring(keyless, in_keyring):
    keys.store_key(KEY)
    assert keys.forget_key() == [f"the OS keyring ({BACKEND})"]
    assert in_the_keyring(in_keyring) is None
    assert keys.KEY_ENV not in os.environ and keys.STORED_MARK_ENV not in os.environ
    assert keys.find_key() is None and keys.key_status() == keys.KeyStatus("none", "")
    assert keys.forget_key() == []


def test_storing_in_the_keyring_removes_a_key_file_so_one_key_is_stored(keyless):
    keys.store_key("sk-ant-api03-" + "o" * 40)  # no usable keyring yet: the file
    assert (keyless / keys.FILE_NAME).exists()
    keyring.set_keyring(FileKeyring())
    assert keys.store_key(KEY).source == "keyring"
    assert not (keyless / keys.FILE_NAME).exists() and api_key() == KEY


def test_a_keyring_that_fails_leaves_the_key_to_the_file(keyless):
    keyring.set_keyring(fail.Keyring())
    assert keys.store_key(KEY) == keys.KeyStatus("file", str(keyless / keys.FILE_NAME))
    assert (keyless / keys.FILE_NAME).read_text() == KEY + "\n"
    assert keys.find_key() == KEY and keys.key_status().source == "file"
    assert keys.forget_key() == [str(keyless / keys.FILE_NAME)]


def test_a_keyring_that_refuses_the_new_key_gives_up_the_old_one_to_the_file(keyless, in_keyring):
    keys.store_key("sk-ant-api03-" + "o" * 40)
    keyring.set_keyring(RefusingKeyring())
    assert keys.store_key(KEY).source == "file"
    assert in_the_keyring(in_keyring) is None  # the old key would have been found first
    assert keys.find_key() == KEY and keys.key_status().source == "file"


def test_a_keyring_backend_not_viable_here_leaves_the_key_to_the_file(keyless, in_keyring, monkeypatch):
    monkeypatch.delenv(PATH_ENV)  # the test keyring's priority now raises, as keyring's backends do
    assert keys.key_status() == keys.KeyStatus("none", "")
    assert keys.store_key(KEY).source == "file" and keys.find_key() == KEY


def test_a_process_that_switches_keyring_backends_reads_the_new_one_at_once(keyless, in_keyring, monkeypatch):
    keys.store_key(KEY)
    monkeypatch.setenv(PATH_ENV, str(in_keyring.with_name("another-keyring.json")))
    keyring.set_keyring(FileKeyring())  # an empty keyring, within the seconds a keyring read is believed
    assert keys.find_key() is None and keys.KEY_ENV not in os.environ


def test_a_key_set_after_a_stored_one_was_exported_is_the_environments_own(keyless, monkeypatch):
    """A mark left behind (a process that exported the stored key, then someone set another
    key) never makes the store override the key the environment now has."""
    keys.store_key(KEY)
    assert keys.find_key() == KEY and keys._exported()
    monkeypatch.setenv(keys.KEY_ENV, "sk-ant-api03-" + "e" * 40)
    keys.forget_key()
    assert keys.find_key() == "sk-ant-api03-" + "e" * 40 == os.environ[keys.KEY_ENV]
