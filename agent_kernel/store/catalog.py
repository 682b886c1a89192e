"""What is in the agent's database: tables, columns and their comments.

``COMMENT ON TABLE`` / ``COMMENT ON COLUMN`` are the one place the model documents its
tables. ``db_schema`` returns them and the system prompt's "Your database" section is
written from them, so there is no second description to keep in step.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_kernel.store import ai_tables
from agent_kernel.store.schema import WRITABLE_PREFIX, quote_name

if TYPE_CHECKING:
    import duckdb

SECTION_CHARS = 3_000


@dataclass
class TableInfo:
    """One table or view of the agent's database."""

    name: str
    schema: str
    view: bool
    comment: str | None
    estimated_rows: int | None
    columns: list[dict[str, Any]] = field(default_factory=list)
    database: str = ""  # the attached database it is in (the store's, or the model's file)

    @property
    def writable(self) -> bool:
        return self.name.lower().startswith(WRITABLE_PREFIX)

    @property
    def qualified(self) -> str:
        return self.name if self.schema == "main" else f"{self.schema}.{self.name}"


def describe(con: duckdb.DuckDBPyConnection) -> list[TableInfo]:
    """Every table and view of the store and of the model's file (not temporary, not
    internal): the model's first. The model's file is attached to ``con`` read-only for
    this (see :func:`agent_kernel.store.ai_tables.attach`) unless it is there already."""
    ai_tables.attach(con)
    databases = [
        str(row[0])
        for row in con.execute(
            "SELECT database_name FROM duckdb_databases() WHERE database_name IN (current_database(), ?, ?)",
            [ai_tables.AI_DATABASE, ai_tables.PROJECT_DATABASE],
        ).fetchall()
    ]
    within = f"database_name IN ({', '.join(ai_tables.sql_literal(d) for d in databases)})"
    found: dict[tuple[str, str, str], TableInfo] = {}
    for database, schema, name, comment, rows in con.execute(
        "SELECT database_name, schema_name, table_name, comment, estimated_size FROM duckdb_tables() "
        f"WHERE {within} AND NOT temporary AND NOT internal"
    ).fetchall():
        found[database, schema, name] = TableInfo(name, schema, False, comment, rows, database=database)
    for database, schema, name, comment in con.execute(
        f"SELECT database_name, schema_name, view_name, comment FROM duckdb_views() "
        f"WHERE {within} AND NOT temporary AND NOT internal"
    ).fetchall():
        found[database, schema, name] = TableInfo(name, schema, True, comment, None, database=database)
    keys: dict[tuple[str, str, str], set[str]] = {}
    for database, schema, name, columns in con.execute(
        "SELECT database_name, schema_name, table_name, constraint_column_names FROM duckdb_constraints() "
        f"WHERE {within} AND constraint_type = 'PRIMARY KEY'"
    ).fetchall():
        keys.setdefault((database, schema, name), set()).update(columns)
    # Filtering duckdb_columns() on the databases in SQL costs ~7 ms more than filtering
    # here (DuckDB 2.0); the (database, schema, name) lookup below keeps their tables.
    for database, schema, name, column, data_type, nullable, comment in con.execute(
        "SELECT database_name, schema_name, table_name, column_name, data_type, is_nullable, comment "
        "FROM duckdb_columns() WHERE NOT internal ORDER BY schema_name, table_name, column_index"
    ).fetchall():
        table = found.get((database, schema, name))
        if table is None:
            continue
        # Only what is there: db_schema lists every column of every table in one result.
        entry: dict[str, Any] = {"name": column, "type": data_type}
        if not nullable:
            entry["notnull"] = True
        if column in keys.get((database, schema, name), ()):
            entry["pk"] = True
        if comment:
            entry["comment"] = comment
        table.columns.append(entry)
    return sorted(found.values(), key=lambda t: (not t.writable, t.schema != "main", t.qualified))


def row_counts(con: duckdb.DuckDBPyConnection, tables: list[TableInfo]) -> dict[str, int]:
    """Exact row counts of the (non-view) ``tables``, in one query."""
    plain = [t for t in tables if not t.view]
    if not plain:
        return {}
    parts = [
        f"SELECT {i} AS i, count(*) AS n FROM {_where(t)}{quote_name(t.schema)}.{quote_name(t.name)}"
        for i, t in enumerate(plain)
    ]
    counts = dict(con.execute(" UNION ALL ".join(parts)).fetchall())
    return {plain[i].qualified: int(n) for i, n in counts.items()}


# The project tables the prompt names (the model asks db_schema for the others): what it
# is most often asked about. Naming every table would grow each request with each feature.
NAMED_PROJECT_TABLES = ("sessions", "messages", "code_executions", "tool_calls", "model_calls", "jobs", "runs")


def prompt_section(
    con: duckdb.DuckDBPyConnection, max_chars: int = SECTION_CHARS, withheld: Collection[str] = ()
) -> str:
    """The system prompt's "Your database" text, written from the tables' comments; the
    tables named (lower case) in ``withheld`` are left out (shown elsewhere, as data)."""
    tables = describe(con)
    mine = [t for t in tables if t.writable and t.name.lower() not in withheld]
    project = [t.qualified for t in tables if not t.writable]
    lines = [
        (
            "Your DuckDB database (db_sql). You write only to tables named ai_*; document each "
            "with COMMENT ON TABLE / COMMENT ON COLUMN, which is what you will read here next "
            "time. Kernel DataFrames can be queried by their variable names."
        )
    ]
    if not mine:
        lines.append("You have no tables yet (e.g. CREATE TABLE ai_sales AS SELECT * FROM sales_df).")
    used = len(lines[0])
    for shown, table in enumerate(mine):
        line = _table_line(table)
        if used + len(line) > max_chars:
            lines.append(f"- ... and {len(mine) - shown} more ai_* tables (db_schema lists them all).")
            break
        lines.append(line)
        used += len(line)
    if project:
        named = [t for t in NAMED_PROJECT_TABLES if t in project]
        more = len(project) - len(named)
        rest = f" and {more} more" if more else ""
        lines.append(f"Read-only project tables: {', '.join(named)}{rest} (db_schema describes them).")
    return "\n".join(lines)


def table_lines(con: duckdb.DuckDBPyConnection, names: Collection[str]) -> dict[str, str]:
    """The prompt line of each commented ``ai_*`` table named (lower case) in ``names``, by that name."""
    if not names:
        return {}
    return {
        t.name.lower(): _table_line(t)
        for t in describe(con)
        if t.writable and t.name.lower() in names and (t.comment or any(c.get("comment") for c in t.columns))
    }


def _where(table: TableInfo) -> str:
    return f"{quote_name(table.database)}." if table.database else ""


def _table_line(table: TableInfo) -> str:
    kind = "view" if table.view else f"~{table.estimated_rows:,} rows" if table.estimated_rows is not None else "table"
    comment = table.comment or (
        f"(no comment yet: COMMENT ON {'VIEW' if table.view else 'TABLE'} {table.qualified} IS '...')"
    )
    columns = ", ".join(
        f"{c['name']} {c['type']}" + (f" ({c['comment']})" if c.get("comment") else "") for c in table.columns
    )
    return f"- {table.qualified} ({kind}): {comment} Columns: {columns}"
