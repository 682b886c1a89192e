"""Recall of past sessions (group ``memory``): ``search_sessions`` and ``session_timeline``."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any

from pydantic import Field

from ..errors import ToolInputError
from ..store import recall
from ..store.memories import parse_instant
from . import Tool, current_context
from .data import with_connection

QUERY_CHARS = 500
SHORT_CHARS = 300  # notebook paths, dates, session names and ids


async def search_sessions(
    query: str,
    notebook: str | None = None,
    from_: Annotated[str | None, Field(alias="from")] = None,
    to: str | None = None,
    limit: Annotated[int, Field(ge=1, le=50)] = 10,
) -> dict[str, Any]:
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
    found = await with_connection(context.store, lambda con: recall.search(con, query, filters, limit))
    answer: dict[str, Any] = {"matches": [m.as_dict() for m in found]}
    if not found:
        answer["note"] = "Nothing matched; try other words, fewer filters, or session_timeline."
    return answer


async def session_timeline(
    limit: Annotated[int, Field(ge=5, le=20)] = 5,
    session: Annotated[str | None, Field(description="name or id: list its turns instead")] = None,
) -> dict[str, Any]:
    """Recent sessions (state, turns, tool calls, cost, summary), or one session's turns in order."""
    _check_length("session", session, SHORT_CHARS)
    store = current_context().store
    if session is not None and session.strip():
        wanted = session.strip()

        def read(con: Any) -> dict[str, Any] | None:
            found = recall.find_session(con, wanted)
            if found is None:
                return None
            listed, left_out = recall.turns(con, found[0])
            stored = recall.summary_of(con, found[0])
            answer: dict[str, Any] = {
                "session": {"id": found[0], "name": found[1], "summary": stored.summary if stored else None},
                "turns": listed,
            }
            if left_out:
                answer["earlier_turns_left_out"] = left_out
            return answer

        answer = await with_connection(store, read)
        if answer is None:
            raise ToolInputError(f"No session has the name or id {wanted!r}; session_timeline without session lists them.")
        return answer
    return {"sessions": await with_connection(store, lambda con: recall.timeline(con, limit))}


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
