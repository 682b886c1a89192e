"""Inline completion for JupyterLab's editor: ``/agent-kernel/api/completion``.

``GET`` says whether completion is on (``AgentKernelServer.completion`` and a key: the
server's ``ANTHROPIC_API_KEY`` or the stored one, :mod:`agent_kernel.model.keys`) and with
which model; without a key a ``POST`` answers 400 with the sentence saying how to store one. ``POST`` takes the text of the cell up to the
cursor and after it, and the sources of the cells above, and streams the text to insert
at the cursor as it arrives: newline-delimited JSON, ``{"text": ...}`` for each piece,
then ``{"done": true, ...}``, or ``{"error": ...}`` when the model call failed, or one
``{"off": ...}`` line when completion is off. The JupyterLab extension cancels a request
by closing it (on the next keystroke); the model's stream is then closed at once.

The request to the model is cache-stable: a fixed system prompt, then the cells above
(marked for the prompt cache: they stay the same while the person types in one cell),
then the current cell with a cursor mark. Everything in it passes the redaction boundary
(:func:`agent_kernel.secrets.scrub`) before it leaves: the server knows the credentials of
its own environment and the shapes of well-known ones (a secret a kernel was told with
``%agent_secret`` lives in that kernel only).

The kernel's variable names are not sent: asking the kernel for them costs a message on
its shell channel, which waits behind a running cell, on every keystroke's request; the
cells above, which define those variables, are in the context already.

Each call is stored in ``model_calls`` with source ``completion`` (no session, no turn),
also a call cancelled mid-stream, with the tokens the API had reported by then; the rows
go through a write-behind queue after the answer has ended.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from agent_kernel.errors import MissingKeyError, ModelError
from agent_kernel.model.client import ModelClient, api_key, describe_api_error
from agent_kernel.model.usage import CallUsage, request_chars
from agent_kernel.secrets import scrub
from agent_kernel.server.handlers import _Handler, no_key
from agent_kernel.server.job_request import BadRequest
from agent_kernel.store.usage import record_completion

if TYPE_CHECKING:
    import duckdb

    from agent_kernel.model.shapes import ContentBlock, MessageParam, TextBlock
    from agent_kernel.server.shapes import CompletionLine, CompletionStatusJson

# Limits of what a request may send (400 past them).
MAX_BEFORE_CHARS = 50_000
MAX_AFTER_CHARS = 20_000
MAX_CELLS = 200
MAX_CELL_CHARS = 50_000
MAX_CELLS_CHARS = 400_000
MAX_LANGUAGE_CHARS = 40
_LANGUAGE = re.compile(r"^[A-Za-z0-9_+#.\- ]*$")
_FIELDS = {"before", "after", "cells_above", "language"}

# What reaches the model at most: the cell's text nearest the cursor, the nearest cells above.
BEFORE_CHARS = 6_000
AFTER_CHARS = 2_000
ABOVE_CHARS = 12_000

# Seconds a completion's model call may take in all (the editor has given up long before).
TIMEOUT_S = 30.0

CURSOR = "<CURSOR>"
SYSTEM_PROMPT = (
    "You complete code in a Jupyter notebook, as an editor's inline suggestion. The user "
    "message holds the notebook's cells above the current one, then the current cell with "
    f"{CURSOR} where the cursor is. Reply with only the text to insert at {CURSOR}: no "
    "explanation, no Markdown fence, nothing repeated from before or after the cursor. "
    "Complete the current statement or block, a few lines at most, in the cell's language "
    "and style. Reply with nothing when no completion is useful."
)


@dataclass(frozen=True)
class CompletionRequest:
    """What the editor sent: the cell's text before and after the cursor, the cells above."""

    before: str
    after: str
    cells_above: tuple[str, ...]
    language: str

    @classmethod
    def from_body(cls, body: Mapping[str, object]) -> CompletionRequest:
        """The request from a JSON body, or :class:`BadRequest` saying what to change."""
        unknown = set(body) - _FIELDS
        if unknown:
            raise BadRequest(f"Unknown field(s) {', '.join(sorted(unknown))}; send {', '.join(sorted(_FIELDS))}.")
        if "before" not in body:
            raise BadRequest("Give `before`: the cell's text up to the cursor.")
        before = _text(body["before"], "`before`", MAX_BEFORE_CHARS)
        after = _text(body.get("after", ""), "`after`", MAX_AFTER_CHARS)
        language = _text(body.get("language", "python"), "`language`", MAX_LANGUAGE_CHARS)
        if not _LANGUAGE.match(language):
            raise BadRequest(f"`language` is a language's name (letters, digits, + # . - _), not {language[:40]!r}.")
        cells = body.get("cells_above", [])
        if not isinstance(cells, list):
            raise BadRequest("`cells_above` must be a list of the cells' sources (strings).")
        if len(cells) > MAX_CELLS:
            raise BadRequest(f"`cells_above` has {len(cells):,} cells; send at most the {MAX_CELLS} nearest.")
        above = tuple(_text(cell, f"`cells_above[{i}]`", MAX_CELL_CHARS) for i, cell in enumerate(cells))
        total = sum(len(cell) for cell in above)
        if total > MAX_CELLS_CHARS:
            raise BadRequest(f"`cells_above` holds {total:,} characters; at most {MAX_CELLS_CHARS:,} are accepted.")
        return cls(before, after, above, language.strip() or "python")


