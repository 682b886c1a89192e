"""The Anthropic API key: ``ANTHROPIC_API_KEY`` when set, else the key the person stored
outside every notebook (the OS keyring, else a file only its owner can read).

A key typed into a cell (``%env ANTHROPIC_API_KEY=...``) lands in the saved notebook, its
outputs, git and the scheduler's run copies. So the person stores it once, with
``%agent_key``, the Agent panel's key field or ``agent-kernel key set``, and every process
that calls the model finds it here: kernels, the Jupyter server's completion and
explanations, scheduled runs. This module is the one place that looks.

Where it is kept: the OS keyring through the ``keyring`` library when that is installed and
has a usable backend (it is optional, never required), else the file ``anthropic-api-key``
in agent-kernel's per-user folder (:func:`agent_kernel.paths.agent_home`), mode 0600,
written whole (a temporary file renamed over it). A key file that others can read is
refused, with the reason: a key that leaked to other users must be replaced, not used.

A process that found a stored key puts it in its own environment as ``ANTHROPIC_API_KEY``
(and ``AGENT_KERNEL_KEY_STORED=1`` beside it, so it and the processes it starts know the
variable is a copy of the stored key and follow the store when the key is changed or
forgotten). Being in the environment under that name makes it a secret the redaction
boundary always replaces (:mod:`agent_kernel.secrets`), and it is what the SDK reads.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent_kernel.paths import agent_home

__all__ = [
    "KEY_ENV",
    "KeyStatus",
    "UnusableKey",
    "find_key",
    "forget_key",
    "key_file",
    "key_status",
    "store_key",
]

KEY_ENV = "ANTHROPIC_API_KEY"
# Set beside KEY_ENV, as a digest of the key, when that variable holds a copy of the stored key
# (not the person's own).
STORED_MARK_ENV = "AGENT_KERNEL_KEY_STORED"
KEYRING_SERVICE = "agent-kernel"
KEYRING_USER = "anthropic-api-key"
FILE_NAME = "anthropic-api-key"
MAX_KEY_CHARS = 500
# How long a keyring read is believed (a keyring may answer over D-Bus; a file is read each time).
KEYRING_SECONDS = 5.0

Source = Literal["environment", "keyring", "file", "none"]


class UnusableKey(ValueError):
    """A key that cannot be stored (empty, too long, spaces inside), or a key file that
    may not be read (others can read it); the message says why and what to do."""


@dataclass(frozen=True)
class KeyStatus:
    """Where the key comes from now, never the key itself."""

    source: Source
    where: str  # the keyring's backend, the file's path, the variable's name ('' for none)
    problem: str | None = None  # why a stored key was not used

    @property
    def has_key(self) -> bool:
        return self.source != "none"

    def line(self) -> str:
        """One sentence for a person."""
        if self.source == "environment":
            return f"Using {KEY_ENV} from the environment (it wins over a stored key)."
        if self.source == "keyring":
            return f"Key stored in the OS keyring ({self.where})."
        if self.source == "file":
            return f"Key stored in the file {self.where} (readable by you only)."
        return self.problem or "No key: none in the environment and none stored."


def key_file() -> Path:
    """The file a key is kept in when no keyring is usable."""
    return agent_home() / FILE_NAME


def _keyring() -> Any:
    """The ``keyring`` module when it is installed and has a usable backend, else None."""
    try:  # imported by name: an optional library, without type information here
        keyring = importlib.import_module("keyring")
        fail = importlib.import_module("keyring.backends.fail")
    except Exception:  # noqa: BLE001 - not installed, or broken: the file serves
        return None
    try:
        backend = keyring.get_keyring()
        # A backend that is not viable here says so by raising from its priority.
        if isinstance(backend, fail.Keyring) or backend.priority <= 0:
            return None
    except Exception:  # noqa: BLE001
        return None
    return keyring


def _backend_name(keyring: Any) -> str:
    backend = keyring.get_keyring()
    return f"{type(backend).__module__}.{type(backend).__name__}"


# When the keyring was last read, which backend answered (a process may switch backends with
# keyring.set_keyring) and what it held.
_keyring_read: tuple[float, object, str | None] | None = None


def _from_keyring() -> str | None:
    global _keyring_read
    keyring = _keyring()
    if keyring is None:
        return None
    now = time.monotonic()
    backend = keyring.get_keyring()
    if _keyring_read is not None and now - _keyring_read[0] < KEYRING_SECONDS and _keyring_read[1] is backend:
        return _keyring_read[2]
    try:
        value = keyring.get_password(KEYRING_SERVICE, KEYRING_USER) or None
    except Exception:  # noqa: BLE001 - a locked or broken keyring holds no key for us
        value = None
    _keyring_read = (now, backend, value)
    return value


def _from_file() -> str | None:
    """The key in :func:`key_file`, None when there is none; :class:`UnusableKey` when
    others can read the file (or it is not the user's own)."""
    path = key_file()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnusableKey(f"The stored key file {path} could not be read: {exc.strerror}.") from None
    with os.fdopen(fd, encoding="utf-8") as file:
        info = os.fstat(file.fileno())
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise UnusableKey(f"The stored key file {path} belongs to another user, so it was not used.")
        if info.st_mode & 0o077:
            raise UnusableKey(
                f"The stored key file {path} can be read by others (mode {stat.S_IMODE(info.st_mode):04o}), "
                "so it was not used: treat the key as leaked, replace it, and store the new one with "
                "`agent-kernel key set` (or run chmod 600 on the file)."
            )
        value = file.read(MAX_KEY_CHARS + 1).strip()
    return value or None


def _stored() -> tuple[str, Source, str] | None:
    """The stored key, where it is kept and its place's name (keyring first)."""
    value = _from_keyring()
    if value:
        keyring = _keyring()
        return value, "keyring", _backend_name(keyring) if keyring is not None else "keyring"
    value = _from_file()
    if value:
        return value, "file", str(key_file())
    return None


def _mark(value: str) -> str:
    """What the mark holds for an exported ``value``: a digest, never the key."""
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def _exported() -> bool:
    """Whether ``ANTHROPIC_API_KEY`` in this environment is the copy of the stored key this
    process (or its parent) put there: a key someone set since, even with the mark left
    behind, is the environment's own."""
    value = os.environ.get(KEY_ENV)
    return bool(value) and os.environ.get(STORED_MARK_ENV) == _mark(value or "")


def _export(value: str | None) -> None:
    if value:
        os.environ[KEY_ENV] = value
        os.environ[STORED_MARK_ENV] = _mark(value)
    else:
        os.environ.pop(KEY_ENV, None)
        os.environ.pop(STORED_MARK_ENV, None)


def find_key() -> str | None:
    """The key to call the model with: ``ANTHROPIC_API_KEY``, else the stored key (which
    this process then has in its environment), else None.

    :class:`UnusableKey` when the only key is in a file others can read."""
    value = os.environ.get(KEY_ENV)
    if value and not _exported():
        return value
    stored = _stored()
    found = stored[0] if stored else None
    if found != (value or None):
        _export(found)
    return found


def key_status() -> KeyStatus:
    """Where the key comes from (a stored key that cannot be used says why)."""
    value = os.environ.get(KEY_ENV)
    if value and not _exported():
        return KeyStatus("environment", KEY_ENV)
    try:
        stored = _stored()
    except UnusableKey as exc:
        return KeyStatus("none", "", str(exc))
    if stored is None:
        return KeyStatus("none", "")
    return KeyStatus(stored[1], stored[2])


def check_key(value: str) -> str:
    """``value`` as it will be stored (surrounding spaces dropped); :class:`UnusableKey`
    when it cannot be a key."""
    value = value.strip()
    if not value:
        raise UnusableKey("No key was given: nothing was stored.")
    if len(value) > MAX_KEY_CHARS:
        raise UnusableKey(f"That is not a key: longer than {MAX_KEY_CHARS} characters. Nothing was stored.")
    if any(c.isspace() or not c.isprintable() for c in value):
        raise UnusableKey("That is not a key: it has spaces or control characters inside. Nothing was stored.")
    return value


def store_key(value: str) -> KeyStatus:
    """Keep ``value`` in the keyring (when usable) or the key file, and use it in this
    process from now on (unless ``ANTHROPIC_API_KEY`` of the environment wins)."""
    global _keyring_read
    value = check_key(value)
    keyring = _keyring()
    stored: KeyStatus | None = None
    if keyring is not None:
        try:
            keyring.set_password(KEYRING_SERVICE, KEYRING_USER, value)
            _keyring_read = (time.monotonic(), keyring.get_keyring(), value)
            stored = KeyStatus("keyring", _backend_name(keyring))
        except Exception:  # noqa: BLE001 - a keyring that refuses: the file serves
            stored = None
            _keyring_read = None
            try:  # an older key left there would be found before the file's
                keyring.delete_password(KEYRING_SERVICE, KEYRING_USER)
            except Exception:  # noqa: BLE001 - none was there
                pass
    if stored is None:
        _write_file(value)
        stored = KeyStatus("file", str(key_file()))
    else:
        key_file().unlink(missing_ok=True)  # one stored key, not two that disagree
    if not os.environ.get(KEY_ENV) or _exported():
        _export(value)
    return stored


def _write_file(value: str) -> None:
    path = key_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(temporary, 0o600)  # mkstemp makes it 0600 already; said here, not assumed
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(value + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def forget_key() -> list[str]:
    """Remove the stored key (keyring and file) and its copy in this process's environment;
    the places it was removed from (none: nothing was stored)."""
    global _keyring_read
    removed: list[str] = []
    keyring = _keyring()
    if keyring is not None:
        try:
            if keyring.get_password(KEYRING_SERVICE, KEYRING_USER):
                keyring.delete_password(KEYRING_SERVICE, KEYRING_USER)
                removed.append(f"the OS keyring ({_backend_name(keyring)})")
        except Exception:  # noqa: BLE001 - nothing there to remove
            pass
    _keyring_read = None
    path = key_file()
    try:
        path.unlink()
        removed.append(str(path))
    except FileNotFoundError:
        pass
    if _exported():
        _export(None)
    return removed
