"""The agent's DuckDB file.

DuckDB lets one process at a time hold a file open for writing, and an open read-only
connection blocks writers too. So every access here is short: take the cross-process
file lock, open, do the work, close. Nothing holds a connection across a model call or
a cell. Two kernels, the scheduler and a script can share one file.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import filelock

from agent_kernel.errors import StoreError
from agent_kernel.redaction import clean_text
from agent_kernel.secrets import redactor
from agent_kernel.store import ai_tables
from agent_kernel.store.schema import migrate

T = TypeVar("T")

if TYPE_CHECKING:
    import duckdb

__all__ = ["Store", "StoreConnection", "log_bytes"]

# Another process that does not take our lock (a DuckDB shell, say) can still hold the file.
_BUSY_RETRY_SECONDS = 30.0
# The name the file has in the store's own database instance (see Store._attach), and in
# the model's connection (see Store._open_model).
_ATTACHED = ai_tables.PROJECT_DATABASE


class Store:
    """Short-lived, serialized connections to one DuckDB file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.ai_path = ai_tables.ai_path(self.path)  # the model's ai_* objects (see ai_tables)
        # filelock waits by polling: poll often, or a busy writer in another process keeps
        # taking the lock back before a waiter looks again.
        self._lock = filelock.FileLock(str(self.path) + ".lock", thread_local=False, poll_interval=0.005)
        self._thread_lock = threading.RLock()
        self._migrated = False
        # Change tracking for what callers keep in memory between connections (the turn's
        # session and prompt sections): ``changes`` counts the connections that may have
        # changed the file behind such a copy; ``_seen`` is the file as the last one left it.
        self.changes = 0
        self._seen: tuple[Any, ...] | None = None
        self._instance: duckdb.DuckDBPyConnection | None = None  # see _attach
        self._exiting = False  # the interpreter exits: no new instance (see _drop_instance)
        self._held: list[str] = []  # how each connection open now reached the file, outermost first

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    @contextmanager
    def connect(
        self,
        *,
        config: Mapping[str, Any] | None = None,
        read_only: bool = False,
        mirrored: bool = False,
        ai: bool = False,
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """Yield a connection under the file lock; commit and close when the block ends.

        ``config``: DuckDB settings for this connection's database instance (the SQL
        sandbox of :mod:`agent_kernel.sql.guard` uses it). ``read_only``: DuckDB opens
        the file for reading only, so nothing run on it can change the file (its TEMP
        schema, in memory, stays writable). ``mirrored``: what the block writes is already
        in the in-memory copies that :meth:`unchanged_since` guards (the turn's journal),
        so it does not count as a change; such a connection attaches the file to a
        database instance the store keeps (see :meth:`_attach`). ``ai``: the model's
        connection: its database is the model's file (:attr:`ai_path`, written unless
        ``read_only``), and the store is attached to it read-only, its tables readable by their
        plain names (see :meth:`_open_model`).
        """
        with self._thread_lock, self._lock:
            if self._signature() != self._seen:
                self.changes += 1  # another process (or an unlocked program) wrote meanwhile
            if not (read_only or mirrored):
                self.changes += 1
            # A connection opened inside another's block (same thread: the lock is
            # reentrant) reaches the file the way the outer one did: DuckDB refuses a
            # second handle on a file one of this process's instances has attached.
            outer = self._held[-1] if self._held else None
            # At exit the kept instance is gone: other connections open the file on their own.
            attached = not ai and (
                outer == "attached"
                if outer is not None
                else config is None and (self._migrated or read_only) and (mirrored or not self._exiting)
            )
            try:
                if (read_only or ai) and not self._migrated:  # migrating writes: do it first
                    self._migrate_now()
                if ai:
                    if outer is not None:
                        raise StoreError("The model's connection cannot be opened inside another store connection.")
                    con = self._open_model(config, read_only=read_only)
                elif not attached:
                    con = self._open(config, read_only=read_only)
                elif outer is None:
                    con = self._attach(read_only=read_only)
                else:
                    con = self._nested()
            except BaseException:
                self._seen = None
                raise
            self._held.append("attached" if attached else "opened")
            try:
                if not self._migrated:
                    migrate(con)
                    ai_tables.move(con, self.ai_path)
                    self._migrated = True
                yield StoreConnection(con)  # type: ignore[misc]
            except BaseException:
                self.changes += 1  # part of a mirrored write may be missing from the file
                raise
            finally:
                self._held.pop()
                con.close()
                if attached and outer is None:
                    self._detach(fold=not (read_only or mirrored))
                self._seen = self._signature()

    def unchanged_since(self, changes: int) -> bool:
        """Whether the file holds what it held when :attr:`changes` was ``changes``, plus
        mirrored writes: no other connection of this process changed it, and no other
        process wrote to it since this one last closed it (two ``stat`` calls, no open).

        Another process's write is seen by the file's modification time, status-change
        time, size and inode (DuckDB's write-ahead log's too).
        """
        return changes == self.changes and self._seen is not None and self._signature() == self._seen

    def _signature(self) -> tuple[Any, ...]:
        marks: list[Any] = []
        for path in (self.path, self._wal, self.ai_path, f"{self.ai_path}.wal"):
            try:
                st = os.stat(path)
            except OSError:
                marks.append(None)
            else:
                marks.append((st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))
        return tuple(marks)

    @property
    def _wal(self) -> str:
        return str(self.path) + ".wal"

    def _attach(self, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        """A connection to the file through an in-memory database instance kept between
        connections: attaching a file to it costs a fraction of starting a new instance
        (a few ms against ~15 ms), which is what a turn's reads and writes pay. The file is
        detached when the connection closes, so it is held no longer than by :meth:`_open`.
        A connection with its own DuckDB settings (the SQL sandbox's) is never made here."""
        import duckdb  # noqa: PLC0415 - heavy (~150 ms): the server extension imports the store

        if self._exiting:
            raise StoreError("The process is exiting; the write is left to DuckDB's log.")
        if self._instance is None:
            # Detaching does not fold DuckDB's write-ahead log into the file: the writes
            # are on disk once committed; the write-behind thread folds it when nobody
            # waits (a reader replays the log meanwhile, as after a crash).
            self._instance = duckdb.connect(":memory:", config={"threads": 1, "checkpoint_on_detach": "DISABLED"})
            atexit.register(_drop_instance, weakref.ref(self))
        path = str(self.path).replace("'", "''")
        instance = self._instance
        options = " (READ_ONLY)" if read_only else ""
        self._while_locked(lambda: instance.execute(f"ATTACH '{path}' AS {_ATTACHED}{options}"))
        con = self._instance.cursor()
        try:
            con.execute(f"USE {_ATTACHED}")
        except BaseException:
            con.close()
            self._detach()
            raise
        return con

    def _nested(self) -> duckdb.DuckDBPyConnection:
        """Another connection to the file the kept instance has attached now."""
        assert self._instance is not None
        con = self._instance.cursor()
        try:
            con.execute(f"USE {_ATTACHED}")
        except BaseException:
            con.close()
            raise
        return con

    def _detach(self, *, fold: bool = False) -> None:
        """Let go of the file; ``fold``: fold DuckDB's write-ahead log into it first, as
        closing an instance of its own would (the write-behind thread's writes leave that
        to its idle time)."""
        if self._instance is None:
            return
        try:
            if fold and log_bytes(self.path):
                self._instance.execute(f"CHECKPOINT {_ATTACHED}")
        finally:
            self._instance.execute(f"DETACH DATABASE IF EXISTS {ai_tables.AI_DATABASE}")  # see ai_tables.attach
            self._instance.execute(f"DETACH DATABASE IF EXISTS {_ATTACHED}")

    def _migrate_now(self) -> None:
        con = self._open()
        try:
            migrate(con)
            ai_tables.move(con, self.ai_path)
            self._migrated = True
        finally:
            con.close()

    def _open(self, config: Mapping[str, Any] | None = None, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        import duckdb  # noqa: PLC0415 - heavy: see _attach

        return self._while_locked(
            lambda: duckdb.connect(str(self.path), read_only=read_only, config=dict(config or {}))
        )

    def _open_model(self, config: Mapping[str, Any] | None, *, read_only: bool) -> duckdb.DuckDBPyConnection:
        """The model's connection: a database instance of its own whose default database is
        the model's file, the store attached ``READ_ONLY``, so that DuckDB refuses any change
        to the store's tables whatever SQL runs. Plain names find the model's objects first,
        then the store's; what is created without a database name lands in the model's file.

        ``config`` is applied as given, but for ``enable_external_access = false``, which
        would refuse the two ATTACHes: it is set once they are made (it cannot be set back).
        """
        import duckdb  # noqa: PLC0415 - heavy: see _attach

        settings = dict(config or {})
        sandboxed = settings.pop("enable_external_access", True) is False
        ai = ai_tables.sql_literal(str(self.ai_path))
        store = ai_tables.sql_literal(str(self.path))
        name = ai_tables.AI_DATABASE

        def open_both() -> duckdb.DuckDBPyConnection:
            con = duckdb.connect(":memory:", config=settings)
            try:
                con.execute(f"ATTACH {store} AS {_ATTACHED} (READ_ONLY)")
                if read_only and not self.ai_path.exists():  # made empty: DuckDB reads only a file
                    con.execute(f"ATTACH {ai} AS {name}")
                    con.execute(f"DETACH {name}")
                con.execute(f"ATTACH {ai} AS {name}{' (READ_ONLY)' if read_only else ''}")
                con.execute(f"USE {name}")
                con.execute(f"SET search_path = '{name}.main,{_ATTACHED}.main'")
                if sandboxed:
                    con.execute("SET enable_external_access = false")
            except BaseException:
                con.close()
                raise
            return con

        return self._while_locked(open_both)

    def _while_locked(self, open_file: Callable[[], T]) -> T:
        """``open_file()``, tried again while another process holds the file's lock (up
        to a few seconds, backing off); any other failure, or a lock held longer, is a
        :class:`StoreError` that says what to do."""
        import duckdb  # noqa: PLC0415 - heavy: see _attach

        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + _BUSY_RETRY_SECONDS
        delay = 0.01
        while True:
            try:
                return open_file()
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                    raise StoreError(
                        f"Cannot open the agent database {self.path}: {exc}. "
                        "Close other programs that hold it, or set AGENT_KERNEL_DB."
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.5)


def _drop_instance(ref: weakref.ref[Store]) -> None:
    """Close a store's kept instance at exit, after the write in progress, if any (the
    write-behind daemon thread references the store, so the instance would outlive the
    interpreter's teardown; a daemon thread stopped inside DuckDB aborts the process)."""
    store = ref()
    if store is None:
        return
    if store._thread_lock.acquire(timeout=10.0):  # let a running write finish
        try:
            store._exiting = True
            instance, store._instance = store._instance, None
            if instance is not None:
                instance.close()
        finally:
            store._thread_lock.release()


class StoreConnection:
    """A DuckDB connection whose every statement is scrubbed before it runs.

    This is where nothing reaches the file unredacted: the text parameters of each
    statement (and its SQL text) lose every known secret and every lone surrogate
    (see :mod:`agent_kernel.secrets`), whoever runs it: the turn's journal, the audit
    trail, memories, stored instructions, state, or code using :class:`Store`.
    Everything else is the connection itself.
    """

    __slots__ = ("_con",)

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def execute(self, query: Any, parameters: Any = None) -> StoreConnection:
        self._con.execute(*_clean((query, parameters)))
        return self

    def executemany(self, query: Any, parameters: Any = None) -> StoreConnection:
        self._con.executemany(*_clean((query, parameters)))
        return self

    def sql(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        if "params" in kwargs:
            kwargs["params"] = _clean(kwargs["params"])
        return self._con.sql(_clean(query), *_clean(list(args)), **kwargs)

    query = sql

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)

    def __enter__(self) -> StoreConnection:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._con.close()


def _clean(value: Any) -> Any:
    """``value`` with its strings redacted and made encodable (other values as they are).

    The strings (in lists, tuples and dict values, at any depth) are redacted together, in
    one pass of the redactor (:meth:`~agent_kernel.redaction.Redactor.texts`): a statement's
    parameters are many short strings, and a pass each costs more than the statement."""
    found: list[str] = []
    _strings(value, found)
    if not found:
        return value
    cleaned = [clean_text(text) for text in found]
    redacted = redactor().texts(cleaned)
    if all(new is old for new, old in zip(redacted, found)):
        return value
    return _put_back(value, iter(redacted))


def _strings(item: Any, found: list[str]) -> None:
    """Append the strings of ``item`` to ``found``, in the order :func:`_put_back` takes them."""
    if isinstance(item, str):
        found.append(item)
    elif isinstance(item, (list, tuple)):
        for value in item:
            _strings(value, found)
    elif isinstance(item, dict):
        for value in item.values():
            _strings(value, found)


def _put_back(item: Any, texts: Iterator[str]) -> Any:
    """``item`` with its strings replaced, in order, by ``texts``."""
    if isinstance(item, str):
        return next(texts)
    if isinstance(item, list):
        return [_put_back(v, texts) for v in item]
    if isinstance(item, tuple):
        return tuple(_put_back(v, texts) for v in item)
    if isinstance(item, dict):
        return {k: _put_back(v, texts) for k, v in item.items()}
    return item


def log_bytes(path: Path) -> int:
    """The size of DuckDB's write-ahead log of the file at ``path`` (0: none)."""
    try:
        return os.stat(f"{path}.wal").st_size
    except OSError:
        return 0
