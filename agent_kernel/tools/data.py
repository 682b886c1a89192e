"""The ``data`` group: guarded SQL over the agent's DuckDB file, and key-value state.

``db_sql`` runs off the event loop, so the kernel stays responsive (Stop works) while
another process runs the SQL (a fork of the kernel for a read of its DataFrames, else a
worker: :mod:`agent_kernel.sql.worker`); Stop interrupts it, and kills it when
DuckDB cannot stop. What the SQL may do is decided in
:mod:`agent_kernel.sql.guard`, how it runs in :mod:`agent_kernel.sql.sandbox`.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import json
import math
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from agent_kernel.errors import ToolInputError
from agent_kernel.kernel.namespace import unwritable_reason
from agent_kernel.secrets import redact
from agent_kernel.sql import guard, sandbox
from agent_kernel.sql import worker as sql_worker
from agent_kernel.store import catalog, provenance
from agent_kernel.store.provenance import TAINTED_NOTE, Provenance, Record
from agent_kernel.store.state import State
from agent_kernel.tools import Tool, current_context, strict_json

if TYPE_CHECKING:
    import duckdb
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.store import Store

T = TypeVar("T")

CELL_CHARS = 1_000
INTO_PREVIEW_ROWS = 10
STATE_VALUE_CHARS = 1_000_000
SQL_CHARS = 100_000  # the most SQL one db_sql call takes (parsing and checking it grows with it)
SQL_PARAMS = 1_000


class SqlWrite(TypedDict):
    """``db_sql``'s reply to statements that return no rows."""

    changes: int
    note: NotRequired[str]


class IntoVariable(TypedDict):
    """The kernel variable an ``into=`` query's whole result went to."""

    variable: str
    shape: list[int]
    capped: NotRequired[bool]  # a size cap left rows out (the reply's note says which)


class SqlRows(TypedDict):
    """``db_sql``'s reply to a query: the rows that fit, as JSON values."""

    columns: list[str]
    rows: list[list[Any]]  # Any: each cell is whatever JSON value json_value made of it
    row_count: int
    truncated: bool
    changes: NotRequired[int]
    into: NotRequired[IntoVariable]
    note: NotRequired[str]


class TableEntry(TypedDict):
    """One table or view in ``db_schema``'s reply."""

    name: str
    columns: NotRequired[list[dict[str, Any]]]  # as agent_kernel.store.catalog describes them
    row_count: int | None
    writable: bool
    view: NotRequired[bool]
    comment: NotRequired[str]


class SchemaReply(TypedDict):
    tables: list[TableEntry]
    note: NotRequired[str]  # when the columns of the last tables are left out (SCHEMA_CHARS)


# What db_schema's tables may take in its reply, in characters of JSON: under the tool result's
# cap, so the reply is always whole JSON. The model's tables come first; past this, tables are
# listed without their columns (name, comment, row count; DESCRIBE shows the columns).
SCHEMA_CHARS = 16_000


class StateValue(TypedDict):
    value: Any  # Any: the JSON value stored with set_state, or None


class StateWritten(TypedDict):
    ok: bool


class StateDeleted(TypedDict):
    deleted: bool


class StateKeys(TypedDict):
    keys: list[str]


# (module, class) of the DataFrame types DuckDB can scan in place.
_FRAME_TYPES = {
    ("pandas", "DataFrame"),
    ("polars", "DataFrame"),
    ("polars", "LazyFrame"),
    ("pyarrow", "Table"),
    ("pyarrow", "RecordBatch"),
    ("pyarrow", "RecordBatchReader"),
    ("pyarrow", "Dataset"),
}


