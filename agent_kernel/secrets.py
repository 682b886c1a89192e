"""Secret values the user typed with ``%agent_secret``, and keeping them from the model.

A secret lives in the kernel's memory and its environment (so the libraries the model's
code calls find it, as ``os.environ["NAME"]``); it is never stored in DuckDB. Every tool
result passes through :meth:`Secrets.redact` before the model sees it or it is stored, so
code that prints a secret shows the model ``[secret NAME]`` instead.
"""

from __future__ import annotations

import os
import re

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Shorter values would redact ordinary words and numbers.
MIN_REDACTED_LENGTH = 4


class Secrets:
    """Named secret values of one kernel."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}
        self._pattern: re.Pattern[str] | None = None

    def set(self, name: str, value: str) -> None:
        if not _NAME.match(name):
            raise ValueError(f"{name!r} is not a valid environment variable name.")
        if not value:
            raise ValueError("An empty secret was not stored.")
        self._values[name] = value
        os.environ[name] = value
        self._pattern = None

    def names(self) -> list[str]:
        return sorted(self._values)

    def redact(self, text: str) -> str:
        """``text`` with every secret value replaced by ``[secret NAME]``."""
        if not self._values:
            return text
        if self._pattern is None:
            values = sorted(
                (v for v in self._values.values() if len(v) >= MIN_REDACTED_LENGTH), key=len, reverse=True
            )
            self._pattern = re.compile("|".join(re.escape(v) for v in values)) if values else None
        if self._pattern is None:
            return text
        by_value = {v: k for k, v in self._values.items()}
        return self._pattern.sub(lambda m: f"[secret {by_value[m.group(0)]}]", text)
