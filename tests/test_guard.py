"""The SQL guard on a real DuckDB file: statement kinds, write targets, the sandbox, the caps."""

from __future__ import annotations

import threading
import time

import pandas as pd
import pytest

from agent_kernel.errors import ToolInputError
from agent_kernel.store import Store, guard
from agent_kernel.store.sessions import Sessions


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "agent.duckdb")
    with store.connect() as con:
        Sessions(con).create("kept", notebook=None)
    return store


def run(store, sql, limits=None, **options):
    return guard.SqlRun(store, limits or guard.Limits()).run(guard.parse(sql), **options)


def refused(store, sql, **options) -> str:
    with pytest.raises(ToolInputError) as caught:
        run(store, sql, **options)
    return str(caught.value)


# Refused by kind, before any connection: (statement, words the refusal must contain)
BY_KIND = [
    ("ATTACH ':memory:' AS other", "own database"),
    ("DETACH other", "own database"),
    ("COPY messages TO 'out.csv'", "no file or network access"),
    ("EXPORT DATABASE 'dump'", "no file or network access"),
    ("IMPORT DATABASE 'dump'", "db_schema"),
    ("INSTALL httpfs", "no extensions"),
    ("LOAD httpfs", "no extensions"),
    ("SET threads = 64", "settings are fixed"),
    ("RESET memory_limit", "settings are fixed"),
    ("USE memory", "settings are fixed"),
    ("SET VARIABLE x = 1", "settings are fixed"),
    ("PRAGMA database_size", "pragma_table_info"),
    ("VACUUM", "maintained for you"),
    ("ANALYZE", "maintained for you"),
    ("BEGIN TRANSACTION", "one transaction"),
    ("COMMIT", "one transaction"),
    ("PREPARE q AS SELECT 1", "params"),
    ("EXECUTE q", "params"),
    ("EXPLAIN ANALYZE DELETE FROM messages", "EXPLAIN (the plan only)"),
    ("EXPLAIN (ANALYZE, FORMAT json) SELECT 1", "EXPLAIN (the plan only)"),
    ("UPDATE EXTENSIONS", "not allowed"),
    ("PIVOT sessions ON state", "values listed"),
]


@pytest.mark.parametrize(("sql", "says"), BY_KIND, ids=[s for s, _ in BY_KIND])
def test_refused_by_kind_without_opening_the_file(sql, says):
    with pytest.raises(ToolInputError) as caught:
        guard.parse(sql)
    assert says in str(caught.value)


# Refused by the binder's plan, inside the transaction: (statement, words of the refusal)
BY_PLAN = [
    ("INSERT INTO sessions (id, name) VALUES ('x', 'y')", "agent-kernel's own tables"),
    ("UPDATE sessions SET state = 'error'", "agent-kernel's own tables"),
    ("DELETE FROM messages", "agent-kernel's own tables"),
    ("TRUNCATE sessions", "agent-kernel's own tables"),
    ("DROP TABLE sessions", "agent-kernel's own tables"),
    ("ALTER TABLE sessions ADD COLUMN x INT", "agent-kernel's own tables"),
    ("COMMENT ON TABLE sessions IS 'mine now'", "agent-kernel's own tables"),
    ("CREATE OR REPLACE TABLE sessions AS SELECT 1 AS id", "agent-kernel's own tables"),
    ("CREATE INDEX ai_idx ON sessions (name)", "agent-kernel's own tables"),
    ("INSERT INTO tool_calls SELECT * FROM tool_calls", "agent-kernel's own tables"),
    ("UPDATE code_executions SET success = true", "agent-kernel's own tables"),
    ("WITH gone AS (DELETE FROM sessions RETURNING *) SELECT count(*) FROM gone", "agent-kernel's own tables"),
    ("WITH x AS (SELECT 1) INSERT INTO main.sessions (id, name) SELECT 'a', 'b' FROM x", "agent-kernel's own tables"),
    ("MERGE INTO sessions s USING sessions t ON s.id = t.id WHEN MATCHED THEN UPDATE SET state = 'x'", "own tables"),
    ("CREATE TABLE notes (t VARCHAR)", "named ai_*"),
    ("CREATE VIEW recent AS SELECT * FROM sessions", "named ai_*"),
    ("CREATE MACRO twice(x) AS x * 2", "named ai_*"),
    ("CREATE SCHEMA scratch", "named ai_*"),
    ("CREATE SEQUENCE counter", "named ai_*"),
    ("SELECT * FROM read_csv('/etc/passwd')", "no file or network access"),
    ("SELECT * FROM read_text('/etc/hostname')", "no file or network access"),
    ("SELECT * FROM glob('/etc/*')", "no file or network access"),
    ("SELECT * FROM read_parquet('https://example.com/x.parquet')", "no file or network access"),
    ("SELECT * FROM 'data.csv'", "no file or network access"),
    ("CALL checkpoint()", "not available"),
    ("CHECKPOINT", "not available"),
    ("SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))", "not available"),
    ("SELECT * FROM force_checkpoint()", "not available"),
    ("CALL enable_logging()", "configuration has been locked"),
    ("WITH c AS (COPY sessions TO 'out.csv') SELECT 1", "no file or network access"),
    ("CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')", "no file or network access"),
]


@pytest.mark.parametrize(("sql", "says"), BY_PLAN, ids=[s for s, _ in BY_PLAN])
def test_refused_by_plan_and_nothing_changes(store, sql, says):
    assert says in refused(store, sql)
    with store.connect() as con:
        assert Sessions(con).by_name("kept") is not None
        assert con.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1
        names = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert "notes" not in names and not (store.path.parent / "out.csv").exists()


