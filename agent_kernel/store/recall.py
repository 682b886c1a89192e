"""Recall of past sessions: their summaries, a search over what was said, a timeline.

- ``session_summaries``: one short summary per session, covering its messages with
  ``seq < covers``; made again (from the earlier summary and the newer messages) when the
  session has gone on since.
- :func:`search`: BM25 over the text the user and the agent wrote (not the turn-context
  blocks, tool inputs or tool results) and over the summaries.
- :func:`timeline` and :func:`turns`: recent sessions with their figures, or one
  session's turns in order.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, TypedDict

from agent_kernel.model.conversation import CONTEXT_START, Message, is_turn_context
from agent_kernel.store.bm25 import STOPWORDS, ranked, terms
from agent_kernel.store.schema import UTC_NOW

if TYPE_CHECKING:
    import duckdb
    from typing_extensions import NotRequired

__all__ = [
    "Match", "MatchEntry", "Pending", "SearchFilters", "SessionLine", "SessionSummary", "TurnLine", "find_session",
    "last_activity", "pending", "previous_session", "save_summary", "search", "summary_of", "timeline", "turns",
]  # fmt: skip

SUMMARY_CHARS = 4_000  # the longest stored summary
SNIPPET_CHARS = 300
TURN_TEXT_CHARS = 400  # of a prompt or an answer in a session's turns
TIMELINE_TURNS = 60  # the most turns one session's timeline lists (the latest)

# The text blocks of a stored message's content, joined: what the user or the agent said.
_SAID = (
    "array_to_string(list_transform(list_filter("
    """from_json(m.content, '[{"type": "VARCHAR", "text": "VARCHAR"}]'), """
    f"lambda b: b.type = 'text' AND NOT starts_with(coalesce(b.text, ''), '{CONTEXT_START.strip()}')"
    "), lambda b: b.text), chr(10))"
)


@dataclass(frozen=True)
class SessionSummary:
    """A session's stored summary."""

    session_id: str
    summary: str
    covers: int  # it covers the session's messages with seq < covers
    model: str | None  # None: made without a model (the call failed)
    updated_at: datetime


@dataclass(frozen=True)
class Pending:
    """What a session's next summary is made from: its earlier summary and the newer messages."""

    session_id: str
    name: str
    earlier: str | None
    messages: list[Message]
    covers: int  # the summary made from these covers the messages with seq < covers


@dataclass
class SearchFilters:
    """What :func:`search` narrows to (times are naive UTC, as stored)."""

    notebook: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    skip_session: str | None = None  # with skip_turn: leave out the turn that is asking
    skip_turn: int | None = None

    def where(self) -> tuple[str, list[Any]]:
        clauses: list[str] = ["true"]
        params: list[Any] = []
        if self.notebook:
            clauses.append("(s.notebook = ? OR ends_with(s.notebook, '/' || ?))")
            params += [self.notebook, self.notebook.lstrip("/")]
        if self.since:
            clauses.append("said.said_at >= ?")
            params.append(self.since)
        if self.until:
            clauses.append("said.said_at < ?")
            params.append(self.until)
        if self.skip_session:
            clauses.append("NOT (said.session_id = ? AND said.turn IS NOT DISTINCT FROM ?)")
            params += [self.skip_session, self.skip_turn]
        return " AND ".join(clauses), params


class MatchEntry(TypedDict):
    """One match as ``search_sessions`` returns it."""

    session: str
    turn: int | None
    at: str | None  # ISO 8601
    snippet: str
    message_id: str | None
    role: str
    relevance: float


@dataclass(frozen=True)
class Match:
    """One search hit: a message or a session's summary."""

    session_id: str
    session: str  # its name
    turn: int | None  # None: the session's summary
    at: datetime
    role: str  # user, assistant or summary
    snippet: str
    seq: int | None
    relevance: float

    @property
    def message_id(self) -> str | None:
        """``SESSION_ID:SEQ``: the row of table ``messages`` (None for a summary)."""
        return None if self.seq is None else f"{self.session_id}:{self.seq}"

    def as_dict(self) -> MatchEntry:
        return {
            "session": self.session,
            "turn": self.turn,
            "at": _iso(self.at),
            "snippet": self.snippet,
            "message_id": self.message_id,
            "role": self.role,
            "relevance": round(self.relevance, 3),
        }


