"""The model at the other end of ``ANTHROPIC_BASE_URL``, through the official SDK.

The SDK streams, retries 408/409/429/5xx/529 before a stream starts, and times out. What
it does not do is retry an error that arrives *inside* a stream (an ``overloaded_error``
event after a 200 response); :meth:`ModelClient.stream` retries that itself, a bounded
number of times. Errors a retry cannot fix become a :class:`~agent_kernel.errors.ModelError`
whose message is one line saying what happened and what to do.

``anthropic`` is imported on the first call, never when the extension loads.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import weakref
from collections.abc import Callable
from copy import deepcopy
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, Union, cast

from jiter import from_json

from agent_kernel import redaction, secrets
from agent_kernel.errors import MissingKeyError, ModelError
from agent_kernel.model import as_sent, caching, conversation
from agent_kernel.model.keys import UnusableKey, find_key
from agent_kernel.model.shapes import ContentBlock, RequestParams

if TYPE_CHECKING:
    import ssl

    from anthropic import DefaultAsyncHttpxClient
    from anthropic.types import Message

    from agent_kernel.redaction import Redactor

# The SDK (and httpx2 under it) is imported inside the functions that call the API: it takes
# over a second, and this module is imported where no call is made (``api_key`` in the magics,
# the server and the scheduler).

# The SDK's async HTTP client, or a function making one for each event loop (what
# ``Agent(http_client=...)`` takes; see :class:`ModelClient`).
HttpClient = Union["DefaultAsyncHttpxClient", Callable[[], "DefaultAsyncHttpxClient"]]

_RETRYABLE_STREAM_ERRORS = {"overloaded_error", "api_error"}
# How the API words a 400 about the prompt's length ("prompt is too long: 215000 tokens >
# 200000 maximum", "input length and `max_tokens` exceed context limit: ...").
_PROMPT_TOO_LONG = re.compile(
    r"prompt is too long|exceeds? (the )?context (limit|window)|context (window|length) exceeded|too many (input )?tokens",
    re.IGNORECASE,
)

_Identity = tuple[str | None, ...]  # what a client was made with: key, token, base URL
_CLOSING: set[asyncio.Task[None]] = set()  # replaced clients being closed (kept from the GC)


class StreamView(Protocol):
    """Where a streaming response is shown as it arrives."""

    def text(self, delta: str) -> None: ...
    def end_text(self) -> None: ...
    def thinking(self, delta: str) -> None: ...
    def end_thinking(self, *, redacted: bool = False) -> None: ...
    def tool_started(self, tool_use_id: str, name: str) -> None: ...
    def tool_input(self, tool_use_id: str, partial: object) -> None: ...
    def server_tool(self, tool_use_id: str, name: str, tool_input: object) -> None: ...
    def server_result(self, block: ContentBlock) -> None: ...
    def new_attempt(self) -> None: ...
    def retract(self) -> None: ...
    def notice(self, text: str, *, kind: str = "info") -> None: ...


_SSL_CONTEXT: tuple[tuple[str | None, ...], ssl.SSLContext] | None = None
_SSL_ENVIRONMENT = ("SSL_CERT_FILE", "SSL_CERT_DIR")  # what httpx reads when it makes one


def ssl_context() -> ssl.SSLContext:
    """The SSL context httpx would make for the SDK's client, made once and shared.

    Loading the certificate bundle takes tens of milliseconds, and a client is made for each
    event loop (every ``Agent.run``) and for the first turn; one context serves them all
    (it is made again when the variables that choose the certificates change)."""
    global _SSL_CONTEXT
    key = tuple(os.environ.get(name) for name in _SSL_ENVIRONMENT)
    if _SSL_CONTEXT is None or _SSL_CONTEXT[0] != key:
        import httpx2  # noqa: PLC0415 - heavy: the SDK's, imported with it (see above)

        _SSL_CONTEXT = (key, httpx2.create_ssl_context())
    return _SSL_CONTEXT[1]


class ModelClient:
    """An ``AsyncAnthropic`` client for each event loop that makes model calls.

    The SDK's pooled keep-alive connections belong to the loop that opened them. A
    connection left over from an earlier loop (an earlier ``asyncio.run``) fails on its
    first read after the request went out, and the SDK then sends the request again:
    a duplicate, billed call. So each running loop gets its own client, dropped with
    the loop; :meth:`aclose` closes the current loop's client before its loop ends.

    ``http_client`` is what the SDK sends requests through (``AsyncAnthropic(http_client=...)``):
    a function returning a new async client of the SDK's httpx package (for example
    ``anthropic.DefaultAsyncHttpxClient``), called for each loop, or one such client, which
    its owner closes (so give it only where one loop makes the calls). Tests pass
    :meth:`agent_kernel.testing.ScriptedModel.http_client`, which serves a script in this
    process. By default the SDK makes its own.
    """

    def __init__(self, *, max_retries: int = 2, http_client: HttpClient | None = None) -> None:
        self.max_retries = max_retries
        self.http_client = http_client
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[_Identity, Any]]
        self._clients = weakref.WeakKeyDictionary()
        self._scrubbed = ScrubbedParts()

    def client(self) -> Any:
        """The running loop's client (made on first use, and again when the key or URL changed)."""
        key = api_key()
        env = os.environ
        identity = (key, env.get("ANTHROPIC_AUTH_TOKEN"), env.get("ANTHROPIC_BASE_URL"))
        loop = asyncio.get_running_loop()
        known = self._clients.get(loop)
        if known is None or known[0] != identity:
            import anthropic  # noqa: PLC0415 - heavy (see the note at the top)

            options: dict[str, Any] = {"max_retries": self.max_retries}
            if key:  # the stored key is in this process's environment too; said here, not assumed
                options["api_key"] = key
            if self.http_client is not None:
                made = self.http_client
                options["http_client"] = made() if callable(made) else made
            else:  # the SDK's own default client, its certificates loaded once per process
                options["http_client"] = anthropic.DefaultAsyncHttpxClient(verify=ssl_context())
            if known is not None and not self._given():
                # The replaced client's pooled connections would stay open with the loop.
                closing = loop.create_task(known[1].close())
                _CLOSING.add(closing)
                closing.add_done_callback(_CLOSING.discard)
            known = (identity, anthropic.AsyncAnthropic(**options))
            self._clients[loop] = known
        return known[1]

    async def aclose(self) -> None:
        """Close the running loop's client and its connections (before that loop ends)."""
        known = self._clients.pop(asyncio.get_running_loop(), None)
        if known is not None and not self._given():  # a client given as such is its owner's to close
            await known[1].close()

    def _given(self) -> bool:
        """Whether the SDK client's HTTP client was given as one (its owner closes it)."""
        return self.http_client is not None and not callable(self.http_client)

    async def stream(
        self, params: RequestParams, view: StreamView, *, retries: int = 3, cache_marks: bool = False
    ) -> Message:
        """Stream one response into ``view``; retry mid-stream overloads up to ``retries`` times.

        Every model request goes out through here, so this is where the request is
        scrubbed as a whole (system prompt, messages, tool definitions): secrets
        redacted, text made encodable, nesting bounded (:func:`agent_kernel.secrets.scrub`).
        With ``cache_marks`` the prompt-cache breakpoints go on the scrubbed request
        (:func:`~agent_kernel.model.caching.with_breakpoints`): its marked blocks are new
        copies each time, so marked first they would be scrubbed again with every request.
        """
        import anthropic  # noqa: PLC0415 - heavy (see the note at the top)

        params = self._scrubbed.request(params)
        if cache_marks:
            params = caching.with_breakpoints(params)
        client = self.client()
        attempt = 0
        while True:
            view.new_attempt()
            try:
                return await _stream_once(client, params, view)
            except anthropic.APIStatusError as exc:
                kind = getattr(exc, "type", None)
                mid_stream = exc.response.status_code == 200
                if not (mid_stream and kind in _RETRYABLE_STREAM_ERRORS) or attempt >= retries:
                    raise ModelError(describe_api_error(exc, params.get("model"))) from exc
                attempt += 1
                view.retract()
                delay = min(0.5 * 2 ** (attempt - 1), 8.0)
                view.notice(
                    f"The model was overloaded mid-response; retrying ({attempt}/{retries}) in {delay:g} s.",
                    kind="muted",
                )
                await asyncio.sleep(delay)
            except anthropic.APIError as exc:
                raise ModelError(describe_api_error(exc, params.get("model"))) from exc

    async def create(self, params: RequestParams) -> Message:
        """One request answered whole (not streamed), for short side tasks: a summary.

        Scrubbed as :meth:`stream` scrubs; the SDK retries as usual; errors become a
        :class:`~agent_kernel.errors.ModelError`.
        """
        import anthropic  # noqa: PLC0415 - heavy (see the note at the top)

        params = self._scrubbed.request(params)
        try:
            message: Message = await self.client().messages.create(**params)
            return message
        except anthropic.APIError as exc:
            raise ModelError(describe_api_error(exc, params.get("model"))) from exc


