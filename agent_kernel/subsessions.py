"""Sub-sessions: child turns a session starts with ``spawn_session``, run side by side.

Each child is a stored session (``parent_id`` set) whose one turn runs as an asyncio
task on the kernel's event loop, next to its parent and siblings. It gets the parent's
system prompt, tools, shell, store and approval policy, its own conversation, token
limit and :class:`~agent_kernel.interrupts.TurnInterrupts`, which follow the parent's:
Stop (or a kernel interrupt) stops the whole tree. A child ends when it calls
``report_result`` (completed), when its turn ends some other way (its last text is the
result), at its token limit, at its time limit (error "timed out") or when stopped.

A session's children are stopped when its own turn ends: their output goes to the cell
that started them, which is then finished.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .errors import ToolInputError
from .interrupts import TurnInterrupts

if TYPE_CHECKING:
    from collections.abc import Callable

    from .approval import Check
    from .config import AgentKernel
    from .display.subsession import SubSessionView
    from .loop import TurnLimits, TurnResult
    from .model import ModelClient
    from .secrets import Secrets
    from .store import Store
    from .store.writer import WriteBehind
    from .tools import Registry, Tool

__all__ = ["Family", "SubSessions"]


@dataclass
class Family:
    """What every session of one tree shares: the parts of the top-level turn."""

    shell: Any
    settings: AgentKernel
    store: Store
    writer: WriteBehind
    registry: Registry
    tools: list[Tool]
    model_client: ModelClient
    system: str
    limits: TurnLimits  # the top-level turn's; a child gets its own model and token limit
    approve: str
    notebook: str
    live: bool
    secrets: Secrets | None = None
    check: Check | None = None
    refresh_tools: Callable[[], list[Tool]] | None = None


@dataclass
class _Child:
    id: str
    name: str
    task: str
    view: SubSessionView
    interrupts: TurnInterrupts = field(default_factory=TurnInterrupts)
    running: asyncio.Task[None] | None = None
    timed_out: bool = False
    outcome: dict[str, Any] | None = None  # {id, status, result?, error?} once finished


class SubSessions:
    """The sub-sessions of one running session (a :class:`~agent_kernel.tools.subsessions.SubSessionHost`)."""

    def __init__(
        self, family: Family, *, session_id: str, session_name: str, depth: int, interrupts: TurnInterrupts
    ) -> None:
        self.family = family
        self.session_id = session_id
        self.session_name = session_name
        self.depth = depth
        self.interrupts = interrupts
        self.children: dict[str, _Child] = {}

    # -- the tools' side ---------------------------------------------------------------------

    def spawn(self, task: str, model: str | None, token_limit: int | None) -> str:
        from .display.subsession import SubSessionView
        from .store.subsessions import ChildRow, insert_child

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
        limit = min(token_limit or settings.subsession_token_limit, settings.token_limit)
        child_id = uuid.uuid4().hex
        name = f"{self.session_name}/sub-{child_id[:6]}"
        self.family.writer.submit(
            insert_child(ChildRow(child_id, name, self.family.notebook, self.session_id, task, model, limit))
        )
        child = _Child(child_id, name, task, SubSessionView(name, task, live=self.family.live))
        self.children[child_id] = child
        child.running = asyncio.ensure_future(self._run(child, model, limit))
        return child_id

    async def wait(self, ids: list[str]) -> list[dict[str, Any]]:
        from .tools import current_context

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
            found = child.outcome if child is not None else stored[child_id]
            assert found is not None
            results.append(found)
        return results

    async def _stored(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """Children of this session from earlier turns, as stored."""
        if not ids:
            return {}
        from .store.subsessions import FINISHED, outcome

        await asyncio.to_thread(self.family.writer.flush)

        def read() -> dict[str, dict[str, Any] | None]:
            with self.family.store.connect(read_only=True) as con:
                return {i: outcome(con, i) for i in ids}

        found = await asyncio.to_thread(read)
        unknown = [i for i, row in found.items() if row is None or row["parent_id"] != self.session_id]
        if unknown:
            mine = ", ".join(self.children) or "none in this turn"
            raise ToolInputError(
                f"Not sub-sessions of this session: {', '.join(unknown)}. Use the ids spawn_session "
                f"returned ({mine})."
            )
        results = {}
        for child_id, row in found.items():
            assert row is not None
            row.pop("parent_id")
            if row["status"] not in FINISHED:
                row = {"id": child_id, "status": "error", "error": f"not finished ({row['status']}) and no longer running"}
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

    async def _run(self, child: _Child, model: str | None, token_limit: int) -> None:
        from . import conversation
        from .loop import Turn
        from .prompt import turn_context
        from .tools.context import ToolContext

        family, settings = self.family, self.family.settings
        interrupts = child.interrupts
        interrupts.install(signals=False)
        interrupts.follow(self.interrupts)
        host = SubSessions(family, session_id=child.id, session_name=child.name, depth=self.depth + 1, interrupts=interrupts)
        context = ToolContext(
            shell=family.shell, settings=settings, store=family.store, writer=family.writer,
            session_id=child.id, session_name=child.name, turn=1, prompt=child.task,
            transcript=child.view,  # type: ignore[arg-type] - the same methods as a Transcript
            interrupts=interrupts, approve=family.approve, secrets=family.secrets, sessions=host,
        )  # fmt: skip
        groups = {t.group for t in family.tools}
        brief = (
            f"You are a sub-session started by session {self.session_name!r} (depth {self.depth + 1}). "
            "Work on the task below on your own: nobody sees this conversation but the session that "
            "started you. When done, call report_result with everything it needs; nothing runs after that."
        )
        turn = Turn(
            context=context,
            registry=family.registry,
            tools=family.tools,
            model_client=family.model_client,
            limits=replace(family.limits, model=model or family.limits.model, token_limit=token_limit),
            system=family.system,
            history=conversation.Repair(),
            prompt_blocks=[
                turn_context(None, settings=settings, shell=family.shell, groups=groups),
                *conversation.as_blocks(f"{brief}\n\nTask:\n{child.task}"),
            ],
            session_tokens=0,
            check=family.check,
            refresh_tools=family.refresh_tools,
        )
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
            interrupts.uninstall()
            child.outcome = self._outcome(child, result, failure, context)
            self._record(child)

    def _time_out(self, child: _Child) -> None:
        child.timed_out = True
        child.interrupts.request("timeout")

    def _outcome(
        self, child: _Child, result: TurnResult | None, failure: str | None, context: Any
    ) -> dict[str, Any]:
        found: dict[str, Any] = {"id": child.id}
        reason = child.interrupts.reason
        if child.timed_out:
            seconds = self.family.settings.subsession_timeout_s
            found |= {"status": "error", "error": f"timed out after {seconds:g} s"}
        elif result is None:
            found |= {"status": "error", "error": failure or "the sub-session crashed"}
        elif result.state == "completed":
            found |= {"status": "completed", "result": result.text}
        elif result.state == "token_limit_reached":
            found |= {"status": "token_limit_reached", "result": _last_text(context.journal.recorded)}
        elif reason is not None:
            why = "its parent's turn ended first" if reason == "parent_ended" else "stopped by the user"
            found |= {"status": "error", "error": f"stopped: {why}"}
        elif result.ending == "end_turn":  # it answered without report_result: that is its result
            found |= {"status": "completed", "result": result.text}
        else:
            found |= {"status": "error", "error": result.error or f"ended in state {result.state}"}
        return found

    def _record(self, child: _Child) -> None:
        from .store.subsessions import record_result

        found = child.outcome
        assert found is not None
        self.family.writer.submit(record_result(child.id, found["status"], found.get("result"), found.get("error")))
        child.view.finished(found["status"], result=found.get("result"), error=found.get("error"))


def _last_text(recorded: list[tuple[str, list[dict[str, Any]]]]) -> str:
    """The text of the last assistant message that had any (a partial result)."""
    for role, content in reversed(recorded):
        if role == "assistant":
            text = "".join(b.get("text", "") for b in content if b.get("type") == "text").strip()
            if text:
                return text
    return ""
