"""What a turn shows in its cell: a Stop button and a status line, streamed text, tool
cards, notices.

Everything but the Stop button is a plain display bundle (Markdown/HTML plus text) kept
up to date through display handles, so a saved or papermill-executed notebook shows the
transcript as it ended. Updates while text streams are throttled to
``updates_per_second``; Jupyter drops output above 1,000 messages a second.

The Stop button and the status line ("waiting for the model…", then the tokens and cost
so far) are shown first, before the turn reads its session or imports the SDK, so the
cell answers at once; the status line is blanked when the turn ends (the footer follows).
An unattended run (papermill, nbclient: no stdin) shows neither, so its saved notebook has
no empty outputs.

Outside IPython (a script calling ``Agent.run``) the same calls print plain text. So do
clients that draw no widgets and ignore display updates (``jupyter console``): they
would keep the first streamed words of an answer and a card's first state. A notebook
client says which cell it runs (``cellId`` in the request's metadata; nbclient sends no
stdin); any other client gets the answer printed as it streams, each card as a line,
until it renders the Stop button (a widget front end such as JupyterLab's console), and
is updated in place from the next paragraph on.
"""

from __future__ import annotations

import asyncio
import html
import json
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from IPython.display import display

from agent_kernel.display.cells_button import InsertCellsButton
from agent_kernel.display.footer import usd
from agent_kernel.display.presence import BUSY_CELL, notebook_cell, stdin_allowed
from agent_kernel.display.safe import clean_text, markdown_bundle, markdown_html
from agent_kernel.display.stop import stop_button
from agent_kernel.display.web import result_summary, sources_bundle
from agent_kernel.model.prices import price_for
from agent_kernel.model.shapes import ContentBlock

Bundle = dict[str, object]

WAITING_FOR_MODEL = "waiting for the model…"
RECEIVING = "receiving"
STOPPING = "stopping…"


@dataclass
class ToolCard:
    """One tool call as shown in the cell."""

    tool_use_id: str
    name: str
    tool_input: Any = None
    status: str = "receiving"  # receiving, running, waiting, ok, error, interrupted
    detail: str = ""
    duration_ms: float | None = None
    handle: Any = field(default=None, repr=False)
    started: float = field(default_factory=time.monotonic)


