"""Guarded SQL: what the model may run on the agent's DuckDB file, and how.

Every check is DuckDB's own, no regular expressions over SQL:

1. **Statement kinds** come from DuckDB's parser (``extract_statements``). ATTACH, COPY,
   EXPORT, INSTALL/LOAD, SET/RESET/USE, PRAGMA, VACUUM/ANALYZE, transactions and prepared
   statements are refused before a connection is opened.
2. **Targets** come from DuckDB's binder: just before a statement runs (inside the call's
   transaction, so earlier statements of the same call are visible) its logical plan is
   serialized with ``json_serialize_plan``. Every operator that writes names the object
   it writes, and the model may write only objects named ``ai_*``; data-modifying CTEs
   (``WITH d AS (DELETE ...) SELECT``) are operators of the plan like any other. Table
   functions come from an allow-list (no ``read_csv``, ``checkpoint``, ``query``, ...), and
   an operator the guard does not know is refused.
3. **The connection** is sandboxed (research/anchors-security.md §1): no file or network
   access, no extension loading, memory and thread limits, DuckDB 2.0's
   ``max_execution_time`` for each statement, then ``lock_configuration`` so nothing can be
   changed back. A write that grows the file past its size cap is rolled back.

Kernel DataFrames are registered on the connection by name, never copied into the file.
The binder cannot serialize a plan that scans a Python object, so a statement that names
a frame is planned against an empty stand-in table of the same columns, then run against
the frame itself.

The sandbox lives on the database *instance*, which exists only while this call's
connection is open: every other use of the file (sessions, state, the scheduler) opens
its own, unsandboxed, connection under the same lock (see :class:`~agent_kernel.store.Store`).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..errors import ToolInputError
from .schema import PROTECTED_TABLES

if TYPE_CHECKING:
    import duckdb

    from . import Store

__all__ = ["Limits", "SqlResult", "SqlRun", "Statement", "parse", "writes"]

WRITABLE_PREFIX = "ai_"

# -- statement kinds ------------------------------------------------------------------------

_NO_FILES = (
    "db_sql has no file or network access. Load files in Python with run_code (for example "
    "pandas.read_csv) and query the DataFrame by its name; to save a result to a file, fetch "
    "it with into=\"name\" and write it from Python."
)
_REFUSED_KINDS = {
    "ATTACH": "ATTACH and DETACH are not allowed: db_sql works on the agent's own database only.",
    "DETACH": "ATTACH and DETACH are not allowed: db_sql works on the agent's own database only.",
    "COPY": "COPY is not allowed. " + _NO_FILES,
    "COPY_DATABASE": "COPY FROM DATABASE is not allowed: db_sql works on the agent's own database only.",
    "EXPORT": "EXPORT DATABASE is not allowed. " + _NO_FILES,
    "LOAD": "INSTALL and LOAD are not allowed: no extensions can be added to the agent's database.",
    "SET": "SET, RESET and USE are not allowed: the connection's settings are fixed. Put values "
    "in the query (or in params) instead of variables.",
    "VARIABLE_SET": "SET VARIABLE is not allowed: put values in the query or in params.",
    "PRAGMA": "PRAGMA (and IMPORT DATABASE) is not allowed. For table details use db_schema, or "
    "SELECT * FROM pragma_table_info('table_name').",
    "VACUUM": "VACUUM and ANALYZE are not allowed: the agent's database is maintained for you.",
    "ANALYZE": "VACUUM and ANALYZE are not allowed: the agent's database is maintained for you.",
    "TRANSACTION": "BEGIN, COMMIT and ROLLBACK are not needed: each db_sql call is one "
    "transaction, committed when all its statements succeed and rolled back otherwise.",
    "PREPARE": "PREPARE and EXECUTE are not allowed: pass values with params (for ? placeholders).",
    "EXECUTE": "PREPARE and EXECUTE are not allowed: pass values with params (for ? placeholders).",
    "MULTI": "A PIVOT statement needs its values listed to run here: write "
    "PIVOT t ON col IN ('a', 'b') USING sum(x), or use GROUP BY.",
}
_ALLOWED_KINDS = {"SELECT", "EXPLAIN", "CALL", "INSERT", "UPDATE", "DELETE", "MERGE_INTO", "CREATE", "DROP", "ALTER"}
_READ_KINDS = {"SELECT", "EXPLAIN", "CALL"}

# -- plan operators -------------------------------------------------------------------------

_READ_OPERATORS = {
    f"LOGICAL_{name}"
    for name in (
        "PROJECTION FILTER AGGREGATE_AND_GROUP_BY WINDOW UNNEST LIMIT ORDER_BY TOP_N DISTINCT "
        "SAMPLE PIVOT GET CHUNK_GET DELIM_GET EXPRESSION_GET DUMMY_SCAN EMPTY_RESULT CTE_REF "
        "JOIN DELIM_JOIN COMPARISON_JOIN ANY_JOIN CROSS_PRODUCT POSITIONAL_JOIN ASOF_JOIN "
        "DEPENDENT_JOIN UNION EXCEPT INTERSECT RECURSIVE_CTE MATERIALIZED_CTE"
    ).split()
}
_WRITE_OPERATORS = {
    f"LOGICAL_{name}"
    for name in (
        "INSERT DELETE UPDATE MERGE_INTO ALTER DROP CREATE_TABLE CREATE_INDEX CREATE_SEQUENCE "
        "CREATE_VIEW CREATE_SCHEMA CREATE_MACRO CREATE_TYPE"
    ).split()
}
# Operators that can make the file bigger (checked against the size cap).
_GROWING_OPERATORS = {"LOGICAL_INSERT", "LOGICAL_UPDATE", "LOGICAL_MERGE_INTO", "LOGICAL_CREATE_TABLE", "LOGICAL_CREATE_INDEX"}

_TABLE_FUNCTIONS = {
    "seq_scan", "range", "generate_series", "unnest", "repeat", "repeat_row", "json_each",
    "json_tree", "summary", "histogram", "histogram_values", "pg_timezone_names",
    "icu_calendar_names", "test_all_types",
}
_TABLE_FUNCTION_PREFIXES = ("duckdb_", "pragma_")
_FILE_FUNCTION_PREFIXES = ("read_", "parquet_", "glob", "sniff_csv")


@dataclass(frozen=True)
class Statement:
    """One statement of a ``db_sql`` call, as DuckDB's parser split it."""

    sql: str
    kind: str  # DuckDB's StatementType name, or "UNKNOWN"

    @property
    def reads(self) -> bool:
        return self.kind in _READ_KINDS


