"""pytest fixtures for agent notebooks (registered through the ``pytest11`` entry point).

The server starts only when a fixture is used; importing it imports neither the SDK nor httpx.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_kernel.testing.server import ScriptedModel


@pytest.fixture
def scripted_model(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedModel]:
    """A running :class:`~agent_kernel.testing.ScriptedModel` with ``ANTHROPIC_BASE_URL``
    and ``ANTHROPIC_API_KEY`` set for this test (and for kernels it starts)."""
    with ScriptedModel() as model:
        for key, value in model.env().items():
            monkeypatch.setenv(key, value)
        yield model
