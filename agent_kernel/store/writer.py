"""Write-behind: a turn's writes go to the DuckDB file from a background thread.

Opening a DuckDB file costs ~15-20 ms, more than a whole tool round trip should. The
turn therefore queues its writes (messages, usage, state) and goes on; a worker thread
applies everything queued so far in one connection and one transaction, in order.
DuckDB releases the GIL while it works, so the kernel's event loop is not held up.
``flush()`` waits until all queued writes are committed to DuckDB's write-ahead log on
disk and the file is closed again; the turn calls it before it ends. The log is folded
into the file (a checkpoint, which costs more than a batch of writes) once the writer
has had nothing to do for about a second, so a turn whose writes come quickly folds it
once after them rather than with each batch; a batch that finds the log past
:data:`FOLD_LOG_BYTES` folds it at once (every connection replays the log).
While writes keep coming (a turn's quick round trips), each batch waits twice as long as
the one before for more, up to :data:`MAX_COALESCE` seconds: each batch costs its own
connection and commit whatever it holds, and a turn of quick round trips would otherwise
pay one every 0.2 s. A write that finds the queue empty starts over at ``coalesce``.
The connections are *mirrored* (see :meth:`Store.connect`): they attach the file to a
database instance kept for them, and the turn keeps what it writes in memory too. If the process dies, at most the writes of the last few
milliseconds are lost, and what was stored stays a valid
conversation (see :mod:`agent_kernel.model.conversation`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from agent_kernel.errors import StoreError
from agent_kernel.store import log_bytes

if TYPE_CHECKING:
    import duckdb

    from agent_kernel.store import Store

Write = Callable[["duckdb.DuckDBPyConnection"], None]

# The write-ahead log's size from which a batch folds it at once. Every attach replays
# the log (~7 ms for 1 MB, ~1 ms for 64 KB, against ~20 ms for the fold of 1 MB): a long
# session of quick turns with large results (500 turns, each with a large tool result) runs
# in half the time with 64 KB as with 1 MB, and folding every batch is slower than either.
FOLD_LOG_BYTES = 64 * 1024
# Seconds without writes after which the log is folded.
FOLD_AFTER_IDLE = 1.0
# The longest a batch waits for more writes (see the module's docstring).
MAX_COALESCE = 0.8


class WriteBehind:
    """An ordered queue of writes applied by one daemon thread."""

    def __init__(self, store: Store, *, coalesce: float = 0.2) -> None:
        self.store = store
        self.coalesce = coalesce  # seconds to gather more writes into one connection
        self._flushing = 0
        self._pending: list[Write] = []
        self._cond = threading.Condition()
        self._busy = False
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._unfolded = False  # the last batch left DuckDB's write-ahead log to fold
        self._burst = 0  # batches in a row that found more writes queued when they ended

    def submit(self, write: Write) -> None:
        """Queue ``write(con)``; it runs after every write queued before it.

        A write already waiting in the queue is not queued twice (a :class:`Journal`
        writes everything recorded up to the moment it runs).
        """
        with self._cond:
            first = not self._pending
            if write not in self._pending:
                self._pending.append(write)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="agent-kernel-store", daemon=True)
                self._thread.start()
            if first:  # the thread waits for a first write; while it gathers more, only for flush()
                self._cond.notify_all()

    @property
    def idle(self) -> bool:
        """Whether every queued write is applied."""
        with self._cond:
            return not self._pending and not self._busy

    def flush(self, timeout: float | None = 60.0) -> None:
        """Wait until every queued write is applied; raise the first write error, if any."""
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                done = self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)
            finally:
                self._flushing -= 1
            error, self._error = self._error, None
        if error is not None:
            raise StoreError(f"Could not save to {self.store.path}: {error}") from error
        if not done:
            raise StoreError(f"Saving to {self.store.path} did not finish in {timeout} s.")

    def _work(self) -> None:
        while True:
            with self._cond:
                # A batch leaves DuckDB's write-ahead log unfolded (see _apply); fold it
                # once no write came for a while.
                idle = FOLD_AFTER_IDLE if self._unfolded else 5.0
                if not self._cond.wait_for(lambda: bool(self._pending), timeout=idle):
                    if not self._unfolded:
                        self._thread = None
                        return
                    batch = []
                else:
                    # Opening the file is the cost; let a few more writes join this batch.
                    window = min(self.coalesce * 2**self._burst, max(self.coalesce, MAX_COALESCE))
                    self._cond.wait_for(lambda: self._flushing > 0, timeout=window)
                    batch, self._pending = self._pending, []
                self._busy = bool(batch)
            try:
                self._apply(batch)
            except BaseException as exc:  # noqa: BLE001 - reported by flush()
                # Drop the traceback: its frames would keep the closed connection alive.
                with self._cond:
                    self._error = self._error or exc.with_traceback(None)
            finally:
                with self._cond:
                    self._busy = False
                    # Writes queued while it ran: they keep coming, the next batch waits longer.
                    self._burst = min(self._burst + 1, 8) if batch and self._pending else 0
                    self._cond.notify_all()
                batch = []

    def _apply(self, batch: list[Write]) -> None:
        # A function of its own so no connection stays referenced by the idle thread's frame.
        with self.store.connect(mirrored=True) as con:
            if batch:
                con.execute("BEGIN TRANSACTION")
                try:
                    for write in batch:
                        write(con)
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
                con.execute("COMMIT")  # in the write-ahead log, on disk: saved
            # Folding the log into the file (a checkpoint) costs more than the writes: a
            # batch leaves it to the idle thread, which folds it once for all the batches
            # of a burst (a turn's round trips). Every connection replays the log, though:
            # past FOLD_LOG_BYTES it is folded now.
            self._unfolded = bool(batch) and log_bytes(self.store.path) < FOLD_LOG_BYTES
            if not self._unfolded:
                con.execute("CHECKPOINT")
