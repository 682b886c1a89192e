"""What a session's turns ran, read back as notebook cells.

A turn's *steps* are its ``run_code`` calls that succeeded in the user's kernel (not the
isolated ones: they ran in a throwaway process and left nothing in the namespace), in the
order they ran, read from the audit trail (``code_executions``; ``seq`` orders a turn's
runs). With the prompt the person gave and the answer the model ended the turn with,
they are what ``%agent_cells`` inserts and ``agent-kernel export`` writes: code that
re-runs without the model.

Cells are nbformat 4 dicts marked ``metadata.agent_kernel = {"session": ID, "turn": N}``,
the mark the notebook tools put on the cells they insert. What they hold comes from the
store, so it already passed the redaction boundary; it is redacted once more with the
secrets this process knows now.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from agent_kernel.cellmark import KEY
from agent_kernel.cellmark import mark as cell_mark
from agent_kernel.model.conversation import is_turn_context
from agent_kernel.secrets import redact
from agent_kernel.store.turn_taint import session_taint

if TYPE_CHECKING:
    import duckdb
    from typing_extensions import NotRequired

    from agent_kernel.model.shapes import ContentBlock

__all__ = [
    "Step",
    "TurnCell",
    "TurnSteps",
    "answer_cell",
    "code_cell",
    "mark",
    "session_steps",
    "turn_cells",
    "turn_steps",
    "turns",
]

MAX_TURNS = 1000  # turns one export reads


@dataclass(frozen=True)
class Step:
    """One successful ``run_code`` call: its code, as the model sent it, and what it printed
    (its stdout as the audit trail keeps it: bounded, redacted)."""

    code: str
    stdout: str = ""


@dataclass(frozen=True)
class TurnSteps:
    """One turn of a session: the prompt, the answer and the code that succeeded, in order."""

    session_id: str
    session_name: str
    turn: int
    prompt: str
    answer: str
    steps: tuple[Step, ...]
    untrusted: tuple[str, ...] = ()  # what the session had read when the turn ran (store.turn_taint)


def turns(con: duckdb.DuckDBPyConnection, session_id: str) -> list[int]:
    """The numbers of the session's turns that have messages, in order."""
    rows = con.execute(
        "SELECT DISTINCT turn FROM messages WHERE session_id = ? ORDER BY turn LIMIT ?", [session_id, MAX_TURNS]
    ).fetchall()
    return [int(turn) for (turn,) in rows]


def turn_steps(con: duckdb.DuckDBPyConnection, session_id: str, turn: int) -> TurnSteps | None:
    """Turn ``turn`` of the session (``None`` when it has no messages)."""
    found = _read(con, session_id, [turn])
    return found[0] if found else None


def session_steps(con: duckdb.DuckDBPyConnection, session_id: str) -> list[TurnSteps]:
    """Every turn of the session, in order."""
    return _read(con, session_id, turns(con, session_id))


def _read(con: duckdb.DuckDBPyConnection, session_id: str, numbers: list[int]) -> list[TurnSteps]:
    if not numbers:
        return []
    name_row = con.execute("SELECT name FROM sessions WHERE id = ?", [session_id]).fetchone()
    name = str(name_row[0]) if name_row else session_id
    runs = con.execute(
        "SELECT turn, code, stdout FROM code_executions "
        "WHERE session_id = ? AND list_contains(?, turn) AND success AND NOT isolated "
        "ORDER BY turn, seq NULLS LAST, created_at, rowid",
        [session_id, numbers],
    ).fetchall()
    messages = con.execute(
        "SELECT turn, role, content FROM messages WHERE session_id = ? AND list_contains(?, turn) ORDER BY seq",
        [session_id, numbers],
    ).fetchall()
    steps: dict[int, list[Step]] = {n: [] for n in numbers}
    for turn, code, stdout in runs:
        if code.strip():
            steps[int(turn)].append(Step(code, stdout or ""))
    taint = session_taint(con, session_id)
    said: dict[int, list[tuple[str, list[ContentBlock]]]] = {n: [] for n in numbers}
    for turn, role, content in messages:
        said[int(turn)].append((str(role), json.loads(content)))
    return [
        TurnSteps(session_id, name, n, _prompt(said[n]), _answer(said[n]), tuple(steps[n]), taint.of_turn(n))
        for n in numbers
        if said[n]
    ]


def _texts(content: list[ContentBlock], *, user: bool) -> list[str]:
    return [
        str(block.get("text", ""))
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and not (user and is_turn_context(block))
        and str(block.get("text", "")).strip()
    ]


def _prompt(said: list[tuple[str, list[ContentBlock]]]) -> str:
    """The person's words: the text of the turn's first user message, without the turn context."""
    for role, content in said:
        if role == "user":
            return "\n\n".join(_texts(content, user=True)).strip()
    return ""


def _answer(said: list[tuple[str, list[ContentBlock]]]) -> str:
    """What the model ended the turn with: the text of its last message that has any."""
    for role, content in reversed(said):
        if role == "assistant":
            texts = _texts(content, user=False)
            if texts:
                return "\n\n".join(texts).strip()
    return ""


# -- cells --------------------------------------------------------------------------------


class TurnCell(TypedDict):
    """A notebook cell made from a turn, in nbformat's keys (a code cell is not run)."""

    cell_type: Literal["markdown", "code"]
    metadata: dict[str, Any]  # the cell's mark (see :func:`mark`)
    source: str
    execution_count: NotRequired[None]
    outputs: NotRequired[list[object]]


def mark(turn: TurnSteps) -> dict[str, Any]:
    """The metadata of a cell made from ``turn`` (with the taint when it ran after untrusted
    content, see :mod:`agent_kernel.cellmark`)."""
    return {KEY: cell_mark(turn.session_id, turn.turn, turn.untrusted)}


def answer_cell(turn: TurnSteps) -> TurnCell:
    """A markdown cell with the prompt (quoted) and the answer, as text: the notebook's
    markdown renderer (and its sanitiser) shows it like any markdown the person writes."""
    quoted = "\n".join("> " + line if line else ">" for line in redact(turn.prompt or "(no prompt)").splitlines())
    answer = redact(turn.answer) if turn.answer else "*(no answer)*"
    source = f"**Agent turn {turn.turn}** (session `{turn.session_name}`)\n\n{quoted}\n\n{answer}"
    return {"cell_type": "markdown", "metadata": mark(turn), "source": source}


def code_cell(turn: TurnSteps, step: Step) -> TurnCell:
    """A code cell, not run, with the step's code."""
    return {
        "cell_type": "code", "metadata": mark(turn), "source": redact(step.code),
        "execution_count": None, "outputs": [],
    }  # fmt: skip


def turn_cells(turn: TurnSteps) -> list[TurnCell]:
    """The turn as cells: the prompt and answer in markdown, then each successful step."""
    return [answer_cell(turn), *(code_cell(turn, step) for step in turn.steps)]