@dataclass(frozen=True)
class Limits:
    """The guardrails of the model's SQL (from ``AgentKernel``)."""

    timeout_s: float = 5.0
    max_rows: int = 1000
    memory_limit: str = "1GB"
    threads: int = 4
    max_db_bytes: int = 2048 * 1024 * 1024

    def config(self) -> dict[str, Any]:
        """The DuckDB settings of the sandboxed database instance (set before it starts)."""
        return {
            "enable_external_access": False,
            "autoload_known_extensions": False,
            "autoinstall_known_extensions": False,
            "allow_community_extensions": False,
            "allow_unsigned_extensions": False,
            "memory_limit": self.memory_limit,
            "threads": max(1, min(self.threads, os.cpu_count() or 1)),
            "max_execution_time": max(1, int(self.timeout_s * 1000)),
            "max_temp_directory_size": f"{self.max_db_bytes}B",
        }


@dataclass(frozen=True)
class _Call:
    """What one ``db_sql`` call runs, and where (the agent's file, or the in-memory sandbox)."""

    statements: Sequence[Statement]
    params: Sequence[Any] | None
    frames: dict[str, Any]
    into: bool
    on_file: bool = False


@dataclass
class SqlResult:
    """What the last statement returned, and what the call changed."""

    columns: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    truncated: bool = False
    changes: int = 0
    wrote: bool = False
    returns_rows: bool = True
    frame: Any = None  # the full result as a pandas DataFrame, for into=


# -- parsing (no connection to the agent's file) --------------------------------------------

_parser: duckdb.DuckDBPyConnection | None = None
_parser_lock = threading.Lock()


def _parser_cursor() -> duckdb.DuckDBPyConnection:
    """A cursor on a private in-memory database used only to parse SQL."""
    global _parser
    import duckdb

    with _parser_lock:
        if _parser is None:
            _parser = duckdb.connect(":memory:", config={"enable_external_access": False})
        return _parser.cursor()


