"""Fixtures of the tools' tests: a web site, a loopback server that no tool may reach, and an
in-process agent offered the module's tool groups."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.websites import Server, Site


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    """A web site on 127.0.0.2 that the tools' tests fetch, browse and search."""
    server = Site("127.0.0.2")
    yield server
    server.close()


@pytest.fixture(scope="module")
def secret() -> Iterator[Server]:
    """A server on 127.0.0.1, what an attacker would reach for: the tests check that no tool does."""
    server = Server("127.0.0.1")
    yield server
    server.close()


@pytest.fixture
def agent(shell_agent: Any, request: pytest.FixtureRequest) -> Any:
    """``shell_agent`` offered the tool groups the test module names in ``GROUPS``."""
    shell_agent.agent.config.tool_groups = request.module.GROUPS
    return shell_agent
