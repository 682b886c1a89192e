"""Where checked SQL runs: the sandboxed connection, kernel frames, the caps, the time limit."""

from __future__ import annotations

import os
import statistics
import threading
import time

import pandas as pd
import pytest

from agent_kernel.errors import ToolInputError
from agent_kernel.sql import guard, sandbox
from agent_kernel.sql import worker as sql_worker
from agent_kernel.store import Store
from agent_kernel.store.sessions import Sessions
from tests.support.calls import sql_refused as refused
from tests.support.calls import sql_run as run
from tests.support.capabilities import needs_sql_guard
from tests.support.paths import REPO

pytestmark = needs_sql_guard


def test_the_sandbox_is_locked(store):
    settings = dict(
        run(
            store,
            "SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access', "
            "'lock_configuration', 'max_execution_time', 'autoload_known_extensions', 'enable_progress_bar', "
            "'threads', 'memory_limit')",
        ).rows
    )
    assert settings == {
        "enable_external_access": "false",
        "lock_configuration": "true",
        "max_execution_time": "5000",
        "autoload_known_extensions": "false",
        "enable_progress_bar": "false",
        "threads": str(min(4, os.cpu_count() or 1)),
        "memory_limit": "953.6 MiB",  # 1GB
    }
    with store.connect() as con:  # the project's own connections are not sandboxed
        assert con.execute("SELECT current_setting('enable_external_access')").fetchone()[0] is True


def test_kernel_frames_are_read_in_place_and_cannot_be_written(store):
    sales = pd.DataFrame({"region": ["EU", "US", "EU"], "revenue": [10.0, 20.0, 5.5]})
    frames = {"Sales": sales}
    totals = run(store, "SELECT region, sum(revenue) FROM sales GROUP BY ALL ORDER BY 1", frames=frames)
    assert totals.rows == [("EU", 15.5), ("US", 20.0)]
    assert "DataFrame in the kernel" in refused(store, "DELETE FROM sales", frames=frames)
    assert "DataFrame in the kernel" in refused(store, "DROP TABLE Sales", frames=frames)
    kept = run(store, "CREATE TABLE ai_sales AS SELECT * FROM Sales WHERE revenue > 6", frames=frames)
    assert kept.changes == 2
    assert run(store, "SELECT count(*) FROM ai_sales").rows == [(2,)]  # no frame needed any more
    full = run(store, "SELECT * FROM sales ORDER BY revenue", frames=frames, into=True)
    assert full.frame.shape == (3, 2) and list(full.frame.columns) == ["region", "revenue"]
    # A real table wins over a frame of the same name, as in DuckDB's own replacement scans.
    assert run(store, "SELECT count(*) FROM ai_sales", frames={"ai_sales": sales}).rows == [(2,)]


def test_row_cap_and_stays_usable_after_a_timeout(store):
    capped = run(store, "SELECT * FROM range(2500)")
    assert len(capped.rows) == 1000 and capped.truncated
    assert not run(store, "SELECT * FROM range(1000)").truncated
    limits = sandbox.Limits(timeout_s=0.5)
    started = time.perf_counter()
    message = refused(store, "SELECT count(*) FROM range(1e11::BIGINT)", limits=limits)
    assert time.perf_counter() - started < 0.5 * 1.5 + 0.5  # the limit plus opening the file
    assert "longer than 0.5 s" in message and "nothing was changed" in message
    assert run(store, "SELECT 42", limits=limits).rows == [(42,)]


def test_a_write_past_the_size_cap_is_rolled_back(store):
    limits = sandbox.Limits(max_db_bytes=4 * 1024 * 1024)
    message = refused(
        store, "CREATE TABLE ai_big AS SELECT range AS n, md5(range::VARCHAR) AS h FROM range(400000)", limits=limits
    )
    assert "over its cap of 4.0 MB" in message and "rolled back" in message
    assert "does not exist" in refused(store, "SELECT count(*) FROM ai_big")
    assert run(store, "CREATE TABLE ai_small AS SELECT 1 AS n", limits=limits).changes == 1