def parse(sql: str) -> list[Statement]:
    """Split ``sql`` into statements; refuse the kinds db_sql never runs."""
    import duckdb

    if not sql.strip():
        raise ToolInputError("sql is empty: give one or more SQL statements.")
    cursor = _parser_cursor()
    try:
        found = cursor.extract_statements(sql)
    except duckdb.Error as exc:
        raise ToolInputError(str(exc)) from None
    finally:
        cursor.close()
    statements = [Statement(s.query.strip().rstrip(";").strip(), _kind(s)) for s in found]
    if not statements:
        raise ToolInputError("sql holds no statement (only comments?).")
    for statement in statements:
        _refuse_kind(statement)
    return statements


def _kind(statement: Any) -> str:
    try:
        return str(statement.type.name)
    except ValueError:  # a statement type newer than the Python enum (e.g. UPDATE EXTENSIONS)
        return "UNKNOWN"


def _refuse_kind(statement: Statement) -> None:
    kind = statement.kind
    if kind in _REFUSED_KINDS:
        raise ToolInputError(_REFUSED_KINDS[kind])
    if kind not in _ALLOWED_KINDS:
        raise ToolInputError(
            f"This statement ({kind.replace('_', ' ')}) is not allowed in db_sql. Allowed: "
            "SELECT (also WITH, FROM, DESCRIBE, SUMMARIZE), EXPLAIN, and CREATE / INSERT / "
            "UPDATE / DELETE / MERGE / ALTER / DROP / COMMENT ON for objects named ai_*."
        )
    if kind == "EXPLAIN" and _explain_analyzes(statement.sql):
        raise ToolInputError(
            "EXPLAIN ANALYZE runs the statement, so it is not allowed; use EXPLAIN (the plan "
            "only), or run the query itself."
        )


def _spans(sql: str) -> list[tuple[int, int, str]]:
    """DuckDB's tokenizer: (start, end, kind) of each token, comments dropped."""
    import duckdb

    found = duckdb.tokenize(sql)
    spans = []
    for i, (start, kind) in enumerate(found):
        end = found[i + 1][0] if i + 1 < len(found) else len(sql)
        if kind.name != "comment":
            spans.append((start, end, kind.name))
    return spans


def _tokens(sql: str) -> list[tuple[str, str]]:
    """DuckDB's tokenizer: (text, kind) pairs, comments dropped."""
    return [(sql[start:end].strip(), kind) for start, end, kind in _spans(sql)]


def _without_parameters(sql: str) -> str:
    """``sql`` with each ``?`` / ``$n`` placeholder replaced by NULL.

    Only for binding the plan: a placeholder stands for a value, never for a name, so the
    plan's operators and targets are those of the statement that runs with the values.
    (DuckDB 2.0 cannot serialize some plans that still hold placeholders.)
    """
    parts, at, skip = [], 0, False
    for start, end, kind in _spans(sql):
        text = sql[start:end].strip()
        if skip:
            skip, at = False, start + len(text)
            continue
        if kind == "operator" and text in ("?", "$"):
            parts.append(sql[at:start] + "NULL")
            at = start + len(text)
            skip = text == "$"
    return "".join(parts) + sql[at:]


def _explain_analyzes(sql: str) -> bool:
    words = [text.upper() for text, _ in _tokens(sql)[1:]]
    if words[:1] in (["ANALYZE"], ["ANALYSE"]):
        return True
    if words[:1] == ["("]:
        options = words[1 : words.index(")")] if ")" in words else words[1:]
        return "ANALYZE" in options or "ANALYSE" in options
    return False


def identifiers(sql: str) -> set[str]:
    """Every name-like token of ``sql`` (unquoted), for finding the DataFrames it reads."""
    names = set()
    for text, kind in _tokens(sql):
        if kind in ("identifier", "keyword"):
            names.add(text[1:-1].replace('""', '"') if text.startswith('"') else text)
    return names


def writes(sql: str) -> bool:
    """Whether ``sql`` would change the database, from the parser alone (for approvals).

    Unparseable or refused SQL counts as not writing: the guard refuses it anyway, and
    the model then gets DuckDB's own error rather than an approval question.
    """
    try:
        statements = parse(sql)
    except ToolInputError:
        return False
    return any(not s.reads or (s.kind == "SELECT" and _select_writes(s.sql)) for s in statements)


