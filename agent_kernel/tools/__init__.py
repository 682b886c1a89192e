"""The tool registry: what the model may call, and the one place calls are dispatched.

A tool is a typed Python function whose docstring describes it; the SDK's
``anthropic.lib.tools`` builds its JSON schema and validates its input. Each tool also
has a *group* (``code``, ``data``, ...) that configuration switches on or off, and says
whether it *writes* (runs code, changes data, schedules) so approval modes can hold it.

:func:`definitions` is what a request offers: the core tools (:data:`LOADED_TOOLS` and the
user's own ``@tool`` functions) loaded, every other offered tool deferred behind the API's
tool search (see :mod:`agent_kernel.model.tool_search`). Deferring changes only when the
model reads a definition: a deferred tool is offered, dispatched and approved exactly as a
loaded one.

:meth:`Registry.dispatch` never raises for a tool's failure: an unknown tool, invalid
input, a refusal or an exception all come back as an ``is_error`` outcome the model can
act on. Only an interrupt (``KeyboardInterrupt`` / ``CancelledError``) goes through.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

from agent_kernel.errors import ToolInputError
from agent_kernel.kernel.interrupts import TURN_FRAMES, TurnInterrupted
from agent_kernel.kernel.libraries import drop_tainted
from agent_kernel.model import as_sent
from agent_kernel.model.conversation import OVERSIZED_INPUT, tool_result
from agent_kernel.model.tool_search import SEARCH_TOOL, deferred_request, referenced
from agent_kernel.secrets import redact, redacted_json
from agent_kernel.tools.context import _CALL, ToolCall
from agent_kernel.tools.report import ToolReport
from agent_kernel.tools.schema import compact

if TYPE_CHECKING:
    from pydantic import ValidationError

    from agent_kernel.config import AgentKernel
    from agent_kernel.model.shapes import ContentBlock
    from agent_kernel.tools.context import ToolContext

__all__ = [
    "INPUT_BYTES", "INPUT_DEPTH", "LOADED_TOOLS", "Outcome", "Registry", "Tool", "ToolReport", "current_context",
    "definitions", "is_loaded", "strict_json", "tool", "unresolved",
]  # fmt: skip

# The most one tool call's input may hold (its text, counted as UTF-8) and how deeply it
# may nest; checked before anything else looks at the input.
INPUT_BYTES = 1_000_000
INPUT_DEPTH = 32

# The tools whose definitions every request carries (when their group is offered): what
# most turns use, and report_result, which a sub-session ends with (parent and child send
# the same definitions, so a child's requests read the parent's cached prefix). The rest
# are found with tool search when needed.
LOADED_TOOLS = frozenset({
    "run_code", "inspect_namespace", "db_sql", "db_schema", "memory", "render_blocks", "ask_user",
    "send_message", "report_result",
})  # fmt: skip

_CONTEXT: contextvars.ContextVar[ToolContext] = contextvars.ContextVar("agent_kernel_tool_context")


def current_context() -> ToolContext:
    """The context of the tool call being dispatched (kernel, store, session, display)."""
    try:
        return _CONTEXT.get()
    except LookupError:
        raise RuntimeError("This tool can only run inside an agent turn.") from None


@dataclass(eq=False)
class Tool:
    """A function the model can call."""

    function: Callable[..., Any]
    name: str
    group: str = "user"
    # True: every call changes something (runs code, schedules). A function of the input:
    # only some calls do (a SQL tool reading or writing); such a tool is still offered
    # in read-only mode, and the approval check asks the function about each call.
    writes: bool | Callable[[Any], bool] = False
    # A callable is asked once, when the definition is first built (it stays the same
    # for the process: tool definitions are part of the cached prompt prefix).
    description: str | Callable[[], str] | None = None
    input_schema: dict[str, object] | None = None
    # Offered only while a notebook front end with the extension is attached (see
    # agent_kernel.kernel.channel): a turn without one never sees the tool.
    needs_notebook: bool = False
    # In ``ask`` mode the tool shows the person the change in the notebook (a diff with
    # Accept and Reject) and applies it only on Accept, so the approval check does not ask.
    asks_in_notebook: bool = False
    # The tool runs its input as code: it gets the input as the model wrote it. Every other
    # tool gets the copy the conversation records, redacted (what it shows is the screen,
    # what it sends leaves the machine): see agent_kernel.model.as_sent.
    runs_input: bool = False

    def writes_for(self, tool_input: Any) -> bool:
        """Whether this call would change something (decides approval)."""
        if callable(self.writes):
            try:
                return bool(self.writes(tool_input))
            except Exception:  # noqa: BLE001 - unclassifiable input: treat as a write
                return True
        return self.writes

    @cached_property
    def _sdk_tool(self) -> Any:
        from anthropic.lib.tools import BetaAsyncFunctionTool, BetaFunctionTool  # noqa: PLC0415 - anthropic is heavy: a cell's @agent_kernel.tool imports this module

        cls = BetaAsyncFunctionTool if inspect.iscoroutinefunction(self.function) else BetaFunctionTool
        description = self.description() if callable(self.description) else self.description
        return cls(
            self.function,
            name=self.name,
            description=description,
            input_schema=self.input_schema,
        )

    def definition(self, settings: AgentKernel | None = None) -> dict[str, object]:
        """The ``tools=[...]`` entry sent to the model, its schema compacted (see schema.py);
        ``settings``: the turn's :class:`~agent_kernel.config.AgentKernel`, which a server
        tool's entry depends on.

        The same object each time (not to be changed): every turn's requests carry it, and
        the model client scrubs an unchanged object once (see ``ScrubbedParts``)."""
        return self._definition

    @cached_property
    def _definition(self) -> dict[str, object]:
        sent: dict[str, object] = dict(self._sdk_tool.to_dict())
        sent["input_schema"] = compact(sent["input_schema"])
        return sent

    def deferred_definition(self, settings: AgentKernel | None = None) -> dict[str, object]:
        """:meth:`definition` marked ``defer_loading`` (found by tool search), kept while
        :meth:`definition` gives the same object."""
        made = self.definition(settings)
        kept: tuple[dict[str, object], dict[str, object]] | None = self.__dict__.get("_deferred")
        if kept is None or kept[0] is not made:
            kept = (made, {**made, "defer_loading": True})
            self.__dict__["_deferred"] = kept
        return kept[1]

    async def call(self, tool_input: object) -> Any:
        """Validate ``tool_input`` against the schema and call the function."""
        if not isinstance(tool_input, dict):
            raise ToolInputError(f"{self.name} takes a JSON object, got {type(tool_input).__name__}.")
        try:
            result = self._sdk_tool.call(tool_input)
            if inspect.isawaitable(result):
                result = await result
        except ValueError as exc:
            cause = exc.__cause__
            if cause is not None and type(cause).__name__ == "ValidationError":
                raise ToolInputError(_describe_validation(self.name, cast("ValidationError", cause))) from None
            raise
        return result


def is_loaded(item: Tool) -> bool:
    """Whether ``item``'s definition is loaded in every request (the others are deferred)."""
    return item.group == "user" or item.name in LOADED_TOOLS


