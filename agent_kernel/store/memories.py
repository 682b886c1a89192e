"""The agent's memory: user memories and calendar-aligned summaries.

- ``user_memory``: what the agent knows about the user and their work (facts,
  preferences, goals, projects, open loops, ...), with tags and a ``pursuingPriority``.
  They are shown in the system prompt, most important first, in a section of at most
  :data:`SECTION_CHARS` characters. A memory that would take the section over it is
  refused with a message saying what to do; a store already over it (rows written by a
  script or an older version) shows the memories that fit and a line counting the rest,
  which ``memory action=recall`` finds.
- ``summaries``: conversation, daily, weekly (ISO ``YYYY-Www``), monthly, quarterly and
  yearly roll-ups under canonical period keys, recalled on demand. One summary per type
  and period (and chat): storing it again replaces it.

Recall ranks by relevance offline: BM25 over word tokens, computed in SQL (DuckDB's fts
extension is not bundled with the wheel).
"""

from __future__ import annotations

import builtins
import re
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, Any

from typing_extensions import NotRequired, TypedDict

from agent_kernel.errors import ToolInputError
from agent_kernel.store.bm25 import ranked
from agent_kernel.store.bm25 import terms as _terms
from agent_kernel.store.schema import UTC_NOW

if TYPE_CHECKING:
    import duckdb

STORES = ("user_memory", "summaries")
CATEGORIES = (
    "fact",
    "preference",
    "life-goal",
    "project",
    "open-loop",
    "relationship",
    "health",
    "work",
    "personal-context",
)
SUMMARY_TYPES = (
    "conversation-summary",
    "daily-summary",
    "weekly-summary",
    "monthly-summary",
    "quarterly-summary",
    "yearly-summary",
)
SECTION_CHARS = 4_000
MEMORY_CHARS = 10_000  # the longest one memory or summary may be
TAGS = 20  # the most tags one memory carries
TAG_CHARS = 100

_COLUMNS = "id, store, type, content, tags, pursuing_priority, period_key, chat_id, created_at"


class MemoryEntry(TypedDict):
    """One memory as the ``memory`` tool returns it (the optional keys when set)."""

    id: str
    store: str
    type: str
    content: str
    tags: list[str]
    created_at: str  # ISO 8601, UTC, seconds
    pursuingPriority: NotRequired[int]  # camelCase: the tool takes it so
    period_key: NotRequired[str]
    chat_id: NotRequired[str]
    relevance: NotRequired[float]


@dataclass
class Memory:
    """One stored memory or summary."""

    id: str
    store: str
    type: str
    content: str
    tags: list[str]
    pursuing_priority: int | None
    period_key: str | None
    chat_id: str | None
    created_at: datetime
    relevance: float | None = None

    def as_dict(self) -> MemoryEntry:
        """The shape the ``memory`` tool returns."""
        found: MemoryEntry = {
            "id": self.id,
            "store": self.store,
            "type": self.type,
            "content": self.content,
            "tags": self.tags,
            "created_at": self.created_at.isoformat(timespec="seconds") + "Z",
        }
        if self.pursuing_priority is not None:
            found["pursuingPriority"] = self.pursuing_priority
        if self.period_key is not None:
            found["period_key"] = self.period_key
        if self.chat_id is not None:
            found["chat_id"] = self.chat_id
        if self.relevance is not None:
            found["relevance"] = self.relevance
        return found

    def line(self) -> str:
        """How this memory reads in the system prompt."""
        label = self.type
        if self.pursuing_priority is not None and self.type != "fact":
            label += f", priority {self.pursuing_priority}"
        tags = f" [tags: {', '.join(self.tags)}]" if self.tags else ""
        return f"- ({label}) {self.content}{tags} (id {self.id})"


