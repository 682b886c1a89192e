"""``Agent``: one per kernel. It owns the session and starts turns.

Scripts and tests use it directly::

    from agent_kernel import Agent
    agent = Agent()
    agent.run("load sales.csv and tell me the monthly totals")      # no running loop
    await agent.arun("now chart them")                               # inside a notebook

What a turn starts from (its session, what it reads first, the tools it offers) is
:mod:`agent_kernel.turn.start`; the loop is :mod:`agent_kernel.turn.loop`; how its cell
ends (the footer, "Insert as cells") is :mod:`agent_kernel.turn.finish`.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython import get_ipython
from IPython.core.interactiveshell import InteractiveShell

from agent_kernel.config import AgentKernel
from agent_kernel.errors import ConfigError, MissingKeyError, TurnFailedError, TurnInProgressError
from agent_kernel.kernel import libraries
from agent_kernel.paths import default_db_path
from agent_kernel.secrets import Secrets
from agent_kernel.turn import warmup
from agent_kernel.turn.request import TurnRequest, run_request

if TYPE_CHECKING:
    from agent_kernel.display.transcript import Transcript
    from agent_kernel.kernel.channel import Attachment
    from agent_kernel.kernel.interrupts import TurnInterrupts
    from agent_kernel.model.client import HttpClient, ModelClient
    from agent_kernel.store import Store
    from agent_kernel.store.sessions import Session
    from agent_kernel.tools import Registry, Tool
    from agent_kernel.turn.admin import Admin
    from agent_kernel.turn.approval import Approver
    from agent_kernel.turn.assemble import TurnParts
    from agent_kernel.turn.loop import Turn, TurnResult
    from agent_kernel.turn.start import Starts
    from agent_kernel.turn.subsessions import SubSessions

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
        self._kernel_key = f"kernel-{uuid.uuid4().hex[:8]}"
        self._store: Store | None = None
        self._store_path: Path | None = None
        self._registry: Registry | None = None
        self._mcp: Any = None  # the MCP servers, started on the first turn that needs them
        self._model_client: ModelClient | None = None  # ModelClient.stream scrubs every request
        self._http_client = http_client
        self._writer: Any = None
        self._session_name = session
        self._starts_made: Starts | None = None
        self._running = False
        self.approver: Approver | None = None
        self._always_allowed: dict[str, set[str]] = {}  # session id -> tools approved for good
        self.secrets = Secrets(lambda: self.config.secret_env, lambda: self.config.secret_env_ignore)
        self.last_result: TurnResult | None = None
        self._budget_seen: dict[str, Any] = {}  # session id -> its last request's reported size
        self._admin: Admin | None = None
        self._moves_seen: dict[str, tuple[str, float]] = {}  # a missing path -> where it went, when asked
        self._announcing: asyncio.Task[None] | None = None  # telling front ends the last turn ended

    # -- parts, made on first use --------------------------------------------------------

    @property
    def shell(self) -> InteractiveShell:
        if self._shell is None:
            self._shell = get_ipython() or InteractiveShell.instance()
        return self._shell

    @property
    def store(self) -> Store:
        path = Path(self.config.db_path).expanduser() if self.config.db_path else default_db_path()
        if self._store is None or path != self._store_path:
            if self._writer is not None:
                self._writer.flush()
            from agent_kernel.store import Store
            from agent_kernel.store.writer import WriteBehind

            self._store, self._store_path = Store(path), path
            self._writer = WriteBehind(self._store)
            if self._starts_made is not None:
                self._starts_made.last = None
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
        return self._model_client

    @property
    def notebook(self) -> str:
        """What identifies this notebook: its absolute path as the attached front end says it
        (it follows renames and moves), else the path the server started the kernel for, or
        where that notebook was moved since; else the kernel."""
        from agent_kernel.kernel import channel

        attached = channel.attached()
        if attached is not None and attached.path:
            return attached.path
        path = os.environ.get("JPY_SESSION_NAME") or self.shell.user_ns.get("__session__")
        return self._followed(str(path)) if path else self._kernel_key

    def _followed(self, path: str) -> str:
        """``path``, or where its notebook went when no file is there any more (the moves
        the server and kernels recorded): a kernel restarted after a rename keeps the old
        name in its environment, and so does a reminder set in a notebook renamed since."""
        if not os.path.isabs(path) or os.path.exists(path):
            return path
        known, asked = self._moves_seen.get(path, (path, 0.0))
        if os.path.exists(known) or time.monotonic() - asked < 5.0:
            return known
        from agent_kernel.store.sessions import Sessions

        with self.store.connect() as con:
            found = Sessions(con).moved_to(path) or path
        self._moves_seen[path] = (found, time.monotonic())
        return found

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

            self._admin = Admin(lambda: self.store, lambda: self.notebook, self._session_id)
        return self._admin

    @property
    def _starts(self) -> Starts:
        """Where this agent's turns start (see :mod:`agent_kernel.turn.start`)."""
        if self._starts_made is None:
            from agent_kernel.turn.start import Starts

            self._starts_made = Starts(
                settings=lambda: self.config, store=lambda: self.store, registry=lambda: self.registry,
                notebook=lambda: self.notebook, kernel_key=self._kernel_key, session_name=self._session_name,
                document=lambda: self.document,
            )  # fmt: skip
            from agent_kernel.kernel import channel

            channel.on_document(self.document_seen)
        return self._starts_made

    @property
    def document(self) -> str | None:
        """The notebook's id (``metadata.agent_kernel.document``) as the attached front end
        says it; None before a save gave the notebook one, or with no front end attached."""
        from agent_kernel.kernel import channel

        attached = channel.attached()
        return (attached.document or None) if attached is not None else None

    def document_seen(self, attachment: Attachment) -> None:
        """A front end named its notebook's id: record where that notebook is, so its sessions
        follow it when it is next moved outside Jupyter (and follow it now if it was)."""
        from agent_kernel.store.sessions import Sessions

        if attachment.path is None:
            return
        with self.store.connect() as con:
            Sessions(con).follow_document(attachment.document, attachment.path)

    def _session_id(self) -> str | None:
        """The id of the session turns continue now (None before one was resolved)."""
        return self._starts_made.session_id if self._starts_made is not None else None

    # -- sessions ------------------------------------------------------------------------

    def session(self, *, new: str | bool | None = None, name: str | None = None, create: bool = True) -> Session | None:
        """The session a turn would use; with ``new`` or ``name`` it becomes the current one.

        ``name`` continues that session, or starts it when there is none of that name.
        ``new`` starts a fresh one (called ``new`` when that is a string; an earlier session
        of that name is kept as ``NAME~1``, ``NAME~2``, ...). Without either: the session
        last used here, else the notebook's latest that is not archived, else a new one
        (or ``None`` when ``create`` is false).
        """
        return self._starts.session(new, name, create)

    def start_session(self, name: str | bool = True) -> tuple[Session, str | None]:
        """Start a fresh session now (``%agent --new [NAME]`` without a prompt).

        Returns it and the name an earlier session called ``name`` is kept under (``None``
        when there was none).
        """
        start = self._starts.start_session(name)
        return start.session, start.resolved.kept_as

    # -- turns ---------------------------------------------------------------------------

    def run(self, prompt: str, **options: Any) -> TurnResult:
        """Run one turn to the end (for scripts; in a notebook use ``await agent.arun(...)``).

        Takes the keyword arguments of :meth:`arun`.
        """
        request = run_request(prompt, **options)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._run_on_own_loop(request))
        raise RuntimeError(
            "An event loop is already running here (a notebook cell?): use "
            "`await agent.arun(...)` or the %agent magic instead of agent.run()."
        )

    def _refuse_without_key(self, request: TurnRequest) -> None:
        """Raise :class:`~agent_kernel.errors.MissingKeyError` when no key can reach the model
        (:class:`~agent_kernel.errors.TurnFailedError` with ``request.check``, which asks for
        every failure as that); outside a kernel (a script) its sentence names the ways a
        script's key is found."""
        from agent_kernel.model.client import KEY_WAYS, NO_KEY, api_key

        try:
            api_key()
        except MissingKeyError as exc:
            refused = exc
            if str(exc).startswith(NO_KEY) and getattr(self.shell, "kernel", None) is None:
                refused = MissingKeyError(
                    f"No Anthropic API key: set ANTHROPIC_API_KEY in this script's environment, or {KEY_WAYS}; "
                    "then run the script again."
                )
            if request.check:
                raise TurnFailedError(str(refused), "model_error") from None
            raise refused from None

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
        line instead, as an ``%agent`` cell does. With no API key no turn starts (no session
        is touched): it raises :class:`~agent_kernel.errors.MissingKeyError`, whose sentence
        says how to give one (``TurnFailedError`` with ``check=True``).
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
        self._refuse_without_key(request)  # before any session is touched: no half turn is left behind
        self._running = True
        try:
            await warmup.wait_for_step()  # its imports and the turn's must not interleave
            from agent_kernel.kernel.streams import quick_flushes

            with quick_flushes():  # each display update flushes the streams: only when needed
                result, footer = await self._turn(request, view, interrupts)
        finally:
            self._running = False
        self.last_result = result
        self._announce_turn()
        if request.check:
            from agent_kernel.turn.outcome import raise_if_failed

            raise_if_failed(result, footer=footer)
        if request.output:
            self.shell.user_ns[request.output] = result.value()
        return result

    def _announce_turn(self) -> None:
        """Tell the attached notebook front ends that a turn of the session ended, once what
        it said is stored: a chat showing the session reloads its history, so it shows turns
        run from ``%agent`` cells as they happen. The cell does not wait for it."""
        from agent_kernel.kernel import channel

        session_id = self._session_id()
        if session_id is None or channel.attached() is None:
            return
        writer = self._writer

        async def announce() -> None:
            if writer is not None and not writer.idle:
                await asyncio.to_thread(writer.flush)
            channel.turn_ended(session_id)

        self._announcing = asyncio.get_running_loop().create_task(announce())

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
        from agent_kernel.display.approval import CardApprover
        from agent_kernel.display.stop import prepare as prepare_stop
        from agent_kernel.kernel import channel
        from agent_kernel.kernel.interrupts import TurnInterrupts
        from agent_kernel.turn import finish
        from agent_kernel.turn.approval import make_check
        from agent_kernel.turn.assemble import Assembler, thinking_level
        from agent_kernel.turn.plan import plan_turn

        level = thinking_level(request.thinking, self.config.thinking)
        mode = (request.approve or self.config.approve).lower()
        mcp_failures = await self._connect_mcp()
        await channel.settle()  # a notebook front end answering the kernel's first hello
        try:
            offered = self._offered(mode)
        except ConfigError as exc:  # the turn stops here: say the servers that did not start too
            raise ConfigError(" ".join([str(exc), *mcp_failures])) from None
        builder = Assembler(self._parts())
        if not self._writer.idle:  # the last turn's saves are still going out
            await asyncio.to_thread(self._writer.flush)
        start = self._starts.begin(request, {t.group for t in offered})
        plan, transcript = await plan_turn(
            request,
            start,
            builder,
            view,
            offered=offered,
            mode=mode,
            level=level,
            mcp_failures=mcp_failures,
            budget_seen=self._budget_seen,
            refresh_tools=lambda: self._offered(mode),
        )
        with given if given is not None else TurnInterrupts() as interrupts:
            transcript.show_stop(lambda: interrupts.request("stop"))
            if self.approver is None and self.live:
                self.approver = CardApprover()
            plan.check = make_check(mode, self.approver if self.live else None, self._always_allowed)
            turn = builder.turn(request, plan, transcript=transcript, interrupts=interrupts)
            context = turn.context
            context.sessions = children = self._subsessions(builder.parts, turn, start.session, interrupts)
            try:
                try:
                    result = await turn.run()
                finally:
                    await children.close()  # children still running end with the turn
            except BaseException:
                self._starts.last = None
                transcript.hide_stop()
                raise
        assert plan.budget is not None
        self._starts.last = start.after(context.journal, turn.estimate, result, plan.budget.compactions)
        # The turn's last writes are saved while the cell shows how it ended; the cell
        # finishes only once they are.
        saving = asyncio.ensure_future(asyncio.to_thread(self._writer.flush))
        if self.live:  # the next turn's Stop button, made while this turn's saves go out
            prepare_stop()
        try:
            footer = await finish.end_cell(
                transcript,
                result,
                turn.limits,
                new=start.resolved.created,
                session_id=start.session.id,
                number=plan.number,
                insert=self.insert_turn_cells,
            )
        finally:
            await saving
        return result, footer

    async def insert_turn_cells(self, session_id: str, number: int) -> str:
        """Insert turn ``number`` of the session as cells into the attached notebook (what
        "Insert as cells" does); the line saying so, or ``ValueError`` saying why not."""
        from agent_kernel.turn import finish

        return await finish.insert_turn_cells(self.store, self._writer, session_id, number)

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

    # -- the system prompt and the tools ---------------------------------------------------

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
        """The tools a turn in approval ``mode`` offers (see :meth:`Starts.offered`)."""
        return self._starts.offered(mode)
