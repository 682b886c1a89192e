"""agent-kernel: a Claude agent that works inside your live Jupyter kernel.

``%load_ext agent_kernel`` registers ``%agent`` and its companions. Loading is cheap: it
imports neither ``anthropic`` nor ``duckdb`` and opens no file. Once the loading cell has
finished, a background thread prepares them for the first turn (:mod:`agent_kernel.turn.warmup`).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name -> the module that defines it. Each is imported on first use (module
# ``__getattr__``) so that ``import agent_kernel`` and ``%load_ext`` stay cheap.
_LAZY = {
    "Agent": ".turn.agent",
    "ToolContext": ".tools.context",
    "TurnResult": ".turn.loop",
    "tool": ".tools",
    "AgentKernelError": ".errors",
    "ConfigError": ".errors",
    "MissingKeyError": ".errors",
    "ModelError": ".errors",
    "SessionError": ".errors",
    "StoreError": ".errors",
    "ToolInputError": ".errors",
    "TurnFailedError": ".errors",
    "TurnInProgressError": ".errors",
}

__all__ = [*_LAZY, "load_ipython_extension", "unload_ipython_extension"]

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.errors import (
        AgentKernelError,
        ConfigError,
        MissingKeyError,
        ModelError,
        SessionError,
        StoreError,
        ToolInputError,
        TurnFailedError,
        TurnInProgressError,
    )
    from agent_kernel.tools import tool
    from agent_kernel.tools.context import ToolContext
    from agent_kernel.turn.agent import Agent
    from agent_kernel.turn.loop import TurnResult


# Submodules reachable as attributes (``agent_kernel.llm.generate``) without importing them here.
_SUBMODULES = {"llm"}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_kernel' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    """Jupyter Server finds the REST API and the in-server scheduler here."""
    from agent_kernel.server import _jupyter_server_extension_points as points

    return points()


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the built JupyterLab extension is (``jupyter labextension develop`` uses it)."""
    return [{"src": "labextension", "dest": "agent-kernel"}]


def load_ipython_extension(shell: InteractiveShell) -> None:
    """Register the magics, the ``AgentKernel`` configuration and the ``%agent`` rewrite."""
    from agent_kernel.config import AgentKernel
    from agent_kernel.magics import agent as magics
    from agent_kernel.magics.cells import CellMagics, rewrite_cells_lines
    from agent_kernel.magics.data import DataMagics
    from agent_kernel.magics.jobs import JobMagics
    from agent_kernel.magics.tools import ToolMagics
    from agent_kernel.turn import warmup

    if magics._ACTIVE is not None and magics._ACTIVE.shell is shell:
        return
    settings = AgentKernel(parent=shell)
    configurables: list[Any] = shell.configurables  # IPython annotates them as shells
    configurables.append(settings)
    instance = magics.AgentMagics(shell, settings)
    magics._ACTIVE = instance
    magics._REGISTERED[:] = [
        instance,
        DataMagics(shell, instance),
        JobMagics(shell, lambda: instance.kernel_agent.store),
        ToolMagics(shell, instance),
        CellMagics(shell, instance),
    ]
    for registered in magics._REGISTERED:
        shell.register_magics(registered)
    from agent_kernel.magics import key

    key.register(shell)
    from agent_kernel.kernel import libraries

    libraries.install(lambda: instance.kernel_agent.store)  # opened at the first agent_libs import
    if getattr(shell, "kernel", None) is not None:
        from agent_kernel.kernel import channel

        channel.install()  # the notebook front end's comm target
        # A save that gives the notebook its id is recorded before any turn runs here.
        channel.on_document(lambda attachment: instance.kernel_agent.document_seen(attachment))
    from agent_kernel.model import calls

    calls.set_kernel_default(lambda: calls.Caller(instance.kernel_agent.model_client, instance.kernel_agent.config))
    if magics.rewrite_agent_cells not in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.append(magics.rewrite_agent_cells)
    if rewrite_cells_lines not in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.append(rewrite_cells_lines)
    warmup.start_after_cell(shell, settings)
    from agent_kernel.kernel import cells

    cells.log_for(shell)  # the errors of the user's cells, from now on


def unload_ipython_extension(shell: InteractiveShell) -> None:
    """Undo :func:`load_ipython_extension` (``%reload_ext`` calls both)."""
    from agent_kernel.magics import agent as magics
    from agent_kernel.turn import warmup

    warmup.stop()
    if magics.rewrite_agent_cells in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(magics.rewrite_agent_cells)
    from agent_kernel.magics.cells import rewrite_cells_lines

    if rewrite_cells_lines in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(rewrite_cells_lines)
    if magics._ACTIVE is not None:
        settings = magics._ACTIVE.settings
        configurables: list[Any] = shell.configurables
        configurables[:] = [c for c in configurables if c is not settings]
    for registered in magics._REGISTERED:
        for kind, names in registered.magics.items():
            for name in names:
                shell.magics_manager.magics[kind].pop(name, None)
    magics._REGISTERED.clear()
    magics._ACTIVE = None
    from agent_kernel.magics import key

    key.unregister(shell)
    from agent_kernel.model import calls

    calls.set_kernel_default(None)
