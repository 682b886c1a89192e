"""The model's own file: the one-time move of a store's ai_* objects, and reading them beside the store."""

from __future__ import annotations

import duckdb

from agent_kernel.store import Store, ai_tables, catalog
from agent_kernel.store.sessions import Sessions
from tests.support.calls import sql_run as run
from tests.support.capabilities import needs_sql_guard

# What db_sql made in the store itself, before the model had a file of its own.
OLD_WAY = """
CREATE SEQUENCE ai_ids START 10;
CREATE TABLE ai_notes (id INTEGER PRIMARY KEY DEFAULT nextval('ai_ids'), body VARCHAR NOT NULL, tags VARCHAR[]);
INSERT INTO ai_notes (body, tags) SELECT 'note ' || i, ['t' || (i % 3)] FROM range(5000) t(i);
COMMENT ON TABLE ai_notes IS 'Notes the agent keeps.';
COMMENT ON COLUMN ai_notes.body IS 'the text';
CREATE INDEX ai_notes_body ON ai_notes (body);
CREATE MACRO ai_twice(x) AS x * 2;
CREATE MACRO ai_firsts(n) AS TABLE SELECT * FROM ai_notes ORDER BY id LIMIT n;
CREATE VIEW ai_per_session AS SELECT s.name, count(*) AS notes FROM ai_notes, sessions AS s GROUP BY ALL;
CREATE VIEW ai_doubled AS SELECT ai_twice(id) AS d FROM ai_notes;
COMMENT ON VIEW ai_per_session IS 'Notes per session.';
"""


def _made_the_old_way(path) -> list:
    store = Store(path)
    with store.connect() as con:
        Sessions(con).create("kept", notebook=None)
    con = duckdb.connect(str(path))
    try:
        con.execute(OLD_WAY)
        return con.execute("SELECT * FROM ai_notes ORDER BY id").fetchall()
    finally:
        con.close()


def _store_names(store) -> set[str]:
    with store.connect() as con:
        return {
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views() "
                "UNION ALL SELECT sequence_name FROM duckdb_sequences() UNION ALL SELECT index_name FROM duckdb_indexes() "
                "UNION ALL SELECT function_name FROM duckdb_functions() WHERE NOT internal"
            ).fetchall()
        }


@needs_sql_guard
def test_a_stores_ai_objects_move_to_the_models_file_once_with_nothing_lost(tmp_path):
    rows = _made_the_old_way(tmp_path / "agent.duckdb")
    assert len(rows) == 5000
    store = Store(tmp_path / "agent.duckdb")  # a new process's first open after the upgrade
    with store.connect(read_only=True):
        pass
    assert not {name for name in _store_names(store) if name.startswith("ai_")}
    assert "sessions" in _store_names(store)
    # Through db_sql, as the model sees them: rows, defaults, views and macros as they were.
    assert run(store, "SELECT * FROM ai_notes ORDER BY id").rows == rows[:1000]
    assert run(store, "SELECT count(*), min(id), max(id) FROM ai_notes").rows == [(5000, 10, 5009)]
    assert run(store, "SELECT name, notes FROM ai_per_session").rows == [("kept", 5000)]
    assert run(store, "SELECT max(d) FROM ai_doubled").rows == [(10018,)]
    assert run(store, "SELECT count(*) FROM ai_firsts(3)").rows == [(3,)]
    assert run(store, "INSERT INTO ai_notes (body) VALUES ('next') RETURNING id").rows == [(5010,)]
    with duckdb.connect(str(store.ai_path), read_only=True) as con:
        assert con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'ai_notes'").fetchone() == (
            "Notes the agent keeps.",
        )
        assert con.execute(
            "SELECT comment FROM duckdb_columns() WHERE table_name = 'ai_notes' AND column_name = 'body'"
        ).fetchone() == ("the text",)
        assert con.execute("SELECT comment FROM duckdb_views() WHERE view_name = 'ai_per_session'").fetchone() == (
            "Notes per session.",
        )
        assert con.execute("SELECT count(*) FROM duckdb_indexes() WHERE index_name = 'ai_notes_body'").fetchone() == (
            1,
        )
    # A second open finds nothing to move and leaves the model's file as it is.
    mark = store.ai_path.stat().st_mtime_ns
    with Store(tmp_path / "agent.duckdb").connect() as con:
        assert ai_tables.move(con, store.ai_path) == 0
    assert store.ai_path.stat().st_mtime_ns == mark


def test_a_move_stopped_halfway_is_done_again_at_the_next_open(tmp_path):
    rows = _made_the_old_way(tmp_path / "agent.duckdb")
    path = tmp_path / "agent.duckdb"
    con = duckdb.connect(str(path))
    try:  # the copies made and committed, the originals not dropped yet
        con.execute(f"ATTACH '{ai_tables.ai_path(path)}' AS {ai_tables.AI_DATABASE}")
        con.execute(f"CREATE TABLE {ai_tables.AI_DATABASE}.main.ai_notes AS SELECT * FROM ai_notes LIMIT 3")
    finally:
        con.close()
    store = Store(path)
    with store.connect() as con:
        assert ai_tables.attach(con)
        assert con.execute(f"SELECT count(*) FROM {ai_tables.AI_DATABASE}.main.ai_notes").fetchone() == (len(rows),)
    assert not {name for name in _store_names(store) if name.startswith("ai_")}


def test_the_models_tables_are_described_beside_the_stores(tmp_path):
    store = Store(tmp_path / "agent.duckdb")
    with store.connect() as con:
        Sessions(con).create("kept", notebook=None)
        assert not ai_tables.attach(con)  # no file yet: nothing of the model's to show
        assert not [t for t in catalog.describe(con) if t.writable]
    _made_the_old_way(tmp_path / "other.duckdb")
    moved = Store(tmp_path / "other.duckdb")
    with moved.connect() as con:
        tables = {t.qualified: t for t in catalog.describe(con)}
        counts = catalog.row_counts(con, list(tables.values()))
        assert tables["ai_notes"].writable and tables["ai_notes"].comment == "Notes the agent keeps."
        assert tables["ai_per_session"].view and not tables["sessions"].writable
        assert counts["ai_notes"] == 5000 and counts["sessions"] == 1
    # The store let go of the model's file: a program of its own can open it for writing.
    duckdb.connect(str(moved.ai_path)).close()
