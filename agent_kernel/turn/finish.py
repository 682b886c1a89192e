"""How a turn's cell ends: the footer under the turn (model, calls, tokens, cost) and, with a
notebook front end attached, "Insert as cells" under it.

Whether the turn failed is :mod:`agent_kernel.turn.outcome`'s rule; a failed turn whose
cell raises shows its footer with the failure's line instead (the line is the cell's last).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from agent_kernel.display.footer import TurnFigures, footer_line
from agent_kernel.kernel import channel, turn_cells
from agent_kernel.store.steps import turn_cells as cells_of
from agent_kernel.store.steps import turn_steps

if TYPE_CHECKING:
    from agent_kernel.display.transcript import Transcript
    from agent_kernel.store import Store
    from agent_kernel.store.writer import WriteBehind
    from agent_kernel.turn.loop import TurnLimits, TurnResult

__all__ = ["end_cell", "footer", "insert_turn_cells", "offer_cells"]

Insert = Callable[[str, int], Awaitable[str]]  # (session id, turn number) -> the line saying what it did


async def end_cell(
    transcript: Transcript,
    result: TurnResult,
    limits: TurnLimits,
    *,
    new: bool,
    session_id: str,
    number: int,
    insert: Insert,
) -> str | None:
    """Show how the turn ended once its transcript settled: the footer and "Insert as
    cells". The footer when the cell raises the turn's failure (it shows it with the
    line), else None."""
    await transcript.settle(wait=not result.failed)  # a stopped turn ends at once
    if result.state == "error" or not result.model_calls:
        return None
    line = footer(result, limits, new=new)
    if result.failed and transcript.failure_raised:
        return line
    usage = {
        "model": result.model, "tool_calls": result.tool_calls, "seconds": round(result.seconds, 3),
        "tokens": result.tokens, "session_tokens": result.session_tokens,
        "token_limit": limits.token_limit, "cost": result.cost,
        "subsessions": result.subsessions, "subsession_tokens": result.subsession_tokens,
    }  # fmt: skip
    transcript.notice(line, kind="muted", usage=usage)
    offer_cells(transcript, session_id, number, insert)
    return None


def footer(result: TurnResult, limits: TurnLimits, *, new: bool = False) -> str:
    """The turn's footer line (see :func:`agent_kernel.display.footer.footer_line`)."""
    return footer_line(
        TurnFigures(
            model=result.model or "model",
            tool_calls=result.tool_calls,
            seconds=result.seconds,
            tokens=result.tokens,
            input_tokens=result.input_tokens,
            cache_read_tokens=result.cache_read_tokens,
            cost=result.cost,
            unpriced_calls=result.unpriced_calls,
            session=result.session,
            session_tokens=result.session_tokens,
            token_limit=limits.token_limit,
            session_cost=result.session_cost,
            new_session=new,
            web_searches=result.web_searches,
            web_fetches=result.web_fetches,
            subsessions=result.subsessions,
            subsession_tokens=result.subsession_tokens,
            subsession_cost=result.subsession_cost,
            cost_limit=limits.cost_limit,
        )
    )


def offer_cells(transcript: Transcript, session_id: str, number: int, insert: Insert) -> None:
    """Remember the cell the turn ran in; with a notebook front end attached, show
    "Insert as cells" under its footer (see :mod:`agent_kernel.kernel.turn_cells`)."""
    turn_cells.remember(session_id, number, channel.running_cell())
    if channel.attached() is None:
        return

    async def action() -> str:
        return await insert(session_id, number)

    transcript.offer_cells(action)


async def insert_turn_cells(store: Store, writer: WriteBehind, session_id: str, number: int) -> str:
    """Insert turn ``number`` of the session as cells into the attached notebook (what
    "Insert as cells" does); the line saying so, or ``ValueError`` saying why not."""
    if not writer.idle:
        await asyncio.to_thread(writer.flush)
    with store.connect() as con:
        turn = turn_steps(con, session_id, number)
    if turn is None:
        raise turn_cells.CellsError("This turn is no longer stored (its session was deleted).")
    placed = await turn_cells.insert(cells_of(turn), session_id=session_id, turn=number, prompt=turn.prompt)
    code = len(placed.cells) - 1
    return f"Inserted below this cell: the prompt and answer, {code} code cell{'s' if code != 1 else ''}."