# What a tool an earlier search found, and this turn does not offer, says when the
# conversation loads it again (see unresolved).
NOT_OFFERED = "Not offered now: the approval mode or the settings leave it out, or it was removed. Do not call it."


def definitions(
    tools: Iterable[Tool], settings: AgentKernel | None = None, *, model: str | None = None, absent: Iterable[str] = ()
) -> list[Mapping[str, object]]:
    """The ``tools=[...]`` of a request to ``model`` offering ``tools``.

    With tool search (``settings.tool_search`` and a model that has it), the loaded tools
    come first, then the deferred ones (``defer_loading``), then the search tool, which
    carries the tools' cache breakpoint (see :mod:`agent_kernel.model.caching`): the cached
    prefix is the loaded definitions and the search tool, whatever is deferred. Without
    it, or when nothing is deferred, every tool is loaded.

    ``absent``: tools an earlier search of the conversation found that ``tools`` leaves
    out (:func:`unresolved`). The API refuses a conversation referencing a tool the
    request lacks, so each is sent deferred, saying it is not offered; a call of it is
    refused like any tool not offered.
    """
    tools = list(tools)
    if not deferred_request(model, getattr(settings, "tool_search", True)):
        return [t.definition(settings) for t in tools]
    loaded: list[Mapping[str, object]] = [t.definition(settings) for t in tools if is_loaded(t)]
    deferred = [t.deferred_definition(settings) for t in tools if not is_loaded(t)]
    deferred += [
        {"name": name, "description": NOT_OFFERED, "input_schema": {"type": "object", "properties": {}}, "defer_loading": True}
        for name in absent
    ]  # fmt: skip
    if not deferred:
        return loaded
    return [*loaded, *deferred, SEARCH_TOOL]  # the same object each time, as the definitions


def unresolved(messages: Iterable[Mapping[str, Any]], tools: Iterable[Tool]) -> tuple[str, ...]:
    """The tools the tool searches in ``messages`` found that ``tools`` does not hold."""
    names = {t.name for t in tools}
    return tuple(n for n in referenced(m for m in messages if m.get("role") == "assistant") if n not in names)


