"""Recall of past sessions (group ``memory``): ``search_sessions`` and ``session_timeline``."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from agent_kernel.errors import ToolInputError
from agent_kernel.store import recall
from agent_kernel.store.memories import parse_instant
from agent_kernel.tools import Tool, current_context
from agent_kernel.tools.data import with_connection
from agent_kernel.untrusted import mark_untrusted

if TYPE_CHECKING:
    import duckdb


class SearchReply(TypedDict):
    """``search_sessions``'s reply: the matches, best first."""

    matches: list[recall.MatchEntry]
    note: NotRequired[str]  # nothing matched: what to try instead


class SessionShown(TypedDict):
    id: str
    name: str
    summary: str | None


class SessionTurns(TypedDict):
    """``session_timeline``'s reply for one session: its turns in order."""

    session: SessionShown
    turns: list[recall.TurnLine]
    earlier_turns_left_out: NotRequired[int]


class RecentSessions(TypedDict):
    """``session_timeline``'s reply without a session: the recent sessions."""

    sessions: list[recall.SessionLine]


QUERY_CHARS = 500
SHORT_CHARS = 300  # notebook paths, dates, session names and ids


async def search_sessions(
    query: str,
    notebook: str | None = None,
    from_: Annotated[str | None, Field(alias="from")] = None,
    to: str | None = None,
    limit: Annotated[int, Field(ge=1, le=50)] = 10,
) -> SearchReply:
    """Search past sessions' messages and summaries, best first. from/to: ISO date (to inclusive) or time. message_id: SESSION_ID:SEQ in table messages."""
    # Lengths are checked here, not in the schema: its size is paid on every request.
    _check_length("query", query, QUERY_CHARS)
    for name, value in (("notebook", notebook), ("from", from_), ("to", to)):
        _check_length(name, value, SHORT_CHARS)
    if not query.strip():
        raise ToolInputError("search_sessions needs query: the words to look for.")
    since = parse_instant(from_, "from")
    until = parse_instant(to, "to")
    if until is not None and to is not None and _is_date(to):
        until += timedelta(days=1)  # a date means up to the end of that day
    if since is not None and until is not None and since >= until:
        raise ToolInputError(f"from ({from_}) must be before to ({to}).")
    context = current_context()
    filters = recall.SearchFilters(
        notebook=notebook.strip() if notebook and notebook.strip() else None,
        since=since,
        until=until,
        skip_session=context.session_id,  # the turn asking: its prompt would match itself
        skip_turn=context.turn,
    )

    def read(con: duckdb.DuckDBPyConnection) -> tuple[list[recall.Match], dict[str, tuple[str, ...]]]:
        matches = recall.search(con, query, filters, limit)
        return matches, _read_untrusted(con, {m.session_id for m in matches})

    found, tainted = await with_connection(context.store, read)
    answer: SearchReply = {"matches": []}
    for match in found:
        item = match.as_dict()
        if match.session_id in tainted:
            item["snippet"] = _as_data(item["snippet"], match.session, tainted[match.session_id])
        answer["matches"].append(item)
    if not found:
        answer["note"] = "Nothing matched; try other words, fewer filters, or session_timeline."
    return answer


async def session_timeline(
    limit: Annotated[int, Field(ge=5, le=20)] = 5,
    session: Annotated[str | None, Field(description="name or id: list its turns instead")] = None,
) -> SessionTurns | RecentSessions:
    """Recent sessions (state, turns, tool calls, cost, summary), or one session's turns in order."""
    _check_length("session", session, SHORT_CHARS)
    store = current_context().store
    if session is not None and session.strip():
        wanted = session.strip()

        def read(con: duckdb.DuckDBPyConnection) -> SessionTurns | None:
            found = recall.find_session(con, wanted)
            if found is None:
                return None
            listed, left_out = recall.turns(con, found[0])
            stored = recall.summary_of(con, found[0])
            summary = stored.summary if stored else None
            read_before = recall.untrusted_sources(con, found[0])
            if read_before:
                summary = _as_data(summary, found[1], read_before) if summary else summary
                for entry in listed:
                    entry["answer"] = _as_data(entry["answer"], found[1], read_before) if entry["answer"] else ""
            answer: SessionTurns = {
                "session": {"id": found[0], "name": found[1], "summary": summary},
                "turns": listed,
            }
            if left_out:
                answer["earlier_turns_left_out"] = left_out
            return answer

        answer = await with_connection(store, read)
        if answer is None:
            raise ToolInputError(
                f"No session has the name or id {wanted!r}; session_timeline without session lists them."
            )
        return answer

    def recent(con: duckdb.DuckDBPyConnection) -> list[recall.SessionLine]:
        listed = recall.timeline(con, limit)
        tainted = _read_untrusted(con, {item["id"] for item in listed})
        for item in listed:
            summary = item.get("summary")
            if item["id"] in tainted and summary:
                item["summary"] = _as_data(summary, item["name"], tainted[item["id"]])
        return listed

    return {"sessions": await with_connection(store, recent)}


def _read_untrusted(con: duckdb.DuckDBPyConnection, session_ids: set[str]) -> dict[str, tuple[str, ...]]:
    """The sessions among ``session_ids`` that had read untrusted content, with what they read."""
    found = {sid: recall.untrusted_sources(con, sid) for sid in session_ids}
    return {sid: sources for sid, sources in found.items() if sources}


def _as_data(text: str, session: str, sources: tuple[str, ...]) -> str:
    """Text a session wrote after it read untrusted content: data for this turn, which now
    counts as having read untrusted content itself."""
    current_context().note_untrusted([f"session {session}, which read {sources[0][:80]}"])
    return mark_untrusted(text, f"session {session}, written after it read untrusted content")


def _check_length(name: str, value: str | None, most: int) -> None:
    if value is not None and len(value) > most:
        raise ToolInputError(f"{name} is {len(value):,} characters; at most {most} are taken.")


def _is_date(text: str) -> bool:
    try:
        datetime.strptime(text.strip(), "%Y-%m-%d")
    except ValueError:
        return False
    return True


TOOLS = [
    Tool(search_sessions, name="search_sessions", group="memory"),
    Tool(session_timeline, name="session_timeline", group="memory"),
]