# -- summaries ----------------------------------------------------------------------------


def summary_of(con: duckdb.DuckDBPyConnection, session_id: str) -> SessionSummary | None:
    row = con.execute(
        "SELECT session_id, summary, covers, model, updated_at FROM session_summaries WHERE session_id = ?",
        [session_id],
    ).fetchone()
    return SessionSummary(*row) if row else None


def save_summary(
    con: duckdb.DuckDBPyConnection, session_id: str, summary: str, *, covers: int, model: str | None
) -> None:
    """Store (or replace) the session's summary."""
    text = summary.strip()
    if len(text) > SUMMARY_CHARS:
        text = text[: SUMMARY_CHARS - 1].rstrip() + "…"
    con.execute(
        "INSERT INTO session_summaries (session_id, summary, covers, model) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (session_id) DO UPDATE SET summary = excluded.summary, covers = excluded.covers, "
        f"model = excluded.model, updated_at = {UTC_NOW}",
        [session_id, text, covers, model],
    )


def pending(con: duckdb.DuckDBPyConnection, session_id: str) -> Pending | None:
    """What the session's summary would be made from now; None when it is up to date (or
    the session said nothing yet)."""
    name_row = con.execute("SELECT name FROM sessions WHERE id = ?", [session_id]).fetchone()
    if name_row is None:
        return None
    stored = summary_of(con, session_id)
    start = stored.covers if stored else 0
    rows = con.execute(
        "SELECT seq, role, content FROM messages WHERE session_id = ? AND seq >= ? ORDER BY seq",
        [session_id, start],
    ).fetchall()
    if not rows:
        return None
    messages: list[Message] = [{"role": role, "content": json.loads(content)} for _, role, content in rows]
    if not any(_said(m["content"]) for m in messages):
        return None  # only tool traffic since: nothing a summary would add
    return Pending(session_id, name_row[0], stored.summary if stored else None, messages, rows[-1][0] + 1)


def last_activity(con: duckdb.DuckDBPyConnection, session_id: str) -> datetime | None:
    """When the session's last message was stored (None: it has none)."""
    row = con.execute("SELECT max(created_at) FROM messages WHERE session_id = ?", [session_id]).fetchone()
    return row[0] if row else None


def previous_session(
    con: duckdb.DuckDBPyConnection, *, current_id: str, notebook: str | None, idle_before: datetime
) -> tuple[str, str] | None:
    """(id, name) of the session before ``current_id``: the one used last in ``notebook``;
    else (a notebook's first session) the one used last anywhere that has been idle since
    ``idle_before``. Only top-level sessions that said something count."""
    row = con.execute(
        "SELECT s.id, s.name FROM sessions s "
        "WHERE s.id <> ? AND s.parent_id IS NULL AND s.notebook IS NOT DISTINCT FROM ? "
        "AND EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id) "
        "ORDER BY s.updated_at DESC LIMIT 1",
        [current_id, notebook],
    ).fetchone()
    if row is None:
        row = con.execute(
            "SELECT s.id, s.name FROM sessions s JOIN "
            "(SELECT session_id, max(created_at) AS last FROM messages GROUP BY session_id) m "
            "ON m.session_id = s.id WHERE s.id <> ? AND s.parent_id IS NULL AND m.last < ? "
            "ORDER BY m.last DESC LIMIT 1",
            [current_id, idle_before],
        ).fetchone()
    return (row[0], row[1]) if row else None


def untrusted_sources(con: duckdb.DuckDBPyConnection, session_id: str) -> tuple[str, ...]:
    """The untrusted sources the session read: its summary and messages were written after them."""
    row = con.execute("SELECT untrusted_sources FROM sessions WHERE id = ?", [session_id]).fetchone()
    return tuple(json.loads(row[0])) if row and row[0] else ()


# -- search -------------------------------------------------------------------------------

