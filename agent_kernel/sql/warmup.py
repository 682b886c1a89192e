"""db_sql's share of the warm-up after ``%load_ext`` (:mod:`agent_kernel.turn.warmup` runs it
off the main thread), so the first query of kernel frames costs what the next ones do.

A first call would otherwise make the parser's database and read DuckDB's function
catalogue (the guard), open the database its forks run on, read the names of the file's
tables (a frame never shadows them), see whether this system lets a fork be kept for
the next call (:mod:`agent_kernel.sql.pages`) and import ``psutil`` (the watch of each call):
~300 ms, most of it on a busy machine's main thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_kernel.config import AgentKernel

__all__ = ["prepare_db_sql"]


def prepare_db_sql(settings: AgentKernel) -> None:
    """Prepare db_sql's first call, when these settings offer db_sql."""
    from agent_kernel.sql import guard

    if not (settings.tools_enabled and "data" in settings.tool_groups and guard.sql_guard_available()):
        return
    import psutil  # noqa: F401 - the watch of every call reads the process's memory with it

    from agent_kernel.paths import default_db_path
    from agent_kernel.sql import pages, sandbox
    from agent_kernel.store import Store

    guard.prepare()
    pages.tracks_writes()  # whether forks may be kept for the next call (opens /proc/self/pagemap)
    path = Path(settings.db_path).expanduser() if settings.db_path else default_db_path()
    sandbox.prepare_fork(Store(path), sandbox.Limits.from_settings(settings))
