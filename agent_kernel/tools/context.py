"""What a tool can reach while it runs: the kernel, the store, the session, the display."""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agent_kernel.store.provenance import Provenance
from agent_kernel.store.sessions import Journal
from agent_kernel.tools.report import ToolReport

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.config import AgentKernel
    from agent_kernel.display.transcript import Transcript
    from agent_kernel.kernel.interrupts import TurnInterrupts
    from agent_kernel.model.client import ModelClient
    from agent_kernel.secrets import Secrets
    from agent_kernel.store import Store
    from agent_kernel.store.subsessions import ChildOutcome
    from agent_kernel.store.writer import WriteBehind

__all__ = ["SubSessionHost", "ToolCall", "ToolContext", "UntrustedReads", "current_call"]


class SubSessionHost(Protocol):
    """What a turn offers its tools for sub-sessions (one per running session)."""

    depth: int  # 0 for a top-level session, 1 for its children, ...

    def spawn(self, task: str, model: str | None, token_limit: int | None) -> dict[str, object]:
        """Start a child session on the event loop; return at once ``{id, model,
        token_limit, cost_limit_usd?, note?}`` (what it got, and why less than asked).

        Raises :class:`~agent_kernel.errors.ToolInputError` when a limit refuses it.
        """

    async def wait(self, ids: list[str]) -> list[ChildOutcome]:
        """Each child's ``{id, status, result?, error?}`` once all of them have finished."""


@dataclass
class UntrustedReads:
    """Where untrusted content (web pages, search results, MCP results) entered a session:
    in its earlier turns (the conversation still holds it) and in this one, one line each.

    Only the turn adds to it, merging what each tool call reported; what a tool keeps from
    then on is tainted by it. The taint is the session's, from its first untrusted read to
    its end: every approval rule (egress, writing actions, "Always" grants) and the import
    of tainted libraries read :meth:`session_sources`, never only this turn's.
    """

    earlier: tuple[str, ...] = ()
    this_turn: list[str] = field(default_factory=list)

    def add(self, sources: list[str]) -> bool:
        """Add the sources not read yet in this turn; whether there were any."""
        new = [s for s in dict.fromkeys(sources) if s not in self.this_turn]
        self.this_turn.extend(new)
        return bool(new)

    def session_sources(self) -> list[str]:
        """Every untrusted source the session has read, earlier turns first."""
        return [*self.earlier, *(s for s in self.this_turn if s not in self.earlier)]


@dataclass
class ToolContext:
    """Handed to every tool call of one turn (see :func:`agent_kernel.tools.current_context`).

    It is also what display's waiting widgets see of the turn
    (:class:`agent_kernel.display.waiting.TurnWaits`).
    """

    shell: InteractiveShell
    settings: AgentKernel
    store: Store
    writer: WriteBehind
    session_id: str
    session_name: str
    turn: int
    prompt: str
    transcript: Transcript
    interrupts: TurnInterrupts
    approve: str = "auto"
    secrets: Secrets | None = None
    # The turn's model client, for calls a tool makes itself (llm_generate, agent_kernel.llm);
    # None: they go where calls outside a turn go (see agent_kernel.model.calls).
    model_client: ModelClient | None = None
    # The untrusted sources the session has read: the turn adds what each call reported;
    # tools read it through session_sources() and provenance().
    reads: UntrustedReads = field(default_factory=UntrustedReads)
    # Starts and waits for this session's sub-sessions (see tools/subsessions.py).
    sessions: SubSessionHost | None = None
    # Runs a tool call a shown UI component asks for, through the turn's dispatcher (its
    # offered tools and approval check): (tool, input) -> (result text, is_error). Set by
    # the turn while it runs, None before and after (see agent_kernel.display.components).
    component_calls: Callable[[str, dict[str, Any]], Awaitable[tuple[str, bool]]] | None = None
    images_sent: int = 0  # images run_code attached to results this turn (AgentKernel.images_per_turn)
    journal: Journal = field(init=False)  # the turn's pending writes

    def __post_init__(self) -> None:
        self.journal = Journal(self.session_id, self.turn)

    # -- what the running call reports (see report.py) -------------------------------------

    @property
    def report(self) -> ToolReport:
        """The report of the tool call running now with this context."""
        call = current_call()
        if call is None or call.context is not self:
            raise RuntimeError("A tool reports only while it is dispatched in an agent turn.")
        return call.report

    @property
    def tool_use_id(self) -> str | None:
        """The id of the tool call running now with this context, or None."""
        call = current_call()
        return call.tool_use_id if call is not None and call.context is self else None

    def note_untrusted(self, sources: list[str]) -> None:
        """Report untrusted content the running call read (``self.report.read_untrusted``)."""
        self.report.read_untrusted(sources)

    # -- read-only views of the turn ---------------------------------------------------------

    def turn_sources(self) -> list[str]:
        """The untrusted sources this turn has read so far, the running call's included."""
        call = current_call()
        running = call.report.untrusted if call is not None and call.context is self else None
        if not running:
            return list(self.reads.this_turn)
        return [*self.reads.this_turn, *(s for s in running if s not in self.reads.this_turn)]

    def session_sources(self) -> list[str]:
        """Every untrusted source this session has read, earlier turns first."""
        earlier = self.reads.earlier
        return [*earlier, *(s for s in self.turn_sources() if s not in earlier)]

    def provenance(self) -> Provenance:
        """Who writes what a tool keeps now: this turn, tainted by what the session read."""
        return Provenance(self.session_id, self.turn, tuple(self.session_sources()))

    @property
    def presence_timeout(self) -> float:
        return float(self.settings.presence_timeout)

    def waiting(self, state: str) -> None:
        """A widget waits for the person: the session is in ``state``, the tool's card says so."""
        self._session_state(state)
        if self.tool_use_id is not None:
            self.transcript.tool_waiting(self.tool_use_id, True)

    def done_waiting(self) -> None:
        self._session_state("running")
        if self.tool_use_id is not None:
            self.transcript.tool_waiting(self.tool_use_id, False)

    def _session_state(self, state: str) -> None:
        self.journal.state(state)
        self.writer.submit(self.journal.write)

    @property
    def namespace(self) -> MutableMapping[str, Any]:
        """The user's namespace: variables defined here stay for the user."""
        namespace: MutableMapping[str, Any] = self.shell.user_ns
        return namespace

    @property
    def hidden_names(self) -> set[str]:
        return set(getattr(self.shell, "user_ns_hidden", {}))


@dataclass(frozen=True)
class ToolCall:
    """The tool call being dispatched: its turn's context, its id, and its report."""

    context: ToolContext
    tool_use_id: str | None
    report: ToolReport


_CALL: contextvars.ContextVar[ToolCall] = contextvars.ContextVar("agent_kernel_tool_call")


def current_call() -> ToolCall | None:
    """The tool call being dispatched here, or None outside one."""
    return _CALL.get(None)
