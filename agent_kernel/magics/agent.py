"""The ``%agent`` magics: parse what the user typed and hand it to the :class:`Agent`.

IPython magics are synchronous, but a turn must be *awaited* on the kernel's event loop
so that widget events (Stop, approvals, forms) arrive while it runs. An input transformer
therefore rewrites ``%agent ...`` lines and ``%%agent`` cells into
``await run_agent_magic(line, body)``. The registered magics stay, for ``%agent?`` help,
``%lsmagic``, and places the rewrite does not reach (a script with no running loop).
"""

from __future__ import annotations

import re
import string
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments

from agent_kernel.config import APPROVE_MODES, AgentKernel
from agent_kernel.magics.args import parse_args, unquote, usage_errors
from agent_kernel.turn.request import TurnRequest

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.display.text_tables import Markdown, Table
    from agent_kernel.turn.agent import Agent
    from agent_kernel.turn.loop import TurnResult

__all__ = [
    "FLAGS",
    "AgentMagics",
    "Flag",
    "flags_help",
    "interpolate",
    "parse_agent_call",
    "rewrite_agent_cells",
    "run_agent_magic",
]

_ACTIVE: AgentMagics | None = None
_REGISTERED: list[Magics] = []  # every Magics instance load_ipython_extension registered

# ---------------------------------------------------------------------------------------
# Parsing


@dataclass(frozen=True)
class Flag:
    """One ``%agent`` flag: the parser, the error messages and ``%agent?`` all read it."""

    names: tuple[str, ...]  # the first is the one shown; the others are accepted too
    value: str  # what follows it in the help ("NAME", "[NAME]" when optional, "" for none)
    help: str
    field: str | None = None  # the TurnRequest field it sets
    # An optional value that is one of these words: the next word is the value only when it
    # is one of them (so "%agent --think why ..." is a prompt, not a value).
    choices: tuple[str, ...] = ()


_THINK_LEVELS = ("adaptive", "low", "medium", "high", "max", "off")  # thinking.LEVELS and off

FLAGS = (
    Flag(("--new",), "[NAME]", "start a new session (on a %agent line: --new=NAME, or --new NAME "
         "-- PROMPT); an earlier NAME is kept as NAME~1", "new"),
    Flag(("--session",), "NAME", "continue the session called NAME, or start it", "session"),
    Flag(("-o", "--output"), "VAR", "also store the final text (or the JSON it holds) in VAR",
         "output"),
    Flag(("--model",), "M", "model for this turn", "model"),
    Flag(("--token-limit",), "N", "the session's token limit for this turn", "token_limit"),
    Flag(("--approve",), "MODE", " | ".join(APPROVE_MODES), "approve"),
    Flag(("--think",), "[LEVEL]", "Claude thinks before answering, shown collapsed: "
         + " | ".join(_THINK_LEVELS) + " (default adaptive, or AgentKernel.thinking)", "thinking",
         choices=_THINK_LEVELS),
    Flag(("--",), "", "end of flags (for a prompt that starts with a dash)"),
)  # fmt: skip
_BY_NAME = {name: flag for flag in FLAGS if flag.field for name in flag.names}
_TOKEN = re.compile(r"\s*(\"[^\"]*\"|'[^']*'|\S+)")
_FLAGS_HELP = ", ".join(f"{flag.names[0]} {flag.value}" for flag in FLAGS if flag.field)


def flags_help(indent: int = 2, column: int = 17, width: int = 76) -> str:
    """The ``Flags:`` lines of ``%agent?``, one flag a line, help wrapped in a column."""
    lines = []
    for flag in FLAGS:
        usage = f"{flag.names[0]} {flag.value}".rstrip()
        lead = " " * indent + usage.ljust(column)
        lines.append(textwrap.fill(
            flag.help, width, initial_indent=lead if len(usage) < column else lead + " ",
            subsequent_indent=" " * (indent + column),
            break_on_hyphens=False, break_long_words=False,
        ))  # fmt: skip
    return "\n".join(lines)


