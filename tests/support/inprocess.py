"""Tool calls and whole turns in this process: a real registry, IPython shell and DuckDB file.

For tests that need no kernel: the loop, tool errors, retries, limits, approval policy,
the prompt; and tests that make many calls (fuzzing, timing) where a kernel round trip
per call would cost too much. The shell is IPython's own ``InteractiveShell`` and the
official SDK makes the model requests (to the scripted model's in-process transport);
nothing is faked.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_kernel import Agent
from agent_kernel.config import AgentKernel
from agent_kernel.display.transcript import Transcript
from agent_kernel.kernel.interrupts import TurnInterrupts
from agent_kernel.store import Store
from agent_kernel.store.sessions import Sessions
from agent_kernel.store.writer import WriteBehind
from agent_kernel.tools import Outcome, Registry
from agent_kernel.tools.builtin import builtin_registry
from agent_kernel.tools.context import ToolContext
from agent_kernel.turn.loop import TurnResult


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
        yield Caller(registry, store, InteractiveShell.instance(), loop, session.id, AgentKernel(), writer)
    finally:
        writer.flush()
        loop.close()


# -- whole turns: an Agent on IPython's shell, its model served in this process ---------------


@dataclass
class Cell:
    """What one in-process turn left: its result, what it printed, the error its cell raises."""

    result: TurnResult | None
    stdout: str
    stderr: str
    error: BaseException | None

    @property
    def shown(self) -> str:
        return self.stdout + self.stderr

    @property
    def lines(self) -> list[str]:
        """What it printed, line by line (as a cell's displays, one a paragraph)."""
        return self.shown.splitlines()

    @property
    def errors(self) -> list[BaseException]:
        """The error the cell raised, as a list (like :attr:`tests.support.kernel.Execution.errors`)."""
        return [self.error] if self.error is not None else []


class ShellAgent:
    """Runs ``%agent`` turns as :meth:`Agent.run` does, on IPython's ``InteractiveShell``.

    Without a kernel nobody can answer a widget, so a turn runs as under papermill: no
    approval card, no Continue at the token limit; the transcript prints plain text.
    """

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    @property
    def shell(self) -> Any:
        return self.agent.shell

    def execute(self, prompt: str, **options: Any) -> Cell:
        """One turn with ``Agent.run(prompt, check=True, **options)``, as an ``%agent`` cell runs it."""
        out, err = io.StringIO(), io.StringIO()
        self.agent.last_result = None
        error: BaseException | None = None
        with redirect_stdout(out), redirect_stderr(err):
            try:
                self.agent.run(prompt, check=True, **options)
            except Exception as exc:  # noqa: BLE001 - the test looks at it
                error = exc
        return Cell(self.agent.last_result, out.getvalue(), err.getvalue(), error)

    def ok(self, prompt: str, **options: Any) -> Cell:
        """A turn that must end normally."""
        cell = self.execute(prompt, **options)
        if cell.error is not None:
            raise AssertionError(f"turn failed: {prompt!r}: {cell.error}") from cell.error
        return cell

    def code(self, source: str) -> None:
        """Run ``source`` in the shell, as a cell; fail the test if it fails."""
        self.shell.run_cell(source).raise_error()

    def value(self, expression: str) -> Any:
        return eval(expression, self.shell.user_ns)  # noqa: S307 - the test's own expression


@contextmanager
def shell_agent(http_client: Any, **settings: Any) -> Iterator[ShellAgent]:
    """A :class:`ShellAgent` on a cleared ``InteractiveShell``; ``@tool`` functions it defines are dropped after."""
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.tools import USER_TOOLS

    shell = InteractiveShell.instance()
    shell.reset(new_session=False)
    user_tools = dict(USER_TOOLS.tools)
    try:
        yield ShellAgent(Agent(shell=shell, http_client=http_client, **settings))
    finally:
        USER_TOOLS.tools.clear()
        USER_TOOLS.tools.update(user_tools)
