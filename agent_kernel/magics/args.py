"""Arguments of the companion magics, declared with IPython's ``@magic_arguments``.

:func:`parse_args` is ``parse_argstring`` whose ``UsageError`` also shows the magic's
usage line, so a mistyped call says what it expected; :func:`usage_errors` shows the
library's errors as a ``UsageError`` too.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import parse_argstring

__all__ = ["parse_args", "unquote", "usage_errors"]


def parse_args(magic: Callable[..., Any], line: str) -> argparse.Namespace:
    """Parse ``line`` for ``magic``; a bad line is a ``UsageError`` naming the usage."""
    try:
        parsed: argparse.Namespace = parse_argstring(magic, line)
        return parsed
    except UsageError as exc:
        parser = getattr(magic, "parser")  # noqa: B009 - set by @magic_arguments, unknown to the type
        usage = " ".join(parser.format_usage().split()[1:])  # without "usage:"
        raise UsageError(f"{exc}. Usage: {usage}") from None


def unquote(value: str) -> str:
    """A value without the quotes IPython's argument splitter leaves on it (``'my session'``)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


@contextmanager
def usage_errors() -> Iterator[None]:
    """The library's errors raised inside, shown as a ``UsageError`` (their message, no traceback)."""
    from agent_kernel.errors import AgentKernelError

    try:
        yield
    except AgentKernelError as exc:
        raise UsageError(str(exc)) from None
