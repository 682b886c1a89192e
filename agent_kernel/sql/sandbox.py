"""Where the model's checked SQL runs: a sandboxed DuckDB connection, one transaction a call.

The connection is sandboxed before it runs anything (research/anchors-security.md §1):
no file or network access, no extension loading, memory and thread limits, DuckDB 2.0's
``max_execution_time`` for each statement, then ``lock_configuration`` so nothing can be
changed back. A write that grows the file past its size cap is rolled back; at most
``max_rows`` rows come back, read a few at a time within ``fetch_bytes``; ``into=`` keeps
at most ``into_max_rows`` rows and ``into_max_bytes``.

No call runs in the kernel itself: :func:`agent_kernel.sql.worker.run_sql` hands it
to another process that the kernel can stop and kill, where
:meth:`SqlRun.run_here` or :meth:`SqlRun.run_in_memory` runs it.

Kernel DataFrames are registered on the connection by name, never copied into the file.
A query that reads only frames needs nothing from the file: it runs in a fork of the
kernel, which sees the frames in place, on a private in-memory database with the same
sandbox, and neither opens the file nor waits for its lock. A call that also reads the
file runs in the worker, which gets the frames it names pickled. There, the binder
cannot serialize a plan that scans a Python object, so a statement that names a frame is
planned against an empty stand-in table of the same columns, then run against the frame.

The sandbox lives on the database *instance*, which exists only while this call's
connection is open: every other use of the file (sessions, state, the scheduler) opens
its own, unsandboxed, connection under the same lock (see :class:`~agent_kernel.store.Store`).
That instance's database is the model's own file, the store attached to it ``READ_ONLY``
(:mod:`agent_kernel.store.ai_tables`): DuckDB refuses any change to a project table, so a
writing call costs the same however much the store holds.
What may run at all is decided in :mod:`agent_kernel.sql.guard`.
"""

from __future__ import annotations

import atexit
import os
import queue
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import duckdb
import psutil

from agent_kernel.errors import ToolInputError
from agent_kernel.sql import protect
from agent_kernel.sql.guard import NO_FILES, Plan, Statement, check_plan, identifiers, reads_only_frames, scalar
from agent_kernel.store.schema import quote_name

if TYPE_CHECKING:
    from agent_kernel.config import AgentKernel
    from agent_kernel.store import Store

__all__ = ["ForkReady", "Limits", "SqlResult", "SqlRun", "prepare_fork", "ready_to_fork"]

PROJECT_READ_ONLY = (
    "agent-kernel's own tables are read-only to db_sql, so nothing was changed. Keep your "
    "data in objects named ai_*, created without a database name."
)
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
    into_max_rows: int = 10_000_000
    into_max_bytes: int = 1024 * 1024 * 1024
    fetch_bytes: int = 16 * 1024 * 1024  # rows shown to the model are read up to this size

    @classmethod
    def from_settings(cls, settings: AgentKernel) -> Limits:
        """The limits the ``AgentKernel`` settings give the model's SQL."""
        return cls(
            timeout_s=settings.sql_timeout_s,
            max_rows=settings.sql_max_rows,
            memory_limit=settings.sql_memory_limit,
            threads=settings.sql_threads,
            max_db_bytes=settings.db_max_mb * 1024 * 1024,
            into_max_rows=settings.into_max_rows,
            into_max_bytes=settings.into_max_mb * 1024 * 1024,
        )

    def worker_memory_bytes(self) -> int:
        """Most memory the worker process may use: DuckDB's limit plus room for Python.

        DuckDB's ``memory_limit`` covers its buffers, not every vector of a running
        statement (one vector of huge strings or lists can take gigabytes outside it).
        """
        try:
            duckdb_limit = _size_bytes(self.memory_limit)
        except ValueError:  # a form DuckDB reads but this does not: half the machine's memory
            duckdb_limit = psutil.virtual_memory().total // 2
        return duckdb_limit + 512 * 1024 * 1024

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
    note: str = ""  # why rows are missing, when a size cap rather than max_rows cut them
    schema: Any = None  # the Arrow schema of an into= result
    file_names: set[str] | None = None  # the file's tables and views, as a call on the file saw them