class ScrubbedParts:
    """Scrubs requests as :func:`agent_kernel.secrets.scrub` does, each part once.

    A turn's requests repeat the one before and add to it: the same tool definitions and
    the same message objects come again with each round trip. Scrubbing all of it each
    time walks the whole conversation in Python on every call. Here each list of a request
    (tools, system blocks, messages) is kept with its parts' scrubbed copies, and the next
    request that starts with the same objects reuses them while they hold: all those parts
    still equal to what they were when scrubbed (one comparison, in C), under the same
    redactor (the same secrets; a new secret scrubs everything again). Only the parts added
    since are scrubbed; a part changed in place scrubs the whole list again.
    """

    # Lists kept at most (a conversation's messages, its tools; a few conversations that
    # take turns, as sub-sessions do), the least recently sent dropped first: they hold
    # their parts alive, a bound on the memory kept for conversations no longer sent.
    LISTS = 12

    def __init__(self) -> None:
        self._redactor: Redactor | None = None
        # (list's key, id of its first part) -> what was sent last in that list
        self._kept: dict[tuple[str, int], _KeptList] = {}
        self._texts: dict[str, tuple[str, object]] = {}  # list's key -> (string sent last, scrubbed)
        self._lock = threading.Lock()

    def request(self, params: RequestParams) -> RequestParams:
        """A scrubbed copy of the request ``params`` (what the SDK is given)."""
        strings = secrets.redactor()
        with self._lock:  # one client may serve threads of their own (generate_many's)
            return self._request(params, strings, redaction.scrub)

    def _request(
        self, params: RequestParams, strings: Redactor, scrub: Callable[[object, Redactor], object]
    ) -> RequestParams:
        if strings is not self._redactor:
            self._redactor, self._kept, self._texts = strings, {}, {}
        scrubbed: dict[str, object] = {}
        for key, value in params.items():
            if key in _LISTED_PARTS and isinstance(value, list) and value:
                scrubbed[key] = self._listed(key, value, lambda part: scrub(part, strings))
            elif key in _LISTED_PARTS and isinstance(value, str):  # a system prompt given as one string
                text = self._texts.get(key)
                if text is None or text[0] is not value:  # a string cannot change in place
                    text = self._texts[key] = (value, scrub(value, strings))
                scrubbed[key] = text[1]
            else:
                scrubbed[str(scrub(key, strings))] = scrub(value, strings)  # a key scrubs to a string
        return cast("RequestParams", scrubbed)  # the same keys, each value a scrubbed copy

    def _listed(self, key: str, parts: list[object], scrub: Callable[[object], object]) -> list[object]:
        slot = (key, id(parts[0]))
        kept = self._kept.pop(slot, None)
        reused = 0
        if kept is not None:
            for part, sent in zip(parts, kept.parts):
                if part is not sent:
                    break
                reused += 1
            if reused and not _same(parts[:reused], kept.snapshots[:reused]):
                reused = 0  # a part changed in place since it was scrubbed
        now = _KeptList([], [], [])
        if kept is not None and reused:
            now = _KeptList(parts[:reused], kept.snapshots[:reused], kept.copies[:reused])
        copies = list(now.copies)
        checkable = True  # every part so far can be checked next time: kept
        for part in parts[reused:]:
            copy = scrub(part)
            copies.append(copy)
            if checkable:
                snapshot = copy if _same(part, copy) else _snapshot(part)
                checkable = snapshot is not _UNCHECKABLE
            if checkable:
                now.parts.append(part)
                now.snapshots.append(snapshot)
                now.copies.append(copy)
        self._kept[slot] = now
        while len(self._kept) > self.LISTS:
            del self._kept[next(iter(self._kept))]
        return copies