def _select_writes(sql: str) -> bool:
    """A SELECT with a data-modifying CTE (``WITH d AS (DELETE ... RETURNING *) ...``)."""
    cursor = _parser_cursor()
    try:
        tree = json.loads(_scalar(cursor, "SELECT json_serialize_sql(?)", [sql]))
    finally:
        cursor.close()
    if tree.get("error"):
        return False
    return any(str(node.get("type", "")).endswith("_QUERY_NODE") for node in _dicts(tree))


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


# -- checking a statement against its plan ---------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    operators: frozenset[str]
    targets: tuple[str, ...]

    @property
    def writes(self) -> bool:
        return bool(self.operators & _WRITE_OPERATORS)

    @property
    def grows(self) -> bool:
        return bool(self.operators & _GROWING_OPERATORS)


def _check_plan(
    con: duckdb.DuckDBPyConnection, statement: Statement, frames: Iterable[str], *, parameters: bool
) -> _Plan:
    """Bind ``statement`` and refuse it unless it reads, or writes only ``ai_*`` objects."""
    if statement.kind == "EXPLAIN":  # shows a plan, runs nothing (ANALYZE was refused)
        return _Plan(frozenset(), ())
    sql = _without_parameters(statement.sql) if parameters else statement.sql
    plan = json.loads(_scalar(con, "SELECT json_serialize_plan(?)", [sql]))
    if plan.get("error"):
        kind = str(plan.get("error_type", "")).replace("_", " ").title()
        message = f"{kind} Error: {plan.get('error_message', 'the statement could not be bound')}"
        if kind == "Permission":
            raise ToolInputError(f"{_NO_FILES} ({message})")
        if kind in ("Internal", "Not Implemented", "Serialization"):
            raise ToolInputError(
                f"db_sql could not check this statement, so it did not run it ({message}). Write "
                "it another way: e.g. INSERT/UPDATE/DELETE instead of MERGE, or a CTE or a table "
                "instead of a subquery."
            )
        raise ToolInputError(message)
    operators: set[str] = set()
    targets: list[str] = []
    for node in _dicts(plan.get("plans", [])):
        node_type = str(node.get("type", ""))
        if node_type.endswith("_QUERY_NODE"):
            raise ToolInputError("INSERT, UPDATE or DELETE cannot be part of a view or macro.")
        if not node_type.startswith("LOGICAL_") or "children" not in node:
            continue
        operators.add(node_type)
        if node_type == "LOGICAL_GET":
            _check_table_function(node)
        elif node_type in _WRITE_OPERATORS:
            targets.extend(_targets(node))
        elif node_type not in _READ_OPERATORS:
            what = node_type.removeprefix("LOGICAL_").replace("_", " ")
            if node_type == "LOGICAL_COPY_TO_FILE":
                raise ToolInputError("COPY is not allowed. " + _NO_FILES)
            raise ToolInputError(f"{what} is not allowed in db_sql.")
    frame_names = {name.lower() for name in frames}
    for target in targets:
        if not target.lower().startswith(WRITABLE_PREFIX):
            raise ToolInputError(_not_writable(target, frame_names))
    return _Plan(frozenset(operators), tuple(targets))


def _check_table_function(node: Mapping[str, Any]) -> None:
    path = (node.get("qname") or {}).get("path") or [""]
    name = str(path[-1]).lower()
    if name in _TABLE_FUNCTIONS or name.startswith(_TABLE_FUNCTION_PREFIXES):
        return
    if name.startswith(_FILE_FUNCTION_PREFIXES):
        raise ToolInputError(f"{name}() is not available. " + _NO_FILES)
    raise ToolInputError(
        f"The table function {name}() is not available in db_sql. Query tables, kernel "
        "DataFrames, range()/generate_series(), unnest(), or duckdb_* / pragma_* metadata."
    )


def _targets(node: Mapping[str, Any]) -> list[str]:
    info = node.get("table_info") or node.get("info") or {}
    names = []
    path = [p for p in (info.get("qualified_name") or {}).get("path", []) if p]
    if path:
        names.append(str(path[-1]))
    for key in ("table", "view_name", "new_table_name", "new_view_name"):
        value = info.get(key)
        if isinstance(value, str) and value:
            names.append(value)
    if not names:
        raise ToolInputError("db_sql could not tell what this statement changes, so it was not run.")
    return names


