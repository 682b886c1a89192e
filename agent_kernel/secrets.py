"""The secrets of a kernel, and the one place text is redacted on its way out.

A secret is either typed by the person with ``%agent_secret NAME`` (kept in the kernel's
memory and environment) or named in ``AgentKernel.secret_env`` (an environment variable
the kernel was started with: papermill, the scheduler, JupyterHub, CI). Code reaches
both as ``os.environ["NAME"]``; values are never stored.

Everything bound for the model or the DuckDB file passes through :func:`scrub` (or
:func:`redact` for one text): the request the model client sends
(:class:`~agent_kernel.model.ModelClient`), every statement the store runs
(:class:`~agent_kernel.store.Store`), and the cuts that shorten text before that (stdout
head and tail, summaries, SQL cells), so a cut never leaves part of a secret. They use
the secrets of every :class:`Secrets` alive in this process, plus the Anthropic key.
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from .redaction import MIN_REDACTED_LENGTH, Redactor, clean_text
from .redaction import scrub as _scrub

__all__ = ["MIN_REDACTED_LENGTH", "Secrets", "redact", "redactor", "scrub"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Always secret when set, though nobody declared them: the model's own credentials.
_ALWAYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


class Secrets:
    """Named secret values of one kernel: typed ones and environment variables by name.

    ``env_names`` is read each time (a function returning the names, or the names), so
    ``%config AgentKernel.secret_env = [...]`` applies at once.
    """

    def __init__(self, env_names: Callable[[], Iterable[str]] | Iterable[str] = ()) -> None:
        self._values: dict[str, str] = {}
        self._env_names = env_names
        _LIVE.add(self)

    def set(self, name: str, value: str) -> None:
        if not _NAME.match(name):
            raise ValueError(f"{name!r} is not a valid environment variable name.")
        if not value:
            raise ValueError("An empty secret was not stored.")
        self._values[name] = value
        os.environ[name] = value

    def env_names(self) -> list[str]:
        names = self._env_names() if callable(self._env_names) else self._env_names
        return [n for n in names if _NAME.match(n)]

    def names(self) -> list[str]:
        """The declared names: typed ones and ``secret_env`` ones (set or not)."""
        return sorted(set(self._values) | set(self.env_names()))

    def pairs(self) -> list[tuple[str, str]]:
        """``(name, value)`` of every secret that has a value now."""
        found = dict(self._values)
        for name in self.env_names():
            value = os.environ.get(name)
            if value and name not in found:
                found[name] = value
        return list(found.items())

    def redact(self, text: str) -> str:
        """``text`` with every secret of this process replaced by ``[secret NAME]``."""
        return redact(text)


_LIVE: weakref.WeakSet[Secrets] = weakref.WeakSet()
_cached: tuple[tuple[tuple[str, str], ...], Redactor] | None = None


def redactor() -> Redactor:
    """The redactor for every secret this process knows now (cached while they stay the same)."""
    global _cached
    pairs: dict[str, str] = {}
    for secrets in list(_LIVE):
        for name, value in secrets.pairs():
            pairs.setdefault(value, name)
    for name in _ALWAYS:
        value = os.environ.get(name)
        if value and len(value) >= 8:
            pairs.setdefault(value, name)
    key = tuple(sorted((n, v) for v, n in pairs.items()))
    if _cached is None or _cached[0] != key:
        _cached = (key, Redactor(key))
    return _cached[1]


def redact(text: str) -> str:
    """``text``, encodable, with every known secret replaced by ``[secret NAME]``."""
    return redactor().text(clean_text(text))


def scrub(value: Any, *, default: Callable[[Any], Any] | None = None) -> Any:
    """A JSON-ready copy of ``value``: encodable, depth-bounded, every known secret redacted."""
    return _scrub(value, redactor(), default=default)