class _KeptList(NamedTuple):
    """The parts of a list as last sent, each as it was when scrubbed, and their scrubbed copies."""

    parts: list[object]
    snapshots: list[object]
    copies: list[object]


# The request's lists whose parts are kept scrubbed.
_LISTED_PARTS = ("messages", "tools", "system")
_UNCHECKABLE = object()


def _snapshot(part: object) -> object:
    """A deep copy of ``part`` to check it against later (``_UNCHECKABLE`` if none can be made)."""

    try:
        return deepcopy(part)
    except Exception:  # noqa: BLE001 - scrubbed again next time
        return _UNCHECKABLE


def _same(value: object, scrubbed: object) -> bool:
    """Whether ``value`` is what scrubbing made ``scrubbed`` from, unchanged (``==`` in C;
    a value ``==`` cannot compare counts as changed)."""
    try:
        return bool(value == scrubbed)
    except Exception:  # noqa: BLE001 - scrubbed again
        return False


async def _stream_once(client: Any, params: RequestParams, view: StreamView) -> Message:
    """One streamed response, accumulated here from the raw events.

    Not the SDK's accumulating ``messages.stream``: it parses each tool input with a
    strict parser that raises on a lone surrogate or deep nesting, losing the whole
    response. Here such an input is parsed leniently and scrubbed like everything else;
    a tool input the scrub redacted is also kept as sent, which is what the tool runs
    (see :mod:`agent_kernel.model.as_sent`).
    """
    from anthropic.types import Message  # noqa: PLC0415 - heavy (see the note at the top)

    if params.get("betas"):  # beta features (the API's context management) are on the beta endpoint
        from anthropic.types.beta import BetaMessage as Message  # type: ignore[assignment]  # noqa: PLC0415

    snapshot: dict[str, Any] = {}
    buffers: dict[int, _InputBuffer] = {}
    current_tool: str | None = None
    api = client.beta.messages if params.get("betas") else client.messages
    stream = await api.create(**params, stream=True)
    async with stream:
        async for event in stream:
            kind = event.type
            if kind == "message_start":
                snapshot = event.message.model_dump(mode="json", exclude_none=True)
                snapshot["content"] = []
            elif kind == "content_block_start":
                block = event.content_block.model_dump(mode="json", exclude_none=True)
                snapshot["content"].append(block)
                if block.get("type") in ("tool_use", "server_tool_use"):
                    current_tool = block["id"]
                    view.tool_started(block["id"], block["name"])
                elif block.get("tool_use_id") and block.get("type", "").endswith("_tool_result"):
                    view.server_result(block)  # a server tool's result arrives whole
            elif kind == "content_block_delta":
                _apply_delta(snapshot["content"][event.index], event, buffers, view, current_tool)
            elif kind == "content_block_stop":
                block = snapshot["content"][event.index]
                if event.index in buffers:
                    block["input"] = tool_input(buffers.pop(event.index).text())
                if block.get("type") == "text":
                    view.end_text()
                elif block.get("type") == "server_tool_use":
                    view.server_tool(block["id"], block["name"], block.get("input"))
                elif block.get("type") in ("thinking", "redacted_thinking"):
                    view.end_thinking(redacted=block["type"] == "redacted_thinking")
                current_tool = None
            elif kind == "message_delta":
                snapshot["stop_reason"] = event.delta.stop_reason
                snapshot["stop_sequence"] = event.delta.stop_sequence
                usage = event.usage.model_dump(mode="json", exclude_none=True)
                snapshot.setdefault("usage", {}).update(usage)
    arrived = snapshot.get("content", [])
    snapshot["content"] = secrets.scrub(arrived)
    as_sent.keep(arrived, snapshot["content"])  # the tools run the inputs as sent
    return Message.model_validate(snapshot)


