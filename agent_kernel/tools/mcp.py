"""Tools of Model Context Protocol servers (``AgentKernel.mcp_servers``), named ``SERVER__TOOL``.

Each server runs in a task of one background event loop (a daemon thread) that lives as
long as the process: turns run on whichever loop calls them (the kernel's, or
``asyncio.run`` in a script), and an MCP session belongs to the loop and task that opened
it. A server starts the first time a turn needs it and is stopped at exit.

Every wait on a server is bounded (``AgentKernel.mcp_timeout``): a server that fails to
start, stops answering or dies gives the model an ``is_error`` result and the cell one
line, and is started again by the next turn. Tool definitions and results go through the
SDK's MCP helpers (``anthropic.lib.tools.mcp``).

A server is someone else's code: what it sends is untrusted. Every result (and every
error text) it gives reaches the model redacted and inside the untrusted envelope, and
the turn notes it as untrusted content, so the approval check asks before writing tools
and ``fetch_url`` from then on. A tool counts as writing whatever it claims, unless the
user marked its server ``"trusted": true`` in ``AgentKernel.mcp_servers``: only then is
its ``readOnlyHint`` believed.

The tool definitions an untrusted server lists are its words too. The model is offered
its tool's description cut to :data:`DESCRIPTION_CHARS`, and what its input schema says
of the parameters (descriptions, titles, examples: :data:`PARAMETERS_CHARS` in all),
inside one untrusted envelope; the schema beside it keeps only its shape and bounds
(:data:`SCHEMA_KEYWORDS`), and no text of the server's but its property names (as it
names them) and type names (cut to :data:`SCHEMA_STRING_CHARS`): enum values, constants,
defaults and formats holding text are among what the envelope says of the parameters. A
trusted server's definitions are offered as it lists them. Input is checked against the
schema as listed either way.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import re
import threading
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import Future
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, TextIO, cast

from agent_kernel.errors import ToolInputError
from agent_kernel.secrets import redact
from agent_kernel.tools import Tool, _cap, current_context, strict_json, to_text
from agent_kernel.tools.schema import compact
from agent_kernel.untrusted import mark_untrusted, neutralise

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult
    from mcp.types import Tool as ListedTool

__all__ = ["SEPARATOR", "McpServers", "McpTool", "kernel_servers", "offered"]

SEPARATOR = "__"
GROUP = "mcp"
NAME_CHARS = 64  # the longest tool name the API takes
TRUSTED = "trusted"  # the key of a server's entry that makes its readOnlyHint believed
# Room kept within result_chars for the envelope's tags and a truncation note, so a long
# result is cut inside the envelope and the closing tag still reaches the model.
ENVELOPE_CHARS = 400
DESCRIPTION_CHARS = 2_000  # the most of an untrusted server's tool description offered
PARAMETERS_CHARS = 1_000  # the most of what its input schema says about the parameters
SCHEMA_STRING_CHARS = 64  # the longest string its schema keeps (a type's name)
# The JSON Schema keywords an untrusted server's input schema keeps: the input's shape and
# bounds. Its text (descriptions, and values holding text) goes inside the envelope; the
# rest (comments, extensions, patterns) is left out.
SCHEMA_KEYWORDS = frozenset({
    "type", "properties", "required", "items", "prefixItems", "additionalProperties", "enum", "const",
    "default", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "minItems", "maxItems",
    "uniqueItems", "minProperties", "maxProperties",
})  # fmt: skip
_NAMED_SCHEMAS = ("properties", "$defs", "definitions")  # keywords whose keys are names
_PARAMETER_TEXT = ("description", "examples")  # what a schema says of a parameter, in words (titles restate names)
_PARAMETER_VALUES = ("enum", "const", "default", "format")  # kept in the schema only when they hold no text


@dataclass(eq=False)
class McpTool(Tool):
    """A tool of an MCP server; its definition and call are the SDK helper's."""

    server: str = ""
    sdk: Any = None

    @property
    def _sdk_tool(self) -> Any:
        return self.sdk

    @cached_property
    def _definition(self) -> dict[str, object]:
        """What the model is offered: the description and schema made when the server was
        listed (see :func:`offered`), not the listing itself; made once, as every tool's."""
        return {"name": self.name, "description": self.description, "input_schema": compact(self.input_schema)}

    async def call(self, tool_input: object) -> str:
        """The server's reply as text in the untrusted envelope (see :meth:`received`); an
        error result or a refusal is a ToolInputError the model reads."""
        try:
            value = await super().call(tool_input)
        except ServerRefused as exc:
            raise ToolInputError(f"{self.name} failed: {self.received(exc.reason)}") from None
        except Exception as exc:
            content = getattr(exc, "content", None)  # the SDK's ToolError for an isError result
            if type(exc).__name__ != "ToolError" or not isinstance(content, list):
                raise
            text = "\n".join(b.get("text", "") for b in content if isinstance(b, dict)).strip()
            if not text:
                raise ToolInputError(f"{self.name} failed (the MCP server gave no message).") from None
            raise ToolInputError(self.received(text)) from None
        if isinstance(value, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in value):
            return self.received("\n".join(b["text"] for b in value))  # plain text, as a built-in tool answers
        return self.received(to_text(value))  # other content (images, documents) as JSON text

    def received(self, text: str) -> str:
        """What the server sent, as the model gets it: redacted, cut to fit, inside the
        untrusted envelope; the turn notes it as untrusted content."""
        source = f"mcp {self.name}"
        current_context().note_untrusted([source])
        limit = int(current_context().settings.result_chars) - ENVELOPE_CHARS
        return mark_untrusted(_cap(redact(text), max(limit, 0)), source)


