"""The agent's memory: user memories and calendar-aligned summaries.

- ``user_memory``: what the agent knows about the user and their work (facts,
  preferences, goals, projects, open loops, ...), with tags and a ``pursuingPriority``.
  All of it is shown in the system prompt, most important first, so the section is
  capped (:data:`SECTION_CHARS`); a memory that would overflow it is refused with a
  message saying what to do.
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
        """Store a user memory, unless the prompt's memory section would overflow."""
        _check_size(content, tags)
        draft = Memory("(new)", "user_memory", category, content, list(tags), pursuing_priority, None, None, _utc_now())
        section = self.section(extra=draft)
        if len(section) > SECTION_CHARS:
            raise ToolInputError(
                f"Not stored: your memory section would be {len(section):,} characters, over its "
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

    def section(self, extra: Memory | None = None, withheld: Collection[str] = ()) -> str:
        """The system prompt's memory section (all user memories, most important first),
        without the memories whose ids are ``withheld`` (shown elsewhere, as data)."""
        found = [m for m in self.user_memories() if m.id not in withheld]
        if extra is not None:
            found.append(extra)
            found.sort(key=lambda m: -(100 if m.pursuing_priority is None else m.pursuing_priority))
        summaries = self.con.execute("SELECT count(*) FROM memories WHERE store = 'summaries'").fetchone()
        lines = [m.line() for m in found]
        if not lines and not (summaries and summaries[0]):
            return ""
        head = (
            "What you stored with the memory tool (user_memory), most important first. Keep it "
            "current: store what the user will want remembered, forget what is outdated."
        )
        if summaries and summaries[0]:
            lines.append(f"Summaries stored: {summaries[0]:,} (memory action=recall, store_filter=summaries).")
        return "\n".join([head, *lines])

    def _find(self, memory_id: str) -> Memory | None:
        row = self.con.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", [memory_id]).fetchone()
        return _memory(row) if row else None

    def _get(self, memory_id: str) -> Memory:
        found = self._find(memory_id)
        assert found is not None
        return found


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