def _not_writable(name: str, frames: set[str]) -> str:
    if name.lower() in frames:
        return (
            f"{name} is a DataFrame in the kernel: db_sql reads it but cannot change it. Change it "
            f"in Python with run_code, or copy it into a table: CREATE TABLE ai_{name} AS "
            f"SELECT * FROM {name}."
        )
    if name.lower() in PROTECTED_TABLES:
        return (
            f"{name} is one of agent-kernel's own tables: you can read it but not change it. "
            "Keep your data in tables named ai_* (state: set_state; memories: the memory tool)."
        )
    return (
        f"db_sql may create or change only objects named ai_*, not {name!r}: name it "
        f"ai_{name.lower().removeprefix('ai')} instead."
    )


# -- running a call --------------------------------------------------------------------------


class SqlRun:
    """One ``db_sql`` call: a sandboxed connection, used from one worker thread.

    :meth:`run` blocks (call it off the event loop); :meth:`interrupt` stops it from any
    thread, e.g. when the user presses Stop.
    """

    def __init__(self, store: Store, limits: Limits) -> None:
        self.store = store
        self.limits = limits
        self._con: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.Lock()
        self._interrupted = False

    def interrupt(self) -> None:
        with self._lock:
            self._interrupted = True
            if self._con is not None:
                self._con.interrupt()

    def run(
        self,
        statements: Sequence[Statement],
        *,
        params: Sequence[Any] | None = None,
        frames: Mapping[str, Any] | None = None,
        into: bool = False,
    ) -> SqlResult:
        """Run ``statements`` in one transaction; every refusal is a :class:`ToolInputError`.

        Queries that read only kernel DataFrames run on a private in-memory database with
        the same sandbox: they neither open the agent's file nor wait for its lock.
        """
        call = _Call(statements, params, dict(frames or {}), into)
        if _reads_only_frames(statements, call.frames, _FILE_NAMES.get(self.store.path)):
            with _memory_sandbox(self.limits).cursor() as con:
                return self._run_on(con, call)
        with self.store.connect(config=self.limits.config()) as con:
            con.execute("SET enable_progress_bar = false")  # a local option: set it, then lock
            con.execute("SET lock_configuration = true")
            return self._run_on(con, replace(call, on_file=True))

    def _run_on(self, con: duckdb.DuckDBPyConnection, call: _Call) -> SqlResult:
        """``call`` as one transaction on ``con``, interruptible; DuckDB errors become refusals."""
        import duckdb

        with self._lock:
            if self._interrupted:
                raise ToolInputError("The query was stopped.")
            self._con = con
        try:
            con.execute("BEGIN TRANSACTION")
            try:
                result = self._statements(con, call)
                con.execute("COMMIT")
            except BaseException:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:  # the transaction may already be aborted
                    pass
                raise
            return result
        except duckdb.Error as exc:
            raise ToolInputError(self._describe(exc)) from None
        finally:
            with self._lock:
                self._con = None

    def _statements(self, con: duckdb.DuckDBPyConnection, call: _Call) -> SqlResult:
        statements, params, frames, into, on_file = call.statements, call.params, call.frames, call.into, call.on_file
        if on_file:
            taken = _FILE_NAMES[self.store.path] = _object_names(con)
            frames = {name: frame for name, frame in frames.items() if name.lower() not in taken}
        pending_before = _pending_bytes(con) if on_file else 0
        result = SqlResult()
        registered: list[str] = []
        grows = False
        try:
            for index, statement in enumerate(statements):
                last = index == len(statements) - 1
                names = _frames_named(statement.sql, frames)
                for name in registered:
                    con.unregister(name)
                registered = []
                if on_file:
                    with _stand_ins(con, {n: frames[n] for n in names}):
                        plan = _check_plan(con, statement, frames, parameters=params is not None)
                else:  # _reads_only_frames checked it: a read of frames and allowed functions
                    plan = _Plan(frozenset(), ())
                for name in names:
                    con.register(name, frames[name])
                registered = names
                self._statement(con, statement, plan, params, into, last, result)
                grows = grows or plan.grows
        finally:
            for name in registered:
                con.unregister(name)
        if grows:
            self._check_size(con, pending_before)
        if on_file and result.wrote:
            _FILE_NAMES[self.store.path] = _object_names(con)
        return result

    def _statement(
        self,
        con: duckdb.DuckDBPyConnection,
        statement: Statement,
        plan: _Plan,
        params: Sequence[Any] | None,
        into: bool,
        last: bool,
        result: SqlResult,
    ) -> None:
        """Run one checked statement; count its changes, or keep its rows if it is the last."""
        if into and plan.writes:
            raise ToolInputError("into= takes a query that reads (SELECT ...), not one that writes.")
        result.wrote = result.wrote or plan.writes
        cursor = con.execute(statement.sql, list(params) if params is not None else None)
        if plan.writes and _is_count(cursor.description):
            rows = cursor.fetchall()
            result.changes += int(rows[0][0]) if rows and cursor.description[0][0] == "Count" else 0
            if last:
                result.returns_rows = False
            return
        if not last:
            # The rows of a statement before the last are not shown; a write still runs to its end.
            con.complete() if plan.writes else con.abort()
            return
        result.columns = [d[0] for d in cursor.description or []]
        if into:
            result.frame = cursor.fetch_df()
            result.truncated = len(result.frame) > self.limits.max_rows
            result.rows = list(result.frame.head(self.limits.max_rows).itertuples(index=False, name=None))
        elif plan.writes:  # INSERT ... RETURNING: the write must finish, whatever is shown
            rows = cursor.fetchall()
            result.truncated = len(rows) > self.limits.max_rows
            result.rows = rows[: self.limits.max_rows]
        else:
            rows = cursor.fetchmany(self.limits.max_rows + 1)
            result.truncated = len(rows) > self.limits.max_rows
            result.rows = rows[: self.limits.max_rows]
            con.abort()  # the rest is not needed; the transaction can commit

    def _check_size(self, con: duckdb.DuckDBPyConnection, pending_before: int) -> None:
        # Rows not written to blocks yet count at their in-memory size, which is larger than
        # on disk: a big write may be refused a little before the file reaches the cap.
        used = _used_bytes(con) + max(0, _pending_bytes(con) - pending_before)
        cap = self.limits.max_db_bytes
        if used > cap:
            raise ToolInputError(
                f"This change would make the agent's database {_mb(used)}, over its cap of "
                f"{_mb(cap)} (AgentKernel.db_max_mb), so it was rolled back. Drop ai_* tables "
                "you no longer need, or keep large results in the kernel with into=\"name\"."
            )

    def _describe(self, exc: Exception) -> str:
        import duckdb

        text = str(exc)
        if isinstance(exc, duckdb.InterruptException):
            if "execution time" in text:
                return (
                    f"The statement ran longer than {self.limits.timeout_s:g} s and was stopped "
                    "(nothing was changed). Make it cheaper: filter or aggregate earlier, add a "
                    "LIMIT, or sample (USING SAMPLE 10%)."
                )
            return "The query was stopped."
        if isinstance(exc, duckdb.PermissionException):
            return f"{_NO_FILES} ({text})"
        if isinstance(exc, duckdb.OutOfMemoryException):
            return (
                f"The statement needed more than its memory limit ({self.limits.memory_limit}) "
                f"and was stopped. Aggregate or filter earlier, or select fewer columns. ({text})"
            )
        return text


