"""``%agent_history`` shows the user's words, not the context the notebook added for the model."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_kernel.display.history import render_history


@dataclass
class Row:
    role: str
    content: list[dict[str, Any]]
    created_at: datetime = datetime(2025, 1, 7, 14, 3)
    turn: int = 1


def test_the_turn_context_is_not_shown_as_the_users_words():
    context = {
        "type": "text",
        "text": "<turn-context>\nCurrent date and time: Tuesday\nVariables in the kernel: none.\n</turn-context>",
    }
    shown = render_history(
        "s",
        [
            Row("user", [context, {"type": "text", "text": "load sales.csv"}]),
            Row("assistant", [{"type": "text", "text": "Loaded."}]),
        ],
    )
    assert "**You** (14:03:00, turn 1): load sales.csv" in shown and "**Agent**" in shown
    assert "turn-context" not in shown and "Current date" not in shown
