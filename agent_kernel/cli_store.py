"""``agent-kernel store stats|prune|vacuum``: how big the agent's DuckDB file is and grows, and
keeping it small.

``stats`` shows the file's size, its growth per day and week (read from the rows'
timestamps), its oldest and newest message, each table's rows and estimated bytes, and the
free space inside the file. ``prune`` shows what is older than the retention
(``AgentKernel.retention_full_days``, or ``--older-than DAYS``), then replaces it with
stubs (``--dry-run``: only shows it); it never touches the conversation's text. ``vacuum``
copies the store to a fresh file and swaps it in, which is when the file shrinks. What is
pruned and how: :mod:`agent_kernel.store.retention`. Pruning loses data, so it is the
person's act, refused when a command an agent turn started asks.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_kernel.store import Store

__all__ = ["add_parser"]


def add_parser(commands: Any) -> None:
    """Add ``store`` and its actions to the ``agent-kernel`` command's subparsers."""
    store = commands.add_parser("store", help="the agent's DuckDB file: its size and growth; prune and vacuum it")
    store.set_defaults(help_of=store)
    actions = store.add_subparsers(metavar="ACTION")
    stats = actions.add_parser("stats", help="size on disk, growth per day and week, rows and bytes per table")
    stats.add_argument("--json", action="store_true", help="as JSON")
    stats.set_defaults(handler=_stats)
    prune = actions.add_parser(
        "prune",
        help="replace tool results, code outputs and run outputs older than the retention with stubs "
        "(the conversation's text and every summary stay); then vacuum to shrink the file",
    )
    prune.add_argument(
        "--older-than",
        type=_days,
        metavar="DAYS",
        help="prune what is older than DAYS days (default: AgentKernel.retention_full_days)",
    )
    prune.add_argument("--dry-run", action="store_true", help="only show what would be pruned")
    prune.set_defaults(handler=_prune)
    vacuum = actions.add_parser(
        "vacuum", help="copy the store to a fresh file and swap it in (a DuckDB file never shrinks by itself)"
    )
    vacuum.set_defaults(handler=_vacuum)


def _days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"DAYS is a number of days, not {text!r}") from None
    if not days > 0:
        raise argparse.ArgumentTypeError(f"DAYS must be more than 0, not {text}")
    return days


def _store(args: argparse.Namespace) -> Store:
    from agent_kernel.paths import default_db_path
    from agent_kernel.store import Store

    path = Path(args.db).expanduser() if getattr(args, "db", None) else default_db_path()
    if not path.exists():
        raise SystemExit(f"agent-kernel: there is no store at {path} (AGENT_KERNEL_DB or --db name it).")
    return Store(path)


def _stats(args: argparse.Namespace) -> int:
    from agent_kernel.store.retention import human_bytes, store_stats

    found = store_stats(_store(args))
    size = found.size
    if args.json:
        data = {
            **size.as_json(),
            "path": size.path,
            "per_week": round(found.per_week),
            "free_bytes": found.free_bytes,
            "pruned_through": found.pruned_through.isoformat() + "Z" if found.pruned_through else None,
            "tables": [{"name": t.name, "rows": t.rows, "bytes": t.bytes} for t in found.tables],
        }
        print(json.dumps(data, indent=1))
        return 0
    log = f" (and {human_bytes(size.log_bytes)} of write-ahead log)" if size.log_bytes else ""
    span = f"{size.oldest:%Y-%m-%d} to {size.newest:%Y-%m-%d}" if size.oldest and size.newest else "none yet"
    pruned = f"older than {found.pruned_through:%Y-%m-%d}" if found.pruned_through else "never"
    lines = [
        f"Store {size.path}",
        f"  size          {human_bytes(size.file_bytes)}{log}",
        f"  growth        {human_bytes(size.per_day)} a day, {human_bytes(found.per_week)} a week (last 7 days)",
        f"  messages      {span}",
        f"  free inside   {human_bytes(found.free_bytes)} (agent-kernel store vacuum gives it back)",
        f"  pruned        {pruned}",
        "",
        f"  {'table':<28} {'rows':>12} {'bytes (est.)':>14}",
    ]
    lines += [f"  {t.name:<28} {t.rows:>12,} {human_bytes(t.bytes):>14}" for t in found.tables if t.rows]
    empty = sum(1 for t in found.tables if not t.rows)
    if empty:
        lines.append(f"  ({empty} empty tables)")
    print("\n".join(lines))
    return 0


def _prune(args: argparse.Namespace) -> int:
    from agent_kernel.authority import inside_turn, started_by_turn
    from agent_kernel.config import AgentKernel
    from agent_kernel.store.retention import prune

    if inside_turn() or started_by_turn():
        print(
            "agent-kernel: agent-kernel store prune is refused here: pruning loses stored results, which "
            "is the person's decision, not that of code running inside an agent turn. Run it in a terminal.",
            file=sys.stderr,
        )
        return 2
    days = args.older_than if args.older_than is not None else AgentKernel().retention_full_days
    if not days:
        print("AgentKernel.retention_full_days is 0: everything is kept in full. Give --older-than DAYS to prune.")
        return 0
    store = _store(args)
    plan = prune(store, days, dry_run=True)
    print(f"Older than {days:g} days (before {plan.cutoff:%Y-%m-%d %H:%M} UTC):")
    for line in plan.lines():
        print(f"  {line}")
    if args.dry_run or not plan.items:
        return 0
    done = prune(store, days)
    print("Done: " + "; ".join(done.lines()) + ".")
    print("The file keeps its size until agent-kernel store vacuum.")
    return 0


def _vacuum(args: argparse.Namespace) -> int:
    from agent_kernel.store.retention import vacuum

    store = _store(args)
    print(f"Vacuuming {store.path} (a copy beside it, then swapped in)...", flush=True)
    print(vacuum(store).line())
    return 0