# -- queries of kernel frames only ----------------------------------------------------------

# Names of the tables and views of each file, as last seen (a frame never shadows them).
_FILE_NAMES: dict[Any, set[str]] = {}


def _reads_only_frames(
    statements: Sequence[Statement], frames: Mapping[str, Any], file_names: set[str] | None
) -> bool:
    """Whether every statement is a plain read of kernel frames (parser only, no connection).

    Such a query needs nothing from the agent's file. Anything else, and anything unsure
    (the file's tables not seen yet, a qualified name, a metadata function), goes to the file.
    """
    if not frames or file_names is None or any(s.kind != "SELECT" for s in statements):
        return False
    lowered = {name.lower() for name in frames}
    named = False
    cursor = _parser_cursor()
    try:
        for statement in statements:
            tree = json.loads(_scalar(cursor, "SELECT json_serialize_sql(?)", [statement.sql]))
            if tree.get("error"):
                return False
            ctes = {str(key.get("key", "")).lower() for node in _dicts(tree) for key in node.get("map", []) if isinstance(key, dict)}
            for node in _dicts(tree):
                kind = node.get("type")
                if isinstance(kind, str) and kind.endswith("_QUERY_NODE"):
                    return False
                if kind == "BASE_TABLE":
                    name = str(node.get("table_name", "")).lower()
                    if name in ctes:
                        continue
                    if node.get("schema_name") or node.get("catalog_name") or name not in lowered or name in file_names:
                        return False
                    named = True
                elif kind == "TABLE_FUNCTION":
                    function = str((node.get("function") or {}).get("function_name", "")).lower()
                    if function not in _TABLE_FUNCTIONS:
                        return False
    finally:
        cursor.close()
    return named


