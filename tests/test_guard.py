"""The SQL guard on a real DuckDB file: statement kinds from the parser, write targets from the binder."""

from __future__ import annotations

import pytest

from agent_kernel.errors import ToolInputError
from agent_kernel.store import guard
from agent_kernel.store.sessions import Sessions

from .calls import sql_refused as refused
from .calls import sql_run as run
from .capabilities import needs_sql_guard

pytestmark = needs_sql_guard

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