@dataclass
class Filters:
    """What recall and list may narrow to."""

    store: str | None = None
    types: Sequence[str] = ()
    tags: Sequence[str] = ()
    chat_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    period_key_prefix: str | None = None

    def where(self) -> tuple[str, list[Any]]:
        clauses: list[str] = ["true"]
        params: list[Any] = []
        if self.store:
            clauses.append("store = ?")
            params.append(self.store)
        if self.types:
            clauses.append("list_contains(?::VARCHAR[], type)")
            params.append(list(self.types))
        if self.tags:
            clauses.append("list_has_any(tags, ?::VARCHAR[])")
            params.append(list(self.tags))
        if self.chat_id:
            clauses.append("chat_id = ?")
            params.append(self.chat_id)
        if self.since:
            clauses.append("created_at >= ?")
            params.append(self.since)
        if self.until:
            clauses.append("created_at <= ?")
            params.append(self.until)
        if self.period_key_prefix:
            clauses.append("starts_with(period_key, ?)")
            params.append(self.period_key_prefix)
        return " AND ".join(clauses), params


# Okapi BM25 of each memory against the query's terms, newest first among equals.
_MEMORY_TERMS = _terms("content || ' ' || array_to_string(tags, ' ') || ' ' || type")
_RECALL = ranked(f"SELECT {_COLUMNS}, {_MEMORY_TERMS} AS terms FROM memories WHERE {{where}}", then_by="created_at")


