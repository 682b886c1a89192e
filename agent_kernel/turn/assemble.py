"""Building a turn: the one place a :class:`TurnRequest` and an agent's parts become the
loop's :class:`~agent_kernel.turn.loop.Turn` (its transcript, limits, context budget,
:class:`~agent_kernel.tools.context.ToolContext` and callbacks).

The Agent builds a session's turn here from what it read of the session
(:meth:`Assembler.session_turn`); a session builds its sub-session's turn here too
(:meth:`Assembler.sub_session_turn`), from the parent's turn. A new field of a turn is
added in :meth:`Assembler.turn`, which both go through.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agent_kernel.display.limit import offer_continue, offer_cost_continue
from agent_kernel.display.transcript import Transcript
from agent_kernel.errors import ConfigError
from agent_kernel.model import conversation
from agent_kernel.model.shapes import ContentBlock
from agent_kernel.model.thinking import LEVELS, OFF
from agent_kernel.model.usage import InputEstimate
from agent_kernel.tools.context import ToolContext, UntrustedReads
from agent_kernel.turn.budget import ContextBudget, Observed
from agent_kernel.turn.loop import Turn, TurnLimits
from agent_kernel.turn.prompt import turn_context

if TYPE_CHECKING:
    from anthropic.types import Message
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.config import AgentKernel
    from agent_kernel.kernel.interrupts import TurnInterrupts
    from agent_kernel.model.client import ModelClient
    from agent_kernel.secrets import Secrets
    from agent_kernel.store import Store
    from agent_kernel.store.compactions import Compaction
    from agent_kernel.store.sessions import Session
    from agent_kernel.store.writer import WriteBehind
    from agent_kernel.tools import Registry, Tool
    from agent_kernel.tools.context import SubSessionHost
    from agent_kernel.turn.approval import Check
    from agent_kernel.turn.request import TurnRequest

__all__ = ["Assembler", "Family", "TurnParts", "TurnPlan", "thinking_level"]


@dataclass(frozen=True)
class TurnParts:
    """What every turn of one agent uses, its sub-sessions' turns too."""

    shell: InteractiveShell
    settings: AgentKernel
    store: Store
    writer: WriteBehind
    registry: Registry
    model_client: ModelClient
    secrets: Secrets | None
    notebook: str
    live: bool  # a front end shows widgets (approval cards, Continue, Stop)


@dataclass
class Family:
    """What every session of one tree shares: the agent's parts and what the top-level turn
    started with."""

    parts: TurnParts
    tools: list[Tool]
    system: str
    limits: TurnLimits  # the top-level turn's; a child gets its own model and token limit
    approve: str
    check: Check | None = None
    refresh_tools: Callable[[], list[Tool]] | None = None

    @property
    def settings(self) -> AgentKernel:
        return self.parts.settings


@dataclass
class TurnPlan:
    """What one turn starts from besides its request: the session's state and what its
    caller decided (tools, prompt, limits, approval)."""

    session_id: str
    session_name: str
    number: int  # the session's turn number
    tools: list[Tool]
    system: str
    approve: str  # the approval mode
    limits: TurnLimits
    prompt_blocks: list[ContentBlock]
    history: conversation.Repair = field(default_factory=conversation.Repair)
    check: Check | None = None
    refresh_tools: Callable[[], list[Tool]] | None = None
    reads: UntrustedReads = field(default_factory=UntrustedReads)
    session_tokens: int = 0
    session_cost: float = 0.0
    estimate: InputEstimate = field(default_factory=InputEstimate)
    budget: ContextBudget | None = None
    side_calls: list[tuple[Message, float]] = field(default_factory=list)
    parent: Turn | None = None  # the turn that started this one as a sub-session
    sessions: SubSessionHost | None = None  # its own sub-sessions
    # Offer Continue at the token and cost limits (a top-level turn someone can answer).
    ask_to_continue: bool = False
    # The tools' own model calls (llm_generate, agent_kernel.llm) go through this turn and
    # count in it; otherwise they go where calls outside a turn go (see model/calls.py).
    own_model_calls: bool = True