class Transcript:
    """The running cell's view of one turn."""

    def __init__(
        self,
        *,
        live: bool,
        updates_per_second: float = 15.0,
        failure_raised: bool = False,
        prices: Mapping[str, Any] | None = None,
    ) -> None:
        self.live = live
        self._prices = prices  # AgentKernel.prices: what the status line prices streamed tokens at
        self.interval = 1.0 / max(updates_per_second, 0.1)
        # The caller raises the line of a failed turn (an %agent cell), so it is not shown here.
        self.failure_raised = failure_raised
        self.updates = 0  # display updates sent (measured by tests)
        self._plain = not live or not _notebook_client()  # printed rather than displayed
        self._text = ""
        self._shown_text = ""
        self._text_handle: Any = None
        self._cards: dict[str, ToolCard] = {}
        self._last_update = 0.0
        self._pending: dict[int, tuple[Any, Callable[[], Bundle]]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._stop_widget: Any = None
        self._stop_handle: Any = None
        self._on_stop: Callable[[], None] | None = None
        self._stop_requested = False
        self._holds_cell = False  # the turn's cell is said busy after widget messages (presence.BUSY_CELL)
        self._segments: list[Any] = []
        self._thinking = ""  # the thinking block streaming now
        self._thinking_handle: Any = None
        self._status_handle: Any = None
        self._phase = WAITING_FOR_MODEL
        self._model = ""
        self._tokens = 0  # the turn's tokens and cost as of its last finished model call
        self._cost: float | None = None
        self._streamed_chars = 0  # of the model call streaming now

    # -- Stop button and status line -----------------------------------------------------

    def show_stop(self, on_stop: Callable[[], None]) -> None:
        """Show a Stop button and the status line (live front ends only); ``on_stop`` runs
        when Stop is clicked.

        Called again once the turn can be stopped, with what stops it: a click that came
        before is passed on at once.
        """
        self._on_stop = on_stop
        if self._stop_requested:
            on_stop()
            return
        if not self.live or self._stop_widget is not None:
            return
        if not stdin_allowed():
            # An unattended run (papermill, nbclient, the scheduler): nobody watches the
            # line or clicks the button, and the two blanked outputs would stay in the
            # saved notebook.
            return
        self._holds_cell = BUSY_CELL.hold()
        self._status_handle = self._display(_status_bundle(self._phase))
        self._stop_widget = stop_button()
        self._stop_widget.on_stop(self._stop_clicked)
        bundle, _ = self._stop_widget._repr_mimebundle_()
        bundle.pop("text/plain", None)  # clients that draw no widgets show nothing for it
        self._stop_handle = self._display(bundle)

    def _stop_clicked(self) -> None:
        if self._stop_requested:
            return
        self._stop_requested = True
        self.status(STOPPING)
        if self._on_stop is not None:
            self._on_stop()

    def hide_stop(self) -> None:
        if self._stop_widget is not None:
            if self._holds_cell:
                BUSY_CELL.release()
            self._stop_widget.close()
            self._stop_widget = None
            if self._stop_handle is not None:
                self._stop_handle.update({"text/plain": ""}, raw=True)
        if self._status_handle is not None:
            self._pending.pop(id(self._status_handle), None)
            self._status_handle.update({"text/plain": ""}, raw=True)
            self._status_handle = None

    def status(self, phase: str) -> None:
        """What the turn is doing now, on the status line (with the tokens and cost so far);
        once Stop was clicked it says so until the turn ends."""
        if phase == self._phase or (self._stop_requested and phase != STOPPING):
            return
        self._phase = phase
        # Phases can change several times in a round trip; the line shows them at the
        # display rate (Stopping at once: the person just clicked).
        self._status_changed(at_once=phase == STOPPING)

    def usage(self, model: str, tokens: int, cost: float | None) -> None:
        """The turn's figures after a model call ended (what the status line counts from)."""
        self._model, self._tokens, self._cost = model, tokens, cost
        self._streamed_chars = 0
        if self._phase == RECEIVING:
            self._phase = "working…"
        self._status_changed()

    def _streamed(self, chars: int) -> None:
        self._streamed_chars += chars
        if self._phase != RECEIVING and not self._stop_requested:
            self.status(RECEIVING)
        else:
            self._status_changed()

    def _status_changed(self, *, at_once: bool = False) -> None:
        handle = self._status_handle
        if handle is None:
            return
        if at_once:
            self._update(handle, self._status_snapshot())
        else:
            self._throttled(handle, self._status_snapshot)

    def _status_snapshot(self) -> Bundle:
        streamed = self._streamed_chars // 4  # about four characters a token
        tokens = self._tokens + streamed
        cost = self._cost
        if streamed and self._model:  # the call streaming now, at its model's output price
            price = price_for(self._model, self._prices)
            if price is not None:
                cost = (cost or 0.0) + streamed * price.output / 1_000_000
        parts = [self._model] if self._model else []
        parts.append(self._phase)
        if tokens:
            parts.append(f"{tokens:,} tokens")
        if cost is not None:
            parts.append(usd(cost))
        return _status_bundle(" · ".join(parts))

    # -- streamed text -------------------------------------------------------------------

    def text(self, delta: str) -> None:
        """Append streamed text to the current paragraph."""
        if not self._text:
            self._refresh_mode()
        self._text += delta
        self._streamed(len(delta))
        if self._plain:
            sys.stdout.write(delta)
            sys.stdout.flush()
            return
        if self._text_handle is None:
            self._text_handle = self._display(_text_bundle(self._text))
            self._shown_text = self._text
            self._segments.append(self._text_handle)
            return
        self._throttled(self._text_handle, self._text_snapshot)

    def _text_snapshot(self) -> Bundle:
        self._shown_text = self._text
        return _text_bundle(self._text)

    def end_text(self) -> None:
        """Finish the current paragraph; the next text starts a new one below what follows."""
        if self._plain:
            if self._text and not self._text.endswith("\n"):
                sys.stdout.write("\n")  # what follows (a card, the footer) starts a new line
                sys.stdout.flush()
        elif self._text_handle is not None:
            if self._text != self._shown_text:
                self._update(self._text_handle, self._text_snapshot())
            else:
                self._pending.pop(id(self._text_handle), None)
        elif self._text:
            self._segments.append(self._display(_text_bundle(self._text)))
        self._text, self._shown_text, self._text_handle = "", "", None

    @property
    def prints(self) -> bool:
        """The client prints what the turn shows as text (a terminal: ``jupyter console``, a
        script) rather than rendering it: a chart is then its text rendering and a saved image."""
        self._refresh_mode()
        return self._plain

    def _refresh_mode(self) -> None:
        """A client printed to so far that has rendered the Stop button applies updates."""
        if self._plain and self.live and self._stop_widget is not None and self._stop_widget.rendered:
            self._plain = False

    # -- thinking ------------------------------------------------------------------------

    def thinking(self, delta: str) -> None:
        """Append streamed thinking to a collapsed "Thinking" section (shown as text, never markup)."""
        if not self._thinking:
            self._refresh_mode()
        self._thinking += delta
        self._streamed(len(delta))
        if self._plain:
            return  # one line when the block ends
        if self._thinking_handle is None:
            self.end_text()
            self._thinking_handle = self._display(_thinking_bundle(self._thinking, done=False))
            self._segments.append(self._thinking_handle)
            return
        self._throttled(self._thinking_handle, lambda: _thinking_bundle(self._thinking, done=False))

    def end_thinking(self, *, redacted: bool = False) -> None:
        """The thinking block ended (``redacted``: the API sent it encrypted, with no text)."""
        bundle = _thinking_bundle(self._thinking, done=True, redacted=redacted)
        if self._plain:
            print_line(str(bundle["text/plain"]))
        elif self._thinking_handle is not None:
            self._update(self._thinking_handle, bundle)
        else:
            self._segments.append(self._display(bundle))
        self._thinking, self._thinking_handle = "", None

    def retract(self) -> None:
        """Blank out the paragraphs of a model call that failed and will be retried."""
        if self._thinking_handle is not None:
            self._pending.pop(id(self._thinking_handle), None)
        self._thinking, self._thinking_handle = "", None
        if self._text_handle is not None:
            self._pending.pop(id(self._text_handle), None)
        elif self._plain and self._text:
            sys.stdout.write("\n")
        self._text, self._shown_text, self._text_handle = "", "", None
        for handle in self._segments:
            self._update(handle, {"text/plain": ""})
        self._segments = []
        self._streamed_chars = 0

    def new_attempt(self) -> None:
        """Start counting paragraphs for a (possibly retried) model call."""
        self._segments = []
        self.status(WAITING_FOR_MODEL)

    # -- tool cards ----------------------------------------------------------------------

    def tool_started(self, tool_use_id: str, name: str) -> None:
        """A tool call begins to stream; its card appears once its input takes a while."""
        self.end_text()
        self._refresh_mode()
        self._cards[tool_use_id] = ToolCard(tool_use_id, name)

    def tool_input(self, tool_use_id: str, partial: Any) -> None:
        card = self._cards.get(tool_use_id)
        if card is None or self._plain:
            return
        card.tool_input = partial
        if card.handle is None:
            if time.monotonic() - card.started >= self.interval:
                self._show_card(card)
            return
        self._throttled(card.handle, lambda: _card_bundle(card))

    def _show_card(self, card: ToolCard) -> None:
        card.handle = self._display(_card_bundle(card))
        self._segments.append(card.handle)

    def _render(self, card: ToolCard) -> None:
        if card.handle is None:
            self._show_card(card)
        else:
            self._update(card.handle, _card_bundle(card))

    def tool_running(self, tool_use_id: str, name: str, tool_input: Any) -> None:
        card = self._cards.get(tool_use_id)
        if card is None:
            self.tool_started(tool_use_id, name)
            card = self._cards[tool_use_id]
        card.tool_input, card.status = tool_input, "running"
        self.status(f"running {name}…")
        if self._plain:
            print_line(f"[{name}] {_input_summary(name, tool_input)}")
        else:
            self._render(card)
        # A tool may block the event loop (code running in the kernel), and with it the
        # timer of throttled updates: what the cell shows while it runs goes out now.
        self._flush_pending()

    def tool_waiting(self, tool_use_id: str, waiting: bool, *, why: str = "waiting for you") -> None:
        """Mark the call as waiting (for the person: a form, a question, an approval; or
        for another session's code, ``why``) or not."""
        card = self._cards.get(tool_use_id)
        if card is None or card.status not in ("running", "waiting"):
            return
        card.status = "waiting" if waiting else "running"
        card.detail = why if waiting else ""
        self.status(f"{why}…" if waiting else f"running {card.name}…")
        if not self._plain:
            self._render(card)

    def tool_finished(
        self, tool_use_id: str, *, status: str, detail: str = "", duration_ms: float | None = None
    ) -> None:
        card = self._cards.get(tool_use_id)
        if card is None:
            return
        card.status, card.detail, card.duration_ms = status, detail, duration_ms
        if self._plain:
            timing = f" · {duration_ms:,.0f} ms" if duration_ms is not None else ""
            print_line(f"[{card.name}] {status}{timing} {detail}".rstrip())
        elif card.handle is None:
            self._show_card(card)
        else:  # a quick call's card goes from running to done within one display interval
            self._throttled(card.handle, lambda: _card_bundle(card))

    # -- the API's server tools (web search, web fetch) ------------------------------------

    def server_tool(self, tool_use_id: str, name: str, tool_input: Any) -> None:
        """The API started a server tool (its input is complete); its result follows."""
        self.tool_running(tool_use_id, name, tool_input)

    def server_result(self, block: ContentBlock) -> None:
        """A server tool's result block: the card says what came back."""
        status, detail = result_summary(block)
        self.tool_finished(str(block.get("tool_use_id")), status=status, detail=detail)

    def sources(self, sources: list[dict[str, str]]) -> None:
        """The pages the answer cites, as links under it."""
        if not sources:
            return
        self.end_text()
        bundle = sources_bundle(sources)
        if self._plain:
            print_line(str(bundle["text/plain"]))
            return
        self._display(bundle)

    # -- notices -------------------------------------------------------------------------

    def notice(self, text: str, *, kind: str = "info", usage: Mapping[str, object] | None = None) -> None:
        """One line under the transcript: an error, a stop, a limit, the footer (with the
        turn's ``usage`` in its structured part)."""
        self.end_text()
        self._refresh_mode()
        if self._plain:
            print_line(text, sys.stderr if kind == "error" else sys.stdout)
            return
        self._display(_notice_bundle(text, kind, usage))

    def offer_cells(self, action: Callable[[], Awaitable[str]]) -> Any:
        """Show the "Insert as cells" button under the footer (see :mod:`.cells_button`);
        ``action`` inserts the turn's cells and returns the line the button shows."""
        if not self.live or self._plain:
            return None
        button = InsertCellsButton(action)
        bundle, _ = button._repr_mimebundle_()
        bundle.pop("text/plain", None)  # clients that draw no widgets show nothing for it
        self._display(bundle)
        return button

    def failed(self, line: str, *, kind: str = "error") -> None:
        """The line saying why the turn failed; shown here unless the caller raises it."""
        if self.failure_raised:
            self.end_text()
        else:
            self.notice(line, kind=kind)

    def close(self) -> None:
        """Flush what is pending (the turn has ended; :meth:`settle` follows)."""
        if self._thinking_handle is not None or self._thinking:
            self.end_thinking()  # a stream cut off mid-thought
        self.end_text()
        self._flush_pending()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def settle(self, *, wait: bool = True) -> None:
        """The turn has ended: flush what is pending, remove the Stop button and the status line.

        (``wait`` is part of :class:`~agent_kernel.display.view.TurnView`; nothing here waits.)
        """
        self.close()
        self.hide_stop()

    # -- display plumbing ----------------------------------------------------------------

    def _display(self, obj: Any, *, raw: bool = True, display_id: bool = True) -> Any:
        self.updates += 1
        self._last_update = time.monotonic()
        return display(obj, raw=raw, display_id=display_id)

    def _update(self, handle: Any, bundle: Bundle) -> None:
        self._pending.pop(id(handle), None)
        self.updates += 1
        self._last_update = time.monotonic()
        handle.update(bundle, raw=True)

    def _throttled(self, handle: Any, make: Callable[[], Bundle]) -> None:
        now = time.monotonic()
        wait = self._last_update + self.interval - now
        if wait <= 0:
            self._update(handle, make())
            return
        self._pending[id(handle)] = (handle, make)
        if self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            self._timer = loop.call_later(wait, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._flush_pending()

    def _flush_pending(self) -> None:
        pending, self._pending = self._pending, {}
        for handle, make in pending.values():
            self._update(handle, make())


def print_line(text: str, stream: Any = None) -> None:
    """Print ``text`` and its newline in one write: ipykernel's stream may send a message
    between two writes, and a client then sees the newline arrive on its own, after what
    followed."""
    out = sys.stdout if stream is None else stream
    out.write(text + "\n")
    out.flush()


def _notebook_client() -> bool:
    """Whether the running cell's client applies display updates: a notebook front end
    (it says which cell runs) or an unattended runner (nbclient, papermill)."""
    return notebook_cell() or not stdin_allowed()


# -- bundles ------------------------------------------------------------------------------

# Each output of a turn also carries its part as data, for the JupyterLab extension's
# renderer (tool cards that open, status icons, usage); other front ends show the HTML.
TURN_MIME = "application/vnd.agent-kernel.turn+json"
_TURN_VERSION = 1

_ICONS = {
    "receiving": "…",
    "running": "⏳",
    "waiting": "⏸",
    "ok": "✓",
    "error": "✗",
    "interrupted": "■",
    "skipped": "–",
}
_COLORS = {"ok": "#1a7f37", "error": "#cf222e", "interrupted": "#9a6700", "skipped": "#57606a"}


def _text_bundle(text: str) -> Bundle:
    # The renderer shows ``html`` (made here by the rules of .safe) through JupyterLab's
    # sanitiser too; it never renders the model's Markdown itself.
    part = {"version": _TURN_VERSION, "part": "text", "text": clean_text(text), "html": markdown_html(text)}
    return {**markdown_bundle(text), TURN_MIME: part}


def _card_bundle(card: ToolCard) -> Bundle:
    icon = _ICONS.get(card.status, "")
    summary = _input_summary(card.name, card.tool_input)
    timing = f" · {card.duration_ms:,.0f} ms" if card.duration_ms is not None else ""
    detail = f" · {card.detail}" if card.detail else ""
    plain = f"{icon} {card.name}: {summary}{timing}{detail}"
    color = _COLORS.get(card.status, "#57606a")
    body = _input_body(card.name, card.tool_input)
    head = (
        f'<span style="color:{color}">{icon}</span> <code>{html.escape(card.name)}</code> '
        f'<span style="color:#57606a">{html.escape(summary)}{timing}'
        f"{html.escape(detail)}</span>"
    )
    markup = (
        f'<details class="agent-kernel-tool" style="margin:2px 0;font-size:0.92em">'
        f"<summary>{head}</summary>{body}</details>"
        if body
        else f'<div class="agent-kernel-tool" style="margin:2px 0;font-size:0.92em">{head}</div>'
    )
    part = {
        "version": _TURN_VERSION,
        "part": "tool",
        "tool": {
            "name": card.name,
            "status": card.status,
            "summary": summary,
            "input": _input_text(card.name, card.tool_input),
            "duration_ms": card.duration_ms,
            "detail": card.detail,
        },
    }
    return {"text/html": markup, "text/plain": plain, TURN_MIME: part}


def _thinking_bundle(text: str, *, done: bool, redacted: bool = False) -> Bundle:
    """A collapsed section: the summary says how much, the thinking is inside (escaped)."""
    if redacted:
        summary = "Thinking (encrypted by the API, not shown)"
    elif done:
        words = len(text.split())
        summary = f"Thinking ({words:,} word{'s' if words != 1 else ''})"
    else:
        summary = "Thinking…"
    body = f'<div style="white-space:pre-wrap;margin:4px 0 4px 1.2em">{html.escape(text)}</div>' if text else ""
    markup = (
        '<details class="agent-kernel-thinking" style="margin:2px 0;font-size:0.92em;color:#57606a">'
        f"<summary>{html.escape(summary)}</summary>{body}</details>"
    )
    return {"text/html": markup, "text/plain": f"▸ {summary}"}


def _status_bundle(text: str) -> Bundle:
    """The status line: HTML and the turn part only, so clients that print outputs once
    (jupyter console) print nothing for it."""
    markup = f'<div class="agent-kernel-status" style="color:#57606a;font-size:0.92em">{html.escape(text)}</div>'
    return {
        "text/html": markup,
        TURN_MIME: {"version": _TURN_VERSION, "part": "notice", "level": "muted", "text": text},
    }


def _notice_bundle(text: str, kind: str, usage: Mapping[str, object] | None = None) -> Bundle:
    color = {"error": "#cf222e", "warning": "#9a6700", "muted": "#57606a"}.get(kind, "#0969da")
    markup = f'<div class="agent-kernel-{kind}" style="color:{color};font-size:0.92em">{html.escape(text)}</div>'
    part: dict[str, object] = {"version": _TURN_VERSION, "part": "notice", "level": kind, "text": text}
    if usage:
        part["usage"] = usage
    return {"text/html": markup, "text/plain": text, TURN_MIME: part}


# What a card's title is made of, first found first: a tool's input names what it works on
# (a title, a question, a query, a key...); an action or operation goes before it.
_TITLE_KEYS = (
    "title", "question", "name", "query", "sql", "url", "task", "prompt", "message", "text",
    "content", "key", "prefix", "names", "ids", "id", "result", "at", "session", "notebook",
)  # fmt: skip
_VERB_KEYS = ("action", "operation")
SUMMARY_CHARS = 90


def _input_summary(name: str, tool_input: Any) -> str:
    """A card's title: what the call works on, in words, never the input as JSON."""
    if not isinstance(tool_input, dict) or not tool_input:
        return ""
    if name == "run_code" and isinstance(tool_input.get("code"), str):
        lines = [line for line in tool_input["code"].splitlines() if line.strip()]
        first = lines[0].strip() if lines else ""
        more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
        return _clip(first, 70) + more
    if name == "render_blocks":
        return _blocks_summary(tool_input)
    verb = next((v for k in _VERB_KEYS if isinstance(v := tool_input.get(k), str) and v), "")
    subject = next((_words(tool_input[k]) for k in _TITLE_KEYS if _words(tool_input.get(k))), "")
    if not subject:
        subject = ", ".join(
            f"{key}: {_words(value)}" for key, value in tool_input.items()
            if key not in _VERB_KEYS and _words(value)
        )  # fmt: skip
    return _clip(" ".join(part for part in (verb, subject) if part), SUMMARY_CHARS)


def _blocks_summary(tool_input: dict[str, Any]) -> str:
    """render_blocks: its title and the kinds of its blocks ("Revenue · table, chart")."""
    blocks = tool_input.get("blocks")
    kinds: list[str] = []
    if isinstance(blocks, list):
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if isinstance(kind, str) and kind not in kinds:
                kinds.append(kind)
    title = _words(tool_input.get("title"))
    shown = ", ".join(kinds) if kinds else ""
    return _clip(" · ".join(part for part in (title, shown) if part), SUMMARY_CHARS)


def _words(value: Any) -> str:
    """A value as a few words on one line ("" for nothing worth showing)."""
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, bool) or value is None:
        return "yes" if value else ""
    if isinstance(value, (int, float)):
        return f"{value:,}"
    if isinstance(value, list):
        items = [_words(item) for item in value if isinstance(item, (str, int, float)) and not isinstance(item, bool)]
        if items and len(items) == len(value):
            return ", ".join(items)
        return f"{len(value):,} item{'s' if len(value) != 1 else ''}" if value else ""
    if isinstance(value, dict):
        return f"{len(value):,} field{'s' if len(value) != 1 else ''}" if value else ""
    return ""


def _input_text(name: str, tool_input: Any) -> str:
    """What a card shows when it opens: run_code's code, else the input as JSON."""
    if not isinstance(tool_input, dict) or not tool_input:
        return ""
    code = tool_input.get("code")
    if name == "run_code" and isinstance(code, str):
        return code
    return json.dumps(tool_input, ensure_ascii=False, indent=2, default=str)


def _input_body(name: str, tool_input: Any) -> str:
    text = _input_text(name, tool_input)
    if not text:
        return ""
    return f'<pre style="margin:4px 0 4px 1.2em;white-space:pre-wrap">{html.escape(text)}</pre>'


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
