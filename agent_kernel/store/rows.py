"""Rows in and out of the store: many rows in one INSERT, the one row of an aggregate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb


def aggregate_row(cursor: duckdb.DuckDBPyConnection) -> tuple[Any, ...]:
    """The row a query without GROUP BY returns: an aggregate (or ``current_database()``)
    always yields exactly one, so ``fetchone()`` never comes back empty here."""
    row = cursor.fetchone()
    assert row is not None, "an aggregate query returns one row"
    return row


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, columns: str, rows: list[list[Any]]) -> None:
    """One INSERT for all ``rows`` (``columns``: their names, comma-separated).

    DuckDB's ``executemany`` runs one statement per row, each parsed, planned and
    scrubbed on its own: a few milliseconds a row, which a turn's model calls and tool
    calls would pay on every batch of the write-behind thread."""
    if not rows:
        return
    width = columns.count(",") + 1
    values = ", ".join(["(" + ", ".join(["?"] * width) + ")"] * len(rows))
    con.execute(f"INSERT INTO {table} ({columns}) VALUES {values}", [v for row in rows for v in row])
