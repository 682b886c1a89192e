"""``%agent_key``: store the Anthropic API key outside every notebook, asked for with getpass.

The key typed here goes into the OS keyring or a file only you can read
(:mod:`agent_kernel.model.keys`), never into the cell's source or its output, so it is in
no saved notebook, no git history and no scheduled run's copy. Storing and forgetting a
key are the person's acts: :func:`agent_kernel.authority.person` refuses them while a turn
runs (code the model runs could otherwise swap the key the next turns are billed to).
"""

from __future__ import annotations

import sys
from typing import Any

from IPython.core.error import UsageError

__all__ = ["agent_key", "register"]

USAGE = "Usage: %agent_key (asks for the key, not echoed), %agent_key --status, %agent_key --forget"
NO_STDIN = (
    "This front end cannot ask for input (papermill, or a run with no terminal): store the key from a "
    "terminal with `agent-kernel key set` (or the key field at the bottom of the Agent chat) instead."
)


def agent_key(line: str = "") -> None:
    """Store the Anthropic API key outside every notebook; it is never echoed.

    Usage::

        %agent_key            asks for the key (typed, not echoed) and stores it
        %agent_key --status   says where the key comes from, never the key
        %agent_key --forget   removes the stored key

    The key is kept in the OS keyring when the keyring library is installed and has a
    usable backend, else in a file only you can read (mode 0600) in agent-kernel's folder
    (AGENT_KERNEL_HOME, or your user data folder). Kernels, the Jupyter server's inline
    completion and Explain, and scheduled runs find it there: nothing goes into this
    notebook, its outputs or its copies. ANTHROPIC_API_KEY in the environment, when set,
    wins over the stored key.

    Never type the key into a cell (%env ANTHROPIC_API_KEY=...): it would be saved with the
    notebook. The same key can be stored from a terminal with `agent-kernel key set`, or in
    JupyterLab with the key field at the bottom of the Agent chat.
    """
    from agent_kernel.model import keys

    words = line.split()
    if words == ["--status"]:
        print(keys.key_status().line())
        return
    if words not in ([], ["--forget"]):
        raise UsageError(USAGE)
    from agent_kernel.authority import TrustRefused, person

    try:
        person("magic", f"%agent_key {line}".strip())
    except TrustRefused as exc:
        raise UsageError(f"%agent_key is refused here: {exc}") from None
    if words == ["--forget"]:
        removed = keys.forget_key()
        print(f"Removed the stored key from {' and '.join(removed)}." if removed else "No key was stored.")
        after = keys.key_status()
        if after.source == "environment":
            print(after.line())
        return
    value = _ask()
    try:
        stored = keys.store_key(value)
    except keys.UnusableKey as exc:
        raise UsageError(str(exc)) from None
    print(f"{stored.line()} Kernels, inline completion, Explain and scheduled runs use it; no notebook holds it.")
    now = keys.key_status()
    if now.source == "environment":
        print(f"{keys.KEY_ENV} in this kernel's environment still wins over it here.")


def _ask() -> str:
    """The key, read with getpass (a password prompt in Jupyter: nothing echoed or saved)."""
    import getpass

    from IPython import get_ipython
    from IPython.core.error import StdinNotImplementedError

    shell = get_ipython()
    if getattr(shell, "kernel", None) is None and not sys.stdin.isatty():
        raise UsageError(NO_STDIN)
    try:
        return getpass.getpass("Anthropic API key (not echoed): ")
    except (StdinNotImplementedError, EOFError):
        raise UsageError(NO_STDIN) from None


def register(shell: Any) -> None:
    """Register ``%agent_key`` with ``shell``."""
    shell.register_magic_function(agent_key, magic_kind="line", magic_name="agent_key")


def unregister(shell: Any) -> None:
    """Remove ``%agent_key`` (``%unload_ext`` / ``%reload_ext``)."""
    shell.magics_manager.magics["line"].pop("agent_key", None)
