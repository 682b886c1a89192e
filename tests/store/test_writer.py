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

    writer.submit(
        lambda con: con.execute("INSERT INTO notes SELECT md5(range::VARCHAR) || repeat('x', 2000) FROM range(1000)")
    )
    writer.flush()  # the same, past the limit: folded before flush returns
    assert not log.exists() or log.stat().st_size == 0
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM notes").fetchone() == (1001,)


def test_batches_leave_the_log_to_be_folded_once_the_writes_stop(tmp_path):
    import time

    from agent_kernel.store.writer import FOLD_AFTER_IDLE

    store = Store(tmp_path / "agent.duckdb")
    with store.connect() as con:
        con.execute("CREATE TABLE notes (body VARCHAR)")
    log = Path(f"{store.path}.wal")
    writer = WriteBehind(store, coalesce=0.01)
    for n in range(5):  # batches nobody waits for, one after another
        writer.submit(lambda con, n=n: con.execute("INSERT INTO notes VALUES (?)", [f"note {n}"]))
        time.sleep(0.05)
    assert log.exists() and log.stat().st_size > 0  # none of them folded it
    deadline = time.monotonic() + FOLD_AFTER_IDLE + 10
    while log.exists() and log.stat().st_size and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not log.exists() or log.stat().st_size == 0  # folded once they stopped
    assert writer.idle
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM notes").fetchone() == (5,)


def test_writes_that_keep_coming_are_gathered_into_ever_fewer_batches(tmp_path):
    """A stream of writes (a turn's quick round trips) gets batches that wait longer each
    time, up to MAX_COALESCE; a write after a pause is applied after ``coalesce`` again."""
    import time

    from agent_kernel.store.writer import MAX_COALESCE

    store = Store(tmp_path / "agent.duckdb")
    with store.connect() as con:
        con.execute("CREATE TABLE notes (body VARCHAR, written DOUBLE)")
    writer = WriteBehind(store, coalesce=0.1)
    batches: list[int] = []  # the connection each write ran in, one per batch

    def note(con, n):
        if not batches or batches[-1] != id(con):
            batches.append(id(con))
        con.execute("INSERT INTO notes VALUES (?, ?)", [f"note {n}", time.monotonic()])

    started = time.monotonic()
    n = 0
    while time.monotonic() - started < 2.0:  # a write every 10 ms for 2 s
        writer.submit(lambda con, n=n: note(con, n))
        n += 1
        time.sleep(0.01)
    writer.flush()
    # 0.1 s each would be about 20 batches; 0.1, 0.2, 0.4, 0.8, 0.8 ... about 5.
    assert len(batches) <= 10, len(batches)
    time.sleep(MAX_COALESCE + 0.5)  # a pause: the next write starts over
    queued = time.monotonic()
    writer.submit(lambda con: note(con, -1))
    deadline = time.monotonic() + 10
    while not writer.idle and time.monotonic() < deadline:
        time.sleep(0.01)
    with store.connect(read_only=True) as con:
        (written,) = con.execute("SELECT written FROM notes WHERE body = 'note -1'").fetchone()
    assert written - queued < MAX_COALESCE  # it waited ``coalesce``, not the longest window
    with store.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM notes").fetchone() == (n + 1,)