async def db_sql(
    sql: Annotated[str, Field(max_length=SQL_CHARS)],
    params: Annotated[list[Any], Field(max_length=SQL_PARAMS)] | None = None,
    into: str | None = None,
) -> SqlRows | SqlWrite:
    """Run DuckDB SQL on your database; kernel DataFrames are tables by their names.

    A query returns {columns, rows, row_count, truncated} (at most 1,000 rows: aggregate or
    LIMIT); a write {changes}. Statements split by ";" run as one transaction. You write only
    tables named ai_*; document them with COMMENT ON TABLE/COLUMN (shown in your prompt
    later). No file or network access, no SET/PRAGMA; calls stop after a few seconds.

    Args:
        sql: SQL statements (bulk data: load it from a DataFrame).
        params: Values for ? placeholders (one statement).
        into: New variable name: the full result becomes a DataFrame in the kernel; the answer shows its first rows.
    """
    context = current_context()
    statements = guard.parse(sql)
    if params is not None and len(statements) > 1:
        raise ToolInputError("params go with a single statement; send the statements one call each.")
    settings = context.settings
    if into is not None:
        refusal = unwritable_reason(into, context.namespace, overwrite=settings.overwrite_protected_names)
        if refusal:
            raise ToolInputError(f"into: {refusal}")
        if not statements[-1].reads:
            raise ToolInputError("into= takes a query that reads (SELECT ...), not one that writes.")
    # A read runs on a read-only connection: a write the guard missed cannot happen there.
    read_only = context.approve == "read-only" or not guard.writes(sql)
    run = sandbox.SqlRun(context.store, sandbox.Limits.from_settings(settings), read_only=read_only)
    frames = kernel_frames(context.namespace, context.hidden_names)
    _let_forks_go_per_cell(context.shell)
    result = await _off_loop(
        lambda: sql_worker.run_sql(run, statements, params=params, frames=frames, into=into is not None),
        run.interrupt,
    )
    commented = [t for t in (guard.commented_table(s.sql) for s in statements if s.kind == "ALTER") if t]
    if commented:
        await _record_comments(commented, context.provenance())
    if not result.returns_rows:
        written: SqlWrite = {"changes": result.changes}
        if commented and context.provenance().untrusted:
            written["note"] = TAINTED_NOTE
        return written
    shown = result.rows[:INTO_PREVIEW_ROWS] if into is not None else result.rows
    rows, cut = bounded_rows(shown, budget=settings.result_chars * 9 // 10)
    answer: SqlRows = {
        "columns": result.columns,
        "rows": rows,
        "row_count": len(rows),
        "truncated": result.truncated or cut or len(shown) < len(result.rows),
    }
    if result.changes:
        answer["changes"] = result.changes
    if into is not None:
        context.namespace[into] = result.frame
        variable: IntoVariable = {"variable": into, "shape": list(result.frame.shape)}
        answer["into"] = variable
        if result.note:
            variable["capped"] = True
            answer["note"] = result.note
    elif result.note:
        answer["note"] = result.note
    elif answer["truncated"]:
        answer["note"] = (  # no double quotes: JSON would escape them, and redaction then walks every row
            "More rows exist than are shown: aggregate or filter in SQL, or fetch the whole "
            "result into the kernel with into='name'."
        )
    return answer


def _let_forks_go_per_cell(shell: InteractiveShell) -> None:
    """Have each cell (``run_code``'s code runs as one) let go of the fork db_sql keeps
    between calls: it holds the kernel's pages as they were when it was made, and while it
    lives the kernel's first write to each costs a copy."""
    events = getattr(shell, "events", None)
    if events is not None and sql_worker.retire_kept not in events.callbacks.get("pre_execute", []):
        events.register("pre_execute", sql_worker.retire_kept)


async def _record_comments(tables: list[str], writer: Provenance) -> None:
    """Record who wrote the comments on ``tables``. A comment on one column leaves the
    table's other comments as they were, so a taint they have carries over."""

    def record(con: duckdb.DuckDBPyConnection) -> None:
        for table in dict.fromkeys(t.lower() for t in tables):
            provenance.record(con, "table_comment", table, writer, inherit=True)

    await with_connection(current_context().store, record)


async def db_schema() -> SchemaReply:
    """Your database's tables and views: columns, row counts, comments (ai_* are yours; others read-only)."""
    context = current_context()
    read_untrusted: list[str] = []

    def read(con: duckdb.DuckDBPyConnection) -> list[TableEntry]:
        tables = catalog.describe(con)
        counts = catalog.row_counts(con, tables)
        tainted = provenance.tainted_names(con, "table_comment")
        described = []
        for table in tables:
            entry: TableEntry = {
                "name": table.qualified,
                "columns": table.columns,
                "row_count": counts.get(table.qualified),
                "writable": table.writable,
            }
            if table.view:
                entry["view"] = True
            if table.comment:
                entry["comment"] = table.comment
            record = tainted.get(table.name.lower())
            if record is not None and (table.comment or any(c.get("comment") for c in table.columns)):
                _wrap_comments(entry, record, table.qualified)
                read_untrusted.append(f"comments on table {table.qualified}")
            described.append(entry)
        return described

    tables = await with_connection(context.store, read)
    context.note_untrusted(read_untrusted)
    return within_schema_budget(tables)


def within_schema_budget(tables: list[TableEntry], budget: int = SCHEMA_CHARS) -> SchemaReply:
    """Every table, with its columns while they fit ``budget`` (see :data:`SCHEMA_CHARS`)."""
    shown: list[TableEntry] = []
    used, cut = 0, 0
    for entry in tables:
        size = len(json.dumps(entry, ensure_ascii=False))
        if cut or (used + size > budget and shown):
            entry = cast(TableEntry, {k: v for k, v in entry.items() if k != "columns"})
            size = len(json.dumps(entry, ensure_ascii=False))
            cut += 1
        shown.append(entry)
        used += size
    if not cut:
        return {"tables": shown}
    note = f"The columns of the last {cut} tables are left out to keep this reply whole: DESCRIBE <table> shows them."
    return {"tables": shown, "note": note}


def _wrap_comments(entry: TableEntry, record: Record, table: str) -> None:
    """A table entry's comments inside the untrusted envelope (they were written after untrusted content)."""
    if "comment" in entry:
        entry["comment"] = provenance.shown(entry["comment"], record, f"comment on table {table}")
    entry["columns"] = [
        {**c, "comment": provenance.shown(c["comment"], record, f"comment on column {table}.{c['name']}")}
        if c.get("comment")
        else c
        for c in entry.get("columns", [])
    ]


async def get_state(key: str) -> StateValue:
    """Read a value stored with set_state ({value: null} when absent).

    Args:
        key: Key.
    """
    _check_key(key)
    return {"value": await _with_state(lambda state: state.get(key))}


async def set_state(key: str, value: Any) -> StateWritten:
    """Store a JSON value under a key (replacing it), kept across sessions; prefix keys ("report/last_run").

    Args:
        key: Key.
        value: Any JSON value.
    """
    _check_key(key)
    size = len(strict_json(value, "value"))
    if size > STATE_VALUE_CHARS:
        raise ToolInputError(
            f"The value is {size:,} characters of JSON; state holds at most {STATE_VALUE_CHARS:,}. "
            "Keep large data in a table (db_sql, CREATE TABLE ai_...)."
        )
    await _with_state(lambda state: state.set(key, value))
    return {"ok": True}


async def delete_state(key: str) -> StateDeleted:
    """Delete a state key; {deleted: false} when it did not exist.

    Args:
        key: The key to delete.
    """
    _check_key(key)
    return {"deleted": await _with_state(lambda state: state.delete(key))}


async def list_state_keys(prefix: str | None = None) -> StateKeys:
    """List your state keys.

    Args:
        prefix: Only keys starting with this.
    """
    return {"keys": await _with_state(lambda state: state.keys(prefix))}


def _sql_writes(tool_input: Mapping[str, object]) -> bool:
    """Whether a db_sql call changes something: writing SQL, or into= (a kernel variable)."""
    return bool(tool_input.get("into")) or guard.writes(str(tool_input.get("sql", "")))


TOOLS = [
    *([Tool(db_sql, name="db_sql", group="data", writes=_sql_writes)] if guard.sql_guard_available() else []),
    Tool(db_schema, name="db_schema", group="data"),
    Tool(get_state, name="get_state", group="data"),
    Tool(set_state, name="set_state", group="data", writes=True),
    Tool(delete_state, name="delete_state", group="data", writes=True),
    Tool(list_state_keys, name="list_state_keys", group="data"),
]


# -- helpers ------------------------------------------------------------------------------


def kernel_frames(namespace: Mapping[str, Any], hidden: set[str]) -> dict[str, Any]:
    """The user's DataFrames (pandas; polars and pyarrow when installed) by variable name."""
    frames = {}
    for name, value in namespace.items():
        if name.startswith("_") or name in hidden:
            continue
        kind = type(value)
        if (kind.__module__.partition(".")[0], kind.__name__) in _FRAME_TYPES:
            frames[name] = value
    return frames


async def _off_loop(work: Callable[[], T], interrupt: Callable[[], None]) -> T:
    """Run ``work`` in a thread; if the turn is stopped meanwhile, interrupt it and wait.

    A stop arrives as a cancellation while this awaits, or as a kernel interrupt's
    ``KeyboardInterrupt`` while this coroutine's own code runs (see interrupts.py), which
    can be after ``work`` was queued and before its future exists: ``work`` is interrupted
    either way, else it would run on unwatched, holding the database file.
    """
    future: asyncio.Future[T] | None = None
    try:
        future = asyncio.get_running_loop().run_in_executor(None, work)
        return await asyncio.shield(future)
    except (asyncio.CancelledError, KeyboardInterrupt):
        interrupt()
        if future is not None:
            await asyncio.wait([future])  # the connection is closed before the turn goes on
        raise


async def with_connection(store: Store, read: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
    """``read(con)`` on a short-lived connection, in a worker thread (the event loop stays free)."""

    def work() -> T:
        with store.connect() as con:
            return read(con)

    return await asyncio.to_thread(work)


async def _with_state(action: Callable[[State], T]) -> T:
    return await with_connection(current_context().store, lambda con: action(State(con)))


def _check_key(key: str) -> None:
    if not key.strip():
        raise ToolInputError("key must not be empty.")
    if len(key) > 512:
        raise ToolInputError("key is too long (at most 512 characters).")


def bounded_rows(rows: list[tuple[Any, ...]], *, budget: int) -> tuple[list[list[Any]], bool]:
    """``rows`` as JSON-ready lists, as many as fit in ``budget`` characters of JSON (at least one).

    Rows are made ready and measured a block at a time, and the rest are left as soon as
    one does not fit: a result far over the budget costs about what is shown, and one
    within it one encoding a block. (A JSON list is ``[``, its items joined by ``, ``,
    then ``]``, so the sizes add up exactly.)
    """
    cells: list[list[Any]] = []
    size = 2
    for start in range(0, len(rows), _ROWS_A_BLOCK):
        block = [[json_value(v) for v in row] for row in rows[start : start + _ROWS_A_BLOCK]]
        block_size = len(_JSON.encode(block)) - 2 + (2 if cells else 0)
        if size + block_size <= budget:
            cells.extend(block)
            size += block_size
            continue
        for cell in block:  # the first row that does not fit is in this block
            size += len(_JSON.encode(cell)) + (2 if cells else 0)
            if size > budget and cells:
                return cells, True
            cells.append(cell)
    return cells, size > budget


_ROWS_A_BLOCK = 64
_JSON = json.JSONEncoder(ensure_ascii=False)


def json_value(value: Any) -> Any:
    """A JSON-ready form of a value DuckDB or pandas returned (dates as ISO text, NaN as null)."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, str):
        if len(value) <= CELL_CHARS:
            return value
        value = redact(value)  # before the cut, which must not end inside a secret
        return value if len(value) <= CELL_CHARS else value[:CELL_CHARS] + f"... [{len(value):,} chars]"
    if isinstance(value, float):
        return value if math.isfinite(value) else (None if math.isnan(value) else str(value))
    if type(value).__name__ in ("NAType", "NaTType"):  # pandas missing values
        return None
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (datetime.timedelta, uuid.UUID)):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return data.hex() if len(data) <= 64 else f"<{len(data):,} bytes>"
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and getattr(value, "ndim", None) == 0:
        return json_value(item())
    if getattr(value, "tolist", None) is not None:  # numpy arrays in list columns
        return json_value(value.tolist())
    return str(value)
