"""The ``%agent`` magics: parse what the user typed and hand it to the :class:`Agent`.

IPython magics are synchronous, but a turn must be *awaited* on the kernel's event loop
so that widget events (Stop, approvals, forms) arrive while it runs. An input transformer
therefore rewrites ``%agent ...`` lines and ``%%agent`` cells into
``await run_agent_magic(line, body)``. The registered magics stay, for ``%agent?`` help,
``%lsmagic``, and places the rewrite does not reach (a script with no running loop).
"""

from __future__ import annotations

import asyncio
import re
import string
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand

from .config import APPROVE_MODES, AgentKernel

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from .agent import Agent
    from .loop import TurnResult

_ACTIVE: AgentMagics | None = None
_REGISTERED: list[Magics] = []  # every Magics instance load_ipython_extension registered

# ---------------------------------------------------------------------------------------
# Parsing


@dataclass
class AgentCall:
    """A parsed ``%agent`` / ``%%agent`` invocation."""

    prompt: str
    new: str | bool | None = None
    session: str | None = None
    output: str | None = None
    model: str | None = None
    token_limit: int | None = None
    approve: str | None = None


_VALUED = {
    "--session": "session",
    "-o": "output",
    "--output": "output",
    "--model": "model",
    "--token-limit": "token_limit",
    "--approve": "approve",
}
_TOKEN = re.compile(r"\s*(\"[^\"]*\"|'[^']*'|\S+)")
_FLAGS_HELP = "--new [NAME], --session NAME, -o VAR, --model M, --token-limit N, --approve MODE"


