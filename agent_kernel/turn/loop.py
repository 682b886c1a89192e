"""One turn: stream from the model, run the tools it calls, repeat until it ends its turn.

A thin loop of our own over ``messages.stream`` (not the SDK's tool runner) because every
step needs a hook: the cell shows each tool call, approval can hold it, and each message
is stored as it happens. The stored conversation stays valid whatever stops the turn: an
interrupted tool call gets a ``tool_result`` saying so.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_kernel.authority import turn_running
from agent_kernel.errors import ModelError
from agent_kernel.kernel.interrupts import TurnInterrupted
from agent_kernel.model import calls, conversation
from agent_kernel.model.client import ModelClient
from agent_kernel.model.shapes import ContentBlock, RequestParams, Role, ToolUseBlock
from agent_kernel.model.thinking import thinking_params
from agent_kernel.model.usage import CallUsage, InputEstimate, request_chars
from agent_kernel.secrets import scrub
from agent_kernel.store import audit
from agent_kernel.store import sessions as session_rows
from agent_kernel.store import usage as usage_rows
from agent_kernel.tools import definitions as tool_definitions
from agent_kernel.tools import unresolved, web
from agent_kernel.tools.report import ToolReport
from agent_kernel.turn import prompt
from agent_kernel.turn.outcome import failure

if TYPE_CHECKING:
    from anthropic.types import Message

    from agent_kernel.tools import Outcome, Registry, Tool
    from agent_kernel.tools.context import ToolContext
    from agent_kernel.turn.approval import Check
    from agent_kernel.turn.budget import ContextBudget

__all__ = ["Turn", "TurnLimits", "TurnResult", "parse_structured"]


@dataclass
class TurnLimits:
    """The numbers one turn runs under."""

    model: str
    max_tokens: int
    token_limit: int
    max_model_calls: int
    model_retries: int
    result_chars: int
    cost_limit: float | None = None  # USD per session; None: no limit
    thinking: str = ""  # AgentKernel.thinking / --think: "" (off), adaptive, low, medium, high, max


@dataclass
class TurnResult:
    """What a turn ended with."""

    session: str
    state: str
    text: str = ""
    tool_calls: int = 0
    model_calls: int = 0
    tokens: int = 0
    session_tokens: int = 0  # what the token limit counts (CallUsage.counted), earlier turns included
    stop_reason: str | None = None
    error: str | None = None
    seconds: float = 0.0
    model: str | None = None
    # Usage of the turn's model calls: cost in USD of the priced ones (None: no call had a
    # price), how many had none, and the input tokens read from the prompt cache.
    cost: float | None = None
    unpriced_calls: int = 0
    session_cost: float = 0.0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    # How the turn ended: "end_turn", or one of outcome.FAILED_ENDINGS (then ``error`` is
    # the line the user saw).
    ending: str = ""
    # The API's server tools: requests billed in this turn (usage.server_tool_use), and
    # the pages the answer cites ({url, title}).
    web_searches: int = 0
    web_fetches: int = 0
    sources: list[dict[str, str]] = field(default_factory=list)
    # Sub-sessions started in this turn (at any depth) and what their calls used: the
    # figures above include them, so the session's limits bound the whole tree.
    subsessions: int = 0
    subsession_tokens: int = 0
    subsession_cost: float = 0.0

    @property
    def failed(self) -> bool:
        """Whether the turn did not end normally (see :mod:`agent_kernel.turn.outcome`)."""
        return failure(self) is not None

    def count(self, usage: CallUsage, *, side: bool = False) -> None:
        """Add one model call's usage (``side``: a call made for the turn, such as a
        conversation summary, which is not one of its model calls)."""
        if not side:
            self.model_calls += 1
            self.model = usage.model
        self._add(usage)

    def count_subsession(self, usage: CallUsage) -> None:
        """Add one model call of a sub-session (started by this turn, at any depth)."""
        self._add(usage)
        self.subsession_tokens += usage.total
        if usage.cost is not None:
            self.subsession_cost += usage.cost

    def _add(self, usage: CallUsage) -> None:
        """A call's tokens and cost in the turn's and the session's figures (the session's
        tokens are those its token limit counts: :attr:`CallUsage.counted`)."""
        self.tokens += usage.total
        self.session_tokens += usage.counted
        self.input_tokens += usage.prompt_tokens
        self.cache_read_tokens += usage.cache_read
        if usage.cost is None:
            self.unpriced_calls += 1
        else:
            self.cost = (self.cost or 0.0) + usage.cost
            self.session_cost += usage.cost

    def value(self) -> Any:
        """The final text, or the JSON it holds when it is only a JSON value."""
        return parse_structured(self.text)

    def __repr__(self) -> str:
        preview = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return (
            f"TurnResult(session={self.session!r}, state={self.state!r}, "
            f"tool_calls={self.tool_calls}, text={preview!r})"
        )


@dataclass
class Turn:
    """Everything one turn needs; :meth:`run` does it."""

    context: ToolContext
    registry: Registry
    tools: list[Tool]
    model_client: ModelClient
    limits: TurnLimits
    system: str
    history: conversation.Repair  # the conversation before this turn, as repaired so far
    prompt_blocks: list[ContentBlock]
    session_tokens: int
    check: Check | None = None
    # Asked at the token limit: the raised limit to go on with, or None to stop (Continue).
    budget: ContextBudget | None = None
    # Given the tokens used, the limit and the next call's estimated input tokens.
    on_token_limit: Callable[[ToolContext, int, int, int], Awaitable[int | None]] | None = None
    # Asked at the cost limit (USD spent, limit): the raised limit, or None to stop.
    on_cost_limit: Callable[[ToolContext, float, float], Awaitable[float | None]] | None = None
    session_cost: float = 0.0  # USD the session's earlier priced calls cost
    # The tools to offer now, asked after a tool call changed the agent-defined tools.
    refresh_tools: Callable[[], list[Tool]] | None = None
    # The last request's reported input size, for the next call's estimate (from the store).
    estimate: InputEstimate = field(default_factory=InputEstimate)
    # Model calls made for this turn before it ran (session summaries): (response, ms), recorded with it.
    side_calls: list[tuple[Message, float]] = field(default_factory=list)
    # The turn of the session that started this one as a sub-session: every call made
    # here counts in its figures (and its parent's), and its limits bound this turn's calls.
    parent: Turn | None = None
    result: TurnResult | None = field(default=None, init=False)  # while and after it runs
    _messages: list[conversation.Message] = field(default_factory=list)
    _journal: session_rows.Journal = field(init=False)
    _audit: audit.AuditLog = field(init=False)
    _usage: usage_rows.UsageLog = field(init=False)
    _prompt_saved: bool = False  # the turn's prompt is stored (with the first reply, or when stopped)
    _contents: list[list[ContentBlock]] = field(default_factory=list)  # this turn's assistant messages
    _unpriced_noted: bool = False
    _tainted_said: bool = False  # the cell said this turn's session read untrusted content
    # What the tool calls reported (see tools/report.py), merged here as each call ends.
    _ended: str | None = None  # report_result: the session ended with this result
    _tools_changed: bool = False
    _prompt_changed: bool = False
    _caller: calls.Caller | None = None  # where the tools' own model calls go (see model/calls.py)
    # The definitions of ``tools``, built once for the turn's calls (again when a tool call
    # changed which tools are offered, or a tool an earlier search found is no longer offered).
    _definitions: tuple[list[Tool], tuple[str, ...], Sequence[Mapping[str, object]]] | None = None

    async def run(self) -> TurnResult:
        """Run the turn; while it runs, the person's trust changes are refused in this
        process (:func:`agent_kernel.authority.turn_running`): code the model runs here
        cannot make them. A sub-session runs inside its parent's turn."""
        with turn_running():
            return await self._run()

    async def _run(self) -> TurnResult:
        started = time.perf_counter()
        result = self._begin()
        try:
            while True:
                self.context.interrupts.check()
                if result.model_calls >= self.limits.max_model_calls:
                    result.state = "idle"
                    self._fail(
                        result,
                        "call_limit",
                        f"Stopped after {result.model_calls} model calls in one turn "
                        "(AgentKernel.max_model_calls). Run %agent continue to go on.",
                        "warning",
                    )
                    break
                content = await self._call_model(result)
                if content is None:  # a limit stopped the turn before the call
                    break
                if result.stop_reason == "pause_turn":
                    continue
                uses = conversation.tool_uses(content)
                if not uses:
                    self._answered(result, content)
                    break
                await self._run_tools(uses, result)
                if self._ended is not None:  # a sub-session called report_result
                    result.state, result.ending, result.text = "completed", "end_turn", self._ended
                    break
        except TurnInterrupted as stop:
            self._interrupted(result, stop)
        except ModelError as exc:
            result.state = "error"
            self._fail(result, "model_error", str(exc), "error")
        finally:
            self._finish(result, started)
        return result

    def _begin(self) -> TurnResult:
        """The turn's result, its conversation with the prompt, and its logs, written as running."""
        ctx = self.context
        result = TurnResult(
            session=ctx.session_name, state="running", session_tokens=self.session_tokens,
            session_cost=self.session_cost,
        )  # fmt: skip
        self.result = result
        # An interpolated prompt can hold a secret or text no encoder accepts: it is
        # stored and sent only scrubbed.
        self.prompt_blocks = scrub(self.prompt_blocks)
        self._messages = self.history.extend([{"role": "user", "content": self.prompt_blocks}]).messages()
        self._prompt_saved = False
        self._contents = []
        self._journal = ctx.journal
        self._audit = audit.AuditLog(ctx.session_id, ctx.turn, ctx.prompt)
        self._usage = usage_rows.UsageLog(ctx.session_id, ctx.turn)
        if self.budget is not None:
            self.budget.on_model_call = lambda message, ms: self._side_call(result, message, ms)
        for message, ms in self.side_calls:
            self._side_call(result, message, ms)
        if ctx.model_client is not None:
            self._caller = calls.Caller(
                ctx.model_client, ctx.settings,
                record=lambda message, ms: self._side_call(result, message, ms),
                limit_reached=lambda: self._limit_line(result),
            )  # fmt: skip
        if ctx.reads.this_turn:  # read before the turn started (a sub-session's inherited sources)
            self._journal.untrusted(ctx.reads.session_sources())
        self._say_tainted()
        self._journal.state("running")
        self._write()
        ctx.component_calls = self._component_call
        return result

    async def _call_model(self, result: TurnResult) -> list[ContentBlock] | None:
        """One model call: the request (fitted to the context budget), checked against the
        limits, streamed; its usage counted and its reply stored and added to the
        conversation. The reply's content, or None when a limit stopped the turn first."""
        ctx = self.context
        view = ctx.transcript
        params = self._params()
        chars: int | None = None
        if self.budget is not None:  # what is sent: compacted to fit the context budget
            params = await ctx.interrupts.phase(self.budget.fit(params, view))
            chars = self.budget.request_chars()
        if chars is None:
            chars = request_chars(params)
        if not await self._within_limits(result, self.estimate.next(chars)):
            return None
        called = time.perf_counter()
        message = await ctx.interrupts.phase(
            # Cache marks go on in the model client, on the scrubbed request: the size
            # counts none, and the budget compares each request's messages with the
            # last one's, whose last message would carry the mark.
            self.model_client.stream(params, view, retries=self.limits.model_retries, cache_marks=True)
        )
        if self.budget is not None:
            self.budget.observe(message, view)
        usage = CallUsage.of(message.model, message.usage, getattr(ctx.settings, "prices", None))
        self.estimate.reported(usage.prompt_tokens, chars)
        self._usage.call(
            usage, duration_ms=(time.perf_counter() - called) * 1000, request_chars=chars,
            stop_reason=message.stop_reason,
        )  # fmt: skip
        self._count(result, usage)
        # Already scrubbed by the model client (a lone surrogate or absurd nesting in a
        # tool input cannot fail the next request or insert).
        content = conversation.from_api(message.content)
        if not self._prompt_saved:
            self._save("user", self.prompt_blocks)
            self._prompt_saved = True
        self._journal.usage(usage.counted)
        self._save("assistant", content)
        _count_server_tools(message, result)
        read = web.untrusted_sources(content)
        if read:
            self._read_untrusted(read)
        self._contents.append(content)
        if self._messages[-1]["role"] == "assistant":
            # The continuation of a paused turn (pause_turn): one assistant message.
            paused = conversation.as_blocks(self._messages[-1]["content"])
            self._messages[-1] = {"role": "assistant", "content": paused + content}
        else:
            self._messages.append({"role": "assistant", "content": content})
        result.stop_reason = message.stop_reason
        return content

    def _answered(self, result: TurnResult, content: list[ContentBlock]) -> None:
        """The model ended its turn with ``content``: its text is the answer (a warning says
        when max_tokens cut it off)."""
        view = self.context.transcript
        result.text = "".join(b.get("text", "") for b in content if b["type"] == "text")
        result.state = "idle"
        result.ending = "end_turn"
        result.sources = web.cited_sources(self._contents)
        view.sources(result.sources)
        if result.stop_reason == "max_tokens":
            view.notice(
                f"The answer was cut off at max_tokens ({self.limits.max_tokens:,}); "
                "raise %config AgentKernel.max_tokens or ask it to continue.",
                kind="warning",
            )

    def _interrupted(self, result: TurnResult, stop: TurnInterrupted) -> None:
        """The Stop button or a kernel interrupt ended the turn."""
        if not self._prompt_saved:
            # Keep what the user asked, as a chat does when stopped; the next turn's
            # prompt is merged after it. (A model *error* drops it instead: a prompt
            # the API rejected would be rejected again with every later turn.)
            self._save("user", self.prompt_blocks)
        if result.state not in ("token_limit_reached", "cost_limit_reached"):
            result.state = "idle"
        if stop.reason == "stop":
            self._fail(result, "stopped", "■ Stopped.", "warning")
        else:
            self._fail(result, "interrupted", "■ Interrupted.", "warning")

    def _finish(self, result: TurnResult, started: float) -> None:
        """However the turn ended: its time and state written, its transcript closed."""
        self.context.component_calls = None
        result.seconds = time.perf_counter() - started
        self._journal.state(result.state, result.error)
        self._write()
        self.context.transcript.close()

    def _fail(self, result: TurnResult, ending: str, line: str, kind: str) -> None:
        """End the turn as failed (see outcome.py); ``line`` is what the user is told."""
        result.ending, result.error = ending, line
        self.context.transcript.failed(line, kind=kind)

    # -- limits ----------------------------------------------------------------------------

    async def _within_limits(self, result: TurnResult, needed: int) -> bool:
        """Whether the next model call, of about ``needed`` input tokens, may start.

        A call that would take the session past its token limit is not started, and one is
        not started once the session's cost reached its cost limit: the person may raise
        the limit (Continue) or the turn ends here.
        """
        name = self.context.session_name
        outer = self._outer_limit(needed)
        if outer is not None:  # nobody to ask: the parent's own turn offers Continue
            result.state = outer[0]
            self._fail(result, outer[0].removesuffix("_reached"), outer[1], "warning")
            return False
        while result.session_tokens >= self.limits.token_limit or (
            result.session_tokens + needed > self.limits.token_limit
        ):
            used, limit = result.session_tokens, self.limits.token_limit
            result.state = "token_limit_reached"
            if used >= limit:
                why = f"Session {name!r} reached its token limit ({used:,} of {limit:,} tokens)."
            else:
                why = (
                    f"Session {name!r} stopped before a model call that would pass its token limit "
                    f"(about {needed:,} input tokens; {used:,} of {limit:,} used)."
                )
            line = (
                f"{why} Continue with a higher limit: %agent --token-limit N ..., or "
                "%config AgentKernel.token_limit = N."
            )
            if not await self._continue_past_limit(result, needed):  # the card says why
                self._fail(result, "token_limit", line, "warning")
                return False
        cost_limit = self.limits.cost_limit
        if cost_limit and result.unpriced_calls and not self._unpriced_noted:
            self._unpriced_noted = True
            self.context.transcript.notice(
                f"AgentKernel.cost_limit does not count calls to {result.model!r}: it has no price "
                "(add one with %config AgentKernel.prices).",
                kind="warning",
            )
        while cost_limit and result.session_cost >= cost_limit:
            result.state = "cost_limit_reached"
            line = (
                f"Session {name!r} reached its cost limit (${result.session_cost:,.4f} of "
                f"${cost_limit:,.2f}). Continue with a higher limit: %config AgentKernel.cost_limit = USD."
            )
            raised = await self._ask_to_continue(
                "cost_limit_reached", self.on_cost_limit, result.session_cost, cost_limit
            )
            if raised is None or raised <= result.session_cost:
                self._fail(result, "cost_limit", line, "warning")
                return False
            cost_limit = self.limits.cost_limit = raised
            self._journal.cost_limit(raised)
            self._resume(result)
        return True

    async def _continue_past_limit(self, result: TurnResult, needed: int = 0) -> bool:
        """Offer Continue at the token limit; True when the limit was raised enough."""
        raised = await self._ask_to_continue(
            "token_limit_reached", self.on_token_limit, result.session_tokens, self.limits.token_limit, needed
        )
        if raised is None or raised <= result.session_tokens:
            return False
        self.limits.token_limit = raised
        self._journal.token_limit(raised)
        self._resume(result)
        return True

    async def _ask_to_continue(self, state: str, ask: Callable[..., Awaitable[Any]] | None, *args: Any) -> Any:
        """The raised limit the person chose (``None``: stop, or nobody to ask)."""
        if ask is None:
            return None
        ctx = self.context
        self._journal.state(state)
        self._write()
        return await ctx.interrupts.phase(ask(ctx, *args))

    def _resume(self, result: TurnResult) -> None:
        self._journal.state("running")
        self._write()
        result.state = "running"

    # -- tools ---------------------------------------------------------------------------

    async def _run_tools(self, uses: list[ToolUseBlock], result: TurnResult) -> None:
        ctx = self.context
        blocks: list[ContentBlock] = []
        running: ToolReport | None = None  # the report of the call under way
        try:
            for use in uses:
                if self._ended is not None:  # report_result ended the session: the rest never run
                    skipped = "Not run: the session ended with report_result before this call."
                    blocks.append(conversation.tool_result(use["id"], skipped, is_error=True))
                    continue
                ctx.transcript.tool_running(use["id"], use["name"], use.get("input"))
                running = ToolReport()
                result.tool_calls += 1  # a call the user stopped ran too
                try:
                    outcome = await ctx.interrupts.phase(
                        self._dispatch(use["name"], use.get("input"), use["id"], running)
                    )
                finally:
                    self._merge(running)
                blocks.append(outcome.block(use["id"]))
                self._audit.tool_call(
                    use,
                    result_chars=len(outcome.content),
                    is_error=outcome.is_error,
                    duration_ms=outcome.duration_ms,
                    executions=running.executions,
                )
                running = None
                ctx.transcript.tool_finished(
                    use["id"],
                    status=_outcome_status(outcome),
                    detail=_outcome_detail(outcome),
                    duration_ms=outcome.duration_ms,
                )
        except TurnInterrupted:
            answered = {str(b.get("tool_use_id")) for b in blocks}
            for use in uses:
                if use["id"] not in answered:
                    stopped = "The user stopped the turn before this call finished."
                    blocks.append(conversation.tool_result(use["id"], stopped, is_error=True))
                    ctx.transcript.tool_finished(use["id"], status="interrupted", detail="stopped")
                    self._audit.tool_call(
                        use,
                        result_chars=len(stopped),
                        is_error=True,
                        duration_ms=None,
                        executions=running.executions if running is not None else [],
                    )
                    running = None  # its runs are audited with the call that made them
            raise
        finally:
            if blocks:
                self._save("user", blocks)
                self._messages.append({"role": "user", "content": blocks})
        if self._tools_changed:
            self._tools_changed = False
            if self.refresh_tools is not None:
                self.tools = self.refresh_tools()
        if self._prompt_changed:
            self._prompt_changed = False
            self.system = self._system_prompt()

    def _merge(self, report: ToolReport) -> None:
        """Take in what a tool call reported it did."""
        if report.untrusted:
            self._read_untrusted(report.untrusted)
        self._tools_changed = self._tools_changed or report.tools_changed
        self._prompt_changed = self._prompt_changed or report.system_prompt_changed
        if report.ended is not None:
            self._ended = report.ended

    def _read_untrusted(self, sources: list[str]) -> None:
        """Untrusted content entered the turn from ``sources``: the session keeps the list."""
        reads = self.context.reads
        if reads.add(sources):
            self._journal.untrusted(reads.session_sources())
            self.context.writer.submit(self._journal.write)
            self._say_tainted()

    def _say_tainted(self) -> None:
        """Once per turn, when the session has read untrusted content: say in the cell (and
        the panel's chat, which shows the cell's output) that writing actions ask, or are
        refused with nobody to approve (the approval check decides which)."""
        if self._tainted_said or not self.context.session_sources():
            return
        self._tainted_said = True
        notice = getattr(self.check, "tainted_notice", None)
        line = notice(self.context) if callable(notice) else None
        if line:
            self.context.transcript.notice(line, kind="warning")

    def _system_prompt(self) -> str:
        """The system prompt built again from the store (a tool changed a stored section)."""
        ctx = self.context
        with ctx.store.connect() as con:
            return prompt.system_prompt(
                con,
                settings=ctx.settings,
                groups={t.group for t in self.tools},
                secrets=ctx.secrets.names() if ctx.secrets is not None else (),
            )

    async def _dispatch(self, name: str, tool_input: object, tool_use_id: str | None, report: ToolReport) -> Outcome:
        """Run one call through the registry: the offered tools, the result cap, the approval
        check (``tool_use_id``: the model's call, None for a UI component's)."""
        token = calls.set_turn_caller(self._caller)
        try:
            return await self.registry.dispatch(
                name,
                tool_input,
                self.context,
                offered=[t.name for t in self.tools],
                result_chars=self.limits.result_chars,
                check=self.check,
                tool_use_id=tool_use_id,
                report=report,
            )
        finally:
            calls.reset_turn_caller(token)

    async def _component_call(self, name: str, tool_input: dict[str, object]) -> tuple[str, bool]:
        """A tool call a shown UI component asks for, dispatched as the model's calls are
        (offered tools, approval check). After untrusted content, a writing tool runs
        from a component only where the person approves each call (``ask`` mode)."""
        item = self.registry.get(name)
        if (
            item is not None and self.context.approve != "ask" and self.context.session_sources()
            and item.writes_for(tool_input)
        ):  # fmt: skip
            return (
                f"{name} changes things, and this session read untrusted content: a component may call it "
                "only in a turn run with --approve ask, where the user approves each call.", True,
            )  # fmt: skip
        report = ToolReport()
        outcome = await self._dispatch(name, tool_input, None, report)
        if report.untrusted:
            self._read_untrusted(report.untrusted)
        return outcome.content, outcome.is_error

    # -- requests and storage ------------------------------------------------------------

    def _side_call(self, result: TurnResult, message: Message, duration_ms: float | None) -> None:
        """Record a model call made for the turn outside its conversation (a summary, a
        tool's llm_generate)."""
        usage = CallUsage.of(message.model, message.usage, getattr(self.context.settings, "prices", None))
        self._usage.call(usage, duration_ms=duration_ms, stop_reason=message.stop_reason)
        self._count(result, usage, side=True)
        self._journal.usage(usage.counted)

    def _count(self, result: TurnResult, usage: CallUsage, *, side: bool = False) -> None:
        """Add a call to this turn's figures and to those of the sessions that started it:
        a sub-session's tokens and cost are its parent's too (and stored with it)."""
        result.count(usage, side=side)
        self.context.transcript.usage(result.model or usage.model, result.tokens, result.cost)
        for outer in self._outer():
            if outer.result is not None:
                outer.result.count_subsession(usage)
                outer.context.transcript.usage(
                    outer.result.model or usage.model, outer.result.tokens, outer.result.cost
                )
            outer._journal.usage(usage.counted)
            self.context.writer.submit(outer._journal.write)

    def _outer(self) -> list[Turn]:
        """The turns of the sessions above this one: its parent's first."""
        return self.lineage()[1:]

    def lineage(self) -> list[Turn]:
        """This turn and those of the sessions above it, nearest first."""
        found: list[Turn] = []
        turn: Turn | None = self
        while turn is not None:
            found.append(turn)
            turn = turn.parent
        return found

    def _outer_limit(self, needed: int) -> tuple[str, str] | None:
        """(state, line) when a call of about ``needed`` input tokens would take a session
        above this one past its token limit, or one of them reached its cost limit."""
        name = self.context.session_name
        for outer in self._outer():
            found = outer.result
            if found is None:
                continue
            above, limit = outer.context.session_name, outer.limits.token_limit
            if found.session_tokens + needed > limit or found.session_tokens >= limit:
                return "token_limit_reached", (
                    f"Sub-session {name!r} stopped: session {above!r}, which started it, would pass its "
                    f"token limit ({found.session_tokens:,} of {limit:,} tokens used, sub-sessions included)."
                )
            cost_limit = outer.limits.cost_limit
            if cost_limit and found.session_cost >= cost_limit:
                return "cost_limit_reached", (
                    f"Sub-session {name!r} stopped: session {above!r}, which started it, reached its cost "
                    f"limit (${found.session_cost:,.4f} of ${cost_limit:,.2f}, sub-sessions included)."
                )
        return None

    def _limit_line(self, result: TurnResult) -> str | None:
        """Why a tool may make no more model calls now (the session's token or cost limit), or None."""
        name = self.context.session_name
        outer = self._outer_limit(0)
        if outer is not None:
            return outer[1] + " No more model calls in this turn."
        if result.session_tokens >= self.limits.token_limit:
            return (
                f"Session {name!r} reached its token limit ({result.session_tokens:,} of "
                f"{self.limits.token_limit:,} tokens); no more model calls in this turn."
            )
        cost_limit = self.limits.cost_limit
        if cost_limit and result.session_cost >= cost_limit:
            return (
                f"Session {name!r} reached its cost limit (${result.session_cost:,.4f} of "
                f"${cost_limit:,.2f}); no more model calls in this turn."
            )
        return None

    def _params(self) -> RequestParams:
        params: RequestParams = {
            "model": self.limits.model,
            "max_tokens": self.limits.max_tokens,
            "system": self.system,
            "messages": self._messages,
        }
        if self.tools:
            absent = unresolved(self._messages, self.tools)
            if self._definitions is None or self._definitions[0] is not self.tools or self._definitions[1] != absent:
                made = tool_definitions(self.tools, self.context.settings, model=self.limits.model, absent=absent)
                self._definitions = (self.tools, absent, made)
            params["tools"] = self._definitions[2]
        if self.limits.thinking:
            params = {**params, **thinking_params(self.limits.model, self.limits.thinking, self.limits.max_tokens)}
        return params

    def _save(self, role: Role, content: list[ContentBlock]) -> None:
        self._journal.message(role, content)
        self._write()

    def _write(self) -> None:
        self.context.writer.submit(self._journal.write)
        self.context.writer.submit(self._audit.write)
        self.context.writer.submit(self._usage.write)


