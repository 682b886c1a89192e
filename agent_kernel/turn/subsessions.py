"""Sub-sessions: child turns a session starts with ``spawn_session``, run side by side.

Each child is a stored session (``parent_id`` set) whose one turn runs as an asyncio
task on the kernel's event loop, next to its parent and siblings. It gets the parent's
system prompt, tools, shell, store and approval policy, its own conversation, token
limit and :class:`~agent_kernel.kernel.interrupts.TurnInterrupts`, which follow the parent's:
Stop (or a kernel interrupt) stops the whole tree. A child ends when it calls
``report_result`` (completed), when its turn ends some other way (its last text is the
result), at its token limit, at its time limit (error "timed out") or when stopped.

A child can never have more than its parent:

- its token limit is at most ``subsession_token_limit`` and what every session above it
  has left of its token limit; its cost limit what they have left of theirs;
- its model is one of the configured ones (a model the person never chose is refused);
- every call it makes counts in its parent's figures (and theirs above), so the parent's
  own limits bound the whole tree however many children share them;
- it runs under the parent's approval mode and starts having read what the parent read
  (untrusted sources), and what it read reaches its parent with its result, which then
  arrives as untrusted data.

A session's children are stopped when its own turn ends: their output goes to the cell
that started them, which is then finished.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from agent_kernel.display.subsession import SubSessionView
from agent_kernel.errors import ToolInputError
from agent_kernel.kernel.interrupts import TurnInterrupts
from agent_kernel.store.subsessions import FINISHED, ChildRow, insert_child, outcome, record_result
from agent_kernel.tools import current_context
from agent_kernel.tools.browser_driver import DRIVER
from agent_kernel.turn.assemble import Assembler, Family
from agent_kernel.turn.request import TurnRequest
from agent_kernel.untrusted import mark_untrusted

if TYPE_CHECKING:
    from agent_kernel.display.subsession import SubSessionView
    from agent_kernel.model.shapes import ContentBlock, Role
    from agent_kernel.store.subsessions import ChildOutcome
    from agent_kernel.tools.context import ToolContext
    from agent_kernel.turn.loop import Turn, TurnResult

__all__ = ["Family", "SubSessions"]


@dataclass
class _Child:
    id: str
    name: str
    task: str
    view: SubSessionView
    interrupts: TurnInterrupts = field(default_factory=TurnInterrupts)
    running: asyncio.Task[None] | None = None
    timed_out: bool = False
    outcome: ChildOutcome | None = None  # once finished
    # Untrusted sources its parent had read when it started it (earlier turns', this turn's).
    inherited: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    read: list[str] = field(default_factory=list)  # every untrusted source it read, once finished


class SubSessions:
    """The sub-sessions of one running session (a :class:`~agent_kernel.tools.subsessions.SubSessionHost`)."""

    def __init__(
        self,
        family: Family,
        *,
        session_id: str,
        session_name: str,
        depth: int,
        interrupts: TurnInterrupts,
        turn: Turn | None = None,
    ) -> None:
        self.family = family
        self.session_id = session_id
        self.session_name = session_name
        self.depth = depth
        self.interrupts = interrupts
        self.turn = turn  # this session's running turn: its figures and limits bound the children
        self.children: dict[str, _Child] = {}

    # -- the tools' side ---------------------------------------------------------------------

    def spawn(self, task: str, model: str | None, token_limit: int | None) -> dict[str, object]:
        settings = self.family.settings
        if self.depth + 1 > settings.subsession_max_depth:
            raise ToolInputError(
                f"Not started: this session is already a sub-session at depth {self.depth}, and sub-sessions "
                f"nest at most {settings.subsession_max_depth} deep (AgentKernel.subsession_max_depth). "
                "Do this part yourself."
            )
        running = [c for c in self.children.values() if c.outcome is None]
        if len(running) >= settings.subsession_max_children:
            raise ToolInputError(
                f"Not started: {len(running)} sub-sessions of this session are still running, the most "
                f"at once (AgentKernel.subsession_max_children). Call wait_for_sessions for some of "
                f"them first: {', '.join(c.id for c in running)}."
            )
        if self.interrupts.reason is not None:
            raise ToolInputError("Not started: this session is being stopped.")
        model = self._model(model)
        limit, why_capped = self._token_limit(token_limit)
        cost_limit = self._cost_left()
        child_id = uuid.uuid4().hex
        name = f"{self.session_name}/sub-{child_id[:6]}"
        parts = self.family.parts
        row = ChildRow(child_id, name, parts.notebook, self.session_id, task, model, limit, cost_limit)
        parts.writer.submit(insert_child(row))
        parent = current_context()
        child = _Child(child_id, name, task, SubSessionView(name, task, live=parts.live))
        child.inherited = (tuple(parent.reads.earlier), tuple(parent.turn_sources()))
        self.children[child_id] = child
        for turn in self._turns():
            if turn.result is not None:
                turn.result.subsessions += 1
        child.running = asyncio.ensure_future(self._run(child, model, limit, cost_limit))
        started: dict[str, object] = {"id": child_id, "model": model, "token_limit": limit}
        if cost_limit is not None:
            started["cost_limit_usd"] = round(cost_limit, 4)
        if why_capped:
            started["note"] = why_capped
        return started

    # -- what a child may have ---------------------------------------------------------------

    def _turns(self) -> list[Turn]:
        """This session's turn and those of the sessions above it."""
        return self.turn.lineage() if self.turn is not None else []

    def own_model(self) -> str:
        """The model this session runs on (a child's default)."""
        return self.turn.limits.model if self.turn is not None else self.family.limits.model

    def allowed_models(self) -> list[str]:
        """The models the person configured (and the top-level turn's, which they chose)."""
        settings = self.family.settings
        named = [settings.model, settings.small_model, settings.medium_model, settings.large_model]
        return list(dict.fromkeys(m for m in [self.family.limits.model, *named] if m))

    def _model(self, requested: str | None) -> str:
        """The child's model: ``requested`` when configured (refused otherwise), else this
        session's. A refusal that lists the choices lets the model pick knowingly; a silent
        substitute would leave it believing another model did the work."""
        if requested is None:
            return self.own_model()
        allowed = self.allowed_models()
        if requested not in allowed:
            raise ToolInputError(
                f"Not started: {requested!r} is not a configured model. Sub-sessions run on one of: "
                f"{', '.join(allowed)} (AgentKernel.model, small_model, medium_model, large_model). "
                f"Leave model out for yours ({self.own_model()})."
            )
        return requested

    def _token_limit(self, requested: int | None) -> tuple[int, str]:
        """The child's token limit and, when it is less than asked, why.

        At most ``subsession_token_limit`` and what each session above has left: the
        tokens of running children count as they are used, so children started side by
        side are bounded again at each call (see ``Turn._outer_limit``)."""
        ceiling = self.family.settings.subsession_token_limit
        wanted = requested or ceiling
        limit, why = wanted, ""
        if ceiling < limit:
            limit, why = ceiling, f"token_limit capped at {ceiling:,} (AgentKernel.subsession_token_limit)"
        for turn in self._turns():
            found = turn.result
            used = found.session_tokens if found is not None else 0
            left = turn.limits.token_limit - used
            name = turn.context.session_name
            if left <= 0:
                raise ToolInputError(
                    f"Not started: session {name!r} has used {used:,} of its {turn.limits.token_limit:,} "
                    "tokens (sub-sessions included); nothing is left for a sub-session. Finish with what "
                    "you have."
                )
            if left < limit:
                limit = left
                why = f"token_limit capped at {left:,}: what session {name!r} has left of its token limit"
        return limit, why if limit < wanted else ""

    def _cost_left(self) -> float | None:
        """USD the child may spend: the least any session above has left (None: no cost limit)."""
        least: float | None = None
        for turn in self._turns():
            cost_limit = turn.limits.cost_limit
            if not cost_limit:
                continue
            spent = turn.result.session_cost if turn.result is not None else 0.0
            left = cost_limit - spent
            if left <= 0:
                raise ToolInputError(
                    f"Not started: session {turn.context.session_name!r} has spent ${spent:,.4f} of its "
                    f"${cost_limit:,.2f} cost limit (sub-sessions included); nothing is left for a "
                    "sub-session. Finish with what you have."
                )
            least = left if least is None else min(least, left)
        return least

    async def wait(self, ids: list[str]) -> list[ChildOutcome]:
        stored = await self._stored([i for i in ids if i not in self.children])
        waiting = [self.children[i].running for i in ids if i in self.children]
        pending = [t for t in waiting if t is not None and not t.done()]
        if pending:
            ctx = current_context()
            use_id = ctx.tool_use_id
            ctx.journal.state("waiting_for_input")  # a pending call waits for sub-sessions
            ctx.writer.submit(ctx.journal.write)
            if use_id is not None:
                many = f"{len(pending)} sub-sessions" if len(pending) > 1 else "a sub-session"
                ctx.transcript.tool_waiting(use_id, True, why=f"waiting for {many}")
            try:
                await asyncio.wait(pending)  # never cancels them: a stop reaches them as a request
            finally:
                ctx.journal.state("running")
                ctx.writer.submit(ctx.journal.write)
                if use_id is not None:
                    ctx.transcript.tool_waiting(use_id, False)
        results = []
        for child_id in ids:
            child = self.children.get(child_id)
            if child is not None:
                assert child.outcome is not None
                found, read, name = child.outcome.copy(), child.read, child.name
            else:
                row = stored[child_id]
                read, name = row.pop("untrusted_sources"), row.pop("name")
                found = cast("ChildOutcome", row)  # the rest of the stored row: id, status, result?, error?
            results.append(_handed_over(found, read, name))
        return results

    async def _stored(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """Children of this session from earlier turns, as stored."""
        if not ids:
            return {}
        await asyncio.to_thread(self.family.parts.writer.flush)

        def read() -> dict[str, dict[str, Any] | None]:
            with self.family.parts.store.connect(read_only=True) as con:
                return {i: outcome(con, i) for i in ids}

        found = await asyncio.to_thread(read)
        unknown = [i for i, row in found.items() if row is None or row["parent_id"] != self.session_id]
        if unknown:
            mine = ", ".join(self.children) or "none in this turn"
            raise ToolInputError(
                f"Not sub-sessions of this session: {', '.join(unknown)}. Use the ids spawn_session returned ({mine})."
            )
        results = {}
        for child_id, row in found.items():
            assert row is not None
            row.pop("parent_id")
            if row["status"] not in FINISHED:
                error = f"not finished ({row['status']}) and no longer running"
                row = {
                    "id": child_id, "status": "error", "error": error,
                    "untrusted_sources": row["untrusted_sources"], "name": row["name"],
                }  # fmt: skip
            results[child_id] = row
        return results

    async def close(self) -> None:
        """Stop the children still running (this session's turn is ending) and wait for them."""
        running = [c for c in self.children.values() if c.running is not None and not c.running.done()]
        for child in running:
            child.interrupts.request("parent_ended")
        if running:
            await asyncio.wait([c.running for c in running if c.running is not None])

    # -- a child's turn ----------------------------------------------------------------------

    async def _run(self, child: _Child, model: str, token_limit: int, cost_limit: float | None) -> None:
        family, settings = self.family, self.family.settings
        interrupts = child.interrupts
        interrupts.install(signals=False)
        interrupts.follow(self.interrupts)
        host = SubSessions(
            family, session_id=child.id, session_name=child.name, depth=self.depth + 1, interrupts=interrupts
        )
        brief = (
            f"You are a sub-session started by session {self.session_name!r} (depth {self.depth + 1}). "
            "Work on the task below on your own: nobody sees this conversation but the session that "
            "started you. When done, call report_result with everything it needs; nothing runs after that."
        )
        request = TurnRequest(
            child.task, session=child.name, model=model, token_limit=token_limit, approve=family.approve
        )
        turn = Assembler(family.parts).sub_session_turn(
            request, family, parent=self.turn, session_id=child.id, session_name=child.name, brief=brief,
            cost_limit=cost_limit, inherited=child.inherited, transcript=child.view, interrupts=interrupts,
            sessions=host,
        )  # fmt: skip
        context = turn.context
        host.turn = turn
        timer = asyncio.get_running_loop().call_later(float(settings.subsession_timeout_s), self._time_out, child)
        result: TurnResult | None = None
        failure: str | None = None
        try:
            result = await turn.run()
        except Exception as exc:  # noqa: BLE001 - a child's crash is its error, not its parent's
            failure = f"{type(exc).__name__}: {exc}"
        finally:
            timer.cancel()
            await host.close()
            _end_browser(child.id)
            interrupts.uninstall()
            child.read = context.session_sources()
            child.outcome = self._outcome(child, result, failure, context)
            self._record(child)

    def _time_out(self, child: _Child) -> None:
        child.timed_out = True
        child.interrupts.request("timeout")

    def _outcome(
        self, child: _Child, result: TurnResult | None, failure: str | None, context: ToolContext
    ) -> ChildOutcome:
        found: dict[str, object] = {"id": child.id}
        reason = child.interrupts.reason
        if child.timed_out:
            seconds = self.family.settings.subsession_timeout_s
            found |= {"status": "error", "error": f"timed out after {seconds:g} s"}
        elif result is None:
            found |= {"status": "error", "error": failure or "the sub-session crashed"}
        elif result.state == "completed":
            found |= {"status": "completed", "result": result.text}
        elif result.state == "token_limit_reached":  # its own limit, or what its parent had left
            found |= {"status": "token_limit_reached", "result": _last_text(context.journal.recorded)}
            if result.error:
                found["error"] = result.error
        elif reason is not None:
            why = "its parent's turn ended first" if reason == "parent_ended" else "stopped by the user"
            found |= {"status": "error", "error": f"stopped: {why}"}
        elif result.ending == "end_turn":  # it answered without report_result: that is its result
            found |= {"status": "completed", "result": result.text}
        else:
            found |= {"status": "error", "error": result.error or f"ended in state {result.state}"}
        return cast("ChildOutcome", found)

    def _record(self, child: _Child) -> None:
        found = child.outcome
        assert found is not None
        self.family.parts.writer.submit(
            record_result(child.id, found["status"], found.get("result"), found.get("error"))
        )
        child.view.finished(found["status"], result=found.get("result"), error=found.get("error"))


def _handed_over(found: ChildOutcome, read: list[str], name: str) -> ChildOutcome:
    """A child's outcome as its parent receives it: after the child read untrusted content
    (its own or inherited), its result is untrusted data, and what the child read that its
    parent had not is now read in the parent's turn too."""
    if read:
        parent = current_context()
        known = set(parent.session_sources())
        parent.note_untrusted([s for s in read if s not in known])
        if "result" in found:
            found["result"] = mark_untrusted(found["result"], f"sub-session {name}")
    return found


def _last_text(recorded: list[tuple[Role, list[ContentBlock]]]) -> str:
    """The text of the last assistant message that had any (a partial result)."""
    for role, content in reversed(recorded):
        if role == "assistant":
            text = "".join(b.get("text", "") for b in content if b["type"] == "text").strip()
            if text:
                return text
    return ""


def _end_browser(session_id: str) -> None:
    """A finished sub-session's browser closes (the browser group's driver, if it ran)."""
    DRIVER.end_session(session_id)
