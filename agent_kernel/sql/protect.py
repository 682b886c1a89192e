"""The storage layer's own check of a writing ``db_sql`` call: nothing but ``ai_*`` changed.

DuckDB has no per-table permissions, so this is the next best thing it allows: inside the
call's transaction, before its statements run and again just before COMMIT, take a
fingerprint of everything the model may not change, and roll back when the two differ.
It does not rely on the SQL analysis of :mod:`agent_kernel.sql.guard` at all, so a gap
there still cannot leave a change to a project table, nor a trigger, behind.

The fingerprint holds

- the catalog entries not named ``ai_*`` (tables and their columns, views, indexes on
  them or so named, sequences and their values, macros, schemas, types) with their SQL
  and comments, and every trigger (``db_sql`` creates none);
- the row count and an order-independent hash (XOR of row hashes) of every table not named
  ``ai_*`` (the project's tables).

Snapshot isolation makes the comparison exact: the transaction sees only its own changes.
The cost is one scan of the project's tables per fingerprint, paid only by writing calls
(reads run on a read-only connection).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_kernel.errors import ToolInputError

if TYPE_CHECKING:
    import duckdb

__all__ = ["Fingerprint", "fingerprint", "verify_unchanged"]

Fingerprint = dict[str, list[tuple[Any, ...]]]

_NOT_AI = "database_name = current_database() AND NOT starts_with(lower({0}), 'ai_')"

_CATALOG = {
    "table": "SELECT schema_name, table_name, sql, comment::VARCHAR FROM duckdb_tables() "
    f"WHERE {_NOT_AI.format('table_name')}",
    "column": "SELECT schema_name, table_name, column_name, data_type, column_default, comment::VARCHAR, "
    f"is_nullable FROM duckdb_columns() WHERE {_NOT_AI.format('table_name')}",
    "view": "SELECT schema_name, view_name, sql, comment::VARCHAR FROM duckdb_views() "
    f"WHERE NOT internal AND {_NOT_AI.format('view_name')}",
    "index": "SELECT schema_name, index_name, table_name, sql FROM duckdb_indexes() "
    "WHERE database_name = current_database() AND NOT (starts_with(lower(index_name), 'ai_') "
    "AND starts_with(lower(table_name), 'ai_'))",
    "sequence": "SELECT schema_name, sequence_name, last_value, sql FROM duckdb_sequences() "
    f"WHERE {_NOT_AI.format('sequence_name')}",
    "macro": "SELECT schema_name, function_name, function_type, macro_definition FROM duckdb_functions() "
    f"WHERE NOT internal AND function_type LIKE '%macro' AND {_NOT_AI.format('function_name')}",
    "schema": f"SELECT database_name, schema_name FROM duckdb_schemas() WHERE NOT internal AND {_NOT_AI.format('schema_name')}",
    "type": f"SELECT schema_name, type_name FROM duckdb_types() WHERE NOT internal AND {_NOT_AI.format('type_name')}",
    "trigger": "SELECT schema_name, trigger_name, table_name, sql FROM duckdb_triggers()",
}


def fingerprint(con: duckdb.DuckDBPyConnection) -> Fingerprint:
    """What the model may not change, as seen by ``con``'s transaction."""
    found: Fingerprint = {
        kind: sorted(map(tuple, con.execute(sql).fetchall()), key=repr) for kind, sql in _CATALOG.items()
    }
    tables = con.execute(
        f"SELECT schema_name, table_name FROM duckdb_tables() WHERE {_NOT_AI.format('table_name')} ORDER BY ALL"
    ).fetchall()
    if tables:
        counts = " UNION ALL ".join(
            f"SELECT {_literal(schema)}, {_literal(table)}, count(*), coalesce(bit_xor(hash(t)), 0) "
            f"FROM {_quote(schema)}.{_quote(table)} AS t"
            for schema, table in tables
        )
        found["rows"] = sorted(map(tuple, con.execute(counts).fetchall()))
    return found


def verify_unchanged(con: duckdb.DuckDBPyConnection, before: Fingerprint) -> None:
    """Refuse (the caller rolls back) if anything of ``before`` differs now."""
    after = fingerprint(con)
    changed = sorted(kind for kind in before.keys() | after.keys() if before.get(kind) != after.get(kind))
    if not changed:
        return
    what = ", ".join(_describe(kind, before.get(kind, []), after.get(kind, [])) for kind in changed)
    raise ToolInputError(
        f"This call changed agent-kernel's own data ({what}), which db_sql never may, so it "
        "was rolled back. Keep your data in objects named ai_*."
    )


def _describe(kind: str, before: list[tuple[Any, ...]], after: list[tuple[Any, ...]]) -> str:
    names = sorted({str(row[1]) for row in set(before) ^ set(after) if len(row) > 1})
    label = "rows of" if kind == "rows" else kind
    return f"{label} {', '.join(names)}" if names else label


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