@dataclass(frozen=True)
class Outcome:
    """What a dispatched call produced: the text the model gets, whether it is an error, and
    what the tool reported it did (for the turn to act on)."""

    content: str
    is_error: bool
    value: Any = None
    duration_ms: float | None = 0.0  # None: the tool never ran (approval refused it)
    report: ToolReport = field(default_factory=ToolReport)

    def block(self, tool_use_id: str) -> ContentBlock:
        if self.report.images and not self.is_error:
            images: list[ContentBlock] = [{"type": "text", "text": self.content}, *self.report.images]
            return {"type": "tool_result", "tool_use_id": tool_use_id, "content": images}
        return tool_result(tool_use_id, self.content, is_error=self.is_error)


@dataclass
class Registry:
    """The tools of one agent: built-in ones plus those a user registers."""

    tools: dict[str, Tool] = field(default_factory=dict)

    def add(self, item: Tool) -> Tool:
        self.tools[item.name] = item
        return item

    def remove(self, name: str) -> None:
        self.tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def offered(self, groups: Iterable[str], *, read_only: bool = False, notebook: bool = False) -> list[Tool]:
        """The tools to offer: those in ``groups``, only reading ones when ``read_only``,
        those that need a notebook front end only when one is attached (``notebook``)."""
        wanted = set(groups)
        return [
            t
            for t in self.tools.values()
            if t.group in wanted and not (read_only and t.writes is True) and (notebook or not t.needs_notebook)
        ]

    async def dispatch(
        self,
        name: str,
        tool_input: object,
        context: ToolContext,
        *,
        offered: Iterable[str] | None = None,
        result_chars: int = 20_000,
        input_bytes: int = INPUT_BYTES,
        check: Callable[[Tool, object, ToolContext], Awaitable[str | None]] | None = None,
        tool_use_id: str | None = None,
        report: ToolReport | None = None,
    ) -> Outcome:
        """Run one tool call; every failure becomes an ``is_error`` outcome.

        An input over ``input_bytes`` (or nested deeper than :data:`INPUT_DEPTH`) is
        refused before anything else. ``offered`` limits which names may run (a tool not
        offered this turn is refused even if registered); ``check`` may refuse a call with
        a reason before it runs (approval). What the tool reports it did goes into
        ``report`` (a fresh one by default: the caller that passes its own still has it
        when an interrupt ends the call) and comes back as ``outcome.report``.

        ``tool_input`` is the call's input as the conversation records it, redacted. A tool
        that runs its input (``runs_input``) and its check get it as the model sent it
        (:mod:`agent_kernel.model.as_sent`): the code that runs is the code the model
        wrote, and the approval card redacts what it shows.
        """
        started = time.perf_counter()
        report = report if report is not None else ToolReport()
        sent = as_sent.take(tool_use_id, tool_input)

        def done(content: str, is_error: bool, value: Any = None, *, ran: bool = True) -> Outcome:
            # A result was redacted by to_text (before JSON encoding); an error text is here.
            # Capping comes last, so a cut never exposes part of a secret.
            if is_error:
                content = redact(content)
            duration_ms = (time.perf_counter() - started) * 1000 if ran else None
            return Outcome(_cap(content, result_chars), is_error, value, duration_ms, report)

        oversize = input_problem(name, tool_input, input_bytes)
        if oversize is not None:
            return done(oversize, True, ran=False)
        allowed = set(offered) if offered is not None else set(self.tools)
        item = self.tools.get(name)
        if item is None or name not in allowed:
            names = ", ".join(sorted(allowed)) or "none"
            return done(f"Unknown tool {name!r}. The tools available are: {names}.", True)
        if item.runs_input:
            tool_input = sent  # run as the model wrote it
        token = _CONTEXT.set(context)
        call_token = _CALL.set(ToolCall(context, tool_use_id, report))
        try:
            if check is not None:
                refusal = await check(item, tool_input, context)
                if refusal:
                    return done(refusal, True, ran=False)
                started = time.perf_counter()  # the tool's own time, not the wait for approval
            value = await item.call(tool_input)
        except KeyboardInterrupt:
            # Raised by the SIGINT handler inside a synchronous tool: this frame is the
            # boundary where it becomes an ordinary exception (see interrupts.py).
            raise TurnInterrupted(context.interrupts.reason or "interrupt") from None
        except (asyncio.CancelledError, TurnInterrupted):
            raise
        except ToolInputError as exc:
            return done(str(exc), True)
        except Exception as exc:  # noqa: BLE001 - a tool never crashes the turn
            tool_error = _sdk_tool_error_content(exc)
            if tool_error is not None:
                return done(tool_error, True)
            return done(_describe_exception(name, exc), True)
        finally:
            _CALL.reset(call_token)
            _CONTEXT.reset(token)
            _drop_tainted_libraries()
        return done(to_text(value), False, value)