def parse_agent_call(line: str, body: str | None = None) -> TurnRequest:
    """Split ``line`` into flags and prompt; ``body`` is the cell of ``%%agent``.

    The request fails the cell when the turn does not end normally (``check``).

    Flags come first. On a ``%agent`` line the prompt is whatever follows them, word for
    word; ``--`` ends the flags explicitly. ``--new`` takes a name as ``--new=NAME``, on
    the ``%%agent`` line as ``--new NAME``, or before ``--`` (``%agent --new NAME -- ...``).
    """
    tokens: list[tuple[str, int]] = []  # (token, end offset in line)
    pos = 0
    while True:
        match = _TOKEN.match(line, pos)
        if not match:
            break
        tokens.append((match.group(1), match.end()))
        pos = match.end()
    call: dict[str, Any] = {}
    cell = body is not None
    i, rest_at = 0, None
    while i < len(tokens):
        token, end = tokens[i]
        flag, _, inline = token.partition("=")
        if token == "--":
            rest_at = end
            break
        if not token.startswith("-") or (not cell and _is_prompt_dash(token)):
            if cell:
                raise UsageError(
                    f"Unexpected {token!r} on the %%agent line: the prompt goes in the cell body. Flags: {_FLAGS_HELP}."
                )
            rest_at = end - len(token)
            break
        known = _BY_NAME.get(flag)
        if known is None or known.field is None:  # _BY_NAME holds only flags with a field
            raise UsageError(f"Unknown flag {flag!r} for %agent. Flags: {_FLAGS_HELP}.")
        field = known.field
        if known.value.startswith("["):  # an optional value: --new, --new=NAME
            if inline:
                value: str | bool = inline
            elif known.choices:
                following = tokens[i + 1][0] if i + 1 < len(tokens) else ""
                value = True
                if unquote(following).lower() in known.choices:
                    value = unquote(following)
                    i += 1
            elif (
                i + 1 < len(tokens)
                and not tokens[i + 1][0].startswith("-")
                and (cell or (i + 2 < len(tokens) and tokens[i + 2][0] == "--"))
            ):
                value = unquote(tokens[i + 1][0])
                i += 1
            else:
                value = True
            call[field] = value
        else:
            value = inline
            if not value:
                if i + 1 >= len(tokens):
                    raise UsageError(f"{flag} needs a value. Flags: {_FLAGS_HELP}.")
                value = tokens[i + 1][0]
                i += 1
            call[field] = unquote(value)
        i += 1
    if rest_at is None:
        rest_at = len(line)
    prompt = (body or "").strip() if cell else line[rest_at:].strip()
    if cell and line[rest_at:].strip():
        raise UsageError("Unexpected text after -- on the %%agent line: the prompt goes in the cell body.")
    _validate(call)
    return TurnRequest(prompt, check=True, **call)


def _count(n: int, thing: str) -> str:
    return f"{n:,} {thing}{'' if n == 1 else 's'}"


def _is_prompt_dash(token: str) -> bool:
    """A dash that starts prose ('- item', '-5 degrees'), not a flag."""
    return token == "-" or bool(re.match(r"^-\d", token))


def _validate(call: dict[str, Any]) -> None:
    """Check the flags' values (``call``: TurnRequest field -> value as typed) and convert them."""
    if call.get("new") and call.get("session") is not None:
        raise UsageError("Use either --new (a fresh session) or --session NAME (continue one), not both.")
    output = call.get("output")
    if output is not None and not output.isidentifier():
        raise UsageError(f"-o needs a Python variable name, not {output!r}.")
    token_limit = call.get("token_limit")
    if isinstance(token_limit, str):
        try:
            call["token_limit"] = int(token_limit.replace("_", "").replace(",", ""))
        except ValueError:
            raise UsageError(f"--token-limit needs a whole number of tokens, not {token_limit!r}.") from None
        if call["token_limit"] <= 0:
            raise UsageError("--token-limit must be positive.")
    think = call.get("thinking")
    if isinstance(think, str):
        if think.lower() not in _THINK_LEVELS:
            raise UsageError(f"--think takes one of {', '.join(_THINK_LEVELS)}, not {think!r}.")
        call["thinking"] = think.lower()
    approve = call.get("approve")
    if approve is not None and approve.lower() not in APPROVE_MODES:
        raise UsageError(f"--approve must be one of {', '.join(APPROVE_MODES)}, not {approve!r}.")


_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\[[^\[\]{}]*\])*)\}")