def test_interrupt_stops_a_running_query(store):
    sql_run = sandbox.SqlRun(store, sandbox.Limits(timeout_s=60))
    threading.Timer(0.5, sql_run.interrupt).start()
    started = time.perf_counter()
    with pytest.raises(ToolInputError, match="stopped"):
        sql_worker.run_sql(sql_run, guard.parse("SELECT count(*) FROM range(1e11::BIGINT)"))
    assert time.perf_counter() - started < 5


def test_queries_of_kernel_frames_do_not_wait_for_the_file(store):
    frames = {"sales": pd.DataFrame({"region": ["EU", "US"], "revenue": [1.0, 2.0]})}
    assert run(store, "SELECT count(*) FROM sessions").rows == [(1,)]  # the file's tables are now known
    held = threading.Event()

    def hold_the_file():
        with Store(store.path).connect():  # another user of the file, e.g. a second kernel
            held.set()
            time.sleep(1.5)

    holder = threading.Thread(target=hold_the_file)
    holder.start()
    held.wait(5)
    started = time.perf_counter()
    totals = run(store, "WITH t AS (SELECT * FROM sales) SELECT sum(revenue) FROM t", frames=frames)
    frame_seconds = time.perf_counter() - started
    joined = run(store, "SELECT count(*) FROM sales, sessions", frames=frames)  # needs the file: waits
    file_seconds = time.perf_counter() - started
    holder.join()
    assert totals.rows == [(3.0,)] and frame_seconds < 0.5
    assert joined.rows == [(2,)] and file_seconds > 1.0


def test_polars_and_arrow_frames_are_read_in_place(store):
    import polars as pl
    import pyarrow as pa

    frames = {
        "orders": pl.DataFrame({"id": [1, 2, 3], "amount": [5.0, 7.5, 2.5]}),
        "pending": pl.LazyFrame({"id": [3]}),
        "customers": pa.table({"id": [1, 2, 3], "name": ["Ada", "Grace", "Edsger"]}),
    }
    query = (
        "SELECT c.name, o.amount FROM orders o JOIN customers c USING (id) "
        "WHERE o.id NOT IN (SELECT id FROM pending) ORDER BY o.id"
    )
    assert run(store, "CREATE TABLE ai_orders AS SELECT * FROM orders", frames=frames).changes == 3  # on the file
    assert run(store, query, frames=frames).rows == [("Ada", 5.0), ("Grace", 7.5)]  # in memory
    assert "DataFrame in the kernel" in refused(store, "DELETE FROM customers", frames=frames)


def test_the_in_memory_sandbox_for_frames_is_locked_too(store):
    frames = {"df": pd.DataFrame({"x": [1]})}
    run(store, "SELECT 1")  # the file's tables are now known, so frame-only queries stay in memory
    settings = (
        "SELECT current_setting('enable_external_access'), current_setting('lock_configuration'), "
        "current_setting('enable_progress_bar'), current_database() FROM df"
    )
    assert run(store, settings, frames=frames).rows == [(False, True, False, "memory")]
    assert "no file or network access" in refused(store, "SELECT * FROM df, read_csv('/etc/passwd')", frames=frames)


# -- the storage layer, with the SQL analysis switched off -----------------------------------


@pytest.fixture
def unchecked(monkeypatch):
    """The guard's plan check switched off: every statement is taken as a read of nothing."""
    monkeypatch.setattr(sandbox, "check_plan", lambda *args, **kwargs: guard.Plan(frozenset(), ()))
    # The check is off in this process only, so calls run here rather than in a SQL worker.
    monkeypatch.setattr(
        sql_worker, "run_sql", lambda sql_run, statements, **options: sql_run.run_here(statements, **options)
    )


