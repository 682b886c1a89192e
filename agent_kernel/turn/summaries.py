"""Short summaries of sessions for recall: which are due when a turn starts, and writing them.

There is no timer. A kernel may be gone (a papermill run, a closed notebook) by the time
its session has been idle for ``summary_idle_minutes``, and a timer thread would keep a
headless run waiting or fire in the middle of someone else's cell. Instead each turn
looks, as it starts, at the two sessions whose summary can matter to it:

- its own session, when its last message is older than ``summary_idle_minutes`` (the
  user comes back after a pause): summarised up to that message;
- on a session's first turn (after ``%agent --new``, or in a notebook's next session),
  the previous session: the one used last in this notebook, else the one used last
  anywhere that has gone idle (a notebook's first session picks up the last session of
  another kernel). It is summarised if it said anything since its summary, and its
  summary goes into this turn's context (:func:`turn_section`).

A summary is made by ``small_model`` from the earlier summary and the newer messages (the
text compaction summarises, :func:`agent_kernel.turn.budget.transcript_text`); its usage is
recorded with the turn that asked for it. When the call fails, the user's prompts stand
in for it (``model`` NULL), so a failing model is not asked again every turn.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from agent_kernel.errors import ModelError
from agent_kernel.store import recall
from agent_kernel.turn.budget import _prompts_only, transcript_text
from agent_kernel.untrusted import mark_untrusted

if TYPE_CHECKING:
    import duckdb
    from anthropic.types import Message

    from agent_kernel.model.client import ModelClient
    from agent_kernel.model.shapes import RequestParams
    from agent_kernel.store import Store
    from agent_kernel.store.recall import Pending
    from agent_kernel.store.sessions import Session

__all__ = [
    "SESSION_SUMMARY_SYSTEM", "Previous", "RecallStart", "Written", "at_start", "is_session_summary_request",
    "turn_section", "write",
]  # fmt: skip

SESSION_SUMMARY_SYSTEM = (
    "You write the summary of a finished session between a user and an AI agent working in "
    "the user's live Jupyter kernel, for the agent's later sessions and searches. In at most "
    "150 words of plain prose or a short list: what the user wanted, what was done and "
    "decided, results worth remembering (numbers, names of variables, DataFrames, files and "
    "tables), and what was left open. No greetings, nothing the agent would not need."
)
SUMMARY_MAX_TOKENS = 600
SUMMARY_INPUT_CHARS = 120_000  # most text one session-summary request carries (about 30k tokens)
SUMMARY_TIMEOUT_S = 30.0


def is_session_summary_request(body: Mapping[str, object]) -> bool:
    """Whether a Messages request body asks for a session's summary."""
    system = body.get("system")
    return isinstance(system, str) and system.startswith(SESSION_SUMMARY_SYSTEM[:80])


@dataclass(frozen=True)
class Previous:
    """The session before this one, and its summary as stored (None: none yet)."""

    id: str
    name: str
    summary: str | None
    last_active: datetime | None
    untrusted_sources: tuple[str, ...] = ()  # what it had read: its summary is data, not orders


@dataclass(frozen=True)
class RecallStart:
    """What a turn found to do for recall as it started."""

    due: tuple[Pending, ...] = ()  # sessions whose summary is to be made first
    previous: Previous | None = None  # on a session's first turn: the session before it


def at_start(
    con: duckdb.DuckDBPyConnection, session: Session, *, first_turn: bool, notebook: str, idle_minutes: float
) -> RecallStart:
    """Which summaries are due as a turn of ``session`` starts (nothing when ``idle_minutes`` is 0)."""
    if not idle_minutes:
        return RecallStart()
    idle_before = recall.idle_since(idle_minutes)
    due = []
    last = recall.last_activity(con, session.id)
    if last is not None and last < idle_before:
        own = recall.pending(con, session.id)
        if own is not None:
            due.append(own)
    previous = None
    if first_turn:
        found = recall.previous_session(con, current_id=session.id, notebook=notebook, idle_before=idle_before)
        if found is not None:
            stored = recall.summary_of(con, found[0])
            previous = Previous(
                found[0],
                found[1],
                stored.summary if stored else None,
                recall.last_activity(con, found[0]),
                recall.untrusted_sources(con, found[0]),
            )
            theirs = recall.pending(con, found[0])
            if theirs is not None:
                due.append(theirs)
    return RecallStart(tuple(due), previous)


@dataclass(frozen=True)
class Written:
    """A summary just made and stored; ``message``: the model's response (None: no model call
    succeeded), whose usage the turn records."""

    session_id: str
    summary: str
    message: Message | None
    duration_ms: float


async def write(
    due: tuple[Pending, ...], *, store: Store, model_client: ModelClient, small_model: str
) -> list[Written]:
    """Make and store the summary of each session in ``due``, one after another."""
    written = []
    for item in due:
        summary, model, message, ms = await _summarise(item, model_client, small_model)

        def save(item: Pending = item, summary: str = summary, model: str | None = model) -> None:
            with store.connect() as con:
                recall.save_summary(con, item.session_id, summary, covers=item.covers, model=model)

        await asyncio.to_thread(save)
        written.append(Written(item.session_id, summary, message, ms))
    return written


async def _summarise(
    item: Pending, model_client: ModelClient, small_model: str
) -> tuple[str, str | None, Message | None, float]:
    text = transcript_text(item.earlier, item.messages)
    if len(text) > SUMMARY_INPUT_CHARS:
        half = SUMMARY_INPUT_CHARS // 2
        text = text[:half] + "\n[... the middle of the session is left out ...]\n" + text[-half:]
    params: RequestParams = {
        "model": small_model,
        "max_tokens": SUMMARY_MAX_TOKENS,
        "system": SESSION_SUMMARY_SYSTEM,
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
    }
    started = time.perf_counter()
    try:
        message = await asyncio.wait_for(model_client.create(params), SUMMARY_TIMEOUT_S)
    except (ModelError, asyncio.TimeoutError):
        return _prompts_only(item.earlier, item.messages), None, None, 0.0
    ms = (time.perf_counter() - started) * 1000
    summary = "".join(getattr(b, "text", "") for b in message.content).strip()
    if not summary:
        return _prompts_only(item.earlier, item.messages), None, message, ms
    return summary, message.model, message, ms


def turn_section(previous: Previous, summary: str | None) -> str:
    """The turn-context lines that give a session's first turn the previous session's summary."""
    if not summary:
        return ""
    when = f", last active {previous.last_active:%Y-%m-%d %H:%M} UTC" if previous.last_active else ""
    text = summary.strip()
    if previous.untrusted_sources:
        text = mark_untrusted(text, f"summary of session {previous.name}, which read untrusted content")
    return f"Summary of your previous session {previous.name!r}{when}:\n{text}"
