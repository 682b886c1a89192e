"""Where the model's checked SQL runs: a sandboxed DuckDB connection, one transaction a call.

The connection is sandboxed before it runs anything (research/anchors-security.md §1):
no file or network access, no extension loading, memory and thread limits, DuckDB 2.0's
``max_execution_time`` for each statement, then ``lock_configuration`` so nothing can be
changed back. A write that grows the file past its size cap is rolled back; at most
``max_rows`` rows come back.

Kernel DataFrames are registered on the connection by name, never copied into the file.
The binder cannot serialize a plan that scans a Python object, so a statement that names
a frame is planned against an empty stand-in table of the same columns, then run against
the frame itself. A query that reads only frames needs nothing from the file: it runs on
a private in-memory database with the same sandbox, and neither opens the file nor waits
for its lock.

The sandbox lives on the database *instance*, which exists only while this call's
connection is open: every other use of the file (sessions, state, the scheduler) opens
its own, unsandboxed, connection under the same lock (see :class:`~agent_kernel.store.Store`).
What may run at all is decided in :mod:`agent_kernel.store.guard`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..errors import ToolInputError
from . import protect
from .guard import (
    NO_FILES,
    Plan,
    Statement,
    check_plan,
    identifiers,
    quote_name,
    reads_only_frames,
    scalar,
)

if TYPE_CHECKING:
    import duckdb

    from . import Store

__all__ = ["Limits", "SqlResult", "SqlRun"]

READ_ONLY_WRITE = (
    "This statement changes the database, and this db_sql call runs read-only (a read-only "
    "turn, or SQL that looked like a read), so it was not run."
)

# Names of the tables and views of each file, as last seen (a frame never shadows them).
_FILE_NAMES: dict[Any, set[str]] = {}


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


# -- running a call --------------------------------------------------------------------------


class SqlRun:
    """One ``db_sql`` call: a sandboxed connection, used from one worker thread.

    :meth:`run` blocks (call it off the event loop); :meth:`interrupt` stops it from any
    thread, e.g. when the user presses Stop.
    """

    def __init__(self, store: Store, limits: Limits, *, read_only: bool = False) -> None:
        """``read_only``: open the file read-only, so nothing this call runs can change it."""
        self.store = store
        self.limits = limits
        self.read_only = read_only
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
        if reads_only_frames(statements, call.frames, _FILE_NAMES.get(self.store.path)):
            with _memory_sandbox(self.limits).cursor() as con:
                return self._run_on(con, call)
        with self.store.connect(config=self.limits.config(), read_only=self.read_only) as con:
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
                kept = protect.fingerprint(con) if call.on_file and not self.read_only else None
                result = self._statements(con, call)
                if kept is not None:
                    protect.verify_unchanged(con, kept)
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
                        plan = check_plan(con, statement, frames, parameters=params is not None)
                else:  # _reads_only_frames checked it: a read of frames and allowed functions
                    plan = Plan(frozenset(), ())
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
        plan: Plan,
        params: Sequence[Any] | None,
        into: bool,
        last: bool,
        result: SqlResult,
    ) -> None:
        """Run one checked statement; count its changes, or keep its rows if it is the last."""
        if into and plan.writes:
            raise ToolInputError("into= takes a query that reads (SELECT ...), not one that writes.")
        if self.read_only and plan.writes:
            raise ToolInputError(READ_ONLY_WRITE)
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
            return f"{NO_FILES} ({text})"
        if isinstance(exc, duckdb.OutOfMemoryException):
            return (
                f"The statement needed more than its memory limit ({self.limits.memory_limit}) "
                f"and was stopped. Aggregate or filter earlier, or select fewer columns. ({text})"
            )
        return text


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
    return int(scalar(con, "SELECT coalesce(used_blocks * block_size, 0) FROM pragma_database_size()"))


def _pending_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """Memory held by rows written in this transaction but not yet in the file's blocks."""
    return int(
        scalar(con, "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() WHERE tag = 'IN_MEMORY_TABLE'")
    )


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:,.1f} MB"
