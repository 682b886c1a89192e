"""The write-behind queue (agent_kernel.store.writer) on a real DuckDB file."""

from __future__ import annotations

from pathlib import Path

from agent_kernel.store import Store
from agent_kernel.store.writer import FOLD_LOG_BYTES, WriteBehind


def test_a_waited_for_batch_leaves_a_small_log_and_folds_one_past_the_limit(tmp_path):
    store = Store(tmp_path / "agent.duckdb")
    with store.connect() as con:
        con.execute("CREATE TABLE notes (body VARCHAR)")
    log = Path(f"{store.path}.wal")
    writer = WriteBehind(store)

    writer.submit(lambda con: con.execute("INSERT INTO notes VALUES ('short')"))
    writer.flush()  # someone waits: the small log is left for later
    assert log.exists() and 0 < log.stat().st_size < FOLD_LOG_BYTES

    writer.submit(lambda con: con.execute("INSERT INTO notes SELECT md5(range::VARCHAR) || repeat('x', 2000) FROM range(1000)"))
    writer.flush()  # the same, past the limit: folded before flush returns
    assert not log.exists() or log.stat().st_size == 0
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM notes").fetchone() == (1001,)
