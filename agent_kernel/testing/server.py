"""A scripted, Anthropic-compatible Messages API on 127.0.0.1, for offline tests.

The official SDK talks to it unchanged through ``ANTHROPIC_BASE_URL``: JSON and SSE
streaming responses (text with its citations, tool_use and server_tool_use with their
input streamed as JSON deltas, server tool results whole, ``pause_turn``), HTTP
error responses, errors in the middle of a stream, and ``count_tokens``. Every request
body is kept in :attr:`ScriptedModel.requests` so a test can check what the agent sent,
also when the agent runs in another process (a kernel, papermill).

    with ScriptedModel([call("run_code", code="x = 41 + 1"), say("x is 42")]) as model:
        os.environ.update(model.env())
        ...  # run %agent in a kernel
        assert model.requests[1]["messages"][-1]["content"][0]["type"] == "tool_result"

:meth:`ScriptedModel.transport` serves the same answers in this process (an httpx
``MockTransport``): both ways go through :meth:`ScriptedModel.respond`, which records
the request and decides the answer, and :meth:`_Answer.chunks`, which makes the SSE.

Usage is reported as the API reports it, prompt cache included: unless a reply scripts
its own ``usage``, each response's ``input_tokens``, ``cache_creation_input_tokens`` and
``cache_read_input_tokens`` come from :class:`~agent_kernel.testing.cache.PromptCache`
(the API's prefix and breakpoint rules, and a documented token estimate); every
response's usage is kept in :attr:`ScriptedModel.usages`.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import socket
import sys
import threading
import time
import types
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, cast

from agent_kernel.testing import search
from agent_kernel.testing.batches import Batches
from agent_kernel.testing.cache import CacheError, PromptCache
from agent_kernel.testing.script import (
    Failure,
    Reply,
    ScriptItem,
    estimate_tokens,
    is_summary_request,
    server_tool_counts,
    signature_for,
    summary_reply,
)
from agent_kernel.testing.wire import BatchesRequest, ErrorBody, EventData, Message, MessagesRequest, Usage

if TYPE_CHECKING:
    import httpx2 as httpx  # the SDK's httpx package (see _httpx)
    from anthropic import DefaultAsyncHttpxClient

__all__ = ["ScriptedModel"]


class ScriptedModel:
    """Answers each ``POST /v1/messages`` with the next scripted reply.

    Parameters
    ----------
    script:
        Replies in order (see :mod:`agent_kernel.testing.script`).
    responder:
        Answers requests once the script is used up (a function of the request body);
        without one, an exhausted script answers 400 with a message saying so.
    summarizer:
        Answers the agent's conversation-summary requests (a compaction, see
        :mod:`agent_kernel.turn.budget`; a session's summary, see :mod:`agent_kernel.turn.summaries`)
        outside the script, so a script need not know when one comes; by default :func:`~agent_kernel.testing.script.summary_reply`. ``None``:
        they take the next scripted reply like any request. Either way they are kept in
        :attr:`requests` and :attr:`summary_requests`.
    cache_min_tokens:
        The shortest prefix the prompt cache writes (the API's minimum is 1,024 tokens
        for Sonnet and Opus models, 2,048 or 4,096 for some others).
    implicit_search:
        A scripted call of a deferred tool that no tool search of the conversation found
        gets a search in front of it (True), or the reply is refused with 400 as the API
        would refuse it (False). See ``agent_kernel.testing.search``.
    """

    def __init__(
        self,
        script: Iterable[ScriptItem] = (),
        *,
        responder: Callable[[MessagesRequest], Reply | Failure] | None = None,
        summarizer: Callable[[MessagesRequest], Reply | Failure] | None = summary_reply,
        host: str = "127.0.0.1",
        port: int = 0,
        cache_min_tokens: int = 1024,
        implicit_search: bool = True,
    ) -> None:
        self.implicit_search = implicit_search
        self.script: collections.deque[ScriptItem] = collections.deque(script)
        self.responder = responder
        self.summarizer = summarizer
        self.summary_requests: list[MessagesRequest] = []
        self.requests: list[MessagesRequest] = []
        self.headers: list[dict[str, str]] = []
        self.count_token_requests: list[MessagesRequest] = []
        self.cache = PromptCache(min_tokens=cache_min_tokens)
        # The usage each successful response reported, in order.
        self.usages: list[Usage] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        # Thinking blocks sent ((text, signature) and redacted data): they must come back as they are.
        self._thinking_sent: set[tuple[str, str]] = set()
        self._address = (host, port)
        self._server: _Server | None = None  # bound on first use: transport() needs none
        self._thread: threading.Thread | None = None
        # The Message Batches endpoints; ``batches.created`` keeps each create request.
        self.batches = Batches(self)

    # -- lifetime ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = cast("tuple[str, int]", self._bound().server_address[:2])
        return f"http://{host}:{port}"

    def _bound(self) -> _Server:
        if self._server is None:
            self._server = _Server(self._address, _handler_for(self))
        return self._server

    def env(self) -> dict[str, str]:
        """Environment for a process whose SDK should talk to this server."""
        return {"ANTHROPIC_BASE_URL": self.url, "ANTHROPIC_API_KEY": "scripted-test-key"}

    def start(self) -> ScriptedModel:
        if self._thread is None:
            # A short poll interval: stop() waits for the next poll (0.5 s by default).
            self._thread = threading.Thread(target=self._bound().serve_forever, args=(0.05,), daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        if self._thread is not None:
            self._server.shutdown()
            self._thread = None
        self._server.server_close()
        self._server = None

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- script --------------------------------------------------------------------------

    def add(self, *items: ScriptItem) -> ScriptedModel:
        """Append replies to the script."""
        with self._lock:
            self.script.extend(items)
        return self

    def clear(self) -> None:
        """Drop the replies no request took (what a failed test left for the next one)."""
        with self._lock:
            self.script.clear()

    @property
    def remaining(self) -> int:
        return len(self.script)

    def _next(self, body: MessagesRequest) -> Reply | Failure:
        summary = is_summary_request(body)
        with self._lock:
            self.requests.append(body)
            if summary:
                self.summary_requests.append(body)
                if self.summarizer is not None:
                    return self.summarizer(body)
            number = len(self.requests)
            item = self.script.popleft() if self.script else None
        if item is None:
            if self.responder is not None:
                return self.responder(body)
            return Failure(400, "invalid_request_error", f"The scripted model has no reply left for request #{number}.")
        return item(body) if callable(item) else item

    def _message_id(self) -> str:
        return f"msg_scripted_{next(self._ids):05d}"

    # -- answering -----------------------------------------------------------------------

    def transport(self) -> httpx.AsyncBaseTransport:
        """An in-process transport serving this script: no server thread, no socket.

        It answers exactly as the HTTP server does (the same recording, streaming, errors
        and ``count_tokens``), so the official SDK still makes the requests. It belongs to
        the SDK's own httpx package (``httpx2`` for ``anthropic`` 2.x).
        """
        return _transport_for(self)

    def http_client(self) -> DefaultAsyncHttpxClient:
        """A new SDK HTTP client over :meth:`transport`.

        Pass the method itself where a client is needed for each event loop:
        ``Agent(http_client=model.http_client)``; or one client to
        ``AsyncAnthropic(api_key=..., http_client=model.http_client())``.
        """
        from anthropic import DefaultAsyncHttpxClient  # noqa: PLC0415 - heavy: see _httpx

        return DefaultAsyncHttpxClient(transport=self.transport())

    def respond(self, path: str, body: Mapping[str, object], headers: dict[str, str], method: str = "POST") -> _Answer:
        """The answer to one request of ``body`` to ``path``, recorded in :attr:`requests`.

        ``body`` is the JSON the client sent, unchecked: the ``path`` it came to says whether
        it is read as a batch's body or as a message's."""
        path = path.split("?", 1)[0]
        if self.batches.handles(path):
            status, payload = self.batches.respond(method, path, cast("BatchesRequest", body))
            if isinstance(payload, bytes):
                return _Answer(status, {"content-type": "application/binary"}, raw=payload)
            return self._json(status, payload)
        request = cast("MessagesRequest", body)
        if path.endswith("/v1/messages/count_tokens"):
            self.count_token_requests.append(request)
            return self._json(200, {"input_tokens": estimate_tokens(request)})
        if not path.endswith("/v1/messages"):
            return self._json(404, _error_body("not_found_error", f"No route {path}"))
        self.headers.append(headers)
        changed = _changed_thinking(request, self._thinking_sent) or search.request_problem(request)
        if changed is None:
            answer = self._next(request)
        else:  # recorded, and the script kept for the next request
            with self._lock:
                self.requests.append(request)
            answer = Failure(400, "invalid_request_error", changed)
        if isinstance(answer, Failure):
            return self._json(answer.status, _error_body(answer.type, answer.message), answer.headers)
        try:
            answer, message = self._completed(request, answer)
        except (CacheError, search.SearchError) as exc:
            return self._json(400, _error_body("invalid_request_error", str(exc)))
        if not request.get("stream"):
            return self._json(200, message, delay=answer.delay)
        headers = {"content-type": "text/event-stream", "request-id": self._request_id()}
        return _Answer(200, headers, reply=answer, message=message, delay=answer.delay)

    def complete(self, body: MessagesRequest) -> tuple[Reply | Failure, Message | None]:
        """The next answer to ``body`` (recorded in :attr:`requests`) and, when it is a reply,
        the message it makes; for requests that arrive another way (a Message Batch)."""
        answer = self._next(body)
        if isinstance(answer, Failure):
            return answer, None
        try:
            return self._completed(body, answer)
        except (CacheError, search.SearchError) as exc:
            return Failure(400, "invalid_request_error", str(exc)), None

    def _completed(self, body: MessagesRequest, answer: Reply) -> tuple[Reply, Message]:
        """``answer`` as sent for ``body`` (its tool searches run, see :mod:`.search`) and the
        message it makes, its usage counted as the API counts it."""
        answer = search.resolve(body, answer, implicit=self.implicit_search)
        with self._lock:
            cached = self.cache.usage(body)
        usage: Usage = answer.usage or {**cached, "output_tokens": estimate_tokens(answer.content)}
        server_tools = server_tool_counts(answer.content)
        if server_tools is not None and "server_tool_use" not in usage:
            usage = {**usage, "server_tool_use": server_tools}
        self.usages.append(usage)
        message = _message(self._message_id(), answer, usage)
        with self._lock:
            self._thinking_sent.update(key for key in map(_thinking_key, answer.content) if key)
        return answer, message

    def _json(
        self, status: int, payload: Mapping[str, object], headers: dict[str, str] | None = None, delay: float = 0.0
    ) -> _Answer:
        sent = {"content-type": "application/json", "request-id": self._request_id()}
        if status in (429, 500, 502, 503, 529):
            sent["retry-after-ms"] = "20"
        sent.update(headers or {})
        return _Answer(status, sent, payload=payload, delay=delay)

    def _request_id(self) -> str:
        return f"req_scripted_{len(self.requests):05d}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket], client_address: object) -> None:
        # A client that hangs up mid-response (a stopped turn) is normal here.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def _handler_for(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
            pass

        def setup(self) -> None:
            super().setup()
            # Small SSE writes must not wait for delayed ACKs (Nagle): ~40 ms a response.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.do_POST("GET")

        def do_POST(self, method: str = "POST") -> None:  # noqa: N802 - http.server's name
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            answer = model.respond(self.path, body, dict(self.headers.items()), method)
            if answer.delay:
                time.sleep(answer.delay)
            self.send_response(answer.status)
            for key, value in answer.headers.items():
                self.send_header(key, value)
            if answer.reply is None:
                data = answer.body()
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            try:
                for chunk, pause in answer.chunks():
                    self.wfile.write(f"{len(chunk):X}\r\n".encode() + chunk + b"\r\n")
                    if pause:
                        self.wfile.flush()
                        time.sleep(pause)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client stopped reading (a Stop)

    return Handler


def _httpx() -> types.ModuleType:
    """The httpx package the installed SDK is built on (its clients refuse any other).

    The SDK is imported here, not at the top: the pytest plugin imports this module in every
    test session, and a scripted model mostly serves kernels in other processes."""
    from anthropic import DefaultAsyncHttpxClient  # noqa: PLC0415 - heavy, and only a client in this process needs it

    base = next(c for c in DefaultAsyncHttpxClient.__mro__ if c.__name__ == "AsyncClient")
    return sys.modules[base.__module__.partition(".")[0]]


def _transport_for(model: ScriptedModel) -> httpx.AsyncBaseTransport:
    http = _httpx()

    async def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(await request.aread() or b"{}")
        answer = model.respond(request.url.path, body, dict(request.headers.items()), request.method)
        if answer.delay:
            await asyncio.sleep(answer.delay)
        response: httpx.Response
        if answer.reply is None:
            response = http.Response(answer.status, headers=answer.headers, content=answer.body())
        else:
            response = http.Response(answer.status, headers=answer.headers, content=_paced(answer))
        return response

    transport: httpx.AsyncBaseTransport = http.MockTransport(handle)
    return transport


async def _paced(answer: _Answer) -> AsyncIterator[bytes]:
    for chunk, pause in answer.chunks():
        yield chunk
        if pause:
            await asyncio.sleep(pause)


@dataclass
class _Answer:
    """One response, whichever way it is sent: a JSON body, or a reply streamed as SSE."""

    status: int
    headers: dict[str, str]
    payload: Mapping[str, object] | None = None
    reply: Reply | None = None
    message: Message | None = None
    delay: float = 0.0
    raw: bytes | None = None  # a body sent as it is (JSONL)

    def body(self) -> bytes:
        return self.raw if self.raw is not None else json.dumps(self.payload).encode()

    def chunks(self) -> Iterator[tuple[bytes, float]]:
        """Each SSE event, and the seconds to wait after sending it."""
        assert self.reply is not None and self.message is not None
        for event, data in _events(self.reply, self.message):
            pause = self.reply.chunk_delay if event == "content_block_delta" else 0.0
            yield f"event: {event}\ndata: {json.dumps(data)}\n\n".encode(), pause


def _message(message_id: str, answer: Reply, usage: Usage) -> Message:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": answer.content,
        "stop_reason": answer.resolved_stop_reason(),
        "stop_sequence": None,
        "usage": usage,
    }


def _events(answer: Reply, message: Message) -> Iterator[tuple[str, EventData]]:
    start = dict(message, content=[], stop_reason=None)
    start["usage"] = dict(message["usage"], output_tokens=1)
    yield "message_start", {"type": "message_start", "message": start}
    if answer.stream_error and not answer.content:
        yield "error", _error_body(answer.stream_error, "scripted stream error")
        return
    for index, block in enumerate(answer.content):
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            if block.get("citations"):
                start["citations"] = []
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": start}
            for cite in block.get("citations") or []:  # as the API sends them: before the text they back
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "citations_delta", "citation": cite},
                    },
                )
            for piece in _pieces(block["text"], answer.chunk_size):
                yield (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}},
                )
        elif block["type"] in ("tool_use", "server_tool_use"):
            head = {"type": block["type"], "id": block["id"], "name": block["name"], "input": {}}
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": head}
            encoded = json.dumps(block["input"])
            # Small pieces as the API sends them, but at most MAX_INPUT_PIECES of them: a
            # huge scripted input (which max_tokens rules out from the real API) stays quick.
            for piece in _pieces(encoded, max(40, -(-len(encoded) // MAX_INPUT_PIECES))):
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
        elif block["type"] == "thinking":
            head = {"type": "thinking", "thinking": "", "signature": ""}
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": head}
            for piece in _pieces(block["thinking"], answer.chunk_size):
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "thinking_delta", "thinking": piece},
                    },
                )
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": block["signature"]},
                },
            )
        else:
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}
        if answer.stream_error and index == len(answer.content) - 1:
            yield (
                "error",
                _error_body(
                    answer.stream_error,
                    "Overloaded" if answer.stream_error == "overloaded_error" else "scripted stream error",
                ),
            )
            return
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    usage: Usage = {"output_tokens": message["usage"]["output_tokens"]}
    if "server_tool_use" in message["usage"]:
        usage["server_tool_use"] = message["usage"]["server_tool_use"]
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": usage,
        },
    )
    yield "message_stop", {"type": "message_stop"}


MAX_INPUT_PIECES = 2_000


def _pieces(value: str, size: int) -> Iterator[str]:
    if not value:
        yield ""
        return
    for start in range(0, len(value), max(size, 1)):
        yield value[start : start + size]


def _thinking_key(block: object) -> tuple[str, str] | None:
    if not isinstance(block, dict):
        return None
    if block.get("type") == "thinking":
        return (str(block.get("thinking")), str(block.get("signature")))
    if block.get("type") == "redacted_thinking":
        return ("", str(block.get("data")))
    return None


def _changed_thinking(body: MessagesRequest, sent: set[tuple[str, str]]) -> str | None:
    """The API's complaint when a request sends a thinking block back changed, else None.

    A thinking block must keep the signature it came with (by default ``signature_for``
    its text); a ``redacted_thinking`` block, the data it came with.
    """
    for m, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        for b, block in enumerate(content):
            key = _thinking_key(block)
            if key is None or key in sent:
                continue
            if block["type"] == "thinking" and key[1] != signature_for(key[0]):
                return f"messages.{m}.content.{b}: Invalid `signature` in `thinking` block"
            if block["type"] == "redacted_thinking":
                return f"messages.{m}.content.{b}: Invalid `data` in `redacted_thinking` block"
    return None


def _error_body(error_type: str, message: str) -> ErrorBody:
    return {"type": "error", "error": {"type": error_type, "message": message}}
