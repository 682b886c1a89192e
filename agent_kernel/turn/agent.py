"""``Agent``: one per kernel. It owns the session and starts turns.

Scripts and tests use it directly::

    from agent_kernel import Agent
    agent = Agent()
    agent.run("load sales.csv and tell me the monthly totals")      # no running loop
    await agent.arun("now chart them")                               # inside a notebook
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kernel.config import TOOL_GROUPS, AgentKernel
from agent_kernel.errors import ConfigError, SessionError, TurnInProgressError
from agent_kernel.paths import default_db_path
from agent_kernel.secrets import Secrets
from agent_kernel.turn.request import TurnRequest

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.display.transcript import Transcript
    from agent_kernel.kernel.interrupts import TurnInterrupts
    from agent_kernel.model.client import HttpClient, ModelClient
    from agent_kernel.model.conversation import Repair
    from agent_kernel.model.usage import InputEstimate
    from agent_kernel.store import Store
    from agent_kernel.store.compactions import Compaction
    from agent_kernel.store.sessions import Journal, Session, Sessions
    from agent_kernel.store.usage import SessionUsage
    from agent_kernel.tools import Registry, Tool
    from agent_kernel.turn.admin import Admin
    from agent_kernel.turn.approval import Approver
    from agent_kernel.turn.assemble import TurnParts
    from agent_kernel.turn.loaded import LoadedConversation
    from agent_kernel.turn.loop import Turn, TurnLimits, TurnResult
    from agent_kernel.turn.subsessions import SubSessions
    from agent_kernel.turn.summaries import RecallStart

__all__ = ["Agent"]


class Agent:
    """A Claude agent working in an IPython shell, with durable sessions in DuckDB.

    Parameters
    ----------
    config:
        The :class:`~agent_kernel.config.AgentKernel` settings; a fresh one by default.
        Keyword arguments named like its traits (``model=...``, ``token_limit=...``)
        override them for this agent.
    shell:
        The IPython shell whose namespace the agent works in; the running one by default,
        else a new ``InteractiveShell``.
    session:
        Name of the session to continue (started when there is none of that name); by
        default the notebook's own session.
    http_client:
        What the SDK sends model requests through: a function returning an
        ``anthropic.DefaultAsyncHttpxClient`` (called for each event loop) or one client;
        by default the SDK's own (see :class:`~agent_kernel.model.client.ModelClient`).
    """

    def __init__(
        self,
        *,
        config: AgentKernel | None = None,
        shell: InteractiveShell | None = None,
        session: str | None = None,
        http_client: HttpClient | None = None,
        **settings: Any,
    ) -> None:
        self.config = config if config is not None else AgentKernel()
        for name, value in settings.items():
            if not self.config.has_trait(name):
                raise TypeError(f"Agent() got an unknown setting {name!r}")
            setattr(self.config, name, value)
        self._shell = shell
        self._session_name = session
        self._session_id: str | None = None
        self._kernel_key = f"kernel-{uuid.uuid4().hex[:8]}"
        self._store: Store | None = None
        self._store_path: Path | None = None
        self._registry: Registry | None = None
        self._mcp: Any = None  # the MCP servers, started on the first turn that needs them
        self._model_client: Any = None  # ModelClient.stream scrubs every request
        self._http_client = http_client
        self._writer: Any = None
        self._start: _TurnStart | None = None  # what the last turn read and wrote, for the next
        self._running = False
        self.approver: Approver | None = None
        self._always_allowed: dict[str, set[str]] = {}  # session id -> tools approved for good
        self.secrets = Secrets(lambda: self.config.secret_env, lambda: self.config.secret_env_ignore)
        self.last_result: TurnResult | None = None
        self._budget_seen: dict[str, Any] = {}  # session id -> its last request's reported size
        self._admin: Admin | None = None
        self._tools_synced: int | None = None  # store.changes when the agent's own tools were last read

    # -- parts, made on first use --------------------------------------------------------

    @property
    def shell(self) -> InteractiveShell:
        if self._shell is None:
            from IPython import get_ipython
            from IPython.core.interactiveshell import InteractiveShell

            self._shell = get_ipython() or InteractiveShell.instance()
        return self._shell

    @property
    def store(self) -> Store:
        path = Path(self.config.db_path).expanduser() if self.config.db_path else default_db_path()
        if self._store is None or path != self._store_path:
            from agent_kernel.store import Store
            from agent_kernel.store.writer import WriteBehind

            if self._writer is not None:
                self._writer.flush()
            self._store, self._store_path = Store(path), path
            self._writer = WriteBehind(self._store)
            self._start = None
            from agent_kernel.kernel import libraries

            libraries.install(lambda: self.store)
        return self._store

    @property
    def registry(self) -> Registry:
        from agent_kernel.tools import USER_TOOLS

        if self._registry is None:
            from agent_kernel.tools.builtin import builtin_registry

            self._registry = builtin_registry()
        for item in USER_TOOLS.tools.values():  # @tool functions defined since last turn
            self._registry.add(item)
        return self._registry

    @property
    def model_client(self) -> ModelClient:
        """What this agent's model calls go through (turns, summaries, agent_kernel.llm)."""
        if self._model_client is None:
            from agent_kernel.model.client import ModelClient

            self._model_client = ModelClient(http_client=self._http_client)
        client: ModelClient = self._model_client
        return client

    @property
    def notebook(self) -> str:
        """What identifies this notebook: the path the server gave the kernel, else the kernel."""
        path = os.environ.get("JPY_SESSION_NAME") or self.shell.user_ns.get("__session__")
        return str(path) if path else self._kernel_key

    @property
    def live(self) -> bool:
        """Whether a front end can show widgets (a Jupyter kernel, not a terminal or script)."""
        return getattr(self.shell, "kernel", None) is not None

    @property
    def admin(self) -> Admin:
        """What the person manages between turns: sessions, the audit trail, the stored
        instructions, skills, tainted items (the magics call it; see :mod:`agent_kernel.turn.admin`)."""
        if self._admin is None:
            from agent_kernel.turn.admin import Admin

            self._admin = Admin(lambda: self.store, lambda: self.notebook, lambda: self._session_id)
        return self._admin

    # -- sessions ------------------------------------------------------------------------

    def session(self, *, new: str | bool | None = None, name: str | None = None, create: bool = True) -> Session | None:
        """The session a turn would use; with ``new`` or ``name`` it becomes the current one.

        ``name`` continues that session, or starts it when there is none of that name.
        ``new`` starts a fresh one (called ``new`` when that is a string; an earlier session
        of that name is kept as ``NAME~1``, ``NAME~2``, ...). Without either: the session
        last used here, else the notebook's latest that is not archived, else a new one
        (or ``None`` when ``create`` is false).
        """
        from agent_kernel.store.sessions import Sessions

        with self.store.connect() as con:
            return self._resolve(Sessions(con), new, name, create).session

    def start_session(self, name: str | bool = True) -> tuple[Session, str | None]:
        """Start a fresh session now (``%agent --new [NAME]`` without a prompt).

        Returns it and the name an earlier session called ``name`` is kept under (``None``
        when there was none).
        """
        try:
            groups = {t.group for t in self._offered(self.config.approve.lower())}
        except ConfigError:
            groups = set()  # the turn will say what is wrong with tool_groups
        start = self._read_start(name or True, None, self.config.instruction, groups)
        # The next turn continues it as read here (no "new session" notice again).
        self._start = replace(start, resolved=_Resolved(start.session))
        return start.session, start.resolved.kept_as

    def _resolve(self, sessions: Sessions, new: str | bool | None, name: str | None, create: bool) -> _Resolved:
        kept_as = None
        if new:
            if isinstance(new, str):
                earlier = sessions.by_name(new)
                if earlier is not None:
                    kept_as = sessions.kept_name(new)
                    sessions.rename(earlier.id, kept_as)
                found = sessions.create(new, notebook=self.notebook)
            else:
                name = sessions.unused_name(self._default_name())
                found = sessions.create(name, notebook=self.notebook)
            resolved = _Resolved(found, created=True, kept_as=kept_as)
        elif name is not None:
            resolved = self._named(sessions, name, create)
        else:
            found = None
            if self._session_id is not None:
                found = sessions.get(self._session_id)
                if found is not None and found.state == "completed":
                    found = None  # archived since: the notebook moves on to a new session
            elif self._session_name is not None:
                return self._adopt(self._named(sessions, self._session_name, create))
            if found is None:
                found = sessions.latest_for_notebook(self.notebook)
            if found is not None:
                resolved = _Resolved(found)
            elif not create:
                return _Resolved(None)
            else:
                name = sessions.unused_name(self._default_name())
                resolved = _Resolved(sessions.create(name, notebook=self.notebook), created=True)
        return self._adopt(resolved)

    def _named(self, sessions: Sessions, name: str, create: bool) -> _Resolved:
        """The session called ``name``, started when there is none (so a notebook re-runs)."""
        found = sessions.by_name(name)
        if found is not None:
            return _Resolved(found)
        if not create:
            raise SessionError(f"No session named {name!r}; %agent_sessions --all lists them.")
        return _Resolved(sessions.create(name, notebook=self.notebook), created=True)

    def _adopt(self, resolved: _Resolved) -> _Resolved:
        if resolved.session is not None:
            if self._session_id is not None and self._session_id != resolved.session.id:
                from agent_kernel.tools.browser_driver import DRIVER

                DRIVER.end_session(self._session_id)  # the session left behind closes its browser
            self._session_id = resolved.session.id
        return resolved

    def _default_name(self) -> str:
        notebook = self.notebook
        if notebook == self._kernel_key:
            return notebook
        return Path(notebook).stem or "session"

    # -- turns ---------------------------------------------------------------------------

    def run(self, prompt: str, **options: Any) -> TurnResult:
        """Run one turn to the end (for scripts; in a notebook use ``await agent.arun(...)``).

        Takes the keyword arguments of :meth:`arun`.
        """
        request = _request(prompt, **options)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._run_on_own_loop(request))
        raise RuntimeError(
            "An event loop is already running here (a notebook cell?): use "
            "`await agent.arun(...)` or the %agent magic instead of agent.run()."
        )

    async def _run_on_own_loop(self, request: TurnRequest) -> TurnResult:
        """A turn on a loop that ends with it: its model connections are closed first."""
        try:
            return await self.arun_request(request)
        finally:
            if self._model_client is not None:
                await self._model_client.aclose()

    async def arun(
        self,
        prompt: str,
        *,
        new: str | bool | None = None,
        session: str | None = None,
        model: str | None = None,
        token_limit: int | None = None,
        approve: str | None = None,
        check: bool = False,
        thinking: str | bool | None = None,
    ) -> TurnResult:
        """Run one turn on the running event loop and return how it ended.

        ``thinking`` turns Claude's thinking on for this turn (``True``: adaptive, or a
        level of :attr:`AgentKernel.thinking`; ``False`` or ``"off"``: off), overriding
        the setting.

        A turn that did not end normally (a model error, Stop or an interrupt, the token
        limit, the model-call cap; see :mod:`agent_kernel.turn.outcome`) still returns its
        result, with ``result.failed`` true and ``result.error`` the line shown; with
        ``check=True`` it raises :class:`~agent_kernel.errors.TurnFailedError` with that
        line instead, as an ``%agent`` cell does.
        """
        return await self.arun_request(
            TurnRequest(
                prompt,
                new=new,
                session=session,
                model=model,
                token_limit=token_limit,
                approve=approve,
                check=check,
                thinking=thinking,
            )
        )

    async def arun_request(
        self, request: TurnRequest, *, view: Transcript | None = None, interrupts: TurnInterrupts | None = None
    ) -> TurnResult:
        """Run the turn ``request`` describes (what :meth:`arun` and ``%agent`` build).

        With ``request.output`` the final text (or the JSON it holds) goes into that
        variable of the shell once the turn ended normally. ``view`` and ``interrupts``:
        the cell's transcript and the turn's interrupts, when the caller showed its Stop
        button before the turn's work began (``%agent``).
        """
        if self._running:
            raise TurnInProgressError("An agent turn is already running in this kernel; wait for it or press Stop.")
        self._running = True
        try:
            from agent_kernel.kernel.streams import quick_flushes
            from agent_kernel.turn import warmup

            await warmup.wait_for_step()  # its imports and the turn's must not interleave
            with quick_flushes():  # each display update flushes the streams: only when needed
                result, footer = await self._turn(request, view, interrupts)
        finally:
            self._running = False
        self.last_result = result
        if request.check:
            from agent_kernel.turn.outcome import raise_if_failed

            raise_if_failed(result, footer=footer)
        if request.output:
            self.shell.user_ns[request.output] = result.value()
        return result

    def _parts(self) -> TurnParts:
        """What this agent's turns (and their sub-sessions) use."""
        from agent_kernel.turn.assemble import TurnParts

        return TurnParts(
            shell=self.shell, settings=self.config, store=self.store, writer=self._writer,
            registry=self.registry, model_client=self.model_client, secrets=self.secrets,
            notebook=self.notebook, live=self.live,
        )  # fmt: skip

    async def _turn(
        self, request: TurnRequest, view: Transcript | None, given: TurnInterrupts | None
    ) -> tuple[TurnResult, str | None]:
        """Run the turn; its result, and the footer of a failed turn whose cell fails (the
        cell shows it with the failure's line, last)."""
        from agent_kernel.display.components import take_notes
        from agent_kernel.kernel.cells import section_untrusted
        from agent_kernel.kernel.cells import turn_section as notebook_cells
        from agent_kernel.kernel.interrupts import TurnInterrupts
        from agent_kernel.model import conversation
        from agent_kernel.model.usage import InputEstimate
        from agent_kernel.tools.context import UntrustedReads
        from agent_kernel.turn.approval import make_check
        from agent_kernel.turn.assemble import Assembler, TurnPlan, thinking_level
        from agent_kernel.turn.prompt import assemble, turn_context

        config = self.config
        level = thinking_level(request.thinking, config.thinking)
        mode = (request.approve or config.approve).lower()
        mcp_failures = await self._connect_mcp()
        from agent_kernel.kernel import channel

        await channel.settle()  # a notebook front end answering the kernel's first hello
        try:
            offered = self._offered(mode)
        except ConfigError as exc:  # the turn stops here: say the servers that did not start too
            raise ConfigError(" ".join([str(exc), *mcp_failures])) from None
        groups = {t.group for t in offered}
        builder = Assembler(self._parts())
        if not self._writer.idle:  # the last turn's saves are still going out
            await asyncio.to_thread(self._writer.flush)
        start = self._unchanged_start(request.new, request.session, config.instruction, groups)
        if start is None:
            start = self._read_start(request.new, request.session, config.instruction, groups)
        resolved = start.resolved
        current = start.session
        limits = builder.limits(request, current, thinking=level)
        summaries = await self._write_summaries(start.recall)
        transcript = view if view is not None else builder.transcript(request)
        context_block = turn_context(
            start.conversation.known,
            settings=config,
            shell=self.shell,
            groups=groups,
            notepad=start.notepad,
            notes=[*mcp_failures, *take_notes(current.id)],
            previous_session=_previous_section(start.recall, summaries),
            cells=notebook_cells(self.shell) if groups else "",
        )
        for line in mcp_failures:
            transcript.notice(line, kind="error")
        if resolved.kept_as:
            transcript.notice(
                f"New session {current.name!r}; the earlier one is kept as {resolved.kept_as!r} "
                f"(%agent --session {resolved.kept_as} continues it).",
                kind="muted",
            )
        spent = start.usage
        budget = builder.budget(limits, current, list(start.compactions), self._budget_seen)
        with given if given is not None else TurnInterrupts() as interrupts:
            transcript.show_stop(lambda: interrupts.request("stop"))
            if self.approver is None and self.live:
                from agent_kernel.display.approval import CardApprover

                self.approver = CardApprover()
            plan = TurnPlan(
                session_id=current.id,
                session_name=current.name,
                number=start.last_turn + 1,
                tools=offered,
                system=assemble(start.sections, groups=groups, secrets=self.secrets.names(), search=config.tool_search),
                approve=mode,
                limits=limits,
                prompt_blocks=[context_block, *conversation.as_blocks(request.prompt), *request.attachments],
                history=start.history(),
                check=make_check(mode, self.approver if self.live else None, self._always_allowed),
                refresh_tools=lambda: self._offered(mode),
                reads=UntrustedReads(
                    earlier=current.untrusted_sources, this_turn=section_untrusted(self.shell) if groups else []
                ),
                session_tokens=current.tokens_used,
                session_cost=spent.cost,
                estimate=InputEstimate(spent.last_prompt_tokens, spent.last_request_chars or 0),
                budget=budget,
                side_calls=[(w.message, w.duration_ms) for w in summaries if w.message is not None],
                ask_to_continue=self.live,
            )
            turn = builder.turn(request, plan, transcript=transcript, interrupts=interrupts)
            context = turn.context
            context.sessions = children = self._subsessions(builder.parts, turn, current, interrupts)
            try:
                try:
                    result = await turn.run()
                finally:
                    await children.close()  # children still running end with the turn
            except BaseException:
                self._start = None
                transcript.hide_stop()
                raise
        self._start = start.after(context.journal, turn.estimate, result, budget.compactions)
        # The turn's last writes are saved while the cell shows how it ended; the cell
        # finishes only once they are.
        saving = asyncio.ensure_future(asyncio.to_thread(self._writer.flush))
        if self.live:  # the next turn's Stop button, made while this turn's saves go out
            from agent_kernel.display.stop import prepare

            prepare()
        try:
            await transcript.settle(wait=not result.failed)  # a stopped turn ends at once
            if result.state != "error" and result.model_calls:
                footer = _footer(result, turn.limits, new=resolved.created)
                if result.failed and transcript.failure_raised:
                    return result, footer
                usage = {
                    "model": result.model, "tool_calls": result.tool_calls, "seconds": round(result.seconds, 3),
                    "tokens": result.tokens, "session_tokens": result.session_tokens,
                    "token_limit": turn.limits.token_limit, "cost": result.cost,
                    "subsessions": result.subsessions, "subsession_tokens": result.subsession_tokens,
                }  # fmt: skip
                transcript.notice(footer, kind="muted", usage=usage)
                self._offer_cells(transcript, current.id, plan.number)
        finally:
            await saving
        return result, None

    def _offer_cells(self, transcript: Transcript, session_id: str, number: int) -> None:
        """Remember the cell the turn ran in; with a notebook front end attached, show
        "Insert as cells" under its footer (see :mod:`agent_kernel.kernel.turn_cells`)."""
        from agent_kernel.kernel import channel, turn_cells

        turn_cells.remember(session_id, number, channel.running_cell())
        if channel.attached() is None:
            return

        async def insert() -> str:
            return await self.insert_turn_cells(session_id, number)

        transcript.offer_cells(insert)

    async def insert_turn_cells(self, session_id: str, number: int) -> str:
        """Insert turn ``number`` of the session as cells into the attached notebook (what
        "Insert as cells" does); the line saying so, or ``ValueError`` saying why not."""
        from agent_kernel.kernel import turn_cells
        from agent_kernel.store.steps import turn_cells as cells_of
        from agent_kernel.store.steps import turn_steps

        if not self._writer.idle:
            await asyncio.to_thread(self._writer.flush)
        with self.store.connect() as con:
            turn = turn_steps(con, session_id, number)
        if turn is None:
            raise turn_cells.CellsError("This turn is no longer stored (its session was deleted).")
        placed = await turn_cells.insert(cells_of(turn), session_id=session_id, turn=number, prompt=turn.prompt)
        code = len(placed.cells) - 1
        return f"Inserted below this cell: the prompt and answer, {code} code cell{'s' if code != 1 else ''}."

    def _subsessions(self, parts: TurnParts, turn: Turn, session: Session, interrupts: TurnInterrupts) -> SubSessions:
        """What spawn_session and wait_for_sessions of this turn use (see subsessions.py)."""
        from agent_kernel.turn.subsessions import Family, SubSessions

        family = Family(
            parts=parts, tools=list(turn.tools), system=turn.system, limits=turn.limits,
            approve=turn.context.approve, check=turn.check, refresh_tools=turn.refresh_tools,
        )  # fmt: skip
        return SubSessions(
            family, session_id=session.id, session_name=session.name, depth=0, interrupts=interrupts, turn=turn
        )

    # -- what a turn reads first -----------------------------------------------------------

    def _unchanged_start(
        self, new: str | bool | None, name: str | None, instruction: str, groups: set[str]
    ) -> _TurnStart | None:
        """The last turn's start, brought up to date by its writes, when it still holds:
        the same session, notebook and prompt sections, and a file nobody else changed."""
        start = self._start
        if (
            start is None
            or new
            or (name is not None and name != start.session.name)
            or start.session.id != self._session_id
            or start.notebook != self.notebook
            or start.sections_key != (instruction, frozenset(groups))
            or not self.store.unchanged_since(start.changes)
            or ("skills" in groups and start.skills_folder != _skills_folder(self.config.skills_dir))
            or self._idle_since(start)  # a summary may be due: see session_summary.py
        ):
            return None
        return start

    def _idle_since(self, start: _TurnStart) -> bool:
        """Whether the session has been idle past summary_idle_minutes since ``start``'s turn."""
        minutes = self.config.summary_idle_minutes
        return bool(minutes) and time.monotonic() - start.ended > minutes * 60

    async def _write_summaries(self, found: RecallStart) -> list[Any]:
        """Make the session summaries due as this turn starts (see session_summary.py)."""
        if not found.due:
            return []
        from agent_kernel.turn import summaries as session_summary

        return await session_summary.write(
            found.due, store=self.store, model_client=self.model_client, small_model=self.config.small_model
        )

    def _read_start(self, new: str | bool | None, name: str | None, instruction: str, groups: set[str]) -> _TurnStart:
        """Resolve the session and read what a turn needs first, in one connection."""
        from agent_kernel.store import compactions
        from agent_kernel.store.notepad import Notepad
        from agent_kernel.store.sessions import Sessions
        from agent_kernel.store.usage import session_usage
        from agent_kernel.turn import summaries as session_summary
        from agent_kernel.turn.loaded import LoadedConversation
        from agent_kernel.turn.prompt import stored_sections

        store = self.store
        synced = self._tools_synced
        with store.connect() as con:
            sessions = Sessions(con)
            resolved = self._resolve(sessions, new, name, True)
            current = resolved.session
            assert current is not None
            stored = sessions.messages(current.id)
            last_turn = sessions.last_turn(current.id)
            sessions.touch(current.id, notebook=self.notebook)
            sections = stored_sections(con, instruction, groups, self.config.skills_dir)
            notepad = Notepad(con, current.id).read_shown()[0] if "skills" in groups else ""
            compacted = compactions.load(con, current.id)
            spent = session_usage(con, current.id)
            recall = session_summary.at_start(
                con,
                current,
                first_turn=last_turn == 0,
                notebook=self.notebook,
                idle_minutes=self.config.summary_idle_minutes,
            )
            changes = store.changes  # this connection's own count: it is still open
        if synced is not None and changes == synced + 1:
            # This connection's write was the only change since the agent's tools were
            # read (another process's, or another connection's, would have counted too),
            # and it wrote no tool: they are still as read.
            self._tools_synced = changes
        return _TurnStart(
            changes=changes,
            resolved=resolved,
            session=current,
            conversation=LoadedConversation().extended({"role": m.role, "content": m.content} for m in stored),
            last_turn=last_turn,
            notebook=self.notebook,
            sections_key=(instruction, frozenset(groups)),
            sections=sections,
            compactions=tuple(compacted),
            usage=spent,
            notepad=notepad,
            recall=recall,
            skills_folder=_skills_folder(self.config.skills_dir) if "skills" in groups else (),
        )

    # -- the system prompt ---------------------------------------------------------------

    def system_prompt(self, *, approve: str | None = None) -> str:
        """The system prompt the next turn would send (``%agent_prompt --full`` shows it)."""
        from agent_kernel.turn.prompt import system_prompt

        offered = self._offered((approve or self.config.approve).lower())
        with self.store.connect(read_only=True) as con:
            return system_prompt(
                con,
                settings=self.config,
                groups={t.group for t in offered},
                secrets=self.secrets.names(),
            )

    async def _connect_mcp(self) -> list[str]:
        """Start the configured MCP servers not running yet and offer their tools; a line
        for each that failed."""
        servers = dict(self.config.mcp_servers) if self.config.tools_enabled else {}
        if not servers and self._mcp is None:
            return []
        if self._mcp is None:
            from agent_kernel.tools.mcp import kernel_servers

            self._mcp = kernel_servers()
        failures: list[str] = await self._mcp.connect(servers, float(self.config.mcp_timeout))
        registry = self.registry
        for name in [n for n, t in registry.tools.items() if t.group == "mcp"]:
            registry.remove(name)
        for item in self._mcp.tools():
            registry.add(item)
        return failures

    def _offered(self, mode: str) -> list[Tool]:
        """The tools a turn in approval ``mode`` offers (none with tools_enabled = False).

        Group names are checked here, not when they are set: a group of ``@tool``
        functions may be named before the cell that defines them runs.
        """
        groups = list(self.config.tool_groups) if self.config.tools_enabled else []
        registry = self.registry
        known = set(TOOL_GROUPS) | {t.group for t in registry.tools.values()}
        unknown = [g for g in groups if g not in known]
        if unknown:
            raise ConfigError(
                f"Unknown tool group {', '.join(map(repr, unknown))} in AgentKernel.tool_groups: "
                f"the groups are {', '.join(sorted(known))}. (tools_enabled = False switches "
                "all tools off.)"
            )
        if "tools" in groups and not (  # the agent's own tools, as stored now
            self._tools_synced is not None and self.store.unchanged_since(self._tools_synced)
        ):
            from agent_kernel.tools.agent_tools import sync

            with self.store.connect(read_only=True) as con:
                sync(registry, con)
            self._tools_synced = self.store.changes
        if self.config.tools_enabled and self.config.mcp_servers:
            groups.append("mcp")  # the servers' tools, see tools/mcp.py
        from agent_kernel.kernel import channel

        return registry.offered(groups, read_only=mode == "read-only", notebook=channel.attached() is not None)