def _count_server_tools(message: Message, result: TurnResult) -> None:
    """Add the server tool requests the API billed for ``message`` to the turn's counts."""
    used = getattr(message.usage, "server_tool_use", None)
    if used is not None:
        result.web_searches += used.web_search_requests or 0
        result.web_fetches += used.web_fetch_requests or 0


def _failed(value: Any) -> bool:
    return isinstance(value, dict) and value.get("success") is False


def _outcome_status(outcome: Outcome) -> str:
    if outcome.duration_ms is None:
        return "skipped"  # the approval check refused it: it never ran
    return "error" if outcome.is_error or _failed(outcome.value) else "ok"


def _outcome_detail(outcome: Outcome) -> str:
    value = outcome.value
    if outcome.duration_ms is None:  # the refusal's first sentence; the rest is for the model
        return outcome.content.split(". ", 1)[0][:120]
    if outcome.is_error:
        first = outcome.content.strip().splitlines()[0] if outcome.content.strip() else "error"
        return first[:120]
    if _failed(value):
        error = value.get("error") or {}
        return f"{error.get('type', 'error')}: {error.get('message', '')}"[:120]
    return ""


_FENCED_JSON = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)


def parse_structured(text: str) -> Any:
    """The JSON value ``text`` holds (bare or in one fenced block), else ``text`` itself."""
    stripped = text.strip()
    match = _FENCED_JSON.match(stripped)
    candidate = match.group(1) if match else stripped
    if candidate[:1] in ("{", "["):
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    return text
