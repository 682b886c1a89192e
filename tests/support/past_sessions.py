"""Stored past sessions for recall tests: sessions as another kernel left them, backdated."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from agent_kernel.model.conversation import CONTEXT_END, CONTEXT_START
from agent_kernel.store import Store
from agent_kernel.store.sessions import Journal, Sessions


def past_session(
    store: Store,
    name: str,
    exchanges: list[tuple[str, str]],
    *,
    notebook: str | None = "elsewhere.ipynb",
    hours_ago: float = 24.0,
    tool_noise: str = "",
) -> str:
    """A session whose turns (prompt, answer) were said ``hours_ago``; its id.

    Each prompt is led by a turn-context block, as the agent stores it; ``tool_noise`` is
    said by a tool call and its result in the first turn.
    """
    with store.connect() as con:
        session = Sessions(con).create(name, notebook=notebook)
        for turn, (prompt, answer) in enumerate(exchanges, 1):
            journal = Journal(session.id, turn)
            context = {"type": "text", "text": CONTEXT_START + "Current date and time: long ago" + CONTEXT_END}
            journal.message("user", [context, {"type": "text", "text": prompt}])
            if tool_noise and turn == 1:
                use = {"type": "tool_use", "id": "toolu_past", "name": "run_code", "input": {"code": tool_noise}}
                journal.message("assistant", [use])
                result = {"type": "tool_result", "tool_use_id": "toolu_past", "content": tool_noise}
                journal.message("user", [result])
            journal.message("assistant", [{"type": "text", "text": answer}])
            journal.state("idle")
            journal.write(con)
        then = datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(hours=hours_ago)
        con.execute(
            "UPDATE messages SET created_at = ? + INTERVAL (seq) SECOND WHERE session_id = ?", [then, session.id]
        )
        con.execute("UPDATE sessions SET created_at = ?, updated_at = ? WHERE id = ?", [then, then, session.id])
    return session.id
