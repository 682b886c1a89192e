"""db_sql's share of the warm-up: what a first query of kernel frames would otherwise do."""

from __future__ import annotations

import pandas as pd

from agent_kernel.config import AgentKernel
from agent_kernel.sql import guard, pages, sandbox
from agent_kernel.sql import worker as sql_worker
from agent_kernel.sql.warmup import prepare_db_sql
from agent_kernel.store import Store
from tests.support.capabilities import needs_sql_guard

pytestmark = needs_sql_guard


def test_the_first_read_of_a_frame_finds_everything_ready(tmp_path):
    path = tmp_path / "agent.duckdb"
    with Store(path).connect():  # an existing file, as on every day but the first
        pass
    settings = AgentKernel(db_path=str(path), sql_timeout_s=7.0)
    limits = sandbox.Limits.from_settings(settings)
    sandbox._FILE_NAMES.pop(path, None)

    prepare_db_sql(settings)

    assert "" in guard._builtins and "table" in guard._builtins  # DuckDB's function catalogue
    assert sandbox._config_key(limits) in sandbox._fork_ready  # the forks' database
    assert "sessions" in sandbox._FILE_NAMES[path]  # the file's tables (a frame never shadows them)
    assert pages._tracks is not None  # whether forks may be kept for the next call
    store = Store(path)
    run = sandbox.SqlRun(store, limits, read_only=True)
    frames = {"sales": pd.DataFrame({"qty": [1, 7, 7]})}
    statements = guard.parse("SELECT count(*) AS n FROM sales WHERE qty = 7")
    assert run.placement(statements, frames)[1]  # runs in a fork, without opening the file
    assert sql_worker.run_sql(run, statements, frames=frames).rows == [(2,)]


def test_nothing_is_prepared_when_db_sql_is_not_offered(tmp_path):
    path = tmp_path / "agent.duckdb"
    with Store(path).connect():
        pass
    sandbox._FILE_NAMES.pop(path, None)
    prepare_db_sql(AgentKernel(db_path=str(path), tool_groups=["code"]))
    prepare_db_sql(AgentKernel(db_path=str(path), tools_enabled=False))
    assert path not in sandbox._FILE_NAMES


def test_a_missing_file_is_left_for_the_first_turn_to_make(tmp_path):
    path = tmp_path / "agent.duckdb"
    prepare_db_sql(AgentKernel(db_path=str(path)))
    assert not path.exists()
