"""Scripting concurrent sub-sessions: replies routed by the task each conversation began with."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agent_kernel.testing import Failure, call

Step = Any  # a Reply, or a function of the request body returning one


def opening(body: dict[str, Any]) -> str:
    """The prompt a conversation began with: the last text of its first message (context
    blocks, such as the previous session's summary, come before it)."""
    content = body["messages"][0]["content"]
    if isinstance(content, str):
        return content
    return [b["text"] for b in content if b.get("type") == "text"][-1]


def route(plan: dict[str, list[Step]]) -> Callable[[dict[str, Any]], Any]:
    """A responder: each conversation is answered by the plan of the first marker its
    opening prompt holds, one step per assistant message so far (the last step repeats)."""

    def respond(body: dict[str, Any]) -> Any:
        first = opening(body)
        step = sum(1 for m in body["messages"] if m["role"] == "assistant")
        for marker, steps in plan.items():
            if marker in first:
                item = steps[min(step, len(steps) - 1)]
                return item(body) if callable(item) else item
        return Failure(400, "invalid_request_error", f"no route for {first[:300]}")

    return respond


def results_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]


def spawned_ids(body: dict[str, Any]) -> list[str]:
    return [json.loads(r["content"])["id"] for r in results_of(body) if not r.get("is_error")]


def wait_for_spawned(body: dict[str, Any]) -> Any:
    return call("wait_for_sessions", ids=spawned_ids(body))


def report_wait(body: dict[str, Any]) -> Any:
    """Report what the last wait_for_sessions returned."""
    return call("report_result", result=results_of(body)[0]["content"])