@dataclass(frozen=True)
class _Resolved:
    """The session a turn uses, whether it was started for it, and where an earlier
    session of its name went."""

    session: Session | None
    created: bool = False
    kept_as: str | None = None


@dataclass(frozen=True)
class _TurnStart:
    """What a turn reads from the store before it starts: its session, the stored
    conversation, the prompt's stored sections. Kept for the next turn, which uses it
    without opening the file while :meth:`Store.unchanged_since` says ``changes`` holds
    (the turn's own writes, its messages and compactions, are mirrored into it)."""

    changes: int
    resolved: _Resolved
    session: Session
    conversation: LoadedConversation  # the stored messages, repaired (see loaded.py)
    last_turn: int
    notebook: str
    sections_key: tuple[str, frozenset[str]]
    sections: list[tuple[str, str]]
    compactions: tuple[Compaction, ...]  # the session's stored context summaries
    usage: SessionUsage  # its cost so far and the size of its last request
    notepad: str  # the session's notepad ("" unless the skills group is on)
    recall: RecallStart  # summaries due, the previous session (see session_summary.py)
    ended: float = 0.0  # time.monotonic() when the turn that last used it ended (0: none did)
    skills_folder: tuple[Any, ...] = ()  # the skills folder as read (see _skills_folder)

    def history(self) -> Repair:
        """The stored conversation, repaired, for a turn to continue (what its requests
        may send is copied for it: the turn may change what it is given)."""
        return self.conversation.for_turn(list(self.compactions))

    def after(
        self, journal: Journal, estimate: InputEstimate, result: TurnResult, made: list[Compaction]
    ) -> _TurnStart:
        """This start as the next turn finds it: the session with what ``journal`` recorded,
        the compactions ``made`` during the turn (saved as mirrored writes), the cost and
        last request size the turn's calls added."""
        from agent_kernel.store.compactions import merged
        from agent_kernel.store.usage import SessionUsage
        from agent_kernel.turn.summaries import RecallStart

        # As stored: the JSON the journal writes, decoded (nothing shared with the turn).
        said = [{"role": role, "content": json.loads(json.dumps(content))} for role, content in journal.recorded]

        session = journal.applied_to(self.session)
        measured = estimate.tokens is not None
        usage = SessionUsage(
            cost=self.usage.cost + (result.cost or 0.0),
            unpriced=self.usage.unpriced + result.unpriced_calls,
            last_prompt_tokens=estimate.tokens if measured else self.usage.last_prompt_tokens,
            last_request_chars=estimate.chars if measured else self.usage.last_request_chars,
        )
        return replace(
            self,
            resolved=_Resolved(session),
            session=session,
            conversation=self.conversation.extended(said) if said else self.conversation,
            compactions=tuple(merged(self.compactions, made)),
            last_turn=max(self.last_turn, journal.turn),
            usage=usage,
            # Made and shown; unless the turn stored nothing (a failed first request): its
            # retry is the session's first turn still.
            recall=RecallStart() if said else RecallStart(previous=self.recall.previous),
            ended=time.monotonic(),
        )


