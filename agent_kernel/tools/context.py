"""What a tool can reach while it runs: the kernel, the store, the session, the display."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agent_kernel.store.provenance import Provenance
from agent_kernel.store.sessions import Journal

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.config import AgentKernel
    from agent_kernel.display.transcript import Transcript
    from agent_kernel.kernel.interrupts import TurnInterrupts
    from agent_kernel.model.client import ModelClient
    from agent_kernel.secrets import Secrets
    from agent_kernel.store import Store
    from agent_kernel.store.writer import WriteBehind

__all__ = ["SubSessionHost", "ToolContext"]


class SubSessionHost(Protocol):
    """What a turn offers its tools for sub-sessions (one per running session)."""

    depth: int  # 0 for a top-level session, 1 for its children, ...

    def spawn(self, task: str, model: str | None, token_limit: int | None) -> dict[str, Any]:
        """Start a child session on the event loop; return at once ``{id, model,
        token_limit, cost_limit_usd?, note?}`` (what it got, and why less than asked).

        Raises :class:`~agent_kernel.errors.ToolInputError` when a limit refuses it.
        """

    async def wait(self, ids: list[str]) -> list[dict[str, Any]]:
        """Each child's ``{id, status, result?, error?}`` once all of them have finished."""


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
    tool_use_id: str | None = None  # the call being dispatched, while there is one
    # The turn's model client, for calls a tool makes itself (llm_generate, agent_kernel.llm).
    model_client: ModelClient | None = None
    # Set by the turn: records a model call made outside the conversation (its response and
    # milliseconds) in the turn's usage; and says why no more calls may be made (a limit
    # reached), or None.
    on_model_call: Callable[[Any, float], None] | None = None
    limit_reached: Callable[[], str | None] | None = None
    # What tools report back to the turn; the loop reads and resets them after each call.
    executions: list[dict[str, Any]] = field(default_factory=list)  # run_code's runs, audited
    system_prompt_changed: bool = False  # memory or stored instructions changed
    tools_changed: bool = False  # an agent-defined tool was created, changed or switched
    # Where untrusted content (web pages, search results, MCP results) entered this turn,
    # one line each; from then on the approval check asks before every writing tool. Add to
    # it with note_untrusted, which also keeps it with the session.
    untrusted: list[str] = field(default_factory=list)
    # The untrusted sources earlier turns of this session read (the conversation still
    # holds them): what this turn writes to be kept is tainted by them too.
    earlier_untrusted: tuple[str, ...] = ()
    # Starts and waits for this session's sub-sessions (see tools/subsessions.py).
    sessions: SubSessionHost | None = None
    # Set by report_result: the session ended itself with this result; the turn stops.
    ended: str | None = None
    journal: Journal = field(init=False)  # the turn's pending writes

    def __post_init__(self) -> None:
        self.journal = Journal(self.session_id, self.turn)

    def note_untrusted(self, sources: list[str]) -> None:
        """Untrusted content entered the turn from ``sources``; the session keeps the list."""
        new = [s for s in sources if s not in self.untrusted]
        if not new:
            return
        self.untrusted.extend(new)
        self.journal.untrusted(self.session_sources())
        self.writer.submit(self.journal.write)

    def session_sources(self) -> list[str]:
        """Every untrusted source this session has read, earlier turns first."""
        return [*self.earlier_untrusted, *(s for s in self.untrusted if s not in self.earlier_untrusted)]

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
        return self.shell.user_ns

    @property
    def hidden_names(self) -> set[str]:
        return set(getattr(self.shell, "user_ns_hidden", {}))
