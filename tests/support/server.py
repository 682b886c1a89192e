"""agent-kernel's server extension over HTTP, in a real Jupyter server (tests/server/)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from tests.support.jupyterlab import JupyterLab

API = "/agent-kernel/api"


SERVER_CONFIG = {
    "ServerApp": {"jpserver_extensions": {"agent_kernel": True}},
    "AgentKernelServer": {"scheduler_poll_s": 0.5},
}


class Client:
    """HTTP to the server: with its token, or as a browser would (login cookie + XSRF)."""

    def __init__(self, lab: JupyterLab) -> None:
        self.lab = lab

    def call(
        self, method: str, path: str, body: Any = None, *, token: bool = True, raw: bytes | None = None,
        headers: dict[str, str] | None = None, opener: Any = None,
    ) -> tuple[int, Any]:  # fmt: skip
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(self.lab.url + path, data=data, method=method, headers=dict(headers or {}))
        if token:
            request.add_header("Authorization", f"token {self.lab.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with (opener or urllib.request.build_opener()).open(request, timeout=30) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text.decode()