def _previous_section(found: RecallStart, written: list[Any]) -> str:
    """The turn context's summary of the previous session (made just now, else as stored)."""
    from agent_kernel.turn.summaries import turn_section

    if found.previous is None:
        return ""
    fresh = [w.summary for w in written if w.session_id == found.previous.id]
    return turn_section(found.previous, fresh[-1] if fresh else found.previous.summary)


def _footer(result: TurnResult, limits: TurnLimits, *, new: bool = False) -> str:
    from agent_kernel.display.footer import TurnFigures, footer_line

    return footer_line(
        TurnFigures(
            model=result.model or "model",
            tool_calls=result.tool_calls,
            seconds=result.seconds,
            tokens=result.tokens,
            input_tokens=result.input_tokens,
            cache_read_tokens=result.cache_read_tokens,
            cost=result.cost,
            unpriced_calls=result.unpriced_calls,
            session=result.session,
            session_tokens=result.session_tokens,
            token_limit=limits.token_limit,
            session_cost=result.session_cost,
            new_session=new,
            web_searches=result.web_searches,
            web_fetches=result.web_fetches,
            subsessions=result.subsessions,
            subsession_tokens=result.subsession_tokens,
            subsession_cost=result.subsession_cost,
            cost_limit=limits.cost_limit,
        )
    )


def _request(prompt: str, **options: Any) -> TurnRequest:
    """The request :meth:`Agent.run` makes of its keyword arguments (those of :meth:`Agent.arun`)."""
    known = {"new", "session", "model", "token_limit", "approve", "check", "thinking"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(f"Agent.run() got an unexpected keyword argument {unknown[0]!r}")
    return TurnRequest(prompt, **options)


def _skills_folder(configured: str) -> tuple[Any, ...]:
    """The skills folder's SKILL.md files as ``stat`` sees them: a skill added, changed or
    removed there changes this, and the next turn reads its prompt sections afresh."""
    from agent_kernel.store.skills import skills_folder

    folder = skills_folder(configured)
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.is_dir())
    except OSError:
        return ()
    found: list[Any] = [str(folder)]
    for name in names:
        try:
            stat = os.stat(folder / name / "SKILL.md")
        except OSError:
            continue
        found.append((name, stat.st_mtime_ns, stat.st_size, stat.st_ino))
    return tuple(found)