@dataclass(frozen=True)
class Assembler:
    """Builds the turns of one agent from its :class:`TurnParts`."""

    parts: TurnParts

    def transcript(self, request: TurnRequest) -> Transcript:
        """What a session's turn shows in its cell."""
        settings = self.parts.settings
        return Transcript(
            live=self.parts.live,
            updates_per_second=settings.updates_per_second,
            failure_raised=request.check,
            prices=settings.prices,
        )

    def limits(self, request: TurnRequest, session: Session, *, thinking: str) -> TurnLimits:
        """The numbers a session's turn runs under: the request's, else the session's, else
        the settings' (``thinking``: the level :func:`thinking_level` found)."""
        settings = self.parts.settings
        # A limit Continue raised for this session stays, unless the setting is higher (0: off).
        cost_limit = max(session.cost_limit or 0.0, settings.cost_limit) if settings.cost_limit else None
        return TurnLimits(
            model=request.model or session.model or settings.model,
            max_tokens=settings.max_tokens,
            token_limit=request.token_limit or session.token_limit or settings.token_limit,
            max_model_calls=settings.max_model_calls,
            model_retries=settings.model_retries,
            result_chars=settings.result_chars,
            cost_limit=cost_limit,
            thinking=thinking,
        )

    def budget(
        self, limits: TurnLimits, session: Session, stored: list[Compaction], seen: dict[str, Observed]
    ) -> ContextBudget:
        """The context budget of a session's turn (what its requests are compacted to fit)."""
        return ContextBudget.from_settings(
            self.parts.settings, model=limits.model, store=self.parts.store, session_id=session.id,
            model_client=self.parts.model_client, seen=seen, stored=stored, mirrored=True,
        )  # fmt: skip

    def turn(self, request: TurnRequest, plan: TurnPlan, *, transcript: Transcript, interrupts: TurnInterrupts) -> Turn:
        """The loop's turn for ``request`` as ``plan`` says, with the context its tools get."""
        parts = self.parts
        context = ToolContext(
            shell=parts.shell, settings=parts.settings, store=parts.store, writer=parts.writer,
            session_id=plan.session_id, session_name=plan.session_name, turn=plan.number,
            prompt=request.prompt, transcript=transcript, interrupts=interrupts, approve=plan.approve,
            secrets=parts.secrets, model_client=parts.model_client if plan.own_model_calls else None,
            reads=plan.reads, sessions=plan.sessions,
        )  # fmt: skip
        return Turn(
            context=context,
            registry=parts.registry,
            tools=plan.tools,
            model_client=parts.model_client,
            limits=plan.limits,
            system=plan.system,
            history=plan.history,
            prompt_blocks=plan.prompt_blocks,
            session_tokens=plan.session_tokens,
            check=plan.check,
            on_token_limit=offer_continue if plan.ask_to_continue else None,
            budget=plan.budget,
            on_cost_limit=offer_cost_continue if plan.ask_to_continue else None,
            session_cost=plan.session_cost,
            estimate=plan.estimate,
            refresh_tools=plan.refresh_tools,
            side_calls=plan.side_calls,
            parent=plan.parent,
        )

    def sub_session_turn(
        self,
        request: TurnRequest,
        family: Family,
        *,
        parent: Turn | None,
        session_id: str,
        session_name: str,
        brief: str,
        cost_limit: float | None,
        inherited: tuple[tuple[str, ...], tuple[str, ...]],
        transcript: Any,
        interrupts: TurnInterrupts,
        sessions: SubSessionHost,
    ) -> Turn:
        """The one turn of a sub-session the turn ``parent`` started: the tools, system
        prompt, approval and check of its tree (``family``); a conversation of its own that
        starts with ``brief`` and the task (``request.prompt``); the model and token limit
        the request gives.

        It starts having read what its parent read (``inherited``: earlier turns', this
        turn's), so the approval check is as strict for it and it keeps the sources.
        """
        assert request.model is not None and request.token_limit is not None
        groups = {t.group for t in family.tools}
        plan = TurnPlan(
            session_id=session_id,
            session_name=session_name,
            number=1,
            tools=family.tools,
            system=family.system,
            approve=family.approve,
            limits=replace(family.limits, model=request.model, token_limit=request.token_limit, cost_limit=cost_limit),
            prompt_blocks=[
                turn_context(None, settings=self.parts.settings, shell=self.parts.shell, groups=groups),
                *conversation.as_blocks(f"{brief}\n\nTask:\n{request.prompt}"),
            ],
            check=family.check,
            refresh_tools=family.refresh_tools,
            reads=UntrustedReads(earlier=inherited[0], this_turn=list(dict.fromkeys(inherited[1]))),
            parent=parent,
            sessions=sessions,
            own_model_calls=False,
        )
        return self.turn(request, plan, transcript=transcript, interrupts=interrupts)


def thinking_level(given: str | bool | None, setting: str) -> str:
    """The thinking level of a turn: ``given`` (``--think``) over the setting; "" is off."""
    if given is None:
        return setting
    if given is True:
        return setting or "adaptive"
    if given is False:
        return ""
    level = given.strip().lower()
    if level in OFF:
        return ""
    if level not in LEVELS:
        raise ConfigError(f"--think takes one of {', '.join(LEVELS)} (or off), not {given!r}.")
    return level