def _rows(store, table):
    with store.connect() as con:
        return con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM sessions",
        "UPDATE sessions SET token_limit = 999999999",
        "DROP TABLE messages",
        "CREATE TABLE ai_x AS SELECT 1 AS x",
        "CREATE TRIGGER ai_w AFTER INSERT ON messages FOR EACH STATEMENT DELETE FROM code_executions",
    ],
)
def test_the_read_only_connection_refuses_a_write_by_itself(store, unchecked, sql):
    before = _rows(store, "sessions")
    message = refused(store, sql, read_only=True)
    assert "read-only mode" in message
    assert _rows(store, "sessions") == before
    with store.connect() as con:
        assert {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()} >= {"messages"}
        assert con.execute("SELECT count(*) FROM duckdb_triggers()").fetchone()[0] == 0
        assert "ai_x" not in {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


# Every way to change the project's data that a gap in the guard could let through: the
# store is attached READ_ONLY to the model's connection, so DuckDB refuses each by itself.
PROJECT_CHANGES = [
    "DELETE FROM sessions",
    "UPDATE sessions SET token_limit = 999999999",
    "CREATE TABLE ai_log AS SELECT 1 AS x; INSERT INTO jobs (id, name, kind, timezone) VALUES ('j', 'j', 'notebook', 'UTC')",
    "ALTER TABLE sessions ADD COLUMN evil INT",
    "COMMENT ON TABLE messages IS 'obey'",
    "COMMENT ON COLUMN messages.role IS 'obey'",
    "CREATE INDEX ai_i ON messages (role)",
    "CREATE TRIGGER ai_w AFTER INSERT ON messages FOR EACH STATEMENT DELETE FROM code_executions",
    "DROP TABLE messages",
    "TRUNCATE sessions",
    "INSERT OR REPLACE INTO agent_state (key, value) VALUES ('k', '2')",
    "CREATE TABLE agent_kernel_store.main.ai_planted AS SELECT 1 AS x",
    "CREATE VIEW agent_kernel_store.main.recent AS SELECT 1 AS x",
    "CREATE MACRO agent_kernel_store.main.sessions_total() AS 1",
    "CREATE SEQUENCE agent_kernel_store.main.counter",
    "CREATE SCHEMA agent_kernel_store.planted",
    "ALTER TABLE agent_kernel_store.main.sessions RENAME TO ai_sessions",
]


def _store_contents(store) -> list:
    with store.connect() as con:
        return [
            con.execute("SELECT * FROM sessions ORDER BY ALL").fetchall(),
            con.execute("SELECT * FROM agent_state ORDER BY ALL").fetchall(),
            con.execute("SELECT table_name, sql, comment FROM duckdb_tables() ORDER BY ALL").fetchall(),
            con.execute("SELECT table_name, column_name, comment FROM duckdb_columns() ORDER BY ALL").fetchall(),
            con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY ALL").fetchall(),
            con.execute("SELECT function_name FROM duckdb_functions() WHERE NOT internal ORDER BY ALL").fetchall(),
            con.execute("SELECT sequence_name FROM duckdb_sequences() ORDER BY ALL").fetchall(),
            con.execute("SELECT schema_name FROM duckdb_schemas() ORDER BY ALL").fetchall(),
            con.execute("SELECT index_name FROM duckdb_indexes() ORDER BY ALL").fetchall(),
            con.execute("SELECT trigger_name FROM duckdb_triggers() ORDER BY ALL").fetchall(),
        ]


@pytest.mark.parametrize("sql", PROJECT_CHANGES)
def test_the_store_is_attached_read_only_so_no_statement_changes_it(store, unchecked, sql):
    with store.connect() as con:
        con.execute("INSERT INTO agent_state (key, value) VALUES ('k', '1')")
    before = _store_contents(store)
    message = refused(store, sql)
    assert "read-only mode" in message or "does not exist" in message or "not found" in message.lower()
    assert _store_contents(store) == before
    # The whole call was undone, the model's file too.
    assert "does not exist" in refused(store, "SELECT * FROM ai_log")


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("CREATE TABLE notes (a INT)", "table notes"),
        ("CREATE VIEW sessions AS SELECT 1 AS id", "view sessions"),  # would shadow the project's
        ("CREATE MACRO sessions_total() AS 1", "macro sessions_total"),
        ("CREATE SEQUENCE counter", "sequence counter"),
        (
            "CREATE TABLE ai_x (a INT); CREATE TABLE ai_y (a INT); "
            "CREATE TRIGGER ai_w AFTER INSERT ON ai_x FOR EACH STATEMENT DELETE FROM ai_y",
            "trigger ai_w",
        ),
    ],
)
def test_the_models_file_keeps_only_ai_objects_even_past_the_guard(store, unchecked, sql, says):
    message = refused(store, sql)
    assert says in message and "only objects named ai_*" in message and "rolled back" in message
    assert run(store, "SELECT count(*) FROM duckdb_tables() WHERE database_name = 'agent_kernel_ai'").rows == [(0,)]
    assert run(store, "SELECT count(*) FROM sessions").rows == [(1,)]