# A partial tool input is re-parsed for the preview after each delta, and each parse reads
# the whole buffer: past this size the preview stops, so a huge input costs linear time.
PREVIEW_CHARS = 16_384


class _InputBuffer:
    """The streamed JSON of one tool input, kept as parts (joined once, at the end)."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0

    def add(self, part: str) -> None:
        self.parts.append(part)
        self.size += len(part)

    def text(self) -> str:
        return "".join(self.parts)


def _apply_delta(
    block: dict[str, Any],
    event: Any,
    buffers: dict[int, _InputBuffer],
    view: StreamView,
    current_tool: str | None,
) -> None:
    delta = event.delta
    if delta.type == "text_delta":
        block["text"] = block.get("text", "") + delta.text
        view.text(delta.text)
    elif delta.type == "input_json_delta":
        buffer = buffers.setdefault(event.index, _InputBuffer())
        buffer.add(delta.partial_json)
        if current_tool is not None and buffer.size <= PREVIEW_CHARS:
            partial = _partial_input(buffer.text())
            if partial is not None:
                view.tool_input(current_tool, secrets.scrub(partial))  # shown as the finished call is
    elif delta.type == "thinking_delta":
        block["thinking"] = block.get("thinking", "") + delta.thinking
        view.thinking(delta.thinking)
    elif delta.type == "compaction_delta":  # the API's own compaction (compaction = "server")
        if delta.content is not None:
            block["content"] = (block.get("content") or "") + delta.content
        if delta.encrypted_content is not None:
            block["encrypted_content"] = delta.encrypted_content
    elif delta.type == "signature_delta":
        block["signature"] = delta.signature
    elif delta.type == "citations_delta":
        block.setdefault("citations", []).append(delta.citation.model_dump(mode="json", exclude_none=True))


def tool_input(text: str) -> dict[str, object]:
    """A tool call's input from its streamed JSON; what cannot be parsed is kept as text.

    The input goes back to the API in the conversation, which requires an object: JSON
    that is not one (or does not parse, or nests past the recursion limit) becomes
    ``{"unparsed_input": <the text, shortened>}``, and the tool's input check answers it.
    An input too large to keep is replaced by its size (see :mod:`agent_kernel.model.conversation`).
    """
    if not text.strip():
        return {}
    if len(text) > conversation.KEPT_INPUT_CHARS:
        return {conversation.OVERSIZED_INPUT: len(text.encode("utf-8", "replace"))}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict):
        return value
    return {"unparsed_input": text[:2000]}


def _partial_input(text: str) -> object:
    """The input streamed so far, for the display (``None`` while it does not parse)."""
    try:
        return from_json(text.encode("utf-8", "replace"), partial_mode=True)
    except Exception:  # noqa: BLE001 - only a preview
        return None


# The ways to give a key that keep it out of every notebook (a key typed into a cell is
# saved with the notebook, its outputs and the scheduler's copies of it).
KEY_WAYS = (
    "store one outside your notebooks with %agent_key (asks for it, not echoed), the key field at "
    "the bottom of the Agent chat, or `agent-kernel key set` in a terminal"
)
NO_KEY = f"No Anthropic API key: set ANTHROPIC_API_KEY before starting Jupyter, or {KEY_WAYS}."


def api_key() -> str | None:
    """The key the SDK will use (:func:`agent_kernel.model.keys.find_key`: the environment's,
    else the stored one); raise :class:`MissingKeyError` when there is none."""
    try:
        key = find_key()
    except UnusableKey as exc:
        if os.environ.get("ANTHROPIC_AUTH_TOKEN"):
            return None
        raise MissingKeyError(f"No usable Anthropic API key. {exc}") from None
    if not key and not os.environ.get("ANTHROPIC_AUTH_TOKEN"):
        raise MissingKeyError(f"{NO_KEY} Then run the cell again.")
    return key


def describe_api_error(exc: Exception, model: str | None = None) -> str:
    """One line: what failed, the API's own message, and what to do next."""
    import anthropic  # noqa: PLC0415 - heavy (see the note at the top)

    message = getattr(exc, "api_message", None) or getattr(exc, "message", None) or str(exc)
    message = str(message).rstrip(". ")  # each line below ends the message with its own "."
    request_id = getattr(exc, "request_id", None)
    suffix = f" (request id {request_id})" if request_id else ""
    status = getattr(exc, "status_code", None)
    kind = getattr(exc, "type", None)
    label = f"{status} {kind}" if kind else f"{status}"
    if isinstance(exc, anthropic.APITimeoutError):
        return f"The model did not answer in time: {message}. Run the cell again.{suffix}"
    if isinstance(exc, anthropic.APIConnectionError):
        base = os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
        return f"Could not reach the model at {base}: {message}. Check the network or ANTHROPIC_BASE_URL."
    if isinstance(exc, anthropic.AuthenticationError):
        hint = (
            "Check the key (ANTHROPIC_API_KEY, or the stored one: %agent_key --status); it may be mistyped or revoked."
        )
    elif isinstance(exc, anthropic.PermissionDeniedError):
        hint = "The key is not allowed to do this; check its workspace and model access."
    elif isinstance(exc, anthropic.NotFoundError):
        hint = f"Check the model name (now {model!r}, set with --model or %config AgentKernel.model)."
    elif isinstance(exc, anthropic.RateLimitError):
        hint = "Rate limited even after retries; wait a minute and run the cell again."
    elif isinstance(exc, anthropic.BadRequestError):
        if _PROMPT_TOO_LONG.search(message):
            hint = "The conversation has grown too long for the model: start a new one with %agent --new."
        else:
            hint = "Change what the message names (a setting, --model, the prompt) and run the cell again."
    elif (status and status >= 500) or kind in _RETRYABLE_STREAM_ERRORS:
        hint = "The API is unavailable or overloaded even after retries; run the cell again later."
    else:
        hint = "Run the cell again; if it persists, start a new session with %agent --new."
    return f"Model request failed ({label}): {message}. {hint}{suffix}"
