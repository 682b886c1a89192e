"""A sub-session as its parent's cell shows it: one collapsible section, kept up to date.

The section (an HTML ``<details>`` behind a display handle, so a saved or papermill
notebook keeps it as it ended) says the child's task, its state, each tool call and,
once it has finished, its result or error. All of it is the model's text, so all of it is
escaped. Without a front end (a script, a terminal) each event is one printed line
prefixed with the child's name.

:class:`SubSessionView` stands in for the child's :class:`~.transcript.Transcript`: the
child's turn, its model stream and its tools call the same methods on it.
"""

from __future__ import annotations

import asyncio
import html
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from IPython.display import display

from agent_kernel.display.transcript import _ICONS, _input_summary, print_line
from agent_kernel.model.shapes import ContentBlock

__all__ = ["SubSessionView"]

_STATE_COLORS = {
    "completed": "#1a7f37", "error": "#cf222e", "token_limit_reached": "#9a6700",
    "waiting_for_input": "#0969da", "running": "#57606a",
}  # fmt: skip
TASK_CHARS = 300
TEXT_CHARS = 600
RESULT_CHARS = 2_000


@dataclass
class _Call:
    name: str
    summary: str
    status: str = "running"
    detail: str = ""


class SubSessionView:
    """The section of one sub-session in its parent's cell."""

    def __init__(self, name: str, task: str, *, live: bool, updates_per_second: float = 4.0) -> None:
        self.live = live
        self.name = name
        self.task = task
        self.state = "running"
        self.result: str | None = None
        self.error: str | None = None
        self.updates = 0
        self.interval = 1.0 / max(updates_per_second, 0.1)
        self._calls: dict[str, _Call] = {}
        self._text = ""  # the paragraph streaming now
        self._said = ""  # the last finished paragraph
        self._handle: Any = None
        self._last_update = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._print(f"started: {_clip(task, TASK_CHARS)}")
        if live:
            self._handle = display(self.bundle(), raw=True, display_id=True)
            self.updates += 1

    # -- what the child's turn reports -----------------------------------------------------

    def text(self, delta: str) -> None:
        self._text += delta
        self._changed()

    def end_text(self) -> None:
        if self._text.strip():
            self._said = self._text
            self._print(_clip(" ".join(self._text.split()), TEXT_CHARS))
        self._text = ""
        self._changed()

    def thinking(self, delta: str) -> None:
        """Thinking is not shown in the section (the child's stored conversation keeps it)."""

    def end_thinking(self, *, redacted: bool = False) -> None:
        """See :meth:`thinking`."""

    def retract(self) -> None:
        self._text = ""

    def new_attempt(self) -> None:
        """A model call starts (again); nothing to undo in the section."""

    def tool_started(self, tool_use_id: str, name: str) -> None:
        self.end_text()

    def tool_input(self, tool_use_id: str, partial: Any) -> None:
        """Inputs are shown once complete (tool_running)."""

    def tool_running(self, tool_use_id: str, name: str, tool_input: Any) -> None:
        self.end_text()
        self._calls[tool_use_id] = _Call(name, _input_summary(name, tool_input))
        self._print(f"[{name}] {self._calls[tool_use_id].summary}")
        self._changed(now=True)

    def tool_waiting(self, tool_use_id: str, waiting: bool, *, why: str = "waiting for you") -> None:
        call = self._calls.get(tool_use_id)
        if call is None:
            return
        call.status, call.detail = ("waiting", why) if waiting else ("running", "")
        if waiting:
            self._print(f"[{call.name}] {why}")
        self._changed(now=True)

    def tool_finished(
        self, tool_use_id: str, *, status: str, detail: str = "", duration_ms: float | None = None
    ) -> None:
        call = self._calls.get(tool_use_id)
        if call is None:
            return
        call.status, call.detail = status, detail
        self._changed(now=True)

    def server_tool(self, tool_use_id: str, name: str, tool_input: Any) -> None:
        self.tool_running(tool_use_id, name, tool_input)

    def server_result(self, block: ContentBlock) -> None:
        self.tool_finished(str(block.get("tool_use_id")), status="ok")

    def sources(self, sources: list[dict[str, str]]) -> None:
        """Cited pages stay in the child's stored conversation."""

    def notice(self, text: str, *, kind: str = "info", usage: Mapping[str, object] | None = None) -> None:
        if kind in ("error", "warning"):
            self._print(text)

    def failed(self, line: str, *, kind: str = "error") -> None:
        """How the child's turn failed is said by :meth:`finished`."""

    def usage(self, model: str, tokens: int, cost: float | None) -> None:
        """The parent's status line counts the tree's calls; the section shows none."""

    def show_stop(self, on_stop: Any) -> None:
        """The parent's Stop button stops the child too."""

    def hide_stop(self) -> None:
        """See :meth:`show_stop`."""

    def close(self) -> None:
        self.end_text()

    async def settle(self, *, wait: bool = True) -> None:
        self.close()

    # -- the section -----------------------------------------------------------------------

    def set_state(self, state: str) -> None:
        """The child's session state (running, waiting_for_input)."""
        self.state = state
        self._changed(now=True)

    def finished(self, status: str, *, result: str | None = None, error: str | None = None) -> None:
        """The child ended: ``status`` as ``wait_for_sessions`` reports it."""
        self.end_text()
        self.state, self.result, self.error = status, result, error
        what = error if error else _clip(" ".join((result or "").split()), RESULT_CHARS)
        self._print(f"{status}: {what}" if what else status)
        self._changed(now=True)

    def bundle(self) -> dict[str, object]:
        calls = list(self._calls.values())
        icon = {"completed": "✓", "error": "✗", "token_limit_reached": "■"}.get(self.state, "⏳")
        waiting = any(c.status == "waiting" for c in calls)
        state = "waiting" if waiting and self.state == "running" else self.state
        head = f"{icon} sub-session {self.name} · {state} · {len(calls)} tool call{'s' if len(calls) != 1 else ''}"
        lines = [head, f"  task: {_clip(self.task, TASK_CHARS)}"]
        lines += [
            f"  {_ICONS.get(c.status, '')} {c.name}: {c.summary}" + (f" · {c.detail}" if c.detail else "")
            for c in calls
        ]
        said = self._text or self._said
        if said.strip() and self.state in ("running", "waiting_for_input"):
            lines.append(f"  {_clip(' '.join(said.split()), TEXT_CHARS)}")
        if self.result is not None:
            lines.append(f"  result: {_clip(self.result, RESULT_CHARS)}")
        if self.error is not None:
            lines.append(f"  error: {self.error}")
        return {"text/html": self._html(head, calls, said), "text/plain": "\n".join(lines)}

    def _html(self, head: str, calls: list[_Call], said: str) -> str:
        color = _STATE_COLORS.get(self.state, "#57606a")
        items = "".join(
            f"<li><code>{html.escape(c.name)}</code> {_ICONS.get(c.status, '')} "
            f'<span style="color:#57606a">{html.escape(c.summary)}'
            f"{html.escape(' · ' + c.detail) if c.detail else ''}</span></li>"
            for c in calls
        )
        parts = [f'<div style="color:#57606a">Task: {html.escape(_clip(self.task, TASK_CHARS))}</div>']
        if items:
            parts.append(f'<ul style="margin:2px 0;padding-left:1.4em">{items}</ul>')
        if said.strip() and self.state in ("running", "waiting_for_input"):
            parts.append(f'<div style="white-space:pre-wrap">{html.escape(_clip(said, TEXT_CHARS))}</div>')
        if self.result is not None:
            parts.append(
                f'<div style="white-space:pre-wrap"><b>Result:</b> {html.escape(_clip(self.result, RESULT_CHARS))}</div>'
            )
        if self.error is not None:
            parts.append(f'<div style="color:#cf222e"><b>Error:</b> {html.escape(self.error)}</div>')
        is_open = " open" if self.state not in ("completed", "error", "token_limit_reached") else ""
        return (
            f'<details class="agent-kernel-subsession"{is_open} style="margin:4px 0;padding:2px 8px;'
            f'border-left:3px solid {color};font-size:0.92em">'
            f'<summary style="color:{color}">{html.escape(head)}</summary>{"".join(parts)}</details>'
        )

    # -- plumbing --------------------------------------------------------------------------

    def _print(self, line: str) -> None:
        if not self.live:
            print_line(f"  ↳ {self.name}: {line}")

    def _changed(self, *, now: bool = False) -> None:
        if self._handle is None:
            return
        wait = self._last_update + self.interval - time.monotonic()
        if now or wait <= 0:
            self._update()
            return
        if self._timer is None:
            try:
                self._timer = asyncio.get_running_loop().call_later(wait, self._update)
            except RuntimeError:
                pass

    def _update(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._last_update = time.monotonic()
        self.updates += 1
        self._handle.update(self.bundle(), raw=True)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