def tool_name(server: str, name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}{SEPARATOR}{name}")[:NAME_CHARS]


class ServerError(ToolInputError):
    """An MCP server failed to start, answer or stay up."""


class ServerRefused(ToolInputError):
    """An MCP server answered a call with an error; ``reason`` is the server's own text."""

    def __init__(self, call: str, reason: str) -> None:
        super().__init__(f"{call} failed: {reason}")
        self.reason = reason


@dataclass(eq=False)
class _Server:
    name: str
    config: Mapping[str, object]  # its entry in AgentKernel.mcp_servers
    ready: Future[list[McpTool]] = field(default_factory=Future)  # its tools, or why it did not start
    stop: asyncio.Event | None = None
    task: asyncio.Task[None] | None = None
    session: ClientSession | None = None
    tools: list[McpTool] = field(default_factory=list)


class McpServers:
    """The MCP servers of one kernel, each started on first use and kept until exit."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: dict[str, _Server] = {}
        self._lock = threading.Lock()

    # -- the turn's side ------------------------------------------------------------------

    async def connect(self, configured: Mapping[str, Mapping[str, object]], timeout: float) -> list[str]:
        """Start the configured servers not running yet; one line for each that failed."""
        for name in [n for n in self._servers if n not in configured or self._servers[n].config != configured[n]]:
            self._forget(name)
        failures = []
        for name, config in configured.items():
            server = self._servers.get(name)
            if server is None:
                server = self._start(name, dict(config), timeout)
            try:
                await asyncio.wait_for(asyncio.wrap_future(server.ready), timeout)
            except asyncio.TimeoutError:
                self._forget(name)
                failures.append(f"MCP server {name!r} did not start within {timeout:g} s; its tools are not offered.")
            except Exception as exc:  # noqa: BLE001 - any failure to start is reported, never raised
                self._forget(name)
                failures.append(f"MCP server {name!r} did not start ({_reason(exc)}); its tools are not offered.")
        return failures

    def tools(self) -> list[McpTool]:
        """The tools of every running server."""
        return [t for s in self._servers.values() if s.ready.done() and not s.ready.exception() for t in s.tools]

    def running(self) -> list[str]:
        return [n for n, s in self._servers.items() if s.ready.done() and not s.ready.exception()]

    async def call(self, server_name: str, tool: str, arguments: dict[str, object], timeout: float) -> CallToolResult:
        server = self._servers.get(server_name)
        if server is None or server.session is None:
            raise ServerError(f"MCP server {server_name!r} is not running; the next turn starts it again.")
        future = asyncio.run_coroutine_threadsafe(server.session.call_tool(tool, arguments), self._require_loop())
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except asyncio.TimeoutError:
            future.cancel()
            self._forget(server_name)
            raise self._failed(
                server_name, f"did not answer {tool} within {timeout:g} s (it may have stopped)"
            ) from None
        except (asyncio.CancelledError, KeyboardInterrupt):
            future.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - a transport failure: the server stopped
            if _answered(exc):  # the server is up and refused this call
                raise ServerRefused(f"{server_name}{SEPARATOR}{tool}", _reason(exc)) from None
            self._forget(server_name)
            raise self._failed(server_name, f"stopped ({_reason(exc)})") from None

    def close(self, timeout: float = 5.0) -> None:
        """Stop every server (at exit)."""
        for name in list(self._servers):
            self._forget(name)
        loop = self._loop
        if loop is None:
            return
        pending = [s.task for s in self._stopping if s.task is not None]
        if pending:
            done = asyncio.run_coroutine_threadsafe(asyncio.wait(pending, timeout=timeout), loop)
            try:
                done.result(timeout + 1)
            except Exception:  # noqa: BLE001 - best effort at exit
                pass
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout)
            if not self._thread.is_alive():
                loop.close()
        self._loop = self._thread = None

    # -- the background loop's side -------------------------------------------------------

    _stopping: list[_Server]

    def _require_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=loop.run_forever, name="agent-kernel-mcp", daemon=True)
                self._thread.start()
                self._loop = loop
                self._stopping = []
                atexit.register(self.close)
            return self._loop

    def _start(self, name: str, config: Mapping[str, object], timeout: float) -> _Server:
        server = _Server(name, config)
        self._servers[name] = server
        loop = self._require_loop()

        def begin() -> None:
            server.stop = asyncio.Event()
            server.task = loop.create_task(self._serve(server, timeout))

        loop.call_soon_threadsafe(begin)
        return server

    async def _serve(self, server: _Server, timeout: float) -> None:
        from mcp import ClientSession  # noqa: PLC0415 - mcp takes seconds to import and only configured servers need it

        assert server.stop is not None
        errlog = open(os.devnull, "w")  # noqa: SIM115 - a stdio server's stderr is not the user's output
        try:
            async with _transport(server.config, errlog) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write, read_timeout_seconds=timeout + 5) as session:
                    await session.initialize()
                    listed = await session.list_tools()
                    server.session = session
                    server.tools = [self._tool(server, t) for t in listed.tools]
                    server.ready.set_result(server.tools)
                    await server.stop.wait()
        except BaseException as exc:  # noqa: BLE001 - reported through ready, or the server stopped
            if not server.ready.done():
                server.ready.set_exception(exc if isinstance(exc, Exception) else ServerError("stopped"))
        finally:
            server.session = None
            errlog.close()

    def _tool(self, server: _Server, listed: ListedTool) -> McpTool:
        from anthropic.lib.tools.mcp import async_mcp_tool  # noqa: PLC0415 - mcp takes seconds to import and only configured servers need it

        server_name = server.name
        name = tool_name(server_name, listed.name)
        annotations = getattr(listed, "annotations", None)
        claims_read_only = bool(annotations is not None and getattr(annotations, "read_only_hint", False))
        read_only = claims_read_only and server.config.get(TRUSTED) is True
        session = cast("ClientSession", _Bridge(self, server_name, listed.name))  # its call_tool is the session's
        sdk = async_mcp_tool(listed.model_copy(update={"name": name}), session)
        description = listed.description or f"{listed.name} (MCP server {server_name})"
        schema: dict[str, object] = dict(sdk.input_schema)
        if server.config.get(TRUSTED) is not True:
            description, schema = offered(description, schema, server_name)
        return McpTool(
            function=_unused,
            name=name,
            group=GROUP,
            writes=not read_only,
            description=description,
            input_schema=schema,
            server=server_name,
            sdk=sdk,
        )

    def _forget(self, name: str) -> None:
        server = self._servers.pop(name, None)
        if server is None or self._loop is None:
            return
        self._stopping.append(server)
        stop = server.stop

        def end() -> None:
            if stop is not None:
                stop.set()
            elif server.task is not None:
                server.task.cancel()

        self._loop.call_soon_threadsafe(end)

    def _failed(self, server_name: str, what: str) -> ServerError:
        # The tool's card shows this error: that is the cell's one line about it.
        return ServerError(f"MCP server {server_name!r} {what}; the next turn starts it again.")


def offered(description: str, schema: object, server_name: str) -> tuple[str, dict[str, object]]:
    """An untrusted server's tool description and input schema as the model is offered
    them: the server's words (its description and what the schema says of each
    parameter), cut, inside one untrusted envelope; the schema's shape and bounds beside."""
    notes: list[str] = []
    kept = _schema_shape(schema, "", notes)
    text = _cut(description, DESCRIPTION_CHARS)
    if notes:
        text += "\n\nParameters, as the server describes them:\n" + _cut("\n".join(notes), PARAMETERS_CHARS)
    shape = kept if isinstance(kept, dict) else {}
    shape.setdefault("type", "object")
    # The server's own words: data about the tool, never orders to the model.
    return mark_untrusted(text, f"MCP server {server_name}"), shape