def interpolate(prompt: str, namespace: Mapping[str, object]) -> str:
    """Replace ``{name}`` (also ``{df.shape}``, ``{Out[3]}``) with the kernel value's ``str``.

    ``{{`` and ``}}`` give literal braces. A name the kernel does not have, and braces
    that are not a simple field (JSON, set literals), are left as they are.
    """
    formatter = string.Formatter()

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        field = match.group(1)
        root = re.match(r"[A-Za-z_][A-Za-z0-9_]*", field)
        if root is None or root.group(0) not in namespace:
            return token
        try:
            value, _ = formatter.get_field(field, (), namespace)
        except Exception:  # noqa: BLE001 - a bad index keeps the text as typed
            return token
        return str(value)

    return _FIELD.sub(replace, prompt)


# ---------------------------------------------------------------------------------------
# The rewrite into an awaited call

_LINE = re.compile(r"^%agent(?=\s|$)(.*)$")
_CELL = re.compile(r"^%%agent(?=\s|$)(.*)$")
_CALL = "await __import__('agent_kernel.magics.agent', fromlist=['run_agent_magic']).run_agent_magic"


def rewrite_agent_cells(lines: list[str]) -> list[str]:
    """IPython cleanup transformer: ``%agent`` / ``%%agent`` become awaited calls."""
    if not lines:
        return lines
    first = lines[0].rstrip("\n")
    cell = _CELL.match(first)
    if cell:
        return [f"{_CALL}({cell.group(1).strip()!r}, {''.join(lines[1:])!r})\n"]
    if first.startswith("%%"):
        return lines  # another cell magic owns this cell
    rewritten = []
    for text in lines:
        match = _LINE.match(text.rstrip("\n"))
        rewritten.append(f"{_CALL}({match.group(1).strip()!r})\n" if match else text)
    return rewritten


async def run_agent_magic(line: str, body: str | None = None) -> None:
    """What a rewritten ``%agent`` line or ``%%agent`` cell awaits."""
    if _ACTIVE is None:
        raise UsageError("agent_kernel is not loaded: run %load_ext agent_kernel first.")
    await _ACTIVE.run_turn(line, body)


# ---------------------------------------------------------------------------------------
# The magics


