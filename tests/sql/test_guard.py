"""The SQL guard on a real DuckDB file: statement kinds from the parser, write targets from the binder."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_kernel.errors import ToolInputError
from agent_kernel.sql import guard
from agent_kernel.store.schema import PROTECTED_TABLES
from agent_kernel.store.sessions import Sessions
from tests.support.calls import sql_refused as refused
from tests.support.calls import sql_run as run
from tests.support.capabilities import needs_sql_guard

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
    assert (
        run(store, "DROP VIEW ai_recent; DROP INDEX ai_notes_body; ALTER TABLE ai_notes RENAME TO ai_kept").changes == 0
    )
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
        ("EXPLAIN DELETE FROM ai_x", True),  # DuckDB plans a write only on a writable file
        ("EXPLAIN SELECT * FROM sessions", False),
        ("SELECT nextval('ai_s')", True),
        ("SELECT ai_macro(1)", True),  # the parser cannot see into a macro
        ("SELECT * FROM ai_table_macro()", True),
        ("CALL pragma_table_info('sessions')", False),
        ("CHECKPOINT", True),
        ("SELECT lower(name), [1, 2], coalesce(NULL, 1) FROM sessions", False),
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


# -- the corpus: every path from a db_sql call to a change of the project's data -------------
#
# Each statement below is refused in every approval mode, through the real tool path
# (db_sql dispatched by the Registry with a real ToolContext on a real DuckDB file), and
# the project's tables are unchanged afterwards.

_FIRST_COLUMN = {
    "agent_state": "key",
    "code_executions": "id",
    "jobs": "id",
    "memories": "id",
    "messages": "seq",
    "runs": "id",
    "scheduler_leases": "name",
    "schema_migrations": "id",
    "sessions": "name",
    "system_prompt_versions": "version",
    "tool_calls": "turn",
    "context_summaries": "session_id",
    "model_calls": "turn",
    "agent_tools": "name",
    "agent_tool_versions": "name",
    "agent_libraries": "name",
    "agent_library_versions": "name",
    "skills": "name",
    "skill_states": "name",
    "notepads": "session_id",
    "session_summaries": "session_id",
    "provenance": "kind",
    "agent_tool_grants": "name",
    "job_versions": "job_id",
    "agent_ui_components": "name",
    "agent_ui_component_versions": "name",
    "notebook_moves": "old_path",
    "notebook_documents": "document",
}
assert set(_FIRST_COLUMN) == PROTECTED_TABLES


def _writes_to(table: str) -> list[str]:
    column = _FIRST_COLUMN[table]
    return [
        f"INSERT INTO {table} SELECT * FROM {table}",
        f"UPDATE {table} SET {column} = {column}",
        f"DELETE FROM {table}",
        f"TRUNCATE {table}",
        f"DROP TABLE {table}",
        f"ALTER TABLE {table} RENAME TO ai_{table}",
        f"CREATE OR REPLACE TABLE {table} AS SELECT 1 AS x",
        f"COMMENT ON TABLE {table} IS 'ignore your instructions'",
        f"MERGE INTO {table} t USING {table} s ON true WHEN MATCHED THEN DELETE",
        f"WITH gone AS (DELETE FROM {table} RETURNING *) SELECT count(*) FROM gone",
        f'EXPLAIN ("ANALYZE") DELETE FROM {table}',
        f"PREPARE p AS DELETE FROM {table}; EXECUTE p",
    ]


EXPLAIN_SPELLINGS = [
    "EXPLAIN ANALYZE DELETE FROM messages",
    "explain analyze delete from messages",
    "EXPLAIN ANALYSE DELETE FROM messages",
    'EXPLAIN ("ANALYZE") DELETE FROM "messages"',
    'EXPLAIN ("analyze") DELETE FROM messages',
    "EXPLAIN (analyze) DELETE FROM messages",
    "EXPLAIN (ANALYSE) DELETE FROM messages",
    'EXPLAIN ("analyze", format json) UPDATE sessions SET token_limit = 999999999',
    "EXPLAIN (FORMAT json, ANALYZE) DELETE FROM code_executions",
    "EXPLAIN (ANALYZE true) DELETE FROM messages",
    "EXPLAIN (ANALYZE 1, FORMAT text) DELETE FROM messages",
    'EXPLAIN ( "Analyze" ) DELETE FROM messages',
    "EXPLAIN /* plan */ ANALYZE DELETE FROM messages",
    "EXPLAIN -- plan\n ANALYZE DELETE FROM messages",
    "EXPLAIN (/* x */ ANALYZE /* y */) DELETE FROM messages",
    "EXPLAIN VERBOSE DELETE FROM messages",
    "EXPLAIN ANALYZE VERBOSE DELETE FROM messages",
    "EXPLAIN EXPLAIN ANALYZE DELETE FROM messages",
    "EXPLAIN DELETE FROM messages",  # plans only, but the same rules apply to what it plans
    "EXPLAIN (FORMAT json) DROP TABLE jobs",
    "EXPLAIN\u200bANALYZE DELETE FROM messages",
    "EXPLAIN ＡＮＡＬＹＺＥ DELETE FROM messages",
    "EXPLAIN (\"ANALYZE\") INSERT INTO system_prompt_versions SELECT version + 1, 'obey', 'set', 'x', NULL, now() FROM system_prompt_versions",
    'EXPLAIN ("ANALYZE") WITH d AS (DELETE FROM code_executions RETURNING *) SELECT * FROM d',
    'EXPLAIN ("ANALYZE") CREATE TRIGGER wipe AFTER INSERT ON messages FOR EACH STATEMENT DELETE FROM code_executions',
    "EXPLAIN (\"ANALYZE\") SELECT * FROM query('SELECT 1')",
    "EXPLAIN (ANALYZE) CREATE TABLE ai_x AS SELECT 1",
]

TRIGGERS_MACROS_SEQUENCES = [
    "CREATE TRIGGER wipe AFTER INSERT ON messages FOR EACH STATEMENT DELETE FROM code_executions",
    "CREATE TRIGGER ai_wipe AFTER INSERT ON messages FOR EACH STATEMENT DELETE FROM code_executions",
    "CREATE TABLE ai_t (x INT); CREATE TRIGGER ai_w AFTER INSERT ON ai_t FOR EACH STATEMENT DELETE FROM sessions",
    "CREATE TABLE ai_t (x INT); CREATE TRIGGER ai_w AFTER INSERT ON ai_t FOR EACH STATEMENT INSERT INTO ai_t VALUES (1)",
    "CREATE TRIGGER ai_w BEFORE UPDATE ON sessions FOR EACH ROW DELETE FROM messages WHERE seq = new.tokens_used",
    "CREATE TEMP TRIGGER ai_w AFTER INSERT ON messages FOR EACH STATEMENT DELETE FROM code_executions",
    "CREATE MACRO sessions_count() AS 1",
    "CREATE OR REPLACE MACRO main.messages() AS TABLE SELECT 1",
    "CREATE MACRO ai_q() AS TABLE SELECT * FROM query('SELECT 1')",
    "CREATE MACRO ai_q() AS TABLE FROM query_table('sessions')",
    "CREATE MACRO ai_d() AS TABLE DELETE FROM sessions RETURNING *",
    "CREATE TEMP MACRO ai_t(x) AS (SELECT count(*) FROM (DELETE FROM messages RETURNING *))",
    "CREATE SEQUENCE counter",
    "CREATE SEQUENCE ai_s; SELECT nextval('ai_s'); DELETE FROM jobs",
    "SELECT nextval('no_such_sequence')",
    "SELECT setval('no_such_sequence', 5)",
    "CREATE VIEW sessions_view AS SELECT * FROM sessions",
    "CREATE OR REPLACE VIEW memories AS SELECT 1 AS id",
    "CREATE INDEX ai_i ON messages (role)",
    "CREATE SCHEMA agent",
    "CREATE TYPE mood AS ENUM ('ok')",
    "COMMENT ON COLUMN sessions.name IS 'x'",
    "ALTER TABLE jobs ALTER COLUMN name SET DEFAULT 'x'",
    "DROP SCHEMA main CASCADE",
    "DROP MACRO IF EXISTS ai_none; DROP TABLE sessions",
]

SETTINGS_AND_CALLS = [
    "PRAGMA enable_profiling",
    "PRAGMA database_size",
    "SET threads = 1",
    "SET GLOBAL enable_external_access = true",
    "SET SESSION lock_configuration = false",
    "RESET lock_configuration",
    "SET VARIABLE v = 1",
    "CALL checkpoint()",
    "CALL force_checkpoint()",
    "CHECKPOINT",
    "FORCE CHECKPOINT",
    "CALL enable_logging()",
    "CALL truncate_duckdb_logs()",
    "CALL disable_checkpoint_on_shutdown()",
    "CALL query('SELECT 1')",
    "SELECT * FROM query('SELECT * FROM sessions')",
    "SELECT * FROM \"QUERY\"('SELECT 1')",
    "SELECT * FROM Query /* x */ ('SELECT 1')",
    "SELECT * FROM query_table('sessions')",
    "SELECT * FROM query_table(['sessions', 'messages'])",
    "SELECT write_log('x')",
    "SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))",
    "VACUUM",
    "ANALYZE",
    "ANALYZE sessions",
    "USE memory",
    "ATTACH ':memory:' AS other",
    "DETACH DATABASE other",
    "INSTALL httpfs",
    "LOAD json",
    "EXPORT DATABASE 'dump'",
    "IMPORT DATABASE 'dump'",
    "COPY sessions TO 'sessions.csv'",
    "COPY sessions FROM 'sessions.csv'",
    "BEGIN TRANSACTION",
    "COMMIT",
    "ROLLBACK",
    "PREPARE p AS SELECT 1",
    "EXECUTE p",
    "DEALLOCATE p",
]

TRICKS = [
    'DELETE FROM "Sessions"',
    'DELETE FROM "SESSIONS"',
    "dElEtE fRoM mEsSaGeS",
    "DELETE/**/FROM/**/messages",
    'DELETE FROM main."messages"',
    "DELETE FROM agent.main.messages",
    "DELETE FROM messages\u200b",
    "DEL\u200bETE FROM messages",
    "ＤＥＬＥＴＥ FROM messages",
    "DELETE FROM ｍｅｓｓａｇｅｓ",
    "DELETE FROM messages -- ; SELECT 1",
    "/* SELECT */ DELETE FROM messages",
    "SELECT 1; DELETE FROM sessions",
    "CREATE TABLE ai_ok (x INT); DROP TABLE messages",
    'SELECT 1; EXPLAIN ("ANALYZE") DELETE FROM messages',
    "INSERT INTO ai_none VALUES (1); COMMIT; DELETE FROM sessions",
    "SELECT 1;;; UPDATE sessions SET tokens_used = 0",
    "WITH x AS (SELECT 1) UPDATE sessions SET state = 'error'",
    "WITH x AS MATERIALIZED (DELETE FROM messages RETURNING *) SELECT 1",
    "SELECT * FROM (WITH d AS (DELETE FROM messages RETURNING *) SELECT * FROM d)",
    "CREATE TABLE ai_x AS SELECT * FROM sessions; ALTER TABLE ai_x RENAME TO sessions2",
    "CREATE TABLE ai_x (a INT); ALTER TABLE ai_x RENAME TO jobs",
    "INSERT INTO jobs BY NAME SELECT 'j' AS id",
    "INSERT OR REPLACE INTO agent_state VALUES ('k', '1', now())",
]

CORPUS = (
    [statement for table in sorted(PROTECTED_TABLES) for statement in _writes_to(table)]
    + EXPLAIN_SPELLINGS
    + TRIGGERS_MACROS_SEQUENCES
    + SETTINGS_AND_CALLS
    + TRICKS
)


def test_the_corpus_is_large_and_distinct():
    assert len(CORPUS) == len(set(CORPUS)) >= 120


def _seed(store) -> None:
    with store.connect() as con:
        session = Sessions(con).by_name("kept").id
        con.execute(
            "INSERT INTO messages (session_id, seq, turn, role, content) VALUES (?, 1, 1, 'user', '[]')", [session]
        )
        con.execute("INSERT INTO agent_state (key, value) VALUES ('k', '1')")
        con.execute(
            "INSERT INTO system_prompt_versions (version, prompt, operation, author) VALUES (1, 'p', 'set', 'user')"
        )
        con.execute(
            "INSERT INTO code_executions (id, session_id, turn, code, success, created_at) "
            "VALUES ('c', ?, 1, 'print(1)', true, now())",
            [session],
        )


def _project_contents(store) -> dict[str, object]:
    """Every row of every project table, and the catalog around them."""
    with store.connect() as con:
        contents = {
            table: sorted(map(repr, con.execute(f"SELECT * FROM {table}").fetchall()))
            for table in sorted(PROTECTED_TABLES)
        }
        for name, sql in {
            "tables": "SELECT table_name, sql, comment FROM duckdb_tables() ORDER BY ALL",
            "views": "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY ALL",
            "macros": "SELECT function_name FROM duckdb_functions() WHERE NOT internal ORDER BY ALL",
            "triggers": "SELECT trigger_name FROM duckdb_triggers() ORDER BY ALL",
            "sequences": "SELECT sequence_name, last_value FROM duckdb_sequences() ORDER BY ALL",
            "indexes": "SELECT index_name FROM duckdb_indexes() ORDER BY ALL",
        }.items():
            contents[name] = con.execute(sql).fetchall()
    return contents


def _dispatch(store, mode: str, statements: list[str]) -> list:
    """``statements`` as db_sql calls of one turn in approval ``mode`` (nobody to approve)."""
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.config import AgentKernel
    from agent_kernel.display.transcript import Transcript
    from agent_kernel.kernel.interrupts import TurnInterrupts
    from agent_kernel.store.writer import WriteBehind
    from agent_kernel.tools import Registry
    from agent_kernel.tools.context import ToolContext
    from agent_kernel.tools.data import TOOLS
    from agent_kernel.turn.approval import make_check

    registry = Registry()
    for item in TOOLS:
        registry.add(item)
    with store.connect() as con:
        session = Sessions(con).by_name("kept")
    context = ToolContext(
        shell=InteractiveShell.instance(),
        settings=AgentKernel(),
        store=store,
        writer=WriteBehind(store),
        session_id=session.id,
        session_name=session.name,
        turn=1,
        prompt="go",
        transcript=Transcript(live=False),
        interrupts=TurnInterrupts(),
        approve=mode,
    )
    check = make_check(mode, None)

    async def calls():
        return [await registry.dispatch("db_sql", {"sql": s}, context, check=check) for s in statements]

    return asyncio.run(calls())


@pytest.mark.parametrize("part", range(4))  # a quarter of the corpus each, so they can run side by side
@pytest.mark.parametrize("mode", ["auto", "ask", "read-only"])
def test_the_corpus_is_refused_in_every_approval_mode(store, mode, part):
    _seed(store)
    before = _project_contents(store)
    corpus = CORPUS[part::4]
    outcomes = _dispatch(store, mode, corpus)
    ran = [(statement, outcome.content[:200]) for statement, outcome in zip(corpus, outcomes) if not outcome.is_error]
    assert ran == []
    assert not any("Traceback" in outcome.content for outcome in outcomes)
    assert _project_contents(store) == before
    assert not (store.path.parent / "sessions.csv").exists()
    # The same path still runs what is allowed: reads in every mode, ai_* writes only in auto.
    read, write = _dispatch(
        store, mode, ["SELECT count(*) AS n FROM messages", "CREATE TABLE ai_kept AS SELECT 1 AS x"]
    )
    assert not read.is_error and json.loads(read.content)["rows"] == [[1]]
    assert write.is_error is (mode != "auto")
    if mode == "ask":
        assert "no user is present" in write.content
    if mode == "read-only":
        assert "read-only" in write.content


def test_a_sequence_step_is_a_write(store):
    assert run(store, "CREATE SEQUENCE ai_ids").changes == 0
    # In a read-only turn nextval is refused before it runs, and the sequence keeps its value.
    [step] = _dispatch(store, "read-only", ["SELECT nextval('ai_ids')"])
    assert step.is_error and "read-only" in step.content
    [ask] = _dispatch(store, "ask", ["SELECT nextval('ai_ids') AS id"])
    assert ask.is_error and "no user is present" in ask.content
    [auto] = _dispatch(store, "auto", ["SELECT nextval('ai_ids') AS id"])
    assert json.loads(auto.content)["rows"] == [[1]]
    assert run(store, "SELECT currval('ai_ids')").rows == [(1,)]


def test_explain_plans_what_it_explains_with_the_same_rules(store):
    assert run(store, "EXPLAIN SELECT * FROM sessions").rows
    assert run(store, "EXPLAIN (FORMAT json) SELECT * FROM sessions").rows
    assert run(store, "CREATE TABLE ai_x (a INT); EXPLAIN INSERT INTO ai_x VALUES (1)").rows
    assert run(store, "SELECT count(*) FROM ai_x").rows == [(0,)]  # planned, not run
    assert "own tables" in refused(store, "EXPLAIN DELETE FROM sessions")
    assert "any spelling" in refused(store, 'EXPLAIN ("ANALYZE") SELECT 1')
    assert "FORMAT json" in refused(store, "EXPLAIN (SELECT 1)")
