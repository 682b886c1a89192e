"""pytest fixtures for agent notebooks (registered through the ``pytest11`` entry point).

Importing this module is cheap: the server is imported only when a fixture is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from agent_kernel.testing.server import ScriptedModel


@pytest.fixture
def scripted_model(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedModel]:
    """A running :class:`~agent_kernel.testing.ScriptedModel` with ``ANTHROPIC_BASE_URL``
    and ``ANTHROPIC_API_KEY`` set for this test (and for kernels it starts)."""
    from agent_kernel.testing.server import ScriptedModel

    with ScriptedModel() as model:
        for key, value in model.env().items():
            monkeypatch.setenv(key, value)
        yield model
