"""The one row of an aggregate query, typed as present."""

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