def _schema_shape(schema: object, path: str, notes: list[str]) -> object:
    """``schema`` with only :data:`SCHEMA_KEYWORDS`, its strings cut and neutralised; what
    it says of a parameter in words goes into ``notes`` as ``- path: text``."""
    if isinstance(schema, list):
        return [_schema_shape(item, path, notes) for item in schema]
    if isinstance(schema, str):
        return neutralise(schema[:SCHEMA_STRING_CHARS])
    if not isinstance(schema, dict):
        return schema
    shape: dict[str, object] = {}
    for key, value in schema.items():
        said = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        if key in _PARAMETER_TEXT or (key in _PARAMETER_VALUES and '"' in json.dumps(value, default=str)):
            notes.append(f"- {path or 'input'}{'' if key == 'description' else f' ({key})'}: {said}")
        elif key in _NAMED_SCHEMAS and isinstance(value, dict):
            shape[key] = {
                name: _schema_shape(item, f"{path}.{name}" if path and key == "properties" else str(name), notes)
                for name, item in value.items()
            }
        elif key in SCHEMA_KEYWORDS:
            shape[key] = value if key == "required" else _schema_shape(value, path, notes)
    return shape


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f" [cut: the server's text was {len(text):,} characters; the first {limit:,} are shown]"


_KERNEL_SERVERS: McpServers | None = None


