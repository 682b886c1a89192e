"""``agent-kernel key set|status|forget``: the Anthropic API key, stored outside every notebook.

``set`` asks for the key with getpass on a terminal (not echoed), or reads it from standard
input when that is piped (``pass show anthropic | agent-kernel key set``); the key is never
an argument, so it stays out of the shell's history and the process list. Where it is kept,
and how every process finds it: :mod:`agent_kernel.model.keys`. Setting and forgetting are
the person's acts, refused inside an agent turn (:func:`agent_kernel.authority.person`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_parser"]


def add_parser(commands: Any) -> None:
    """Add ``key`` and its actions to the ``agent-kernel`` command's subparsers."""
    key = commands.add_parser("key", help="store the Anthropic API key outside every notebook; its status; forget it")
    key.set_defaults(help_of=key)
    actions = key.add_subparsers(metavar="ACTION")
    setting = actions.add_parser(
        "set", help="store the key: asked for on a terminal (not echoed), or read from standard input when piped"
    )
    setting.set_defaults(handler=_set)
    status = actions.add_parser("status", help="where the key comes from (never the key)")
    status.set_defaults(handler=_status)
    forget = actions.add_parser("forget", help="remove the stored key")
    forget.set_defaults(handler=_forget)


def _refused(what: str) -> str | None:
    from agent_kernel.authority import TrustRefused, person

    try:
        person("cli", f"agent-kernel key {what}")
    except TrustRefused as exc:
        return f"agent-kernel key {what} is refused here: {exc}"
    return None


def _set(args: argparse.Namespace) -> int:
    import getpass

    from agent_kernel.model import keys

    refused = _refused("set")
    if refused:
        print(f"agent-kernel: {refused}", file=sys.stderr)
        return 2
    if sys.stdin.isatty():
        value = getpass.getpass("Anthropic API key (not echoed): ")
    else:
        value = sys.stdin.read(keys.MAX_KEY_CHARS + 2)
    try:
        stored = keys.store_key(value)
    except keys.UnusableKey as exc:
        print(f"agent-kernel: {exc}", file=sys.stderr)
        return 2
    print(f"{stored.line()} Kernels, JupyterLab's completion and Explain, and scheduled runs use it.")
    if keys.key_status().source == "environment":
        print(f"Note: {keys.KEY_ENV} is set in this shell; where it is set, it wins over the stored key.")
    return 0


def _status(args: argparse.Namespace) -> int:
    from agent_kernel.model import keys

    status = keys.key_status()
    print(status.line())
    return 0 if status.has_key else 1


def _forget(args: argparse.Namespace) -> int:
    from agent_kernel.model import keys

    refused = _refused("forget")
    if refused:
        print(f"agent-kernel: {refused}", file=sys.stderr)
        return 2
    removed = keys.forget_key()
    print(f"Removed the stored key from {' and '.join(removed)}." if removed else "No key was stored.")
    return 0
