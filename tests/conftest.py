from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .kernel import Kernel


@pytest.fixture
def agent_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh DuckDB file for the agent, also for kernels the test starts."""
    path = tmp_path / "agent.duckdb"
    monkeypatch.setenv("AGENT_KERNEL_DB", str(path))
    monkeypatch.setenv("AGENT_KERNEL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    return path


@pytest.fixture
def store(tmp_path: Path):
    """A DuckDB file with the project's tables and one session, ``kept``."""
    from agent_kernel.store import Store
    from agent_kernel.store.sessions import Sessions

    store = Store(tmp_path / "agent.duckdb")
    with store.connect() as con:
        Sessions(con).create("kept", notebook=None)
    return store


@pytest.fixture
def kernel(scripted_model, agent_db: Path, tmp_path: Path) -> Iterator[Kernel]:
    """A real ipykernel talking to the scripted model, with agent_kernel loaded."""
    k = Kernel({}, cwd=str(tmp_path))
    try:
        k.ok("%load_ext agent_kernel")
        yield k
    finally:
        k.shutdown()
