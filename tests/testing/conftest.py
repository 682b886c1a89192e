"""The scripted server's tests talk to it through the official SDK's client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest


@pytest.fixture
def client(scripted_model: Any) -> Iterator[anthropic.Anthropic]:
    """The official SDK, talking to ``scripted_model`` (its base URL and key are in the environment)."""
    with anthropic.Anthropic(max_retries=0) as sdk:
        yield sdk
