"""Keeping the store small: old tool results and run outputs pruned to a stub, the file's size
and growth, and a compaction that gives the space back.

A DuckDB file never shrinks by itself: an ``UPDATE`` or ``DELETE`` frees blocks inside the
file for later writes, but the file keeps its size. So retention works in two steps:
:func:`prune` replaces payloads older than the retention (``AgentKernel.retention_full_days``)
with a short stub that says what was there and when it was pruned, keeping every row so the
conversation, its summaries and the audit trail stay whole; :func:`vacuum` copies what is
left to a fresh file and swaps it in, which is when the file gets smaller.

What is pruned, past the cutoff and only when longer than :data:`KEEP_CHARS` characters:
the content of ``tool_result`` blocks in stored messages (the message, its ``tool_use_id``
and ``is_error`` stay, so the history is still a valid conversation), the stdout, stderr and
traceback of code runs, and a finished run's output notebook (outputs but errors) and logs.
Never pruned: what the person and the model wrote (text, tool inputs, code), session and
context summaries, memories, usage. Deleting a session's conversation is the person's act
(``%agent_sessions --delete``), never retention's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kernel.errors import StoreError
from agent_kernel.store import ai_tables, log_bytes
from agent_kernel.store.rows import aggregate_row, insert_rows

if TYPE_CHECKING:
    from collections.abc import Iterator

    import duckdb

    from agent_kernel.store import Store

__all__ = [
    "KEEP_CHARS",
    "Pruned",
    "SizeLine",
    "StoreStats",
    "TableSize",
    "Vacuumed",
    "human_bytes",
    "measure",
    "prune",
    "prune_if_due",
    "size_line",
    "store_stats",
    "tidy_daily",
    "vacuum",
]

# A payload up to this many characters is kept whole: a stub would not be much shorter.
KEEP_CHARS = 1000
# How much of a pruned payload its stub keeps, so a reader still sees what it was about.
PREVIEW_CHARS = 200
# What starts every stub (and tells a pruned payload from one to prune).
MARK = "[pruned "
# How often :func:`prune_if_due` prunes, at most.
AUTO_EVERY = timedelta(days=1)
# The tables whose rows carry a created_at: how fast the store grows is read from them.
_DATED = ("messages", "tool_calls", "code_executions", "model_calls", "memories")
_BATCH = 500  # rows rewritten per statement
# About how many messages one connection prunes, and the pause between two (see prune).
PRUNE_ROWS = 100_000
PRUNE_PAUSE_S = 0.05


def _utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)  # the store keeps UTC wall-clock times


def human_bytes(n: float) -> str:
    """``n`` bytes as a person reads them (``412.3 MB``)."""
    for unit in ("bytes", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


# -- size and growth ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeLine:
    """The file's size on disk and how fast it grew over the last week (bytes a day, estimated
    from the share of rows written in those 7 days), and its oldest and newest message."""

    path: str
    file_bytes: int
    log_bytes: int
    per_day: float
    oldest: datetime | None
    newest: datetime | None
    ai_bytes: int = 0  # the model's own file of ai_* objects and its log (ai_tables), counted in

    @property
    def total_bytes(self) -> int:
        """Everything on disk: the store, its log, the model's file and its log."""
        return self.file_bytes + self.log_bytes + self.ai_bytes

    def text(self) -> str:
        """One line: ``412.3 MB on disk, growing about 3.1 MB a day (last 7 days)``."""
        size = human_bytes(self.total_bytes)
        mine = f" ({human_bytes(self.ai_bytes)} of it the agent's ai_* tables)" if self.ai_bytes >= 1024 * 1024 else ""
        since = f", messages since {self.oldest:%Y-%m-%d}" if self.oldest else ""
        return f"{size} on disk{mine}, growing about {human_bytes(self.per_day)} a day (last 7 days){since}"

    def as_json(self) -> dict[str, Any]:
        return {
            "bytes": self.total_bytes,
            "per_day": round(self.per_day),
            "oldest": self.oldest.isoformat() + "Z" if self.oldest else None,
            "newest": self.newest.isoformat() + "Z" if self.newest else None,
            "text": self.text(),
        }