_DOCS = f"""
SELECT said.session_id || ':' || coalesce(said.seq::VARCHAR, 'summary') AS id, said.*,
       s.name AS session_name, {terms("said.body")} AS terms
FROM (
    SELECT m.session_id, m.seq, m.turn, m.role, m.created_at AS said_at, {_SAID} AS body
    FROM messages m WHERE m.role IN ('user', 'assistant')
    UNION ALL
    SELECT ss.session_id, NULL, NULL, 'summary', coalesce(covered.last, ss.updated_at), ss.summary
    FROM session_summaries ss LEFT JOIN (  -- a summary is dated by the last message it covers
        SELECT m.session_id, max(m.created_at) AS last FROM messages m JOIN session_summaries c
        ON c.session_id = m.session_id AND m.seq < c.covers GROUP BY m.session_id
    ) covered ON covered.session_id = ss.session_id
) said JOIN sessions s ON s.id = said.session_id
WHERE length(said.body) > 0 AND {{where}}
"""


def search(con: duckdb.DuckDBPyConnection, query: str, filters: SearchFilters, limit: int = 10) -> list[Match]:
    """The messages and summaries most relevant to ``query`` (BM25), best first."""
    where, params = filters.where()
    sql = ranked(_DOCS.replace("{where}", where), then_by="said_at")
    columns = "session_id, session_name, turn, said_at, role, body, seq, score"
    rows = con.execute(
        f"SELECT {columns} FROM ({sql}) ORDER BY score DESC, said_at DESC", [*params, query, limit]
    ).fetchall()
    words = query_words(query)
    return [
        Match(sid, name, turn, at, role, snippet(body, words), seq, float(score))
        for sid, name, turn, at, role, body, seq, score in rows
    ]


def query_words(query: str) -> list[str]:
    """The words of ``query`` a snippet is centred on (stopwords left out)."""
    found = [w for w in re.split(r"[^\w]+", query.lower()) if len(w) > 1 and w not in STOPWORDS]
    return list(dict.fromkeys(found))