TURN_FRAMES.add(Registry.dispatch.__code__)


def _drop_tainted_libraries() -> None:
    """A tainted library the call loaded stays out of the import cache (see libraries.py)."""
    drop_tainted()


def tool(
    function: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    group: str = "user",
    writes: bool = False,
    description: str | None = None,
) -> Any:
    """Make a notebook function available to the agent as a tool.

    The schema comes from the type hints, the description from the docstring (an
    ``Args:`` section documents each parameter). Works bare (``@tool``) or with options
    (``@tool(writes=True)``). The function is returned unchanged.
    """

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not (fn.__doc__ or description):
            raise ValueError(f"{fn.__name__} needs a docstring: the model reads it to decide when to call it.")
        USER_TOOLS.add(Tool(fn, name=name or fn.__name__, group=group, writes=writes, description=description))
        return fn

    return register(function) if function is not None else register


# Tools registered with @tool in this process; every Agent offers them (group "user").
USER_TOOLS = Registry()


def to_text(value: object) -> str:
    """The text sent to the model for a tool's return value (JSON for structured values).

    Secrets are redacted as in the raw strings, which JSON escaping could hide (a value
    holding quotes, backslashes or newlines): see :func:`agent_kernel.secrets.redacted_json`.
    """
    if isinstance(value, str):
        return redact(value)
    return redacted_json(value, default=_json_default)


def strict_json(value: object, what: str) -> str:
    """``value`` as JSON text, refusing NaN and infinities (which JSON has no numbers for)."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError:
        raise ToolInputError(
            f"{what} holds NaN or an infinity, which JSON cannot store: use null or a string instead."
        ) from None


def _json_default(value: object) -> object:
    llm = getattr(value, "_repr_llm_", None)
    if callable(llm):
        return llm()
    return repr(value)


def input_problem(name: str, tool_input: object, limit: int, depth: int = INPUT_DEPTH) -> str | None:
    """Why ``tool_input`` is too big or too deep for one call, or None when it is not.

    Walks the input once and stops as soon as it is over ``limit`` bytes, so an
    oversized input costs little more than its first ``limit`` bytes.
    """
    size = 0
    if isinstance(tool_input, dict) and set(tool_input) == {OVERSIZED_INPUT}:
        size = tool_input[OVERSIZED_INPUT] if isinstance(tool_input[OVERSIZED_INPUT], int) else limit + 1
    stack: list[tuple[object, int]] = [(tool_input, 0)] if size <= limit else []
    while stack:
        value, level = stack.pop()
        if isinstance(value, str):
            chars = len(value)  # a lower bound of its UTF-8 bytes, enough when over the limit
            size += chars if chars > limit or value.isascii() else len(value.encode("utf-8", "surrogatepass"))
        elif isinstance(value, (dict, list, tuple)):
            if level >= depth:
                return f"The input of {name} is nested more than {depth} levels deep; send a flatter structure."
            size += 2 + len(value)  # brackets and separators, before the items are walked
            if size > limit:
                break
            if isinstance(value, dict):
                for key, item in value.items():
                    stack.append((key, level + 1))
                    stack.append((item, level + 1))
            else:
                stack.extend((item, level + 1) for item in value)
        else:
            size += 8  # a number, a boolean or null
        if size > limit:
            break
    if size > limit:
        return (
            f"The input of {name} is over {limit:,} bytes, the most one tool call takes. "
            "Send less: split the work into several smaller calls, or let code you run "
            "(or a table) hold the large data and pass its name instead of the data."
        )
    return None


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[truncated: the result was {len(text):,} characters; the first {limit:,} are shown]"


def _describe_validation(name: str, error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        where = ".".join(str(p) for p in item.get("loc", ())) or "input"
        problems.append(f"{where}: {item.get('msg')}")
    return f"Invalid input for {name}: " + "; ".join(problems)


def _describe_exception(name: str, exc: BaseException) -> str:
    frames = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3)
    return f"{name} failed with {type(exc).__name__}: {exc}\n" + "".join(frames[-4:]).strip()


def _sdk_tool_error_content(exc: Exception) -> str | None:
    """The content of an ``anthropic.lib.tools.ToolError``, which user tools may raise."""
    if type(exc).__name__ != "ToolError" or not hasattr(exc, "content"):
        return None
    content = exc.content
    return content if isinstance(content, str) else str(exc)
