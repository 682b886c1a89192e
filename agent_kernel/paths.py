"""Where agent-kernel keeps its files: the DuckDB file and the scheduler's home."""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "agent-kernel"


def default_db_path() -> Path:
    """The DuckDB file: ``AGENT_KERNEL_DB`` when set, else under the user's data directory."""
    configured = os.environ.get("AGENT_KERNEL_DB")
    if configured:
        return Path(configured).expanduser()
    return agent_home() / "agent.duckdb"


def agent_home() -> Path:
    """Jobs, runs and outputs: ``AGENT_KERNEL_HOME`` when set, else the user's data directory."""
    configured = os.environ.get("AGENT_KERNEL_HOME")
    if configured:
        return Path(configured).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
