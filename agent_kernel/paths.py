"""Where agent-kernel keeps its files (the DuckDB file, the scheduler's home), and how it
writes a notebook the person may have open: whole, never half."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

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


def write_notebook_whole(path: Path, notebook: Any, *, keep_mode: bool = False) -> None:
    """Write ``notebook`` (nbformat) to a temporary file beside ``path``, then rename it over
    ``path``: a reader never sees half a notebook. ``keep_mode``: the file keeps the
    permissions ``path`` has."""
    import nbformat

    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if keep_mode else None
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if mode is not None:
            os.chmod(temporary, mode)
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            nbformat.write(notebook, file)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