def snippet(text: str, words: list[str], size: int = SNIPPET_CHARS) -> str:
    """About ``size`` characters of ``text`` around the first of ``words`` it contains."""
    flat = " ".join(text.split())
    if len(flat) <= size:
        return flat
    lower = flat.lower()
    hits = [i for i in (_find_word(lower, w) for w in words) if i >= 0]
    centre = min(hits) if hits else 0
    start = max(0, min(centre - size // 3, len(flat) - size))
    piece = flat[start : start + size]
    return ("…" if start > 0 else "") + piece + ("…" if start + size < len(flat) else "")


def _find_word(text: str, word: str) -> int:
    stem = word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word
    found = re.search(r"\b" + re.escape(stem), text)
    return found.start() if found else -1


# -- the timeline ---------------------------------------------------------------------------


def find_session(con: duckdb.DuckDBPyConnection, name_or_id: str) -> tuple[str, str] | None:
    """(id, name) of the session with that name, else that id."""
    row = con.execute(
        "SELECT id, name FROM sessions WHERE name = ? UNION ALL SELECT id, name FROM sessions WHERE id = ? LIMIT 1",
        [name_or_id, name_or_id],
    ).fetchone()
    return (row[0], row[1]) if row else None


class SessionLine(TypedDict):
    """One session as ``session_timeline`` lists it."""

    id: str
    name: str
    notebook: str | None
    state: str
    started: str | None
    last_active: str | None
    turns: int
    tool_calls: int
    tokens: int
    cost_usd: float | None
    summary: str | None
    parent_id: NotRequired[str]


class TurnLine(TypedDict):
    """One turn of a session as ``session_timeline`` shows it: when, the prompt, the final
    answer, the tools called."""

    turn: int
    at: str | None
    prompt: str
    answer: str
    tool_calls: NotRequired[int]
    tool_errors: NotRequired[int]
    tools: NotRequired[list[str]]


def timeline(con: duckdb.DuckDBPyConnection, limit: int) -> list[SessionLine]:
    """The ``limit`` sessions used last, newest first, with their figures and summaries."""
    rows = con.execute(
        "SELECT s.id, s.name, s.notebook, s.state, s.parent_id, s.created_at, s.updated_at, s.tokens_used, "
        "coalesce(m.turns, 0), coalesce(t.calls, 0), c.cost, ss.summary "
        "FROM sessions s "
        "LEFT JOIN (SELECT session_id, max(turn) AS turns FROM messages GROUP BY ALL) m ON m.session_id = s.id "
        "LEFT JOIN (SELECT session_id, count(*) AS calls FROM tool_calls GROUP BY ALL) t ON t.session_id = s.id "
        "LEFT JOIN (SELECT session_id, sum(cost_usd) AS cost FROM model_calls GROUP BY ALL) c ON c.session_id = s.id "
        "LEFT JOIN session_summaries ss ON ss.session_id = s.id "
        "ORDER BY s.updated_at DESC LIMIT ?",
        [limit],
    ).fetchall()
    found: list[SessionLine] = []
    for sid, name, notebook, state, parent, created, updated, tokens, n_turns, calls, cost, summary in rows:
        item: SessionLine = {
            "id": sid, "name": name, "notebook": notebook, "state": state, "started": _iso(created),
            "last_active": _iso(updated), "turns": int(n_turns), "tool_calls": int(calls),
            "tokens": int(tokens), "cost_usd": None if cost is None else round(float(cost), 4),
            "summary": summary,
        }  # fmt: skip
        if parent:
            item["parent_id"] = parent
        found.append(item)
    return found


def turns(con: duckdb.DuckDBPyConnection, session_id: str) -> tuple[list[TurnLine], int]:
    """The session's turns in order (the latest :data:`TIMELINE_TURNS`), and how many earlier
    ones are left out: when, the prompt, the final answer, the tools called."""
    rows = con.execute(
        "SELECT turn, role, content, created_at FROM messages WHERE session_id = ? ORDER BY seq", [session_id]
    ).fetchall()
    calls = con.execute(
        "SELECT turn, tool, is_error FROM tool_calls WHERE session_id = ? ORDER BY created_at", [session_id]
    ).fetchall()
    by_turn: dict[int, TurnLine] = {}
    for turn, role, content, at in rows:
        entry = by_turn.setdefault(turn, {"turn": turn, "at": _iso(at), "prompt": "", "answer": ""})
        said = _said(json.loads(content))
        if not said:
            continue
        if role == "user" and not entry["prompt"]:
            entry["prompt"] = _cut(said, TURN_TEXT_CHARS)
        elif role == "assistant":
            entry["answer"] = _cut(said, TURN_TEXT_CHARS)  # the last text is the answer
    for turn, tool, is_error in calls:
        called = by_turn.get(turn)
        if called is not None:
            called["tool_calls"] = called.get("tool_calls", 0) + 1
            called["tool_errors"] = called.get("tool_errors", 0) + int(bool(is_error))
            if tool not in called.setdefault("tools", []):
                called["tools"].append(tool)
    ordered = [by_turn[t] for t in sorted(by_turn)]
    for entry in ordered:
        entry.setdefault("tool_calls", 0)
    left_out = max(0, len(ordered) - TIMELINE_TURNS)
    return ordered[left_out:], left_out


# -- helpers --------------------------------------------------------------------------------


def _said(content: Any) -> str:
    """The words of a stored message's content (its text blocks, not the turn context)."""
    if isinstance(content, str):
        return content.strip()
    texts = [
        str(b.get("text", "")) for b in content
        if isinstance(b, dict) and b.get("type") == "text" and not is_turn_context(b)
    ]  # fmt: skip
    return "\n".join(t for t in texts if t.strip()).strip()


def _cut(text: str, size: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= size else flat[: size - 1].rstrip() + "…"


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="seconds") + "Z"


def utc_now() -> datetime:
    """Now as naive UTC (how the tables store times)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def idle_since(minutes: float) -> datetime:
    """The time a session idle for ``minutes`` was last active at, at the latest."""
    return utc_now() - timedelta(minutes=minutes)