class _MemorySandbox:
    """A private in-memory DuckDB with the file's sandbox, for queries of kernel frames.

    Opening a DuckDB database costs ~20 ms, more than many queries, so this one stays
    open; each call takes one of its connections. They are made before the configuration
    is locked, because the progress bar can only be switched off per connection.
    """

    def __init__(self, limits: Limits, connections: int = 2) -> None:
        import queue

        import duckdb

        self.database = duckdb.connect(":memory:", config=limits.config())
        self._free: queue.Queue[duckdb.DuckDBPyConnection] = queue.Queue()
        for _ in range(connections):
            con = self.database.cursor()
            con.execute("SET enable_progress_bar = false")
            self._free.put(con)
        self.database.execute("SET lock_configuration = true")

    @contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        con = self._free.get()
        try:
            yield con
        finally:
            self._free.put(con)


_memory_sandboxes: dict[tuple[Any, ...], _MemorySandbox] = {}
_memory_lock = threading.Lock()


def _memory_sandbox(limits: Limits) -> _MemorySandbox:
    key = tuple(sorted(limits.config().items()))
    with _memory_lock:
        if key not in _memory_sandboxes:
            _memory_sandboxes.clear()  # settings changed: the old one is not needed again
            _memory_sandboxes[key] = _MemorySandbox(limits)
        return _memory_sandboxes[key]


def _frames_named(sql: str, frames: Mapping[str, Any]) -> list[str]:
    """The frames ``sql`` names (DuckDB names are case-insensitive; an exact match wins)."""
    if not frames:
        return []
    named = {name.lower(): name for name in identifiers(sql)}
    found = []
    for lowered, written in named.items():
        matches = [f for f in frames if f.lower() == lowered]
        if written in matches:
            found.append(written)
        elif len(matches) == 1:
            found.append(matches[0])
    return found


def _is_count(description: Any) -> bool:
    """A write's own answer (rows changed, or DDL's success flag), not rows it returned."""
    return bool(description) and len(description) == 1 and description[0][0] in ("Count", "Success")


@contextmanager
def _stand_ins(con: duckdb.DuckDBPyConnection, frames: Mapping[str, Any]) -> Iterator[None]:
    """Empty temp tables shaped like ``frames``, so the statement can be bound and serialized."""
    made = []
    try:
        for name, frame in frames.items():
            con.register("__agent_kernel_frame", frame)
            try:
                con.execute(
                    f"CREATE TEMP TABLE {quote_name(name)} AS SELECT * FROM __agent_kernel_frame LIMIT 0"
                )
            finally:
                con.unregister("__agent_kernel_frame")
            made.append(name)
        yield
    finally:
        for name in made:
            con.execute(f"DROP TABLE temp.main.{quote_name(name)}")


def _object_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute(
        "SELECT lower(table_name) FROM duckdb_tables() UNION SELECT lower(view_name) FROM duckdb_views()"
    ).fetchall()
    return {row[0] for row in rows}


def _used_bytes(con: duckdb.DuckDBPyConnection) -> int:
    return int(_scalar(con, "SELECT coalesce(used_blocks * block_size, 0) FROM pragma_database_size()"))


def _pending_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """Memory held by rows written in this transaction but not yet in the file's blocks."""
    return int(
        _scalar(con, "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() WHERE tag = 'IN_MEMORY_TABLE'")
    )


def _scalar(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> Any:
    """The one value ``sql`` returns (fetched to the end: DuckDB 2.0 wants results finished)."""
    return con.execute(sql, params).fetchall()[0][0]


def quote_name(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:,.1f} MB"
