"""``GET /agent-kernel/api/offline``: whether this server's model is the offline scripted one.

``agent-kernel lab --offline`` starts the scripted model on 127.0.0.1 and gives JupyterLab
(and so its kernels, its completion and its explanations) ``ANTHROPIC_BASE_URL`` pointing
at it, and ``AGENT_KERNEL_OFFLINE`` naming the model it reports. The page reads this route
once to label itself ("Agent: offline scripted model" in the status bar). The server says
offline only when both hold: the marker is set and the base URL is a loopback address, so
the label never covers a server that talks to a real endpoint.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Mapping
from typing import TypedDict
from urllib.parse import urlsplit

from jupyter_server.auth.decorator import authorized
from tornado import web

from agent_kernel.server.handlers import _Handler

_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$")


class OfflineStatusJson(TypedDict):
    """``GET /offline``: ``offline`` true when the offline scripted model answers; its model id."""

    offline: bool
    model: str | None


def offline_status(environ: Mapping[str, str]) -> OfflineStatusJson:
    """The status for a server whose environment is ``environ``."""
    model = environ.get("AGENT_KERNEL_OFFLINE", "")
    if not model or not _MODEL.match(model) or not is_loopback(environ.get("ANTHROPIC_BASE_URL", "")):
        return {"offline": False, "model": None}
    return {"offline": True, "model": model}


def is_loopback(url: str) -> bool:
    """Whether ``url`` is an http(s) URL on this machine's loopback interface."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return False
    if parts.scheme not in ("http", "https"):
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OfflineHandler(_Handler):
    @web.authenticated
    # jupyter_server's `authorized(action=...)` returns an unsolved type variable.
    @authorized(action="read")
    async def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(offline_status(os.environ)))


def handlers(base: str = "/agent-kernel/api") -> list[tuple[str, type]]:
    return [(f"{base}/offline", OfflineHandler)]
