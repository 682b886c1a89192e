"""The base of the companion magics: they serve the kernel's agent, which ``%agent``'s
magics hold (made on first use, after ``%config`` had its say)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from IPython.core.magic import Magics

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.magics.agent import AgentMagics
    from agent_kernel.turn.agent import Agent

__all__ = ["CompanionMagics"]


class CompanionMagics(Magics):
    """Magics registered beside ``%agent``'s, working on the same agent."""

    def __init__(self, shell: InteractiveShell, owner: AgentMagics) -> None:
        super().__init__(shell=shell)
        self.owner = owner

    @property
    def agent(self) -> Agent:
        return self.owner.kernel_agent