def kernel_servers() -> McpServers:
    """The MCP servers of this process (a kernel's servers outlive its agents' turns)."""
    global _KERNEL_SERVERS
    if _KERNEL_SERVERS is None:
        _KERNEL_SERVERS = McpServers()
    return _KERNEL_SERVERS


@dataclass
class _Bridge:
    """What the SDK helper calls as the MCP client: the server's session on the background loop."""

    servers: McpServers
    server: str
    tool: str

    async def call_tool(self, name: str, arguments: dict[str, object] | None = None) -> CallToolResult:
        timeout = float(current_context().settings.mcp_timeout)
        _check_sendable(f"{self.server}{SEPARATOR}{self.tool}", arguments or {})
        return await self.servers.call(self.server, self.tool, arguments or {}, timeout)


def _check_sendable(name: str, arguments: Mapping[str, object]) -> None:
    """Refuse input the server cannot be sent as it is: NaN or an infinity (sent as null), or
    a lone surrogate (not UTF-8: the transport drops the message and the call waits out
    its time limit)."""
    text = strict_json(arguments, f"The input of {name}")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolInputError(
                f"The input of {name} holds a lone surrogate (not valid Unicode text); send the text without it."
            ) from None


def _transport(config: Mapping[str, object], errlog: TextIO) -> Any:
    if "url" in config:
        return _streamable_http(str(config["url"]), _strings(config, "headers"))
    if "command" not in config:
        raise ServerError('needs "command" (a stdio server) or "url" (a streamable HTTP server)')
    from mcp import StdioServerParameters  # noqa: PLC0415 - mcp takes seconds to import and only configured servers need it
    from mcp.client.stdio import stdio_client  # noqa: PLC0415 - mcp takes seconds to import and only configured servers need it

    args = config.get("args") or []
    if not isinstance(args, (list, tuple)):
        raise ServerError(f'"args" is a list of strings, not {type(args).__name__}')
    cwd = config.get("cwd")
    params = StdioServerParameters(
        command=str(config["command"]),
        args=[str(a) for a in args],
        env=_strings(config, "env") or None,
        cwd=None if cwd is None else str(cwd),
    )
    return stdio_client(params, errlog=errlog)


def _strings(config: Mapping[str, object], key: str) -> dict[str, str]:
    """A server entry's ``env`` or ``headers``: names to values, each as text."""
    value = config.get(key) or {}
    if not isinstance(value, Mapping):
        raise ServerError(f'"{key}" is a dict of names to values, not {type(value).__name__}')
    return {str(k): str(v) for k, v in value.items()}


@asynccontextmanager
async def _streamable_http(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """The streams of a streamable HTTP server, with the configured headers on every request.

    The SDK takes headers only on an HTTP client of one's own, which it then leaves open:
    this one is closed with the connection. Its time limits are the SDK's defaults (a
    server may hold a response stream open for minutes); every wait of a turn is bounded
    by ``mcp_timeout`` besides.
    """
    import httpx2  # noqa: PLC0415 - 0.5 s to import; only a streamable HTTP server needs it
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415 - mcp takes seconds to import and only configured servers need it

    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
        )
        yield await stack.enter_async_context(streamable_http_client(url, http_client=client))


def _answered(exc: BaseException) -> bool:
    """Whether ``exc`` is an error the server sent (not a lost connection)."""
    from mcp import MCPError  # noqa: PLC0415 - mcp takes seconds to import and only configured servers need it
    from mcp.types import CONNECTION_CLOSED  # noqa: PLC0415 - mcp takes seconds to import and only configured servers need it

    return isinstance(exc, MCPError) and exc.error.code != CONNECTION_CLOSED


def _reason(exc: BaseException) -> str:
    while inner := getattr(exc, "exceptions", None):  # anyio task groups wrap errors in groups
        exc = inner[0]
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _unused(**_: object) -> None:
    """Placeholder: an MCP tool's call goes through its SDK helper."""