def test_a_refusal_rolls_back_the_whole_call(store):
    message = refused(store, "CREATE TABLE ai_a (x INT); INSERT INTO ai_a VALUES (1); DELETE FROM sessions")
    assert "own tables" in message
    assert "does not exist" in refused(store, "SELECT * FROM ai_a")  # the first two were undone


def test_ai_tables_are_fully_writable(store):
    changed = run(
        store,
        "CREATE TABLE ai_notes (id INTEGER PRIMARY KEY, body VARCHAR);"
        "INSERT INTO ai_notes VALUES (1, 'a'), (2, 'b');"
        "UPDATE ai_notes SET body = 'B' WHERE id = 2;"
        "COMMENT ON TABLE ai_notes IS 'Notes the agent keeps.';"
        "COMMENT ON COLUMN ai_notes.body IS 'the text';"
        "CREATE VIEW ai_recent AS SELECT * FROM ai_notes JOIN sessions ON true;"
        "ALTER TABLE ai_notes ADD COLUMN score DOUBLE;"
        "CREATE INDEX ai_notes_body ON ai_notes (body);"
        "CREATE MACRO ai_twice(x) AS x * 2;"
        "INSERT INTO ai_notes (id, body) VALUES (3, 'c') ON CONFLICT DO NOTHING",
    )
    assert not changed.returns_rows and changed.changes == 2 + 1 + 1
    rows = run(store, "SELECT id, body, ai_twice(id) FROM ai_notes ORDER BY id").rows
    assert rows == [(1, "a", 2), (2, "B", 4), (3, "c", 6)]
    gone = run(store, "DELETE FROM ai_notes WHERE id = 1 RETURNING body")  # RETURNING gives rows
    assert gone.columns == ["body"] and gone.rows == [("a",)] and gone.wrote
    assert run(store, "DROP VIEW ai_recent; DROP INDEX ai_notes_body; ALTER TABLE ai_notes RENAME TO ai_kept").changes == 0
    assert run(store, "DROP TABLE ai_kept").changes == 0
    assert "named ai_*" in refused(store, "CREATE TABLE ai_x (a INT); ALTER TABLE ai_x RENAME TO jobs")


def test_reads_of_project_tables_and_metadata(store):
    assert run(store, "SELECT name FROM sessions").rows == [("kept",)]
    assert run(store, "SUMMARIZE sessions").rows
    assert run(store, "DESCRIBE messages").rows
    assert run(store, "CALL pragma_table_info('sessions')").rows
    assert run(store, "SELECT count(*) FROM duckdb_tables()").rows[0][0] >= 2
    assert run(store, "EXPLAIN SELECT * FROM sessions").columns == ["explain_key", "explain_value"]
    assert run(store, "PIVOT (SELECT state FROM sessions) ON state IN ('idle') USING count(*)").rows == [(1,)]
    assert run(store, "SELECT ? + 1 AS answer, ?::VARCHAR AS word", params=[41, "hi"]).rows == [(42, "hi")]


def test_the_sandbox_is_locked(store):
    settings = dict(
        run(
            store,
            "SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access', "
            "'lock_configuration', 'max_execution_time', 'autoload_known_extensions', 'enable_progress_bar')",
        ).rows
    )
    assert settings == {
        "enable_external_access": "false",
        "lock_configuration": "true",
        "max_execution_time": "5000",
        "autoload_known_extensions": "false",
        "enable_progress_bar": "false",
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
    limits = guard.Limits(timeout_s=0.5)
    started = time.perf_counter()
    message = refused(store, "SELECT count(*) FROM range(1e11::BIGINT)", limits=limits)
    assert time.perf_counter() - started < 0.5 * 1.5 + 0.5  # the limit plus opening the file
    assert "longer than 0.5 s" in message and "nothing was changed" in message
    assert run(store, "SELECT 42", limits=limits).rows == [(42,)]


def test_a_write_past_the_size_cap_is_rolled_back(store):
    limits = guard.Limits(max_db_bytes=4 * 1024 * 1024)
    message = refused(store, "CREATE TABLE ai_big AS SELECT range AS n, md5(range::VARCHAR) AS h FROM range(400000)", limits=limits)
    assert "over its cap of 4.0 MB" in message and "rolled back" in message
    assert "does not exist" in refused(store, "SELECT count(*) FROM ai_big")
    assert run(store, "CREATE TABLE ai_small AS SELECT 1 AS n", limits=limits).changes == 1


def test_interrupt_stops_a_running_query(store):
    sql_run = guard.SqlRun(store, guard.Limits(timeout_s=60))
    threading.Timer(0.5, sql_run.interrupt).start()
    started = time.perf_counter()
    with pytest.raises(ToolInputError, match="stopped"):
        sql_run.run(guard.parse("SELECT count(*) FROM range(1e11::BIGINT)"))
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM sessions", False),
        ("EXPLAIN DELETE FROM sessions", False),
        ("FROM ai_x; SELECT 1", False),
        ("INSERT INTO ai_x VALUES (1)", True),
        ("SELECT 1; CREATE TABLE ai_y (a INT)", True),
        ("WITH d AS (DELETE FROM ai_x RETURNING *) SELECT * FROM d", True),
        ("COMMENT ON TABLE ai_x IS 'x'", True),
        ("this is not sql", False),
    ],
)
def test_writes_is_decided_by_the_parser(sql, expected):
    assert guard.writes(sql) is expected


def test_placeholders_become_null_only_for_planning():
    assert guard._without_parameters("SELECT ?, '?', $1 FROM t WHERE a = ? -- ?") == (
        "SELECT NULL, '?', NULL FROM t WHERE a = NULL -- ?"
    )


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
