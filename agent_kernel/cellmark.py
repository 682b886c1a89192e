"""The mark on notebook cells an agent turn wrote, and whether the turn had read untrusted content.

Every cell a turn puts into a notebook (``insert_cell``, ``replace_cell``, "Insert as
cells", ``%agent_cells``, ``agent-kernel export``) carries ``metadata.agent_kernel``::

    {"session": ID, "turn": N}

and, when the session had read untrusted content (a web page, an MCP result, tainted
kept text, ...) by then, the taint with where it came from::

    {"session": ID, "turn": N, "untrusted": true, "sources": ["fetch_url https://...", ...]}

Such a cell is code or text a hostile page may have steered. It stays marked until the
person clears it (``agent-kernel cells clear NOTEBOOK``, or Clear on the cell's badge in
JupyterLab); clearing removes ``untrusted`` and ``sources`` and records who cleared it
and when under ``cleared``. ``read_notebook`` returns a marked cell inside the untrusted
envelope, the scheduler refuses to run a notebook holding one, and JupyterLab shows a
badge on it.

The mark is untrusted input wherever it is read back (a notebook file, the front end's
answer): :func:`check` bounds its types and sizes, and :func:`untrusted` reads anything
it cannot understand as marked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_kernel.authority import PersonEvent

__all__ = [
    "KEY",
    "MOST_SOURCES",
    "MarkedCell",
    "check",
    "clear",
    "mark",
    "marked_cells",
    "untrusted",
]  # fmt: skip

KEY = "agent_kernel"  # the cell metadata key of the mark
MOST_SOURCES = 3  # sources a mark names (the session's first ones)
SOURCE_CHARS = 200
SESSION_CHARS = 64
MOST_TURN = 10**9
LABEL_CHARS = 300  # who cleared it (a PersonEvent's label)
_SESSION = re.compile(r"^[A-Za-z0-9_.:-]{0,64}$")
_FIELDS = {"session", "turn", "untrusted", "sources", "cleared"}


def mark(session_id: str, turn: int, sources: Sequence[str] = ()) -> dict[str, Any]:
    """The value of ``metadata.agent_kernel`` for a cell turn ``turn`` of the session wrote,
    ``sources`` being the untrusted content the session had read by then (none: clean)."""
    value: dict[str, Any] = {"session": str(session_id)[:SESSION_CHARS], "turn": int(turn)}
    if sources:
        value["untrusted"] = True
        value["sources"] = [_one_line(s)[:SOURCE_CHARS] for s in list(sources)[:MOST_SOURCES]]
    return value


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def check(value: Any) -> dict[str, Any]:
    """``value`` as a well-formed mark, or ``ValueError`` saying what is wrong (types, sizes)."""
    if not isinstance(value, dict):
        raise ValueError("the agent_kernel mark is an object")
    unknown = set(value) - _FIELDS
    if unknown:
        raise ValueError(f"the agent_kernel mark has no field {sorted(unknown)[0][:40]!r}")
    session = value.get("session", "")
    if not isinstance(session, str) or not _SESSION.match(session):
        raise ValueError(f"the mark's session is an id of at most {SESSION_CHARS} characters")
    turn = value.get("turn", 0)
    if not isinstance(turn, int) or isinstance(turn, bool) or not 0 <= turn <= MOST_TURN:
        raise ValueError("the mark's turn is a turn number")
    if "untrusted" in value and not isinstance(value["untrusted"], bool):
        raise ValueError("the mark's untrusted is true or false")
    sources = value.get("sources", [])
    if (
        not isinstance(sources, list) or len(sources) > MOST_SOURCES
        or not all(isinstance(s, str) and len(s) <= SOURCE_CHARS for s in sources)
    ):  # fmt: skip
        raise ValueError(f"the mark's sources are at most {MOST_SOURCES} texts of {SOURCE_CHARS} characters")
    cleared = value.get("cleared")
    if cleared is not None and not (
        isinstance(cleared, dict) and set(cleared) <= {"by", "at", "sources"}
        and all(isinstance(cleared.get(k, ""), str) and len(cleared.get(k, "")) <= LABEL_CHARS for k in ("by", "at", "sources"))
    ):  # fmt: skip
        raise ValueError("the mark's cleared is {by, at, sources}")
    return value


def untrusted(metadata: Any) -> list[str] | None:
    """The sources of a cell whose metadata carries the untrusted mark (``[]`` when it names
    none), ``None`` for a clean or unmarked cell. A mark that does not read as one (a
    notebook edited by hand or by code) counts as untrusted."""
    if not isinstance(metadata, dict) or KEY not in metadata:
        return None
    value = metadata[KEY]
    try:
        check(value)
    except ValueError:
        return ["a malformed agent_kernel mark"]
    if value.get("untrusted", False) is False:
        return None
    return list(value.get("sources", []))


@dataclass(frozen=True)
class MarkedCell:
    """A cell written after untrusted content: its place, id and the mark's sources."""

    number: int  # 1-based, as the notebook shows cells
    id: str
    sources: tuple[str, ...]
    head: str  # its source's first line, for a person to recognise it

    def describe(self) -> str:
        where = f"; read: {'; '.join(self.sources)}" if self.sources else ""
        return f"cell {self.number} (id {self.id}: {self.head!r}){where}"


def marked_cells(cells: Sequence[Any]) -> list[MarkedCell]:
    """The cells (nbformat nodes or dicts) carrying the untrusted mark, in order."""
    found = []
    for number, cell in enumerate(cells, start=1):
        sources = untrusted(cell.get("metadata") if isinstance(cell, dict) else None)
        if sources is None:
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        head = (text.strip().splitlines() or [""])[0][:60]
        found.append(MarkedCell(number, str(cell.get("id", ""))[:64], tuple(sources), head))
    return found


def clear(cells: Sequence[Any], event: PersonEvent, *, ids: Sequence[str] | None = None) -> list[MarkedCell]:
    """Clear the untrusted mark of ``cells`` (those whose id is in ``ids``, else all of them),
    in place: ``untrusted`` and ``sources`` go, ``cleared`` says who cleared it and when.
    The cells cleared. ``event`` is the person's (see :mod:`agent_kernel.authority`)."""
    marked = [m for m in marked_cells(cells) if ids is None or m.id in ids]
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for found in marked:
        cell = cells[found.number - 1]
        value = cell["metadata"][KEY]
        kept = value if isinstance(value, dict) else {}
        session, turn = kept.get("session", ""), kept.get("turn", 0)
        cleaned: dict[str, Any] = {
            "session": session if isinstance(session, str) and _SESSION.match(session) else "",
            "turn": turn if isinstance(turn, int) and not isinstance(turn, bool) and 0 <= turn <= MOST_TURN else 0,
            "cleared": {"by": event.label()[:LABEL_CHARS], "at": at, "sources": "; ".join(found.sources)[:LABEL_CHARS]},
        }
        cell["metadata"][KEY] = cleaned
    return marked
