"""agent-kernel's Jupyter Server extension: the JupyterLab extension's REST API and the
scheduler running inside the server (see :mod:`.app`)."""

from __future__ import annotations

from typing import Any


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from agent_kernel.server.app import AgentKernelServer  # noqa: PLC0415 - jupyter_server loads only in a server (shapes and views import without it)

    return [{"module": "agent_kernel.server", "app": AgentKernelServer}]
