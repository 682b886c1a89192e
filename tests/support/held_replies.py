"""Scripted replies a browser test times against what the person does: held until the test
says, and kept for the turn while the person's typing asks for inline completions.

Typing in a notebook cell asks the model for an inline completion (the extension's
provider); those requests reach the same scripted model as the turn's, so a test that types
during a turn wraps the turn's replies with :func:`for_the_turn`.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from agent_kernel.testing import say


def completion(body: dict[str, Any]) -> bool:
    """Whether a request to the model is an inline completion's (not the turn's)."""
    return "<current_cell" in json.dumps(body["messages"][-1])


def turn_requests(model: Any, start: int) -> list[dict[str, Any]]:
    """The turn's requests to the model since ``start`` (inline completions left out)."""
    return [body for body in model.requests[start:] if not completion(body)]


def wait_requests(model: Any, start: int, count: int, timeout: float = 120) -> None:
    """Until the scripted model has had ``count`` requests of the turn since ``start``."""
    deadline = time.monotonic() + timeout
    while len(turn_requests(model, start)) < count:
        assert time.monotonic() < deadline, f"the model had {len(turn_requests(model, start))} of {count} requests"
        time.sleep(0.1)


def for_the_turn(model: Any, *replies: Any) -> list[Any]:
    """``replies`` for the turn's requests only: an inline completion gets an empty answer
    and leaves the turn's reply in its place."""

    def keeping(reply: Any) -> Any:
        def answer(body: dict[str, Any]) -> Any:
            if completion(body):
                model.script.appendleft(answer)
                return say("")
            return reply(body) if callable(reply) else reply

        return answer

    return [keeping(reply) for reply in replies]


def held(event: threading.Event, reply: Any) -> Any:
    """A scripted reply that waits for ``event`` first (the model is still thinking)."""

    def answer(_body: dict[str, Any]) -> Any:
        event.wait(240)
        return reply

    return answer


def type_at_end(page: Any, cell: Any, text: str) -> None:
    """Type ``text`` at the end of ``cell``'s source (a Playwright locator), as a person does."""
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+End")
    page.keyboard.type(text)