@magics_class
class AgentMagics(Magics):
    """``%agent`` and its companions; settings live in :class:`AgentKernel`."""

    def __init__(self, shell: InteractiveShell, settings: AgentKernel) -> None:
        super().__init__(shell=shell)
        self.settings = settings
        self._agent: Agent | None = None
        # The Agent chat's settings row (magics/chat.py): defaults for every later turn
        # (model, approve, thinking), and the session of the next turn only (session, new).
        self.panel_defaults: dict[str, Any] = {}
        self.panel_next: dict[str, Any] = {}

    @property
    def kernel_agent(self) -> Agent:
        """The kernel's one :class:`Agent`, made on first use."""
        if self._agent is None:
            from agent_kernel.turn.agent import Agent

            self._agent = Agent(config=self.settings, shell=self.shell)
        return self._agent

    async def run_turn(self, line: str, body: str | None) -> TurnResult | None:
        """Parse, interpolate and run one turn; user mistakes become ``UsageError``.

        The Stop button and the status line are shown first, before anything heavy is
        imported or read (the SDK, the store, the session), so the cell answers at once;
        a Stop or an interrupt meanwhile stops the turn before its first model call.
        """
        return await self.run_request(parse_agent_call(line, body))

    async def run_request(self, request: TurnRequest) -> TurnResult | None:
        """Interpolate and run one parsed turn (an ``%agent`` cell's, or the Agent chat's)."""
        from agent_kernel.display.transcript import Transcript
        from agent_kernel.errors import AgentKernelError, TurnFailedError
        from agent_kernel.kernel.interrupts import TurnInterrupts

        shell = self.shell
        assert shell is not None  # a registered magic has its shell
        request, from_panel = self.with_panel_choices(request)
        request = replace(request, prompt=interpolate(request.prompt, shell.user_ns))
        if not request.prompt:
            if request.new:
                session, kept_as = self.kernel_agent.start_session(request.new)
                kept = f" The earlier {session.name!r} is kept as {kept_as!r}." if kept_as else ""
                print(f"Started session {session.name!r}; the next %agent continues it.{kept}")
                return None
            raise UsageError("Give the agent a prompt: %agent PROMPT, or a %%agent cell with a body.")
        from agent_kernel.errors import MissingKeyError
        from agent_kernel.model.client import api_key

        try:  # before any session is touched: a turn that cannot reach the model leaves none behind
            api_key()
        except MissingKeyError as exc:
            raise UsageError(str(exc)) from None
        view = Transcript(
            live=getattr(shell, "kernel", None) is not None,
            updates_per_second=self.settings.updates_per_second,
            failure_raised=request.check,
            prices=self.settings.prices,
        )
        if from_panel:
            view.notice(from_panel, kind="muted")
        with TurnInterrupts() as interrupts:
            view.show_stop(lambda: interrupts.request("stop"))
            try:
                # A turn that did not end normally fails the cell (request.check; see outcome.py).
                return await self.kernel_agent.arun_request(request, view=view, interrupts=interrupts)
            except TurnFailedError:
                raise
            except AgentKernelError as exc:
                raise UsageError(str(exc)) from None
            finally:
                view.hide_stop()

    def with_panel_choices(self, request: TurnRequest) -> tuple[TurnRequest, str]:
        """``request`` with the Agent chat's choices where it made none, and the line that
        says which were taken from the panel ('' for none). The next-turn session choice is
        used up by this turn, whichever way it came (a cell's --session or --new wins)."""
        taken = {f: v for f, v in self.panel_defaults.items() if getattr(request, f) is None}
        if request.new is None and request.session is None:
            taken.update(self.panel_next)
        self.panel_next = {}
        if not taken:
            return request, ""
        shown = ", ".join(
            f"{'--think' if f == 'thinking' else '--' + f}" + ("" if v is True else f" {v}") for f, v in taken.items()
        )
        line = f"From the Agent chat's settings: {shown} (a flag on the cell overrides them)."
        return replace(request, **taken), line

    @no_var_expand
    @line_cell_magic
    def agent(self, line: str = "", cell: str | None = None) -> None:
        """Run one agent turn in this kernel.

        Usage::

            %agent PROMPT
            %agent [flags] PROMPT
            %%agent [flags]
            PROMPT (the cell body)

        The agent may run code here (variables stay, outputs land in this cell), inspect
        your variables, and call its other tools until it ends its turn. A Stop button,
        or interrupting the kernel, ends the turn. The next %agent in this notebook
        continues the same session, also after a kernel restart.

        Flags:
        {flags}

        {name} in the prompt is replaced by that variable's value; {{ and }} are braces.
        Settings: %config AgentKernel (model, token_limit, approve, tool_groups, ...).

        API key: ANTHROPIC_API_KEY from the environment Jupyter started with, else the key
        stored outside your notebooks by %agent_key (asks, not echoed), the key field at the
        bottom of the Agent chat or `agent-kernel key set` in a terminal. Never type the key
        into a cell: it would be saved with the notebook.

        Safety: with approve "auto" (the default) the agent's code runs in this kernel
        without asking; %agent --approve ask ... makes writing tools wait for Run/Skip.

        Other magics (each has its own help, e.g. %agent_sessions?):
          %agent_sessions   this notebook's sessions: list, rename, archive, delete
          %agent_history    the current session's transcript
          %agent_prompt     the agent's stored instructions
          %agent_secret     a secret for the agent's code, never echoed
          %agent_key        store the Anthropic API key outside every notebook
          %agent_tools      the tools the model can call; %agent_skills its skills
          %agent_cells      a turn as cells below its %agent cell, to re-run without the model
          %agent_export     the session as a notebook (papermill parameters, schedulable)
          %agent_jobs       scheduled jobs and their last runs
          %agent_stats      code runs, failures, tokens and cost per day
          %agent_failures   the code and error of the last failed runs
          %agent_tainted    what was kept after reading untrusted content

        In JupyterLab, the Agent chat (the right sidebar) runs turns in the notebook's
        kernel and shows its session as it goes; the Agent dashboard (the left sidebar)
        shows sessions, scheduled jobs, recent runs and their outputs;
        "Schedule this notebook…" (the clock in a notebook's toolbar) runs a notebook
        later or on a schedule.
        """
        import asyncio  # a kernel has it loaded; a plain IPython shell pays for it here, not at load

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            raise UsageError(
                "%agent must be awaited on the kernel's event loop: put it at the start of a "
                "line at the top level of a cell (not inside a block or function), and keep "
                "%autoawait on. From code, use `await agent_kernel.Agent().arun(...)`."
            )
        asyncio.run(self.run_turn(line, cell))

    if agent.__doc__:  # %agent? shows the flags as FLAGS declares them (None under python -OO)
        agent.__doc__ = agent.__doc__.replace("        {flags}", textwrap.indent(flags_help(), " " * 8))

    @magic_arguments()
    @argument("--all", action="store_true", help="List every notebook's sessions.")
    @argument("--rename", nargs=2, metavar=("OLD", "NEW"), help="Rename session OLD to NEW.")
    @argument("--archive", metavar="NAME", help="Archive NAME (state completed).")
    @argument("--delete", metavar="NAME", help="Delete NAME, its messages and its audit rows.")
    @argument("--yes", action="store_true", help="Delete without asking (papermill, scripts).")
    @line_magic
    def agent_sessions(self, line: str = "") -> Table | None:
        """List the agent's sessions (name, notebook, state, tokens, cost, last use), or manage one.

        Without --all only this notebook's sessions are listed; the current one is marked *;
        sub-sessions stand indented under the session that started them.
        Names with spaces go in quotes. An archived session is not continued by a plain
        %agent; %agent --session NAME reopens it. --delete asks for confirmation when
        someone can answer, and refuses where nobody can (papermill, a script) unless
        --yes is given. Memories and stored-prompt versions outlive a deleted session.
        """
        args = parse_args(self.agent_sessions, line)
        actions = [f for f in ("rename", "archive", "delete") if getattr(args, f) is not None]
        if len(actions) > 1:
            raise UsageError("Give one of --rename, --archive and --delete at a time.")
        if actions and args.all:
            raise UsageError("--all lists sessions; it does not go with --" + actions[0] + ".")
        if args.yes and actions != ["delete"]:
            raise UsageError("--yes goes with --delete NAME.")
        if args.rename is not None:
            self._rename_session(*(unquote(name) for name in args.rename))
        elif args.archive is not None:
            self._archive_session(unquote(args.archive))
        elif args.delete is not None:
            self._delete_session(unquote(args.delete), confirmed=args.yes)
        else:
            return self._list_sessions(args.all)
        return None

    def _list_sessions(self, show_all: bool) -> Table:
        from agent_kernel.display.footer import usd
        from agent_kernel.display.text_tables import Table

        listing = self.kernel_agent.admin.listing(every_notebook=show_all)
        costs = listing.costs

        def cost(session_id: str) -> str:
            spent, unpriced = costs.get(session_id, (0.0, 0))
            if session_id not in costs:
                return "-"
            if unpriced and not spent:
                return "no price"
            return usd(spent) + (" + unpriced" if unpriced else "")

        rows = [
            [
                "    " * level + ("↳ " if level else "") + ("* " if s.id == listing.current else "") + s.name,
                s.notebook or "",
                s.state,
                f"{s.tokens_used:,}",
                cost(s.id),
                f"{s.updated_at:%Y-%m-%d %H:%M}",
            ]
            for s, level in listing.sessions  # sub-sessions under their parent, indented
        ]
        note = "" if rows else "No sessions yet: the first %agent starts one."
        return Table(["session", "notebook", "state", "tokens", "cost", "last used"], rows, note=note)

    def _rename_session(self, old: str, new: str) -> None:
        with usage_errors():
            self.kernel_agent.admin.rename(old, new)
        print(f"Renamed session {old!r} to {new!r}.")

    def _archive_session(self, name: str) -> None:
        with usage_errors():
            self.kernel_agent.admin.archive(name)
        print(f"Archived session {name!r} (state completed); %agent --session {name} reopens it.")

    def _delete_session(self, name: str, *, confirmed: bool) -> None:
        admin = self.kernel_agent.admin
        with usage_errors():
            found = admin.stored_rows(name)
        rows = found.rows
        what = (
            f"session {name!r} with {_count(rows['messages'], 'message')}, "
            f"{_count(rows['tool_calls'], 'tool call')} "
            f"and {_count(rows['code_executions'], 'code run')}"
        )
        if not confirmed:
            answer = self._ask(f"Delete {what}? This cannot be undone. [y/N] ")
            if answer is None:
                raise UsageError(
                    f"Deleting {what} needs a confirmation, and nobody can answer here "
                    "(papermill or a script?): add --yes to delete it."
                )
            if answer.strip().lower() not in ("y", "yes"):
                print(f"Kept session {name!r}.")
                return
        with usage_errors():
            admin.delete(found)
        print(f"Deleted {what}.")

    def _ask(self, question: str) -> str | None:
        """The person's answer to ``question``, or ``None`` when nobody can be asked."""
        import sys

        from IPython.core.error import StdinNotImplementedError

        if getattr(self.shell, "kernel", None) is None and not sys.stdin.isatty():
            return None  # a script with no terminal
        try:
            return input(question)
        except (StdinNotImplementedError, EOFError):
            return None

    @magic_arguments()
    @argument("name", metavar="NAME", help="The environment variable the value goes in.")
    @argument(
        "--host", action="append", default=[], metavar="HOST",
        help="A host {secret:NAME} may be sent to (repeat for more): api.example.com, any port; "
        "api.example.com:8443, that port only.",
    )  # fmt: skip
    @line_magic
    def agent_secret(self, line: str = "") -> None:
        """Ask for a secret value and keep it for the agent's code; it is never echoed.

        The value is read with getpass, kept in this kernel's memory and environment
        (code the agent runs finds it as os.environ["NAME"]), and never stored. The model
        is told the name; anything sent to it or stored that contains the value (raw or
        in a common encoding) shows [secret NAME]. Unattended runs declare secrets with
        %config AgentKernel.secret_env = ["NAME"] instead.

        --host binds the secret to its hosts: {secret:NAME} in fetch_url and browser_type
        goes to those hosts only, in every mode. Without --host it is bound to none, and the
        agent asks you once per host it wants to send it to (refused when nobody can answer).
        For secret_env secrets: %config AgentKernel.secret_hosts = {"NAME": ["HOST"]}.
        """
        import getpass

        from IPython.core.error import StdinNotImplementedError

        from agent_kernel.authority import TrustRefused, person
        from agent_kernel.secrets import MOST_HOSTS, parse_host

        args = parse_args(self.agent_secret, line)
        name = args.name
        if not name.isidentifier():
            raise UsageError("Usage: %agent_secret NAME [--host HOST ...] (NAME: a valid environment variable name)")
        if len(args.host) > MOST_HOSTS:
            raise UsageError(f"A secret is bound to at most {MOST_HOSTS} hosts.")
        try:
            hosts = [parse_host(host) for host in args.host]
        except ValueError as exc:
            raise UsageError(f"--host: {exc}") from None
        try:
            event = person("magic", f"%agent_secret {line}")
        except TrustRefused as exc:
            raise UsageError(f"%agent_secret is refused here: {exc}") from None
        try:
            value = getpass.getpass(f"Value for {name} (not echoed): ")
        except StdinNotImplementedError:
            raise UsageError(
                f"This front end cannot ask for input (papermill?). Set {name} in the kernel's environment instead."
            ) from None
        secrets = self.kernel_agent.secrets
        try:
            secrets.set(name, value)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        secrets.bind(name, hosts, event)
        where = (
            f"{{secret:{name}}} goes to {', '.join(str(h) for h in hosts)} only."
            if hosts
            else f"{{secret:{name}}} is bound to no host: the agent asks you once per host."
        )
        print(f"Stored {name} ({len(value)} characters). The model sees it as [secret {name}]. {where}")

    @magic_arguments()
    @argument("n", nargs="?", type=int, metavar="N", help="The last N messages (default: all).")
    @argument("--session", metavar="NAME", help="Show the session NAME instead of the current one.")
    @line_magic
    def agent_history(self, line: str = "") -> Markdown:
        """Show the current session's transcript (the last N messages, all by default)."""
        from agent_kernel.display.history import render_history
        from agent_kernel.display.text_tables import Markdown

        args = parse_args(self.agent_history, line)
        if args.n is not None and args.n < 0:
            raise UsageError("N must be a number of messages (0 or more).")
        name = None if args.session is None else unquote(args.session)
        agent = self.kernel_agent
        with usage_errors():
            session = agent.session(name=name, create=False)
        if session is None:
            return Markdown("No session yet in this notebook: the first %agent starts one.")
        return Markdown(render_history(session.name, agent.admin.messages(session), args.n))