class Memories:
    """The ``memories`` table through one open connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    # -- writing ---------------------------------------------------------------------------

    def remember(
        self,
        content: str,
        *,
        category: str = "fact",
        tags: Sequence[str] = (),
        pursuing_priority: int | None = None,
        session_id: str | None = None,
    ) -> Memory:
        """Store a user memory, unless it would take the prompt's memory section over its cap.

        A store already over the cap (filled without this check) keeps accepting memories:
        refusing would ask the model to forget more than it can, and the section shows what fits.
        """
        _check_size(content, tags)
        draft = Memory("(new)", "user_memory", category, content, list(tags), pursuing_priority, None, None, _utc_now())
        size = len(self.section(extra=draft, max_chars=None))
        if size > SECTION_CHARS >= len(self.section(max_chars=None)):
            raise ToolInputError(
                f"Not stored: your memory section would be {size:,} characters, over its "
                f"cap of {SECTION_CHARS:,} (it is in every system prompt). Forget memories that no "
                "longer matter or merge several into one shorter memory first (action=list shows "
                "them with ids), or store longer material as a summary (store=summaries), which "
                "is recalled on demand."
            )
        memory_id = uuid.uuid4().hex[:12]
        self.con.execute(
            "INSERT INTO memories (id, store, type, content, tags, pursuing_priority, session_id) "
            "VALUES (?, 'user_memory', ?, ?, ?, ?, ?)",
            [memory_id, category, content, list(tags), pursuing_priority, session_id],
        )
        return self._get(memory_id)

    def summarize(
        self,
        content: str,
        *,
        summary_type: str,
        period_key: str,
        chat_id: str | None = None,
        tags: Sequence[str] = (),
        session_id: str | None = None,
    ) -> tuple[Memory, bool]:
        """Store the summary of a period (replacing an earlier one); whether it replaced one."""
        _check_size(content, tags)
        row = self.con.execute(
            "SELECT id FROM memories WHERE store = 'summaries' AND type = ? AND period_key = ? "
            "AND chat_id IS NOT DISTINCT FROM ?",
            [summary_type, period_key, chat_id],
        ).fetchone()
        if row:
            self.con.execute(
                f"UPDATE memories SET content = ?, tags = ?, session_id = ?, updated_at = {UTC_NOW} WHERE id = ?",
                [content, list(tags), session_id, row[0]],
            )
            return self._get(row[0]), True
        memory_id = uuid.uuid4().hex[:12]
        self.con.execute(
            "INSERT INTO memories (id, store, type, content, tags, period_key, chat_id, session_id) "
            "VALUES (?, 'summaries', ?, ?, ?, ?, ?, ?)",
            [memory_id, summary_type, content, list(tags), period_key, chat_id, session_id],
        )
        return self._get(memory_id), False

    def forget(self, memory_id: str) -> Memory | None:
        """Delete a memory; the memory that was deleted, if there was one."""
        found = self._find(memory_id)
        if found is not None:
            self.con.execute("DELETE FROM memories WHERE id = ?", [memory_id])
        return found

    # -- reading ---------------------------------------------------------------------------

    def recall(self, query: str, filters: Filters, limit: int = 10) -> list[Memory]:
        """The memories most relevant to ``query`` (BM25), best first; only those that match."""
        where, params = filters.where()
        rows = self.con.execute(_RECALL.replace("{where}", where), [*params, query, limit]).fetchall()
        return [_memory(row[:-1], relevance=round(float(row[-1]), 3)) for row in rows]

    def list(self, filters: Filters, limit: int = 10) -> list[Memory]:
        """The newest memories that pass ``filters``."""
        where, params = filters.where()
        rows = self.con.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE {where} ORDER BY created_at DESC, id LIMIT ?",
            [*params, limit],
        ).fetchall()
        return [_memory(row) for row in rows]

    def user_memories(self) -> builtins.list[Memory]:
        """Every user memory, most important first (the order the system prompt shows)."""
        rows = self.con.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE store = 'user_memory' "
            "ORDER BY coalesce(pursuing_priority, 100) DESC, created_at, id"
        ).fetchall()
        return [_memory(row) for row in rows]

    def section(
        self, extra: Memory | None = None, withheld: Collection[str] = (), max_chars: int | None = SECTION_CHARS
    ) -> str:
        """The system prompt's memory section: user memories most important first, without
        those whose ids are ``withheld`` (shown elsewhere, as data).

        At most ``max_chars`` (``None``: every memory): every request carries it, so a store
        with thousands of memories must not make each request larger. The memories that fit
        are chosen by priority, then the newest (one too long for the room left is passed over
        for the next), and shown in the usual order, then a line counting the rest and naming
        the tool that finds them. It depends only on what is
        stored, so it stays byte-identical while the memories do (the request cache).
        """
        found = [m for m in self.user_memories() if m.id not in withheld]
        if extra is not None:
            found.append(extra)
            found.sort(key=lambda m: -(100 if m.pursuing_priority is None else m.pursuing_priority))
        summaries = self.con.execute("SELECT count(*) FROM memories WHERE store = 'summaries'").fetchone()
        lines = [m.line() for m in found]
        if not lines and not (summaries and summaries[0]):
            return ""
        tail = []
        if summaries and summaries[0]:
            tail.append(f"Summaries stored: {summaries[0]:,} (memory action=recall, store_filter=summaries).")
        whole = "\n".join([_SECTION_HEAD, *lines, *tail])
        if max_chars is None or len(whole) <= max_chars:
            return whole
        chosen: set[int] = set()
        used = len(_SECTION_HEAD) + len(_more_line(len(lines))) + 1 + sum(len(line) + 1 for line in tail)
        for at in sorted(range(len(found)), key=lambda at: _newest_first(found[at])):
            if used + len(lines[at]) + 1 <= max_chars:
                chosen.add(at)
                used += len(lines[at]) + 1
        shown = [line for at, line in enumerate(lines) if at in chosen]
        return "\n".join([_SECTION_HEAD, *shown, _more_line(len(lines) - len(shown)), *tail])

    def _find(self, memory_id: str) -> Memory | None:
        row = self.con.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", [memory_id]).fetchone()
        return _memory(row) if row else None

    def _get(self, memory_id: str) -> Memory:
        found = self._find(memory_id)
        assert found is not None
        return found


_SECTION_HEAD = (
    "What you stored with the memory tool (user_memory), most important first. Keep it "
    "current: store what the user will want remembered, forget what is outdated."
)


def _newest_first(memory: Memory) -> tuple[int, float, str]:
    """Which memories a full section keeps: the highest priority (none counts as 100, as in
    :meth:`Memories.user_memories`), then the newest."""
    priority = 100 if memory.pursuing_priority is None else memory.pursuing_priority
    return -priority, -memory.created_at.timestamp(), memory.id


def _more_line(count: int) -> str:
    return (
        f"{count:,} more user memories are stored but not shown here for room: memory "
        "action=recall with a query (store_filter=user_memory) finds them."
    )


def _check_size(content: str, tags: Sequence[str]) -> None:
    if len(content) > MEMORY_CHARS:
        raise ToolInputError(
            f"Not stored: the memory is {len(content):,} characters; one memory holds at most "
            f"{MEMORY_CHARS:,}. Store the gist, or split it into several memories or summaries."
        )
    if len(tags) > TAGS or any(len(tag) > TAG_CHARS for tag in tags):
        raise ToolInputError(f"Not stored: a memory has at most {TAGS} tags of at most {TAG_CHARS} characters each.")


def _memory(row: Sequence[Any], relevance: float | None = None) -> Memory:
    memory_id, store, kind, content, tags, priority, period_key, chat_id, created_at = row
    return Memory(
        memory_id, store, kind, content, list(tags or []), priority, period_key, chat_id, created_at, relevance
    )


def _utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


# -- period keys --------------------------------------------------------------------------

_FORMATS = {
    "daily-summary": "YYYY-MM-DD",
    "weekly-summary": "an ISO week YYYY-Www (weeks run Monday to Sunday)",
    "monthly-summary": "YYYY-MM",
    "quarterly-summary": "YYYY-Qn",
    "yearly-summary": "YYYY",
    "conversation-summary": "YYYY-MM-DD (the day of the conversation)",
}


def period_key(summary_type: str, key: str | None, today: date) -> str:
    """The canonical period key of a ``summary_type``: ``key`` checked and normalized.

    Without ``key``, the period that contains ``today``. A date (``YYYY-MM-DD``) is accepted
    for any type and means the period containing it (``2025-12-10`` -> ``2025-W50``).
    """
    if key is None or not key.strip():
        return _period_of(summary_type, today)
    text = key.strip().upper()
    try:
        day = date.fromisoformat(text)
    except ValueError:
        day = None
    if day is not None:
        return _period_of(summary_type, day)
    normalized = _normalize(summary_type, text)
    if normalized is None:
        raise ToolInputError(
            f"period_key {key!r} does not fit {summary_type}: use {_FORMATS[summary_type]}, "
            "or a date (YYYY-MM-DD) inside the period."
        )
    return normalized


def _period_of(summary_type: str, day: date) -> str:
    if summary_type == "weekly-summary":
        year, week, _ = day.isocalendar()
        return f"{year}-W{week:02d}"
    if summary_type == "monthly-summary":
        return f"{day:%Y-%m}"
    if summary_type == "quarterly-summary":
        return f"{day.year}-Q{(day.month - 1) // 3 + 1}"
    if summary_type == "yearly-summary":
        return f"{day.year}"
    return day.isoformat()


def _normalize(summary_type: str, text: str) -> str | None:
    if summary_type == "weekly-summary" and (m := re.fullmatch(r"(\d{4})-?W(\d{1,2})", text)):
        year, week = int(m[1]), int(m[2])
        try:
            date.fromisocalendar(year, week, 1)
        except ValueError:
            return None
        return f"{year}-W{week:02d}"
    if summary_type == "monthly-summary" and (m := re.fullmatch(r"(\d{4})-(\d{1,2})", text)):
        return f"{m[1]}-{int(m[2]):02d}" if 1 <= int(m[2]) <= 12 else None
    if summary_type == "quarterly-summary" and (m := re.fullmatch(r"(\d{4})-?Q([1-4])", text)):
        return f"{m[1]}-Q{m[2]}"
    if summary_type == "yearly-summary" and re.fullmatch(r"\d{4}", text):
        return text
    return None


def parse_instant(text: str | None, name: str) -> datetime | None:
    """An ISO 8601 date or timestamp as naive UTC (how the table stores times)."""
    if text is None or not text.strip():
        return None
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ToolInputError(
            f"{name} must be an ISO 8601 date or time (e.g. 2025-12-01 or 2025-12-01T09:00Z), not {text!r}."
        ) from None
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value
