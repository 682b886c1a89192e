"""The model's own DuckDB file: its ``ai_*`` tables, views, macros and sequences, beside the store.

The model's ``db_sql`` connection (:meth:`agent_kernel.store.Store.connect` with
``ai=True``) opens this file and attaches the project's store ``READ_ONLY``, so DuckDB
itself refuses every change to a project table, whatever SQL reaches it; nothing has to
scan the project's rows to tell. The file is opened only under the store's lock, like the
store itself, so no other connection holds it while one writes it.

Code that shows the model's tables beside the project's (``db_schema``, the prompt's
"Your database") reads them through :func:`attach`, which adds the file read-only to a
store connection; the store lets go of it when that connection closes.

A store made before the file existed kept the model's objects among its own: :func:`move`
copies them over, once, at the store's first open, then drops them from the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agent_kernel.store.schema import WRITABLE_PREFIX, quote_name

if TYPE_CHECKING:
    import duckdb

__all__ = ["AI_DATABASE", "PROJECT_DATABASE", "ai_path", "attach", "move", "sql_literal"]

# What the model's file is called in a connection that has it attached.
AI_DATABASE = "agent_kernel_ai"
# What the project's store is called in the model's connection (the store's kept instance
# uses the same name, see agent_kernel.store).
PROJECT_DATABASE = "agent_kernel_store"

_IS_AI = f"starts_with(lower({{0}}), '{WRITABLE_PREFIX}')"


def ai_path(store_path: Path) -> Path:
    """Where the model's file of the store at ``store_path`` lives: beside it, named for it."""
    return store_path.with_name(f"{store_path.stem}.ai_tables{store_path.suffix or '.duckdb'}")


def sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def attach(con: duckdb.DuckDBPyConnection) -> bool:
    """Make the model's tables readable on ``con``, a store connection, as :data:`AI_DATABASE`
    (read-only); whether they are (False: the model has no file yet). The caller holds the
    store's lock; the store detaches the file when the outermost connection closes."""
    attached = {row[0] for row in con.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
    if AI_DATABASE in attached:
        return True
    row = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    if row is None or not row[0]:
        return False
    path = ai_path(Path(row[0]))
    if not path.exists():
        return False
    con.execute(f"ATTACH IF NOT EXISTS {sql_literal(str(path))} AS {AI_DATABASE} (READ_ONLY)")
    return True


def move(con: duckdb.DuckDBPyConnection, path: Path) -> int:
    """Move the ``ai_*`` objects of ``con``'s database (the store, open for writing) into
    the model's file at ``path``; how many were moved (0, and nothing else done, when there
    are none: every open after the first).

    Two transactions, as DuckDB writes one database per transaction: the copies are
    committed in the model's file first, then the originals dropped from the store. A
    process stopped in between leaves both; the next open copies again over the copies.
    """
    store = str(con.execute("SELECT current_database()").fetchone()[0])  # type: ignore[index]
    found = _objects(con, store)
    if not any(found.values()):
        return 0
    con.execute(f"ATTACH IF NOT EXISTS {sql_literal(str(path))} AS {AI_DATABASE}")
    cur = con.cursor()
    try:
        cur.execute(f"USE {AI_DATABASE}")
        cur.execute(f"SET search_path = '{AI_DATABASE}.main,{store}.main'")
        cur.execute("BEGIN TRANSACTION")
        _copy(cur, store, found)
        cur.execute("COMMIT")
        cur.execute(f"USE {quote_name(store)}")
        cur.execute("BEGIN TRANSACTION")
        _drop(cur, store, found)
        cur.execute("COMMIT")
    finally:
        cur.close()
        con.execute(f"DETACH DATABASE IF EXISTS {AI_DATABASE}")
    return sum(len(items) for items in found.values())


_Objects = dict[str, list[tuple[str, ...]]]


def _objects(con: duckdb.DuckDBPyConnection, database: str) -> _Objects:
    """The ``ai_*`` objects of ``database``, each kind in the order they were created."""
    where = f"database_name = {sql_literal(database)} AND schema_name = 'main'"
    queries = {
        "sequence": f"SELECT sequence_name, sql FROM duckdb_sequences() WHERE {where} AND "
        f"{_IS_AI.format('sequence_name')} ORDER BY sequence_oid",
        "table": f"SELECT table_name, sql, coalesce(comment::VARCHAR, '') FROM duckdb_tables() WHERE {where} "
        f"AND NOT temporary AND {_IS_AI.format('table_name')} ORDER BY table_oid",
        "index": f"SELECT index_name, sql FROM duckdb_indexes() WHERE {where} AND "
        f"{_IS_AI.format('table_name')} AND sql IS NOT NULL ORDER BY index_oid",
        "view": f"SELECT view_name, sql, coalesce(comment::VARCHAR, '') FROM duckdb_views() WHERE {where} "
        f"AND NOT internal AND NOT temporary AND {_IS_AI.format('view_name')} ORDER BY view_oid",
        "macro": "SELECT function_name, function_type, array_to_string(parameters, ', '), macro_definition "
        f"FROM duckdb_functions() WHERE {where} AND NOT internal AND function_type IN ('macro', 'table_macro') "
        f"AND {_IS_AI.format('function_name')} ORDER BY function_oid",
    }
    found = {kind: [tuple(map(str, row)) for row in con.execute(sql).fetchall()] for kind, sql in queries.items()}
    if found["table"]:
        found["column"] = [
            tuple(map(str, row))
            for row in con.execute(
                f"SELECT table_name, column_name, comment::VARCHAR FROM duckdb_columns() WHERE {where} "
                f"AND {_IS_AI.format('table_name')} AND comment IS NOT NULL AND comment::VARCHAR <> ''"
            ).fetchall()
        ]
    return found


def _copy(cur: duckdb.DuckDBPyConnection, store: str, found: _Objects) -> None:
    _drop(cur, AI_DATABASE, found)  # copies an earlier try left
    for _name, sql in found["sequence"]:
        cur.execute(sql)
    for name, sql, comment in found["table"]:
        cur.execute(sql)
        cur.execute(
            f"INSERT INTO {AI_DATABASE}.main.{quote_name(name)} SELECT * FROM {quote_name(store)}.main.{quote_name(name)}"
        )
        if comment:
            cur.execute(f"COMMENT ON TABLE {quote_name(name)} IS {sql_literal(comment)}")
    for table, column, comment in found.get("column", []):
        cur.execute(f"COMMENT ON COLUMN {quote_name(table)}.{quote_name(column)} IS {sql_literal(comment)}")
    for _name, sql in found["index"]:
        cur.execute(sql)
    # Views and macros may name one another: in the order they were made, as they were.
    for name, kind, parameters, definition in found["macro"]:
        body = f"TABLE {definition}" if kind == "table_macro" else definition
        cur.execute(f"CREATE MACRO {quote_name(name)}({parameters}) AS {body}")
    for name, sql, comment in found["view"]:
        cur.execute(sql)
        if comment:
            cur.execute(f"COMMENT ON VIEW {quote_name(name)} IS {sql_literal(comment)}")


def _drop(cur: duckdb.DuckDBPyConnection, database: str, found: _Objects) -> None:
    """Drop the objects ``found`` from ``database``, those that depend on others first."""
    where = f"{quote_name(database)}.main"
    for name, *_ in reversed(found["view"]):
        cur.execute(f"DROP VIEW IF EXISTS {where}.{quote_name(name)}")
    for name, kind, *_ in reversed(found["macro"]):
        cur.execute(f"DROP {'MACRO TABLE' if kind == 'table_macro' else 'MACRO'} IF EXISTS {where}.{quote_name(name)}")
    for name, *_ in found["index"]:
        cur.execute(f"DROP INDEX IF EXISTS {where}.{quote_name(name)}")
    for name, *_ in reversed(found["table"]):
        cur.execute(f"DROP TABLE IF EXISTS {where}.{quote_name(name)}")
    for name, *_ in found["sequence"]:
        cur.execute(f"DROP SEQUENCE IF EXISTS {where}.{quote_name(name)}")