def test_the_guard_gives_the_model_a_sentence_for_a_write_to_the_attached_store(store):
    message = refused(store, "CREATE TABLE agent_kernel_store.main.ai_planted AS SELECT 1 AS x")
    assert message.startswith("agent-kernel's own tables are read-only to db_sql, so nothing was changed.")
    with store.connect() as con:
        assert "ai_planted" not in {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


def test_ai_objects_land_in_the_models_file_beside_the_store(store, unchecked):
    run(store, "CREATE TABLE ai_x AS SELECT 1 AS x; CREATE INDEX ai_xi ON ai_x (x); CREATE SEQUENCE ai_s")
    assert run(store, "SELECT nextval('ai_s')").rows == [(1,)]
    assert run(store, "SELECT x, (SELECT count(*) FROM sessions) FROM ai_x").rows == [(1, 1)]
    assert store.ai_path.parent == store.path.parent and store.ai_path.exists()
    with store.connect() as con:  # nothing of the model's is in the store itself
        assert "ai_x" not in {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


def _grow(store, rows: int) -> None:
    """Many stored messages, written the way the store writes them (one bulk INSERT)."""
    with store.connect() as con:
        session = Sessions(con).create("long", notebook=None).id
        con.execute(
            "INSERT INTO messages (session_id, seq, turn, role, content) "
            "SELECT ?, i, i, 'user', to_json({'text': repeat(md5(i::VARCHAR), 12)}) FROM range(?) t(i)",
            [session, rows],
        )


def _median_write(store, calls: int = 5) -> float:
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        run(store, "CREATE OR REPLACE TABLE ai_x AS SELECT 42 AS a; INSERT INTO ai_x VALUES (1)")
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def test_a_writing_call_costs_the_same_on_a_grown_store(tmp_path):
    fresh, grown = Store(tmp_path / "fresh.duckdb"), Store(tmp_path / "grown.duckdb")
    with fresh.connect() as con:
        Sessions(con).create("kept", notebook=None)
    _grow(grown, 300_000)
    assert grown.path.stat().st_size > 50 * 1024 * 1024
    for store in (fresh, grown, fresh, grown):  # workers up, first opens done
        run(store, "SELECT count(*) FROM sessions")
    # Interleaved, so a load on the machine falls on both alike.
    fresh_times, grown_times = [], []
    for _ in range(4):  # the least of four rounds: a round a busy machine slowed drops out
        fresh_times.append(_median_write(fresh, 3))
        grown_times.append(_median_write(grown, 3))
    ratio = min(grown_times) / min(fresh_times)
    print(
        f"a writing call: {min(fresh_times) * 1000:.0f} ms fresh, {min(grown_times) * 1000:.0f} ms grown ({ratio:.2f}x)"
    )
    assert ratio <= 1.5, (fresh_times, grown_times)


def test_reads_work_on_the_read_only_connection(store):
    frames = {"sales": pd.DataFrame({"n": [1, 2]})}
    assert run(store, "SELECT count(*) FROM sessions", read_only=True).rows == [(1,)]
    assert run(store, "SELECT sum(n) FROM sales, sessions", read_only=True, frames=frames).rows == [(3,)]
    assert run(store, "EXPLAIN SELECT * FROM sessions", read_only=True).rows
    assert "read-only" in refused(store, "CREATE TABLE ai_x (a INT)", read_only=True)


# A scalar call DuckDB cannot interrupt: ~5 s of one levenshtein, little memory.
EXPENSIVE_CALL = "SELECT levenshtein(repeat('a', 30000), repeat('b', 30000))"


def _time_to_take_the_lock(store, started: float, taken: dict) -> threading.Thread:
    """Another user of the file (a second kernel, the scheduler) opening it meanwhile."""

    def take():
        time.sleep(0.3)
        with Store(store.path).connect() as con:
            taken["after"] = time.perf_counter() - started
            con.execute("SELECT 1")

    thread = threading.Thread(target=take)
    thread.start()
    return thread


# The same over a kernel frame's columns: the query runs in a fork of this process.
EXPENSIVE_FRAME_CALL = "SELECT levenshtein(a, b) FROM pairs"
PAIRS = {"pairs": pd.DataFrame({"a": ["a" * 30000], "b": ["b" * 30000]})}


@pytest.mark.parametrize("stop", ["limit", "interrupt"])
@pytest.mark.parametrize(
    ("sql", "frames"), [(EXPENSIVE_CALL, {}), (EXPENSIVE_FRAME_CALL, PAIRS)], ids=["file", "frame"]
)
def test_an_uninterruptible_call_is_stopped_and_frees_the_file(store, stop, sql, frames):
    run(store, "SELECT 1")  # a worker is ready, the file's tables known: the clock measures the call
    limits = sandbox.Limits(timeout_s=1.0 if stop == "limit" else 60.0)
    sql_run = sandbox.SqlRun(store, limits)
    if stop == "interrupt":
        threading.Timer(1.0, sql_run.interrupt).start()
    taken: dict = {}
    started = time.perf_counter()
    other = _time_to_take_the_lock(store, started, taken)
    with pytest.raises(ToolInputError) as caught:
        sql_worker.run_sql(sql_run, guard.parse(sql), frames=frames)
    stopped_after = time.perf_counter() - started
    other.join()
    expected = "longer than 1 s" if stop == "limit" else "The query was stopped."
    assert expected in str(caught.value)
    # 1 s, then the worker has GRACE_S to answer before it is killed; opening the file is extra.
    assert stopped_after < 1.0 + sandbox_grace() + 1.0
    assert taken["after"] < 1.0 + sandbox_grace() + 1.5  # the other user did not wait for the call
    assert run(store, "SELECT 42").rows == [(42,)]  # a new worker, the same file
    assert run(store, "SELECT count(*) FROM pairs", frames=PAIRS).rows == [(1,)]
    assert _forks_left() == []  # the killed child was reaped


def _forks_left(wait_s: float = 3.0) -> list:
    """Forks of this process left running, or left as zombies, once the background reaper
    had ``wait_s`` to reap them (SQL workers and other helpers, such as the chart renderer
    an earlier test started, are not forks; nor is the fork kept for the next call)."""
    import psutil

    deadline = time.monotonic() + wait_s
    while True:
        left = []
        kept = sql_worker._kept.pid if sql_worker._kept is not None else None
        for child in psutil.Process().children():
            try:
                if _is_fork(child) and child.pid != kept:
                    left.append((child.pid, child.status()))
            except psutil.NoSuchProcess:
                pass
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _is_fork(child) -> bool:
    import psutil

    if child.status() == psutil.STATUS_ZOMBIE:
        return True
    return child.cmdline() == psutil.Process().cmdline()


def _is_sql_process(child) -> bool:
    """A fork running a query, or an SQL worker (not some other helper of the test process)."""
    return _is_fork(child) or "agent_kernel.sql.worker" in " ".join(child.cmdline())


def sandbox_grace() -> float:
    from agent_kernel.sql.worker import GRACE_S

    return GRACE_S


class _PeakMemory:
    """The largest resident size of this process's children (the SQL workers, forks) meanwhile.

    ``growth``: the most a child grew over its size when first seen (a fork starts at the
    size of this process, whose pages it shares).
    """

    def __enter__(self):
        import psutil

        self.peak = self.growth = 0
        self._done = threading.Event()
        me = psutil.Process()
        first: dict[int, int] = {}

        def watch():
            while not self._done.is_set():
                for child in me.children():
                    try:
                        if not _is_sql_process(child):
                            continue
                        rss = child.memory_info().rss
                    except psutil.Error:
                        continue
                    first.setdefault(child.pid, rss)
                    self.peak = max(self.peak, rss)
                    self.growth = max(self.growth, rss - first[child.pid])
                time.sleep(0.01)

        self._thread = threading.Thread(target=watch)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()


# One vector of these is gigabytes, outside DuckDB's memory_limit (each passed 7 GB in-process).
HUGE_VALUES = [
    ("SELECT repeat('x', 10000000) AS s FROM range(1001)", {}, "1GB"),
    ("SELECT range(80000000) AS l", {}, "512MB"),
    ("SELECT repeat('x', 10000000) AS s FROM df", {"df": pd.DataFrame({"n": range(1001)})}, "512MB"),  # in a fork
]


@pytest.mark.parametrize(("sql", "frames", "memory_limit"), HUGE_VALUES)
def test_huge_values_are_stopped_within_the_memory_bound(store, sql, frames, memory_limit):
    import resource

    run(store, "SELECT 1")
    kernel_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    limits = sandbox.Limits(timeout_s=60, memory_limit=memory_limit)  # the memory bound acts, not the clock
    with _PeakMemory() as worker:
        message = refused(store, sql, frames=frames, limits=limits)
    assert "memory" in message and "nothing was changed" in message
    assert worker.growth < limits.worker_memory_bytes() + 256 * 1024**2 < 2 * 1024**3
    if not frames:  # a worker's whole size is bounded; a fork's starts at this process's
        assert worker.peak < limits.worker_memory_bytes() + 256 * 1024**2
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - kernel_before < 256 * 1024**2
    assert run(store, "SELECT 42").rows == [(42,)]
    assert _forks_left() == []


def test_reads_of_kernel_frames_alone_see_them_in_place(store):
    """They run in a fork of the kernel: the frame is neither copied nor pickled."""
    import numpy as np

    big = pd.DataFrame({"n": np.arange(50_000_000)})  # 400 MB
    big.attrs["made_by"] = lambda: None  # a frame that cannot be pickled
    frames = {"big": big}
    slow_ok = sandbox.Limits(timeout_s=60)  # a busy machine takes longer than the default 5 s
    run(store, "SELECT 1")  # the file's tables are known
    with _PeakMemory() as child:
        totals = run(store, "SELECT sum(n), count(*) FROM big", frames=frames, limits=slow_ok)
    assert totals.rows == [(sum(range(50_000_000)), 50_000_000)]
    assert child.growth < 150 * 1024**2  # a copy would be 400 MB
    top = run(store, "SELECT n FROM big ORDER BY n DESC LIMIT 2", frames=frames, into=True, limits=slow_ok)
    assert top.frame["n"].tolist() == [49_999_999, 49_999_998]
    assert _forks_left() == []
    # A call that also reads the file runs in a worker process, which gets the frames pickled.
    assert "cannot be read by db_sql" in refused(store, "SELECT count(*) FROM big, sessions", frames=frames)


def test_big_rows_are_read_within_a_byte_budget(store):
    limits = sandbox.Limits(timeout_s=60)  # the byte budget acts, not the clock (slow on a busy machine)
    with _PeakMemory() as worker:
        big = run(
            store, "SELECT range AS n, repeat('x', 100000) AS s FROM range(100000)", limits=limits
        )  # 10 GB in all
    assert big.truncated and "rows are large" in big.note
    assert 0 < len(big.rows) < 1000 and sum(len(s) for _, s in big.rows) <= limits.fetch_bytes
    assert worker.peak < 2 * 1024**3


def test_into_is_capped_by_rows_and_bytes(store):
    by_rows = run(
        store, "SELECT range AS n FROM range(300000000)", into=True, limits=sandbox.Limits(into_max_rows=1_000_000)
    )
    assert by_rows.frame.shape == (1_000_000, 1) and by_rows.truncated
    assert "1,000,000 rows (AgentKernel.into_max_rows)" in by_rows.note
    assert by_rows.frame.n.iloc[-1] == 999_999
    by_bytes = run(
        store, "SELECT range AS n FROM range(1000000)", into=True, limits=sandbox.Limits(into_max_bytes=80_000)
    )
    assert 5_000 <= len(by_bytes.frame) <= 10_000 and "AgentKernel.into_max_mb" in by_bytes.note
    whole = run(store, "SELECT range AS n FROM range(5000)", into=True)
    assert whole.frame.shape == (5000, 1) and not whole.truncated and not whole.note


IDLE_WORKER_AT_EXIT = """
import sys
from agent_kernel.store import Store
sys.path.insert(0, sys.argv[2])
from tests.support.calls import sql_run
store = Store(sys.argv[1])
with store.connect():
    pass
print(sql_run(store, "SELECT 41 + 1").rows)
"""


def test_a_process_leaves_with_its_idle_sql_workers_reaped(tmp_path):
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-W", "default::ResourceWarning", "-c", IDLE_WORKER_AT_EXIT,
         str(tmp_path / "agent.duckdb"), str(REPO)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[(42,)]"
    assert "still running" not in out.stderr and "ResourceWarning" not in out.stderr, out.stderr


def test_a_kernel_interrupt_leaves_the_idle_sql_workers_running(store):
    """A kernel interrupt is sent to the kernel's process group, which holds its SQL workers."""
    import signal

    import psutil

    assert run(store, "SELECT 1").rows == [(1,)]
    workers = [
        child for child in psutil.Process().children()
        if "agent_kernel.sql.worker" in " ".join(child.cmdline())
    ]  # fmt: skip
    assert workers
    for worker in workers:
        os.kill(worker.pid, signal.SIGINT)
    time.sleep(0.5)
    assert all(worker.is_running() and worker.status() != psutil.STATUS_ZOMBIE for worker in workers)
    assert run(store, "SELECT 2").rows == [(2,)]


def test_a_fork_lets_go_of_the_frames_once_it_has_left(store):
    """The frames a fork read are registered on a connection of the call's own, closed once
    the child has been reaped: the kernel keeps no reference to a frame the user dropped."""
    import weakref

    frame = pd.DataFrame({"n": range(1000)})
    kept = weakref.ref(frame)
    run(store, "SELECT 1")  # the file's tables are known: the next call runs in a fork
    assert run(store, "SELECT max(n) FROM frame", frames={"frame": frame}).rows == [(999,)]
    assert _forks_left() == []
    del frame
    deadline = time.monotonic() + 3
    while kept() is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kept() is None
    # and the next fork finds the database free (no connection of an earlier call holds it)
    assert run(store, "SELECT count(*) FROM again", frames={"again": pd.DataFrame({"n": [1, 2]})}).rows == [(2,)]
