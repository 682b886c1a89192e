"""Tool calls dispatched in this process: a real registry, IPython shell and DuckDB file.

For tests that make many calls (fuzzing, timing) where a kernel round trip per call
would cost too much. The shell is IPython's own ``InteractiveShell``; nothing is faked.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_kernel.config import AgentKernel
from agent_kernel.display.transcript import Transcript
from agent_kernel.interrupts import TurnInterrupts
from agent_kernel.store import Store
from agent_kernel.store.sessions import Sessions
from agent_kernel.store.writer import WriteBehind
from agent_kernel.tools import Outcome, Registry
from agent_kernel.tools.builtin import builtin_registry
from agent_kernel.tools.context import ToolContext


@dataclass
class Caller:
    """Dispatches calls as one turn would, on its own event loop."""

    registry: Registry
    store: Store
    shell: Any
    loop: asyncio.AbstractEventLoop
    session_id: str
    settings: AgentKernel
    writer: WriteBehind

    def call(self, name: str, tool_input: object, **options: Any) -> Outcome:
        """Dispatch one call in a fresh turn context (as ``%agent`` would) and return its outcome."""
        return self.loop.run_until_complete(self._call(name, tool_input, **options))

    def calls(self, *uses: tuple[str, object]) -> list[Outcome]:
        """Several calls in one turn: the same context and interrupts, as a model reply's calls."""

        async def run() -> list[Outcome]:
            with TurnInterrupts() as interrupts:
                context = self._context(interrupts)
                return [await self.registry.dispatch(name, tool_input, context) for name, tool_input in uses]

        return self.loop.run_until_complete(run())

    def value(self, name: str, tool_input: object) -> Any:
        """The decoded result of a call that must succeed."""
        outcome = self.call(name, tool_input)
        assert not outcome.is_error, outcome.content
        return json.loads(outcome.content)

    async def _call(self, name: str, tool_input: object, **options: Any) -> Outcome:
        with TurnInterrupts() as interrupts:
            return await self.registry.dispatch(name, tool_input, self._context(interrupts), **options)

    def _context(self, interrupts: TurnInterrupts) -> ToolContext:
        return ToolContext(
            shell=self.shell,
            settings=self.settings,
            store=self.store,
            writer=self.writer,
            session_id=self.session_id,
            session_name="kept",
            turn=1,
            prompt="go",
            transcript=Transcript(live=False),
            interrupts=interrupts,
        )


@contextmanager
def in_process(tmp_path: Path) -> Iterator[Caller]:
    """A :class:`Caller` over every built-in tool, a fresh DuckDB file and IPython's shell."""
    from IPython.core.interactiveshell import InteractiveShell

    store = Store(tmp_path / "agent.duckdb")
    with store.connect() as con:
        session = Sessions(con).create("kept", notebook=None)
    registry = builtin_registry()
    for item in registry.tools.values():
        item.definition()  # as a turn does before its first call: builds each tool's validator
    loop = asyncio.new_event_loop()
    writer = WriteBehind(store)
    try:
        yield Caller(
            registry, store, InteractiveShell.instance(), loop, session.id, AgentKernel(), writer
        )
    finally:
        writer.flush()
        loop.close()
