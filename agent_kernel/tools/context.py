"""What a tool can reach while it runs: the kernel, the store, the session, the display."""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..config import AgentKernel
    from ..display.transcript import Transcript
    from ..interrupts import TurnInterrupts
    from ..secrets import Secrets
    from ..store import Store
    from ..store.sessions import Journal
    from ..store.writer import WriteBehind

__all__ = ["ToolContext"]


@dataclass
class ToolContext:
    """Handed to every tool call of one turn (see :func:`agent_kernel.tools.current_context`)."""

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
    extras: dict[str, Any] = field(default_factory=dict)
    journal: Journal | None = None  # the turn's pending writes, set when the turn starts
    tool_use_id: str | None = None  # the call being dispatched, while there is one

    def session_state(self, state: str) -> None:
        """Record the session's state now (``waiting_for_input`` while a widget waits)."""
        if self.journal is not None:
            self.journal.state(state)
            self.writer.submit(self.journal.write)

    @property
    def namespace(self) -> MutableMapping[str, Any]:
        """The user's namespace: variables defined here stay for the user."""
        return self.shell.user_ns

    @property
    def hidden_names(self) -> set[str]:
        return set(getattr(self.shell, "user_ns_hidden", {}))
