"""What one tool call did that its turn must act on, reported back with its outcome.

The dispatcher gives each call a fresh :class:`ToolReport` (a tool reaches it as
``current_context().report``) and returns it in :attr:`~agent_kernel.tools.Outcome.report`;
the turn merges it into its own state. A tool never writes into the turn: it says what it
did, and the turn decides what follows (audit the code runs, rebuild the system prompt or
the tool list, keep the untrusted sources, stop the session).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_kernel.model.shapes import ContentBlock

__all__ = ["ToolReport"]


@dataclass
class ToolReport:
    """What one tool call did, written only through its methods while the call runs."""

    executions: list[dict[str, Any]] = field(default_factory=list)  # run_code's runs, audited
    system_prompt_changed: bool = False  # memory, stored instructions or the skill list changed
    tools_changed: bool = False  # an agent-defined tool was created, changed, switched or trusted
    untrusted: list[str] = field(default_factory=list)  # where untrusted content entered, one line each
    ended: str | None = None  # report_result: the session ended itself with this result
    images: list[ContentBlock] = field(default_factory=list)  # image blocks sent with the result

    def attach_image(self, block: ContentBlock) -> None:
        """An image block (see :mod:`agent_kernel.model.images`) the model gets with the result."""
        self.images.append(block)

    def ran_code(self, run: dict[str, Any]) -> None:
        """A ``run_code`` execution (its outcome and code), for the audit trail."""
        self.executions.append(run)

    def changed_prompt(self) -> None:
        """A stored part of the system prompt changed: the next request sends it afresh."""
        self.system_prompt_changed = True

    def changed_tools(self) -> None:
        """The agent-defined tools changed: the next request offers them afresh."""
        self.tools_changed = True

    def read_untrusted(self, sources: list[str]) -> None:
        """Untrusted content entered the turn from ``sources`` (the session keeps them; from
        then on the approval check asks before every writing tool)."""
        self.untrusted.extend(s for s in sources if s not in self.untrusted)

    def end_session(self, result: str) -> None:
        """The session ends with ``result``: no further tool call of the turn runs."""
        self.ended = result