# -- running a call --------------------------------------------------------------------------


class SqlRun:
    """One ``db_sql`` call.

    :meth:`run` blocks (call it off the event loop) while another process runs the call
    (a fork of the kernel, or a worker: :mod:`agent_kernel.sql.worker`), so that any
    statement can be stopped at the time limit or by :meth:`interrupt` (from any thread,
    e.g. when the user presses Stop), and its memory bounded. :meth:`run_here` runs it on
    a connection in this process (the worker does).
    """

    def __init__(self, store: Store, limits: Limits, *, read_only: bool = False) -> None:
        """``read_only``: open the file read-only, so nothing this call runs can change it."""
        self.store = store
        self.limits = limits
        self.read_only = read_only
        self._con: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.Lock()
        self._interrupted = threading.Event()
        self.emit_batch: Callable[[Any], None] | None = None  # where into= rows go (Arrow batches)
        self.on_start: Callable[[], None] | None = None  # called once the connection is open

    @property
    def interrupted(self) -> bool:
        return self._interrupted.is_set()

    def interrupt(self) -> None:
        with self._lock:
            self._interrupted.set()
            if self._con is not None:
                self._con.interrupt()

    def placement(self, statements: Sequence[Statement], frames: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        """The kernel frames ``statements`` name, and whether the call may run in a fork.

        A read of kernel frames alone runs in a fork of this process, which sees the frames
        in place; anything else runs in a worker process, which gets the frames it names.
        """
        named = {name: frames[name] for statement in statements for name in _frames_named(statement.sql, frames)}
        in_place = bool(named) and all(map(_forks_well, named.values()))
        return named, in_place and reads_only_frames(statements, named, self._file_names())

    def remember(self, result: SqlResult) -> None:
        """Keep the file's table names a worker read, for :meth:`placement`'s next decision."""
        if result.file_names is not None:
            _FILE_NAMES[self.store.path] = result.file_names

    def _file_names(self) -> set[str]:
        """The file's tables and views (a frame never shadows them), read once if not known yet."""
        names = _FILE_NAMES.get(self.store.path)
        if names is None:
            with self.store.connect(read_only=True, ai=True) as con:
                names = _FILE_NAMES[self.store.path] = _object_names(con)
        return names

    def run_in_memory(
        self,
        ready: ForkReady,
        statements: Sequence[Statement],
        *,
        params: Sequence[Any] | None = None,
        into: bool = False,
    ) -> SqlResult:
        """Run a read of kernel frames alone in a fork made within :func:`ready_to_fork`,
        once :meth:`ForkReady.lock` has set up its database; the frames are registered."""
        return self._run_on(ready.con, _Call(statements, params, {}, into))

    def run_here(
        self,
        statements: Sequence[Statement],
        *,
        params: Sequence[Any] | None = None,
        frames: Mapping[str, Any] | None = None,
        into: bool = False,
    ) -> SqlResult:
        """Run the call on a connection of this process (the worker process does this).

        Queries that read only kernel DataFrames (sent here when their frames cannot be
        read in a fork, e.g. a polars LazyFrame) run on a private in-memory database with
        the same sandbox: they neither open the agent's file nor wait for its lock.
        """
        call = _Call(statements, params, dict(frames or {}), into)
        if reads_only_frames(statements, call.frames, _FILE_NAMES.get(self.store.path)):
            with _memory_sandbox(self.limits).cursor() as con:
                return self._run_on(con, call)
        with self.store.connect(config=self.limits.config(), read_only=self.read_only, ai=True) as con:
            con.execute("SET enable_progress_bar = false")  # a local option: set it, then lock
            con.execute("SET lock_configuration = true")
            return self._run_on(con, replace(call, on_file=True))

    def _run_on(self, con: duckdb.DuckDBPyConnection, call: _Call) -> SqlResult:
        """``call`` as one transaction on ``con``, interruptible; DuckDB errors become refusals."""
        with self._lock:
            if self._interrupted.is_set():
                raise ToolInputError("The query was stopped.")
            self._con = con
        if self.on_start is not None:
            self.on_start()
        try:
            con.execute("BEGIN TRANSACTION")
            try:
                result = self._statements(con, call)
                if call.on_file and not self.read_only:
                    protect.verify_only_ai(con)
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
        if on_file:
            result.file_names = _FILE_NAMES[self.store.path]
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
        if into and last:  # a relation streams its Arrow batches; a DB-API result is read whole first
            relation = con.sql(statement.sql, params=list(params) if params is not None else None)
            result.columns = list(relation.columns)
            self._fetch_into(relation, result)
            return
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
        # INSERT ... RETURNING: the write must finish, whatever is shown.
        self._fetch_shown(cursor, result, drain=plan.writes)
        if not plan.writes:
            con.abort()  # the rest is not needed; the transaction can commit

    def _fetch_shown(self, cursor: duckdb.DuckDBPyConnection, result: SqlResult, *, drain: bool) -> None:
        """At most ``max_rows`` rows and about ``fetch_bytes`` of them, read a few at a time.

        The first row tells how big rows are; later reads take as many as fit in a quarter
        of what is left of the budget, so one read never holds much more than the budget.
        """
        rows: list[tuple[Any, ...]] = []
        size = 0
        budget, wanted = self.limits.fetch_bytes, self.limits.max_rows + 1
        step = 1
        while len(rows) < wanted and size <= budget:
            chunk = cursor.fetchmany(min(step, wanted - len(rows)))
            if not chunk:
                break
            chunk_size = sum(_row_bytes(row) for row in chunk)
            rows.extend(chunk)
            size += chunk_size
            per_row = max(1, chunk_size // len(chunk))
            step = max(1, min(2048, (budget - size) // 4 // per_row))
        if size > budget:
            while len(rows) > 1 and size > budget:
                size -= _row_bytes(rows.pop())
            result.truncated = True
            result.note = (
                f"The rows are large: only the first {len(rows):,} (about {_mb(size)}) were read. "
                "Select fewer or shorter columns (left(text, 200)), or aggregate in SQL."
            )
        elif len(rows) > self.limits.max_rows:
            result.truncated = True
        result.rows = rows[: self.limits.max_rows]
        if drain:
            while cursor.fetchmany(1024):
                pass

    def _fetch_into(self, relation: duckdb.DuckDBPyRelation, result: SqlResult) -> None:
        """The result as Arrow batches, up to ``into_max_rows`` rows and ``into_max_bytes``.

        Batches go to :attr:`emit_batch` as they are read (the worker streams them to the
        kernel), so the whole result is never held twice.
        """
        import pyarrow as pa  # noqa: PLC0415 - heavy, and only an into= result is Arrow

        batches: list[Any] = []
        emit = self.emit_batch or batches.append
        rows = size = 0
        max_rows, max_bytes = self.limits.into_max_rows, self.limits.into_max_bytes
        reader = relation.to_arrow_reader(8192)
        schema = reader.schema
        try:
            for batch in reader:
                if rows + batch.num_rows > max_rows:
                    batch = batch.slice(0, max_rows - rows)
                    result.note = f"into= keeps at most {max_rows:,} rows (AgentKernel.into_max_rows)"
                if size + batch.nbytes > max_bytes:
                    keep = int(batch.num_rows * (max_bytes - size) / max(1, batch.nbytes))
                    batch = batch.slice(0, keep)
                    result.note = f"into= keeps at most {_mb(max_bytes)} of rows (AgentKernel.into_max_mb)"
                rows += batch.num_rows
                size += batch.nbytes
                if batch.num_rows:
                    emit(batch)
                if result.note:
                    break
        finally:
            reader.close()
        if result.note:
            result.truncated = True
            result.note += f": the variable holds the first {rows:,}. Filter or aggregate in SQL, or raise the setting."
        if self.emit_batch is None:
            result.frame = pa.Table.from_batches(batches, schema=schema).to_pandas()
            result.rows = list(result.frame.head(self.limits.max_rows).itertuples(index=False, name=None))
        result.schema = schema

    def _check_size(self, con: duckdb.DuckDBPyConnection, pending_before: int) -> None:
        # Rows not written to blocks yet count at their in-memory size, which is larger than
        # on disk: a big write may be refused a little before the file reaches the cap.
        used = _used_bytes(con) + max(0, _pending_bytes(con) - pending_before)
        cap = self.limits.max_db_bytes
        if used > cap:
            raise ToolInputError(
                f"This change would make the agent's database {_mb(used)}, over its cap of "
                f"{_mb(cap)} (AgentKernel.db_max_mb), so it was rolled back. Drop ai_* tables "
                'you no longer need, or keep large results in the kernel with into="name".'
            )

    def _describe(self, exc: Exception) -> str:
        text = str(exc)
        if isinstance(exc, duckdb.InterruptException):
            if "execution time" in text:
                return timeout_message(self.limits.timeout_s)
            return "The query was stopped."
        if isinstance(exc, duckdb.PermissionException):
            return f"{NO_FILES} ({text})"
        if "read-only mode" in text and not self.read_only:  # the store, attached READ_ONLY
            return f"{PROJECT_READ_ONLY} ({text})"
        if isinstance(exc, duckdb.OutOfMemoryException):
            return (
                f"The statement needed more than its memory limit ({self.limits.memory_limit}) "
                f"and was stopped. Aggregate or filter earlier, or select fewer columns. ({text})"
            )
        return text


def timeout_message(timeout_s: float) -> str:
    return (
        f"The statement ran longer than {timeout_s:g} s and was stopped (nothing was changed). "
        "Make it cheaper: filter or aggregate earlier, add a LIMIT, or sample (USING SAMPLE 10%)."
    )


class _MemorySandbox:
    """A private in-memory DuckDB with the file's sandbox, for queries of kernel frames.

    Opening a DuckDB database costs ~20 ms, more than many queries, so this one stays
    open; each call takes one of its connections. They are made before the configuration
    is locked, because the progress bar can only be switched off per connection.
    """

    def __init__(self, limits: Limits, connections: int = 2) -> None:
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


def _config_key(limits: Limits) -> tuple[Any, ...]:
    return tuple(sorted(limits.config().items()))


def _memory_sandbox(limits: Limits) -> _MemorySandbox:
    key = _config_key(limits)
    with _memory_lock:
        if key not in _memory_sandboxes:
            _memory_sandboxes.clear()  # settings changed: the old one is not needed again
            _memory_sandboxes[key] = _MemorySandbox(limits)
        return _memory_sandboxes[key]


# For forks: an in-memory database with the sandbox but not locked yet and one thread
# (so none of its own). This process uses it only to register the frames of a call on a
# connection of its own right before it forks, and to close that connection once the
# child has left, each under _fork_lock: no thread holds any of its locks at a fork.
# Opening a DuckDB database takes ~40 ms; registering a frame in a fresh fork ~25 ms (the
# first touch copies thousands of the kernel's pages), ~2 ms here.
_fork_ready: dict[tuple[Any, ...], duckdb.DuckDBPyConnection] = {}
_fork_lock = threading.Lock()


@dataclass(frozen=True)
class ForkReady:
    """The database a fork runs its call on, and the call's connection, the frames registered."""

    database: duckdb.DuckDBPyConnection
    con: duckdb.DuckDBPyConnection

    def lock(self, limits: Limits) -> None:
        """In the fork, before its first call: give the database its threads (none survive
        a fork), then lock its configuration."""
        self.con.execute(f"SET threads = {limits.config()['threads']}")
        self.database.execute("SET lock_configuration = true")

    def register(self, name: str, frame: Any) -> None:
        """Make ``frame`` a table of the call's connection by ``name`` (a polars frame as Arrow)."""
        self.con.register(name, frame.to_arrow() if _is_polars(frame) else frame)

    def release(self) -> None:
        """Close the call's connection, which lets go of its frames: once the child has left
        (before, closing it would write pages the child shares, each copied first)."""
        with _fork_lock:
            if not _exiting:
                self.con.close()


def prepare_fork(store: Store, limits: Limits) -> None:
    """Do now what a first read of kernel frames would: open the forks' database for
    ``limits`` and read the names of the file's tables (when the file exists)."""
    with _fork_lock:
        _fork_database(limits)
    if store.path.exists():
        SqlRun(store, limits, read_only=True)._file_names()


def _fork_database(limits: Limits) -> duckdb.DuckDBPyConnection:
    """The forks' database for ``limits`` (the caller holds ``_fork_lock``)."""
    key = _config_key(limits)
    if key not in _fork_ready:
        _fork_ready.clear()
        _fork_ready[key] = duckdb.connect(":memory:", config={**limits.config(), "threads": 1})
    return _fork_ready[key]


@contextmanager
def ready_to_fork(limits: Limits, frames: Mapping[str, Any]) -> Iterator[ForkReady]:
    """Fork within this block to have the child's database ready, ``frames`` registered on
    its connection; call ``release()`` on what it yields once the child has left."""
    with _fork_lock:
        database = _fork_database(limits)
        con = database.cursor()
        try:
            con.execute("SET enable_progress_bar = false")  # a local option: set before the lock
            ready = ForkReady(database, con)
            for name, frame in frames.items():
                ready.register(name, frame)
            yield ready
        except BaseException:
            con.close()
            raise


def _forks_well(frame: Any) -> bool:
    """Whether a fork can scan ``frame`` in place: its data is in memory, and reading it
    needs no thread pool of its library (none survive a fork: a polars LazyFrame would
    hang collecting there). A polars DataFrame is read as Arrow (no copy)."""
    kind = type(frame)
    return (kind.__module__.split(".")[0], kind.__name__) in {
        ("pandas", "DataFrame"),
        ("pyarrow", "Table"),
        ("pyarrow", "RecordBatch"),
        ("polars", "DataFrame"),
    }


def _is_polars(frame: Any) -> bool:
    return type(frame).__module__.split(".")[0] == "polars"


_exiting = False


@atexit.register
def _close_fork_ready() -> None:
    """At exit: close the forks' database, and let no thread close a connection of it later
    (a thread still in DuckDB's code as the interpreter finishes is ended there: abort)."""
    global _exiting
    with _fork_lock:
        _exiting = True
        _fork_ready.clear()


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
                con.execute(f"CREATE TEMP TABLE {quote_name(name)} AS SELECT * FROM __agent_kernel_frame LIMIT 0")
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
    """The size of the file the model writes (its connection's own database)."""
    return int(
        scalar(
            con,
            "SELECT coalesce(sum(used_blocks * block_size), 0) FROM pragma_database_size() "
            "WHERE database_name = current_database()",
        )
    )


def _pending_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """Memory held by rows written in this transaction but not yet in the file's blocks."""
    return int(
        scalar(con, "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() WHERE tag = 'IN_MEMORY_TABLE'")
    )


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:,.1f} MB"


def _row_bytes(row: tuple[Any, ...]) -> int:
    """About how much memory a fetched row takes (strings and blobs by length, lists deep)."""
    return sum(_value_bytes(value) for value in row)


def _value_bytes(value: Any) -> int:
    if isinstance(value, (str, bytes, bytearray)):
        return 50 + len(value)
    if isinstance(value, (list, tuple)):
        return 56 + sum(_value_bytes(v) for v in value)
    if isinstance(value, dict):
        return 64 + sum(_value_bytes(k) + _value_bytes(v) for k, v in value.items())
    return 32


_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def _size_bytes(text: str) -> int:
    """Bytes in a DuckDB size setting such as ``1GB`` or ``953.6 MiB``."""
    match = re.fullmatch(r"\s*([0-9.]+)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(f"not a size: {text!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])
