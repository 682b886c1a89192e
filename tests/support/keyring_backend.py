"""A keyring backend for tests: passwords in a JSON file named by ``AGENT_KERNEL_TEST_KEYRING``.

The machines the suite runs on have no OS keyring (keyring falls back to its ``fail`` backend),
so the keyring path of :mod:`agent_kernel.model.keys` runs against this one, chosen the ways
keyring documents: ``PYTHON_KEYRING_BACKEND=tests.support.keyring_backend.FileKeyring`` in a
process's environment, or ``keyring.set_keyring(FileKeyring())`` in this one. The file is what
other processes share, as they share a real keyring. Without the variable the backend is not
viable, so merely importing this module never makes keyring choose it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from jaraco.classes import properties
from keyring import backend, errors

PATH_ENV = "AGENT_KERNEL_TEST_KEYRING"
BACKEND = "tests.support.keyring_backend.FileKeyring"  # what PYTHON_KEYRING_BACKEND names


def _path() -> Path:
    path = os.environ.get(PATH_ENV)
    if not path:
        raise RuntimeError(f"{PATH_ENV} does not name this test keyring's file")
    return Path(path)


class FileKeyring(backend.KeyringBackend):
    """Passwords by service and user in one JSON file (``{"service": {"user": "password"}}``)."""

    @properties.classproperty
    def priority(cls) -> float:
        _path()  # not viable (RuntimeError, as keyring expects) without its file
        return 20.0

    def _read(self) -> dict[str, dict[str, str]]:
        try:
            data: dict[str, dict[str, str]] = json.loads(_path().read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return data

    def _write(self, data: dict[str, dict[str, str]]) -> None:
        _path().write_text(json.dumps(data), encoding="utf-8")

    def get_password(self, service: str, username: str) -> str | None:
        return self._read().get(service, {}).get(username)

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._read()
        data.setdefault(service, {})[username] = password
        self._write(data)

    def delete_password(self, service: str, username: str) -> None:
        data = self._read()
        if username not in data.get(service, {}):
            raise errors.PasswordDeleteError("no such password")
        del data[service][username]
        self._write(data)


class RefusingKeyring(FileKeyring):
    """A keyring that reads and deletes but refuses new passwords (as a locked one may)."""

    def set_password(self, service: str, username: str, password: str) -> None:
        raise errors.PasswordSetError("this keyring refuses new passwords")
