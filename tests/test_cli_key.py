"""``agent-kernel key set|status|forget`` as a person runs it in a terminal: the key piped in
(never an argument), stored outside every notebook, its status without the key, forgotten;
refused when a command an agent turn started asks."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from tests.support.keyring_backend import BACKEND, PATH_ENV
from tests.support.paths import REPO

KEY = "sk-ant-api03-" + "c" * 30 + "-from-the-terminal"


@pytest.fixture
def env(tmp_path):
    """The command's environment: no key, its own store, no usable keyring (keyring's ``fail``
    backend, whatever this machine has)."""
    clean = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")}
    clean.pop("AGENT_KERNEL_KEY_STORED", None)
    clean.pop("AGENT_KERNEL_IN_TURN", None)
    return {
        **clean,
        "AGENT_KERNEL_HOME": str(tmp_path / "home"),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
    }


def key(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "agent_kernel.cli", "key", *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, env=env, timeout=120)


def test_set_status_forget(env, tmp_path):
    status = key(env, "status")
    assert status.returncode == 1 and "No key" in status.stdout
    stored = key(env, "set", stdin=KEY + "\n")
    assert stored.returncode == 0, stored.stderr
    path = tmp_path / "home" / "anthropic-api-key"
    assert f"Key stored in the file {path}" in stored.stdout and KEY not in stored.stdout + stored.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text().strip() == KEY
    status = key(env, "status")
    assert status.returncode == 0 and str(path) in status.stdout and KEY not in status.stdout
    with_env = key({**env, "ANTHROPIC_API_KEY": "sk-set-in-the-shell"}, "status")
    assert "from the environment" in with_env.stdout
    forgot = key(env, "forget")
    assert forgot.returncode == 0 and "Removed the stored key" in forgot.stdout and not path.exists()
    assert "No key was stored" in key(env, "forget").stdout


def test_what_cannot_be_a_key_is_refused_with_a_sentence(env, tmp_path):
    for sent, why in (("", "No key was given"), ("two words", "spaces")):
        refused = key(env, "set", stdin=sent)
        assert refused.returncode == 2 and why in refused.stderr
    assert not (tmp_path / "home" / "anthropic-api-key").exists()


def test_a_command_an_agent_turn_started_is_refused(env, tmp_path):
    in_turn = {**env, "AGENT_KERNEL_IN_TURN": "1"}  # a turn ran in another process (pid 1) when it started
    for args, stdin in ((("set",), KEY), (("forget",), "")):
        refused = key(in_turn, *args, stdin=stdin)
        assert refused.returncode == 2 and "refused here" in refused.stderr
    assert not (tmp_path / "home" / "anthropic-api-key").exists()
    assert key(in_turn, "status").returncode == 1  # reading where the key is stays open


def test_key_alone_shows_its_actions(env):
    shown = key(env)
    assert shown.returncode == 2 and "set" in shown.stdout and "forget" in shown.stdout


def test_with_a_keyring_the_key_goes_there_and_a_fresh_process_finds_it(env, tmp_path):
    pythonpath = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    store = tmp_path / "keyring.json"  # what tests/support/keyring_backend.py keeps passwords in
    with_keyring = {**env, "PYTHON_KEYRING_BACKEND": BACKEND, PATH_ENV: str(store), "PYTHONPATH": pythonpath}
    stored = key(with_keyring, "set", stdin=KEY + "\n")
    assert stored.returncode == 0, stored.stderr
    assert f"Key stored in the OS keyring ({BACKEND})" in stored.stdout and KEY not in stored.stdout + stored.stderr
    assert KEY in store.read_text() and not (tmp_path / "home" / "anthropic-api-key").exists()
    status = key(with_keyring, "status")
    assert status.returncode == 0 and f"OS keyring ({BACKEND})" in status.stdout and KEY not in status.stdout
    forgot = key(with_keyring, "forget")
    assert forgot.returncode == 0 and f"from the OS keyring ({BACKEND})" in forgot.stdout
    assert KEY not in store.read_text() and key(with_keyring, "status").returncode == 1