@dataclass(frozen=True)
class TableSize:
    """A table's rows and an estimate of its bytes in the file (the blocks its columns use)."""

    name: str
    rows: int
    bytes: int


@dataclass(frozen=True)
class StoreStats:
    """What ``agent-kernel store stats`` shows."""

    size: SizeLine
    tables: list[TableSize]
    free_bytes: int  # free blocks inside the file: what a vacuum gives back at least
    per_week: float
    pruned_through: datetime | None  # payloads older than this were pruned


def size_line(store: Store, *, now: datetime | None = None) -> SizeLine:
    """The store's size and growth, for ``%agent_stats`` and the panel: a few ``count(*)``
    that DuckDB answers from its zone maps, whatever the store holds."""
    with store.connect(read_only=True) as con:
        return measure(con, store.path, now or _utc_now())


def measure(con: Any, path: Path, now: datetime | None = None) -> SizeLine:
    """:func:`size_line` on an open connection ``con`` to the store at ``path``."""
    now = now or _utc_now()
    week = now - timedelta(days=7)
    counts = " UNION ALL ".join(
        f"SELECT count(*) AS n, count(*) FILTER (WHERE created_at >= $week) AS new FROM {table}" for table in _DATED
    )
    total, recent, oldest, newest = aggregate_row(
        con.execute(
            f"SELECT coalesce(sum(n), 0), coalesce(sum(new), 0), (SELECT min(created_at) FROM messages), "
            f"(SELECT max(created_at) FROM messages) FROM ({counts})",
            {"week": week},
        )
    )
    file_bytes = _file_bytes(path)
    per_day = file_bytes * recent / total / 7 if total else 0.0
    mine = ai_tables.ai_path(path)
    ai_bytes = _file_bytes(mine) + log_bytes(mine)
    return SizeLine(str(path), file_bytes, log_bytes(path), per_day, oldest, newest, ai_bytes)


def _data_bytes(con: Any, table: str, columns: list[tuple[str, str]]) -> tuple[int, int]:
    """A table's rows, and its data's bytes: its text as UTF-8, other values 8 bytes each."""
    parts = [
        f"coalesce(sum(strlen(CAST({_quoted(c)} AS VARCHAR))), 0)" if kind in ("VARCHAR", "JSON") or kind.endswith("[]")
        else f"8 * count({_quoted(c)})"
        for c, kind in columns
    ]  # fmt: skip
    rows, data = aggregate_row(con.execute(f"SELECT count(*), {' + '.join(parts) or '0'} FROM main.{_quoted(table)}"))
    return int(rows), int(data)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _file_bytes(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def store_stats(store: Store, *, now: datetime | None = None) -> StoreStats:
    """Size, growth, rows and estimated bytes of every table, free space inside the file."""
    with store.connect(read_only=True) as con:
        size = measure(con, store.path, now or _utc_now())
        block, used, free = aggregate_row(
            con.execute(
                "SELECT block_size, used_blocks, free_blocks FROM pragma_database_size() "
                "WHERE database_name = current_database()"
            )
        )
        columns: dict[str, list[tuple[str, str]]] = {}
        for table, column, kind in con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE database_name = current_database() "
            "AND schema_name = 'main' ORDER BY table_name, column_index"
        ).fetchall():
            columns.setdefault(table, []).append((column, kind))
        measured = [(name, *_data_bytes(con, name, cols)) for name, cols in columns.items()]
    # DuckDB keeps long strings in blocks of their own, which pragma_storage_info does not
    # list: the used blocks are shared out in proportion to each table's data instead.
    total = sum(data for _, _, data in measured) or 1
    tables = [TableSize(name, rows, round(int(used) * int(block) * data / total)) for name, rows, data in measured]
    tables.sort(key=lambda t: (-t.bytes, t.name))
    return StoreStats(size, tables, int(free) * int(block), size.per_day * 7, _stamp(store).get("cutoff"))


