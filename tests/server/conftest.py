"""The server tests' HTTP client for their module's JupyterLab server."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.server import Client


@pytest.fixture
def client(server: tuple[Any, Any]) -> Client:
    """HTTP to the module's ``server`` (a JupyterLab server and its store)."""
    return Client(server[0])