def parse_agent_call(line: str, body: str | None = None) -> AgentCall:
    """Split ``line`` into flags and prompt; ``body`` is the cell of ``%%agent``.

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
    call = AgentCall(prompt="")
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
                    f"Unexpected {token!r} on the %%agent line: the prompt goes in the cell body. "
                    f"Flags: {_FLAGS_HELP}."
                )
            rest_at = end - len(token)
            break
        if flag == "--new":
            if inline:
                call.new = inline
            elif i + 1 < len(tokens) and not tokens[i + 1][0].startswith("-") and (
                cell or (i + 2 < len(tokens) and tokens[i + 2][0] == "--")
            ):
                call.new = _unquote(tokens[i + 1][0])
                i += 1
            else:
                call.new = True
        elif flag in _VALUED:
            value = inline
            if not value:
                if i + 1 >= len(tokens):
                    raise UsageError(f"{flag} needs a value. Flags: {_FLAGS_HELP}.")
                value = tokens[i + 1][0]
                i += 1
            setattr(call, _VALUED[flag], _unquote(value))
        else:
            raise UsageError(f"Unknown flag {flag!r} for %agent. Flags: {_FLAGS_HELP}.")
        i += 1
    if rest_at is None:
        rest_at = len(line)
    call.prompt = body.strip() if cell else line[rest_at:].strip()
    if cell and line[rest_at:].strip():
        raise UsageError("Unexpected text after -- on the %%agent line: the prompt goes in the cell body.")
    _validate(call)
    return call


def _is_prompt_dash(token: str) -> bool:
    """A dash that starts prose ('- item', '-5 degrees'), not a flag."""
    return token == "-" or bool(re.match(r"^-\d", token))


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _validate(call: AgentCall) -> None:
    if call.output is not None and not call.output.isidentifier():
        raise UsageError(f"-o needs a Python variable name, not {call.output!r}.")
    if isinstance(call.token_limit, str):
        try:
            call.token_limit = int(call.token_limit.replace("_", "").replace(",", ""))
        except ValueError:
            raise UsageError(f"--token-limit needs a whole number of tokens, not {call.token_limit!r}.") from None
        if call.token_limit <= 0:
            raise UsageError("--token-limit must be positive.")
    if call.approve is not None and call.approve.lower() not in APPROVE_MODES:
        raise UsageError(f"--approve must be one of {', '.join(APPROVE_MODES)}, not {call.approve!r}.")


_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\[[^\[\]{}]*\])*)\}")


def interpolate(prompt: str, namespace: dict[str, Any]) -> str:
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
_CALL = "await __import__('agent_kernel.magics', fromlist=['run_agent_magic']).run_agent_magic"


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

    @property
    def kernel_agent(self) -> Agent:
        """The kernel's one :class:`Agent`, made on first use."""
        if self._agent is None:
            from .agent import Agent

            self._agent = Agent(config=self.settings, shell=self.shell)
        return self._agent

    async def run_turn(self, line: str, body: str | None) -> TurnResult | None:
        """Parse, interpolate and run one turn; user mistakes become ``UsageError``."""
        from .errors import AgentKernelError, SessionError, TurnFailedError

        call = parse_agent_call(line, body)
        prompt = interpolate(call.prompt, self.shell.user_ns)
        agent = self.kernel_agent
        if not prompt:
            if call.new:
                try:
                    session = agent.session(new=call.new)
                except SessionError as exc:
                    raise UsageError(str(exc)) from None
                assert session is not None
                print(f"Started session {session.name!r}; the next %agent continues it.")
                return None
            raise UsageError("Give the agent a prompt: %agent PROMPT, or a %%agent cell with a body.")
        try:
            result = await agent.arun(
                prompt,
                new=call.new,
                session=call.session,
                model=call.model,
                token_limit=call.token_limit,
                approve=call.approve,
                check=True,  # a turn that did not end normally fails the cell (outcome.py)
            )
        except TurnFailedError:
            raise
        except AgentKernelError as exc:
            raise UsageError(str(exc)) from None
        if call.output:
            self.shell.user_ns[call.output] = result.value()
        return result

    @no_var_expand
    @line_cell_magic
    def agent(self, line: str = "", cell: str | None = None) -> None:  # type: ignore[override]
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
          --new [NAME]     start a new session (on a %agent line: --new=NAME, or
                           --new NAME -- PROMPT)
          --session NAME   continue the session called NAME
          -o VAR           also store the final text (or the JSON it holds) in VAR
          --model M        model for this turn
          --token-limit N  the session's token limit for this turn
          --approve MODE   auto | ask | read-only
          --               end of flags (for a prompt that starts with a dash)

        {name} in the prompt is replaced by that variable's value; {{ and }} are braces.
        Settings: %config AgentKernel (model, token_limit, approve, tool_groups, ...).
        """
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

    @line_magic
    def agent_sessions(self, line: str = "") -> Any:
        """List the agent's sessions: name, notebook, state, messages and tokens.

        Usage: %agent_sessions [--all]

        Without --all only this notebook's sessions are listed. The current one is marked *.
        """
        from .display.tables import Table
        from .store.sessions import Sessions

        show_all = line.strip() == "--all"
        if line.strip() and not show_all:
            raise UsageError("Usage: %agent_sessions [--all]")
        agent = self.kernel_agent
        current = agent._session_id  # noqa: SLF001 - the magic shows the agent's own state
        notebook = None if show_all else agent.notebook
        with agent.store.connect() as con:
            found = Sessions(con).list(notebook)
        rows = [
            [
                ("* " if s.id == current else "") + s.name,
                s.notebook or "",
                s.state,
                f"{s.tokens_used:,}",
                f"{s.updated_at:%Y-%m-%d %H:%M}",
            ]
            for s in found
        ]
        note = "" if rows else "No sessions yet: the first %agent starts one."
        return Table(["session", "notebook", "state", "tokens", "last used"], rows, note=note)

    @line_magic
    def agent_secret(self, line: str = "") -> None:
        """Ask for a secret value and keep it for the agent's code; it is never echoed.

        Usage: %agent_secret NAME

        The value is read with getpass, kept in this kernel's memory and environment
        (code the agent runs finds it as os.environ["NAME"]), and never stored. Tool
        results that contain it reach the model as [secret NAME].
        """
        import getpass

        from IPython.core.error import StdinNotImplementedError

        name = line.strip()
        if not name.isidentifier():
            raise UsageError("Usage: %agent_secret NAME (a valid environment variable name)")
        try:
            value = getpass.getpass(f"Value for {name} (not echoed): ")
        except StdinNotImplementedError:
            raise UsageError(
                f"This front end cannot ask for input (papermill?). Set {name} in the "
                "kernel's environment instead."
            ) from None
        try:
            self.kernel_agent.secrets.set(name, value)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        print(f"Stored {name} ({len(value)} characters). The model sees it as [secret {name}].")

    @line_magic
    def agent_history(self, line: str = "") -> Any:
        """Show the current session's transcript (the last N messages, all by default).

        Usage: %agent_history [N] [--session NAME]
        """
        from .display.tables import Markdown
        from .errors import SessionError
        from .display.history import render_history
        from .store.sessions import Sessions

        words = line.split()
        name = None
        if "--session" in words:
            at = words.index("--session")
            if at + 1 >= len(words):
                raise UsageError("--session needs a session name.")
            name = words[at + 1]
            del words[at : at + 2]
        if len(words) > 1 or (words and not words[0].isdigit()):
            raise UsageError("Usage: %agent_history [N] [--session NAME]")
        limit = int(words[0]) if words else None
        agent = self.kernel_agent
        try:
            session = agent.session(name=name, create=False)
        except SessionError as exc:
            raise UsageError(str(exc)) from None
        if session is None:
            return Markdown("No session yet in this notebook: the first %agent starts one.")
        with agent.store.connect() as con:
            messages = Sessions(con).messages(session.id)
        return Markdown(render_history(session.name, messages, limit))
