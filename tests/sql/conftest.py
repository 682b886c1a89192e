"""The SQL tests' store: a DuckDB file with the project's tables and one session, ``kept``."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_kernel.store import Store
from agent_kernel.store.sessions import Sessions


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A DuckDB file with the project's tables and one session, ``kept``."""
    store = Store(tmp_path / "agent.duckdb")
    with store.connect() as con:
        Sessions(con).create("kept", notebook=None)
    return store