# -- pruning ------------------------------------------------------------------------------------


@dataclass
class Pruned:
    """What a prune replaced (or, dry, would replace): per kind, items and characters."""

    cutoff: datetime
    dry_run: bool
    kinds: dict[str, list[int]] = field(default_factory=dict)  # kind -> [items, characters]

    def add(self, kind: str, items: int, chars: int) -> None:
        found = self.kinds.setdefault(kind, [0, 0])
        found[0] += items
        found[1] += chars

    @property
    def items(self) -> int:
        return sum(n for n, _ in self.kinds.values())

    def lines(self) -> list[str]:
        """One line per kind, for the CLI."""
        verb = "would prune" if self.dry_run else "pruned"
        if not self.items:
            return [f"Nothing older than {self.cutoff:%Y-%m-%d %H:%M} UTC to prune."]
        return [
            f"{verb} {n:,} {kind} ({human_bytes(chars)} of payload)" for kind, (n, chars) in self.kinds.items() if n
        ]


def prune(
    store: Store,
    older_than_days: float,
    *,
    dry_run: bool = False,
    now: datetime | None = None,
    since: datetime | None = None,
    part_rows: int = PRUNE_ROWS,
) -> Pruned:
    """Replace payloads written more than ``older_than_days`` days ago with stubs (``dry_run``:
    only count them). ``since``: only payloads written after it (what an earlier prune left),
    so a daily prune reads one day of rows, not the whole store. ``part_rows``: about how many
    messages one connection prunes."""
    if older_than_days <= 0:
        raise StoreError(f"older_than_days must be positive, not {older_than_days}.")
    now = now or _utc_now()
    cutoff = now - timedelta(days=older_than_days)
    pruned = Pruned(cutoff, dry_run)
    note = f"{MARK}{now:%Y-%m-%d}: "
    # About a row group of messages at a time (DuckDB's unit of storage: the checkpoint that
    # ends each connection rewrites the row groups it changed), each under a connection of
    # its own with a pause between, so kernels and the scheduler wait for one part at most,
    # never for a whole first prune of a year.
    with store.connect(read_only=True) as con:
        first, rows = aggregate_row(
            con.execute(
                "SELECT least((SELECT min(created_at) FROM messages), (SELECT min(created_at) FROM code_executions)), "
                "(SELECT count(*) FROM messages WHERE created_at < $cutoff AND created_at >= $since)",
                {"cutoff": cutoff, "since": since or datetime(1970, 1, 1)},
            )
        )
    start = max(first, since) if first is not None and since is not None else first
    if start is not None and start < cutoff:
        parts = max(1, -(-int(rows) // max(1, part_rows)))
        step = (cutoff - start) / parts
        for part in range(parts):
            end = cutoff if part == parts - 1 else start + step
            if part:
                time.sleep(PRUNE_PAUSE_S)
            with store.connect(read_only=dry_run) as con:
                _prune_tool_results(con, pruned, end, start, note)
                _prune_code_outputs(con, pruned, end, start, note)
            start = end
    with store.connect(read_only=True) as con:
        runs = con.execute(
            "SELECT run_dir, output_path FROM runs WHERE finished_at < ? AND finished_at >= ? AND run_dir IS NOT NULL",
            [cutoff, since or datetime(1970, 1, 1)],
        ).fetchall()
    for run_dir, output_path in runs:  # finished runs: nothing writes their files any more
        _prune_run(Path(run_dir), Path(output_path) if output_path else None, pruned, note)
    if not dry_run:
        _write_stamp(store, now, cutoff)
    return pruned


def _window(cutoff: datetime, since: datetime | None) -> tuple[str, list[Any]]:
    if since is None:
        return "created_at < ?", [cutoff]
    return "created_at < ? AND created_at >= ?", [cutoff, since]


def _prune_tool_results(con: Any, pruned: Pruned, cutoff: datetime, since: datetime | None, note: str) -> None:
    where, params = _window(cutoff, since)
    # The last message a stored compaction covers stays as it is: the compaction is found
    # again by that message's fingerprint (turn/budget.py).
    rows = con.execute(
        f"SELECT session_id, seq, content, created_at FROM messages m WHERE {where} AND role = 'user' "
        f"AND strlen(CAST(content AS VARCHAR)) > {KEEP_CHARS} "
        "AND CAST(content AS VARCHAR) LIKE '%\"tool_result\"%' "
        "AND NOT EXISTS (SELECT 1 FROM context_summaries c WHERE c.session_id = m.session_id AND c.covers - 1 = m.seq)",
        params,
    ).fetchall()
    changed: list[list[Any]] = []
    for session_id, seq, content, at in rows:
        blocks = json.loads(content)
        if not isinstance(blocks, list):
            continue
        found = 0
        for block in blocks:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            payload = block.get("content", "")
            text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
            if len(text) <= KEEP_CHARS or _is_stub(payload):
                continue
            pruned.add("tool results", 1, len(text))
            found += 1
            preview = _preview(payload)
            stub = (
                f"{preview}\n{note}this tool result of {len(text):,} characters from {at:%Y-%m-%d} was "
                "older than the store's retention (AgentKernel.retention_full_days); only its start is kept.]"
            )
            block["content"] = [{"type": "text", "text": stub.lstrip()}]
        if found:
            changed.append([session_id, seq, json.dumps(blocks, ensure_ascii=False)])
    if pruned.dry_run or not changed:
        return
    con.execute("CREATE OR REPLACE TEMP TABLE pruned_messages (session_id VARCHAR, seq INTEGER, content VARCHAR)")
    try:
        for start in range(0, len(changed), _BATCH):
            insert_rows(con, "pruned_messages", "session_id, seq, content", changed[start : start + _BATCH])
        con.execute(
            "UPDATE messages SET content = p.content FROM pruned_messages p "
            "WHERE messages.session_id = p.session_id AND messages.seq = p.seq"
        )
    finally:
        con.execute("DROP TABLE IF EXISTS pruned_messages")


def _is_stub(payload: Any) -> bool:
    if isinstance(payload, str):
        return MARK in payload[-400:]
    return (
        isinstance(payload, list)
        and len(payload) == 1
        and isinstance(payload[0], dict)
        and MARK in str(payload[0].get("text", ""))[-400:]
    )


def _preview(payload: Any) -> str:
    """The start of a tool result's text (its images dropped)."""
    if isinstance(payload, str):
        text = payload
    else:
        text = "\n".join(str(b.get("text", "")) for b in payload if isinstance(b, dict) and b.get("type") == "text")
    return text[:PREVIEW_CHARS] + ("…" if len(text) > PREVIEW_CHARS else "")


def _prune_code_outputs(con: Any, pruned: Pruned, cutoff: datetime, since: datetime | None, note: str) -> None:
    where, params = _window(cutoff, since)
    for column in ("stdout", "stderr", "traceback"):
        old = f"{column} IS NOT NULL AND length({column}) > {KEEP_CHARS} AND NOT contains({column}, '{MARK}')"
        n, chars = aggregate_row(
            con.execute(
                f"SELECT count(*), coalesce(sum(length({column})), 0) FROM code_executions WHERE {where} AND {old}",
                params,
            )
        )
        pruned.add("code run outputs", int(n), int(chars))
        if pruned.dry_run or not n:
            continue
        # The stub keeps the end of a traceback (where the error is) and the start of the outputs.
        kept = f"right({column}, {PREVIEW_CHARS})" if column == "traceback" else f"left({column}, {PREVIEW_CHARS})"
        con.execute(
            f"UPDATE code_executions SET {column} = {kept} || chr(10) || ? || format('{{:,}}', length({column})) || "
            f"' characters of {column} from ' || strftime(created_at, '%Y-%m-%d') || "
            "' were older than the store''s retention (AgentKernel.retention_full_days).]' "
            f"WHERE {where} AND {old}",
            [note, *params],
        )


def _prune_run(run_dir: Path, output: Path | None, pruned: Pruned, note: str) -> None:
    """A finished run's logs cut to their end, its output notebook's outputs (but errors) to a note."""
    for name in ("stdout.log", "stderr.log", "runner.log"):
        path = run_dir / name
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if len(text) <= KEEP_CHARS or text.startswith(MARK):
            continue
        pruned.add("run logs", 1, len(text))
        if not pruned.dry_run:
            head = (
                f"{note}{len(text):,} characters of this log were older than the store's retention; its end is kept.]\n"
            )
            _write_whole(path, head + text[-KEEP_CHARS:])
    if output is None:
        return
    try:
        notebook = json.loads(output.read_text())
    except (OSError, ValueError):
        return
    meta = notebook.setdefault("metadata", {}).setdefault("agent_kernel", {})
    if not isinstance(meta, dict) or "pruned" in meta:
        return
    dropped = 0
    for cell in notebook.get("cells", []):
        outputs = cell.get("outputs") or []
        size = len(json.dumps(outputs))
        if size <= KEEP_CHARS:
            continue
        errors = [o for o in outputs if o.get("output_type") == "error"]
        dropped += size
        text = f"{note}{size:,} characters of outputs were older than the store's retention.]\n"
        cell["outputs"] = [*errors, {"output_type": "stream", "name": "stdout", "text": text}]
    if not dropped:
        return
    pruned.add("run output notebooks", 1, dropped)
    if not pruned.dry_run:
        meta["pruned"] = {"at": note[len(MARK) : -2], "characters": dropped}
        _write_whole(output, json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")


def _write_whole(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.pruning")
    temporary.write_text(text)
    os.replace(temporary, path)


# -- automatic pruning ------------------------------------------------------------------------


def _stamp_path(store: Store) -> Path:
    return Path(f"{store.path}.retention.json")


def _stamp(store: Store) -> dict[str, datetime]:
    try:
        data = json.loads(_stamp_path(store).read_text())
        return {key: datetime.fromisoformat(value) for key, value in data.items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def _write_stamp(store: Store, now: datetime, cutoff: datetime) -> None:
    previous = _stamp(store).get("cutoff")
    through = max(cutoff, previous) if previous else cutoff
    data = {"pruned_at": now.isoformat(), "cutoff": through.isoformat()}
    with contextlib.suppress(OSError):
        _write_whole(_stamp_path(store), json.dumps(data) + "\n")


def prune_if_due(store: Store, days: float, *, now: datetime | None = None) -> Pruned | None:
    """Prune what became older than ``days`` days since the last prune, at most once a day
    (``days`` 0 or less: keep everything). When nothing is due this is one ``stat`` of the
    stamp file beside the store (``<db>.retention.json``); a prune reads only the rows
    written between the last cutoff and the new one."""
    if days <= 0:
        return None
    now = now or _utc_now()
    try:
        last = datetime.fromtimestamp(os.stat(_stamp_path(store)).st_mtime, timezone.utc).replace(tzinfo=None)
    except OSError:
        last = None
    if last is not None and now - last < AUTO_EVERY:
        return None
    since = _stamp(store).get("cutoff")
    return prune(store, days, now=now, since=since)


def tidy_daily(
    store: Store,
    days: float,
    stop: threading.Event,
    *,
    check_s: float = 3600.0,
    log: logging.Logger | logging.LoggerAdapter[Any] | None = None,
) -> None:
    """Until ``stop`` is set, :func:`prune_if_due` every ``check_s`` seconds: the loop a
    long-running process (the scheduler daemon, the Jupyter server) runs in a thread of its
    own, so the store is pruned once a day without anyone asking."""
    log = log or logging.getLogger("agent_kernel.store")
    while days > 0:
        try:
            done = prune_if_due(store, days)
        except Exception as exc:  # noqa: BLE001 - a failed prune must not end the process's loop: logged, tried again
            log.warning("agent-kernel: pruning the store %s failed: %s", store.path, exc)
        else:
            if done is not None and done.items:
                log.info("agent-kernel: store retention (%g days): %s", days, "; ".join(done.lines()))
        if stop.wait(check_s):
            return


# -- compaction of the file ---------------------------------------------------------------------


@dataclass(frozen=True)
class Vacuumed:
    """A vacuum's result: the file's size before and after, and the rows of each table (the
    same in both files, or the old file stays)."""

    before: int
    after: int
    rows: dict[str, int]

    def line(self) -> str:
        saved = self.before - self.after
        return (
            f"{human_bytes(self.before)} -> {human_bytes(self.after)} ({human_bytes(saved)} given back); "
            f"{sum(self.rows.values()):,} rows in {len(self.rows)} tables, every one kept."
        )


def vacuum(store: Store) -> Vacuumed:
    """Copy the store into a fresh file and swap it in, under the store's lock.

    DuckDB's ``CHECKPOINT`` folds the write-ahead log but keeps freed blocks inside the file;
    ``COPY FROM DATABASE`` writes every table (constraints, defaults, comments, views,
    sequences, macros) compactly into a new file. The old file stays beside it as
    ``<db>.vacuum-backup`` until the new one is checked (every table, the same rows), then it
    is removed; if anything fails, the old file is left in place untouched."""
    import duckdb  # noqa: PLC0415 - heavy (~150 ms): the server extension imports the store

    path = store.path
    fresh = Path(f"{path}.vacuum-new")
    backup = Path(f"{path}.vacuum-backup")
    with _locked(store):
        with store.connect() as con:  # migrated, and its log folded into the file
            con.execute("CHECKPOINT")
        before = _file_bytes(path)
        fresh.unlink(missing_ok=True)
        Path(f"{fresh}.wal").unlink(missing_ok=True)
        work = duckdb.connect(":memory:")
        try:
            quoted = str(path).replace("'", "''")
            work.execute(f"ATTACH '{quoted}' AS old (READ_ONLY)")
            work.execute(f"ATTACH '{str(fresh).replace(chr(39), chr(39) * 2)}' AS new")
            work.execute("COPY FROM DATABASE old TO new")
            rows = _rows(work, "old")
            copied = _rows(work, "new")
            work.execute("CHECKPOINT new")
        finally:
            work.close()
        if copied != rows:
            fresh.unlink(missing_ok=True)
            raise StoreError(f"The vacuum's copy of {path} differs from it; the store was left as it was.")
        if log_bytes(path):
            fresh.unlink(missing_ok=True)
            raise StoreError(f"{path} has an unfolded write-ahead log; the store was left as it was.")
        backup.unlink(missing_ok=True)
        try:
            os.link(path, backup)  # the old file under a second name, without copying it
        except OSError:
            shutil.copy2(path, backup)
        os.replace(fresh, path)
        try:
            check = duckdb.connect(str(path), read_only=True)
            try:
                swapped = _rows(check, current=True)
            finally:
                check.close()
            if swapped != rows:
                raise StoreError(f"The vacuumed {path} differs from the store it replaced.")
        except BaseException:
            os.replace(backup, path)
            raise
        backup.unlink()
    return Vacuumed(before, _file_bytes(path), rows)


@contextlib.contextmanager
def _locked(store: Store) -> Iterator[None]:
    """The store's own locks (this process's threads, then every process's), held across the
    connections a vacuum opens (they take them again: both are reentrant) and the swap."""
    with store._thread_lock, store._lock:
        yield


def _rows(con: duckdb.DuckDBPyConnection, database: str = "", *, current: bool = False) -> dict[str, int]:
    where = "database_name = current_database()" if current else "database_name = ?"
    names = con.execute(
        f"SELECT schema_name, table_name FROM duckdb_tables() WHERE {where} AND NOT temporary ORDER BY ALL",
        [] if current else [database],
    ).fetchall()
    prefix = "" if current else f"{database}."
    counts = {}
    for schema, name in names:
        target = f'{prefix}"{schema}"."{name}"'
        (n,) = aggregate_row(con.execute(f"SELECT count(*) FROM {target}"))
        counts[name if schema == "main" else f"{schema}.{name}"] = int(n)
    return counts