def _text(value: object, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"{what} must be a string, not {type(value).__name__}.")
    if len(value) > limit:
        raise BadRequest(f"{what} is {len(value):,} characters long; at most {limit:,} are accepted.")
    if "\x00" in value:
        raise BadRequest(f"{what} holds a NUL character; send it without.")
    return value


def nearest_cells(cells: tuple[str, ...], budget: int) -> list[str]:
    """The cells nearest the current one (in notebook order) whose sources fit ``budget``
    characters; the farthest one that fits only in part keeps its end."""
    kept: list[str] = []
    left = budget
    for source in reversed(cells):
        if not source.strip():
            continue
        if len(source) > left:
            if left > 200:
                kept.append("…\n" + source[-left:])
            break
        kept.append(source)
        left -= len(source)
    return kept[::-1]


class CompletionParams(TypedDict):
    """The Messages API request of one completion: the keywords the SDK's ``create`` takes."""

    model: str
    max_tokens: int
    system: list[TextBlock]
    messages: list[MessageParam]


def model_request(request: CompletionRequest, *, model: str, max_tokens: int) -> CompletionParams:
    """The Messages API request for one completion (not yet scrubbed)."""
    content: list[ContentBlock] = []
    above = nearest_cells(request.cells_above, ABOVE_CHARS)
    if above:
        cells = "\n".join(f"<cell>\n{source}\n</cell>" for source in above)
        content.append({
            "type": "text", "text": f"<cells_above>\n{cells}\n</cells_above>", "cache_control": {"type": "ephemeral"},
        })  # fmt: skip
    before = request.before[-BEFORE_CHARS:]
    after = request.after[:AFTER_CHARS]
    current = f'<current_cell language="{request.language}">\n{before}{CURSOR}{after}\n</current_cell>'
    content.append({"type": "text", "text": current})
    return {
        "model": model,
        "max_tokens": max_tokens,
        "system": [{"type": "text", "text": SYSTEM_PROMPT}],
        "messages": [{"role": "user", "content": content}],
    }


class FenceFilter:
    """Drops a Markdown fence the model may put around its answer, as the text streams.

    The opening fence line is held until its newline arrives; at the end of each piece,
    text after the last newline that could be the start of a closing fence is held until
    the next piece says whether it is one."""

    def __init__(self) -> None:
        self._held = ""
        self._started = False

    def feed(self, text: str) -> str:
        held = self._held + text
        if not self._started:
            if held.lstrip().startswith("```") or (held.strip() and "```".startswith(held.strip())):
                if "\n" not in held:
                    self._held = held
                    return ""
                held = held.split("\n", 1)[1]
            elif not held.strip():
                self._held = held
                return ""
            self._started = True
        line_start = held.rfind("\n") + 1
        tail = held[line_start:]
        if tail and "```".startswith(tail.strip()) and tail.strip():
            self._held = tail
            return held[:line_start]
        self._held = ""
        return held

    def end(self) -> str:
        held, self._held = self._held, ""
        if held.strip().startswith("```"):
            return ""
        return held if self._started else held.lstrip()


@dataclass
class Streamed:
    """What one completion call used so far (its usage grows as the stream reports it)."""

    model: str
    usage: dict[str, int]
    stop_reason: str | None = None

    def call_usage(self) -> CallUsage:
        return CallUsage.of(self.model, self.usage)


async def stream_completion(client: Any, params: CompletionParams, streamed: Streamed) -> AsyncIterator[str]:
    """The completion's text as the model streams it; ``streamed`` keeps its usage.

    ``params`` are scrubbed here (the redaction boundary) before the SDK sends them."""
    scrubbed: CompletionParams = scrub(params)
    stream = await client.messages.create(**scrubbed, stream=True, timeout=TIMEOUT_S)
    async with stream:
        async for event in stream:
            if event.type == "message_start":
                streamed.usage.update(_usage(event.message.usage))
            elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                yield event.delta.text
            elif event.type == "message_delta":
                streamed.usage.update(_usage(event.usage))
                streamed.stop_reason = event.delta.stop_reason


def _usage(usage: Any) -> dict[str, int]:
    found = usage.model_dump(mode="json", exclude_none=True)
    return {name: value for name, value in found.items() if isinstance(value, int)}


