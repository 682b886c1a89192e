"""What a writing ``db_sql`` call may leave in the model's file: objects named ``ai_*``, no trigger.

The project's tables need no check here: the model's connection attaches the store
``READ_ONLY`` (:meth:`agent_kernel.store.Store.connect` with ``ai=True``), so DuckDB refuses
every change to them, whatever the SQL analysis of :mod:`agent_kernel.sql.guard` missed.

What is left to the storage layer is the model's own file: everything in it is named
``ai_*`` (which is how ``db_schema`` and the prompt tell the model's tables from the
project's, and so no object of the model's file shadows a project table for the model's
reads), and it holds no trigger (which would run later, unchecked). Just before COMMIT,
one query of the file's catalog tells; its cost depends on how many objects the model
made, never on how much the store holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_kernel.errors import ToolInputError
from agent_kernel.store.ai_tables import AI_DATABASE
from agent_kernel.store.schema import WRITABLE_PREFIX

if TYPE_CHECKING:
    import duckdb

__all__ = ["verify_only_ai"]

_IN_AI = f"database_name = '{AI_DATABASE}'"
_NOT_AI = f"NOT starts_with(lower({{0}}), '{WRITABLE_PREFIX}')"

_FOUND = " UNION ALL ".join(
    [
        f"SELECT 'table', table_name FROM duckdb_tables() WHERE {_IN_AI} AND {_NOT_AI.format('table_name')}",
        f"SELECT 'view', view_name FROM duckdb_views() WHERE {_IN_AI} AND NOT internal AND {_NOT_AI.format('view_name')}",
        f"SELECT 'sequence', sequence_name FROM duckdb_sequences() WHERE {_IN_AI} AND {_NOT_AI.format('sequence_name')}",
        f"SELECT 'index', index_name FROM duckdb_indexes() WHERE {_IN_AI} AND {_NOT_AI.format('index_name')} "
        f"AND {_NOT_AI.format('table_name')}",
        f"SELECT 'macro', function_name FROM duckdb_functions() WHERE {_IN_AI} AND NOT internal "
        f"AND {_NOT_AI.format('function_name')}",
        f"SELECT 'schema', schema_name FROM duckdb_schemas() WHERE {_IN_AI} AND NOT internal "
        f"AND {_NOT_AI.format('schema_name')}",
        f"SELECT 'type', type_name FROM duckdb_types() WHERE {_IN_AI} AND NOT internal AND {_NOT_AI.format('type_name')}",
        f"SELECT 'trigger', trigger_name FROM duckdb_triggers() WHERE {_IN_AI}",
    ]
)


def verify_only_ai(con: duckdb.DuckDBPyConnection) -> None:
    """Refuse (the caller rolls back) when the model's file, as ``con``'s transaction sees it,
    holds an object not named ``ai_*`` or a trigger."""
    found = sorted(set(con.execute(_FOUND).fetchall()))
    if not found:
        return
    what = ", ".join(f"{kind} {name}" for kind, name in found)
    raise ToolInputError(
        f"This call made {what} in your database, where only objects named ai_* (and no "
        "triggers) may be, so it was rolled back. Name what you create ai_*."
    )