class Completion:
    """The server's completion settings and its model client (one per server)."""

    def __init__(self, *, enabled: bool, model: str, max_tokens: int, http_client: Any = None) -> None:
        self.enabled = enabled
        self.model = model
        self.max_tokens = max_tokens
        # One retry at most: a suggestion that comes late is no use.
        self.client = ModelClient(max_retries=1, http_client=http_client)

    def off_reason(self) -> str | None:
        """Why completion is off now, or None when it is on."""
        if not self.enabled:
            return "Inline completion is turned off (AgentKernelServer.completion = False)."
        try:
            api_key()
        except MissingKeyError as exc:
            return f"Inline completion is off. {no_key(exc)}"
        return None

    def status(self) -> CompletionStatusJson:
        reason = self.off_reason()
        return {"enabled": reason is None, "model": self.model, "reason": reason}


class CompletionHandler(_Handler):
    _streaming: asyncio.Task[None] | None = None

    @property
    def completion(self) -> Completion:
        completion: Completion = self.agent.completion
        return completion

    @web.authenticated
    @authorized(action="read")
    async def get(self) -> None:
        self.reply(self.completion.status())

    @web.authenticated
    @authorized(action="execute")
    async def post(self) -> None:
        request = CompletionRequest.from_body(self.body())
        self.set_header("Content-Type", "application/x-ndjson")
        self.set_header("Cache-Control", "no-store")
        reason = self.completion.off_reason()
        if reason is not None and self.completion.enabled:  # no key: the request cannot be answered
            self.refuse(400, reason)
            return
        if reason is not None:
            off: CompletionLine = {"off": reason}
            self.finish(json.dumps(off) + "\n")
            return
        self._no_delay()
        params = model_request(request, model=self.completion.model, max_tokens=self.completion.max_tokens)
        streamed = Streamed(self.completion.model, {})
        started = time.perf_counter()
        self._streaming = asyncio.ensure_future(self._answer(params, streamed))
        try:
            await self._streaming
        except asyncio.CancelledError:  # the editor closed the request: the next keystroke
            streamed.stop_reason = streamed.stop_reason or "cancelled"
        duration_ms = (time.perf_counter() - started) * 1000
        if not self._finished:
            try:
                self.finish()  # before the usage is stored: the editor need not wait for the file
            except StreamClosedError:
                pass  # the editor had gone
        self._record(streamed, params, duration_ms)

    def _no_delay(self) -> None:
        """Send each streamed line at once: with Nagle's algorithm a small write waits for
        the client's delayed acknowledgement of the one before (tens of milliseconds)."""
        stream = getattr(self.request.connection, "stream", None)
        if stream is not None and hasattr(stream, "set_nodelay"):
            stream.set_nodelay(True)

    def on_connection_close(self) -> None:
        if self._streaming is not None:
            self._streaming.cancel()
        super().on_connection_close()

    async def _answer(self, params: CompletionParams, streamed: Streamed) -> None:
        import anthropic  # noqa: PLC0415 - the SDK loads on the first completion, not when the server starts

        fences = FenceFilter()
        try:
            async for piece in stream_completion(self.completion.client.client(), params, streamed):
                await self._line({"text": fences.feed(piece)})
            await self._line({"text": fences.end()})
            await self._line({"done": True, "model": streamed.model, "stop_reason": streamed.stop_reason})
        except anthropic.APIError as exc:
            await self._line({"error": describe_api_error(exc, streamed.model)})
        except ModelError as exc:
            await self._line({"error": str(exc)})
        except StreamClosedError:
            streamed.stop_reason = streamed.stop_reason or "cancelled"
        except Exception as exc:
            self.log.warning("agent-kernel: an inline completion failed", exc_info=True)
            await self._line({"error": f"The completion failed: {type(exc).__name__}: {exc}"})

    async def _line(self, data: CompletionLine) -> None:
        if data == {"text": ""}:
            return
        self.write(json.dumps(data) + "\n")
        await self.flush()

    def _record(self, streamed: Streamed, params: CompletionParams, duration_ms: float) -> None:
        """Queue the call's usage for the store's write-behind thread: opening the DuckDB
        file costs more than the completion's own work, and completions come in bursts
        while someone types (their rows are written together)."""
        if not streamed.usage:
            return  # the request never reached the model

        usage = streamed.call_usage()
        chars = request_chars(params)
        stop = streamed.stop_reason

        def write(con: duckdb.DuckDBPyConnection) -> None:
            record_completion(con, usage, duration_ms=duration_ms, request_chars=chars, stop_reason=stop)

        self.agent.usage_writes.submit(write)


def handlers(base: str = "/agent-kernel/api") -> list[tuple[str, type]]:
    return [(f"{base}/completion", CompletionHandler)]
