"""``%agent_cells`` (a turn into cells) and ``%agent_export`` (a session into a notebook).

``%agent_cells`` awaits the notebook front end's answers, so a line starting with it is
rewritten into an awaited call (:func:`rewrite_cells_lines`, as ``%agent`` lines are):
the kernel then handles the channel's messages while the cell waits.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from IPython.core.error import UsageError
from IPython.core.magic import line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from agent_kernel.magics.args import parse_args, unquote, usage_errors
from agent_kernel.magics.companion import CompanionMagics

if TYPE_CHECKING:
    from agent_kernel.kernel.turn_cells import Placed
    from agent_kernel.store.sessions import Session
    from agent_kernel.store.steps import TurnSteps
    from agent_kernel.turn.agent import Agent

__all__ = ["CellMagics", "rewrite_cells_lines", "run_cells_magic"]

MAX_TURN = 1_000_000


@magics_class
class CellMagics(CompanionMagics):
    """A turn into cells, a session into a notebook you can schedule."""

    @magic_arguments()
    @argument("turn", nargs="?", metavar="TURN", help="The turn's number (default: the session's last turn).")
    @argument("--session", metavar="NAME", help="A turn of session NAME instead of the current one.")
    @argument("--to", metavar="PATH", help="Write the cells into this notebook file instead (made when missing).")
    @line_magic
    def agent_cells(self, line: str = "") -> None:
        """Put a turn into the notebook as cells, so it re-runs without the model.

        Usage::

            %agent_cells [TURN] [--session NAME] [--to PATH]

        Below the turn's %agent cell come a markdown cell with the prompt and the
        answer, then one code cell for each run_code step that succeeded in this
        kernel, in order (not run). Each is marked with the session and turn in its
        metadata (agent_kernel); when the session had read untrusted content by then,
        also with that (JupyterLab shows a badge, and the scheduler will not run the
        notebook until you clear it). Default: the last turn of the current session.

        With JupyterLab or Notebook 7 and the agent-kernel extension, the cells appear
        in the open notebook at once. Without such a front end they are written into
        the notebook file: --to PATH, else the notebook this kernel was started for
        (JPY_SESSION_NAME); an unattended run (papermill, the scheduler) needs --to.
        The "Insert as cells" button under a finished turn does the same.
        """
        from agent_kernel.kernel import channel

        _refuse_inside_a_turn("agent_cells")
        args = parse_args(self.agent_cells, line)
        if args.to is None and channel.attached() is not None:
            raise UsageError(
                "%agent_cells waits for the notebook: put it at the start of a line at the top level of a cell."
            )
        self._write_file(args)

    async def cells(self, line: str) -> None:
        """What ``%agent_cells LINE`` does (awaited by the rewritten line)."""
        from agent_kernel.kernel import channel, turn_cells
        from agent_kernel.store.steps import turn_cells as cells_of

        _refuse_inside_a_turn("agent_cells")
        args = parse_args(self.agent_cells, line)
        if args.to is not None or channel.attached() is None:
            self._write_file(args)
            return
        turn = self._turn(args)
        with usage_errors(), _cell_errors():
            placed = await turn_cells.insert(
                cells_of(turn), session_id=turn.session_id, turn=turn.turn, prompt=turn.prompt
            )
        print(_placed_line(turn, placed))

    def _write_file(self, args: argparse.Namespace) -> None:
        from agent_kernel.kernel import turn_cells
        from agent_kernel.store.steps import turn_cells as cells_of

        shell = self.shell
        assert shell is not None
        turn = self._turn(args)
        with _cell_errors():
            path = turn_cells.notebook_file(None if args.to is None else unquote(args.to), shell.user_ns)
        with _cell_errors():
            placed = turn_cells.write_into(
                path, cells_of(turn), session_id=turn.session_id, turn=turn.turn, prompt=turn.prompt
            )
        print(_placed_line(turn, placed))

    def _turn(self, args: argparse.Namespace) -> TurnSteps:
        """The turn ``args`` name, or ``UsageError`` saying which there are."""
        from agent_kernel.store.sessions import Sessions
        from agent_kernel.store.steps import turn_steps

        number: int | None = None
        if args.turn is not None:
            if not re.fullmatch(r"[0-9]{1,7}", args.turn) or not 1 <= int(args.turn) <= MAX_TURN:
                raise UsageError(f"TURN is a turn's number (1, 2, ...), not {args.turn!r}.")
            number = int(args.turn)
        agent = self.agent
        name = None if args.session is None else unquote(args.session)
        with usage_errors():
            session = agent.session(name=name, create=False) if name is None else _named(agent, name)
        if session is None:
            raise UsageError("No session yet in this notebook: the first %agent starts one.")
        with agent.store.connect() as con:
            last = Sessions(con).last_turn(session.id)
            turn = turn_steps(con, session.id, number if number is not None else last) if last else None
        if turn is None:
            have = f"its turns are 1 to {last}" if last else "it has no turns yet"
            raise UsageError(
                f"Session {session.name!r} has no turn {number if number is not None else ''}".rstrip() + f"; {have}."
            )
        return turn

    @magic_arguments()
    @argument("out", metavar="OUT", help="The notebook to write (.ipynb).")
    @argument("--session", metavar="NAME", help="Export session NAME instead of the current one.")
    @argument("--force", action="store_true", help="Overwrite OUT if it exists.")
    @argument("--no-verify", action="store_true", help="Skip the headless papermill run.")
    @argument("--schedule", metavar="CRON", help="Then create a job running it on this cron expression.")
    @argument("--timezone", metavar="TZ", help="IANA timezone of --schedule (default: the machine's).")
    @argument("--yes", action="store_true", help="Verify a session that read untrusted content without asking.")
    @line_magic
    def agent_export(self, line: str = "") -> None:
        """Export a session's successful code as a notebook that re-runs without the model.

        Usage::

            %agent_export OUT.ipynb [--session NAME] [--force] [--no-verify] [--yes] [--schedule CRON] [--timezone TZ]

        The notebook holds each turn's prompt (markdown) and its run_code steps that
        succeeded in this kernel, no %agent cell, and a cell tagged `parameters` with
        the inputs the code assigned at top level (file paths, dates, numbers), which
        papermill and the scheduler can set. It is then run headless with papermill,
        the model out of reach, in this kernel's working directory, and the magic says
        whether it passed. --schedule CRON creates a scheduled job for it (only when
        it passed). Same as `agent-kernel export SESSION OUT` in a terminal.

        Cells of turns that ran after the session read untrusted content (a web page,
        an MCP result, ...) keep the untrusted mark: review them; the scheduler runs the
        notebook only once you clear it (`agent-kernel cells clear OUT`, or Clear on the
        cell's badge). Verifying such a session runs its code, so the magic asks you
        first (type y); --yes answers for you, and where nobody can answer (papermill)
        it is not verified. Code the agent runs cannot call this magic.
        """
        import os

        from agent_kernel.scheduler import ScheduleError, export

        _refuse_inside_a_turn("agent_export")
        args = parse_args(self.agent_export, line)
        agent = self.agent
        name = None if args.session is None else unquote(args.session)
        with usage_errors():
            session = agent.session(name=name, create=False) if name is None else _named(agent, name)
        if session is None:
            raise UsageError("No session yet in this notebook: the first %agent starts one.")
        try:
            exported = export.export_session(agent.store, session.id, unquote(args.out), overwrite=args.force)
        except ScheduleError as exc:
            raise UsageError(str(exc)) from None
        print(exported.describe())
        if args.no_verify:
            print("Not verified (--no-verify).")
        elif not _consents(export.consent_question(exported), args.yes):
            print("Not verified: the session read untrusted content and you did not say yes (or --yes).")
            return
        else:
            verdict = export.verify(exported, cwd=os.getcwd())
            print(verdict.describe())
            if not verdict.passed:
                if args.schedule:
                    print("Not scheduled: the notebook did not pass its headless run.")
                return
        if args.schedule:
            from agent_kernel.scheduler.clock import iso

            try:
                job = export.schedule(agent.store, exported, args.schedule, timezone=args.timezone, cwd=os.getcwd())
            except ScheduleError as exc:
                raise UsageError(f"Not scheduled: {exc}") from None
            print(
                f"Scheduled job {job.id} ({job.name}): {job.schedule.describe()}; next run {iso(job.next_run_at, job.timezone)}."
            )


def _named(agent: Agent, name: str) -> Session:
    from agent_kernel.store.sessions import Sessions

    with agent.store.connect() as con:
        found = Sessions(con).by_name(name)
    if found is None:
        raise UsageError(f"No session named {name!r} (%agent_sessions --all lists them).")
    return found


def _consents(question: str, yes: bool) -> bool:
    """Whether the person agrees to run code a tainted session wrote: no question (a clean
    session), --yes, or "y" typed at the prompt; where nobody can answer (papermill, a
    client without input), no."""
    if not question or yes:
        return True
    try:
        return input(question).strip().lower() in ("y", "yes")
    except Exception:  # noqa: BLE001 - StdinNotImplementedError, EOFError: nobody to answer
        return False


def _refuse_inside_a_turn(magic: str) -> None:
    """The model's code (``run_code``) may not call these magics: cells go into the notebook
    through the notebook tools (bounded, approved, audited), and a job the model writes goes
    through the schedule tools, which keep it disabled after untrusted content; a job this
    magic creates is the person's."""
    from agent_kernel.authority import inside_turn
    from agent_kernel.tools import current_context

    try:
        current_context()
    except RuntimeError:
        if not inside_turn():
            return
    raise UsageError(f"%{magic} is the person's command: it cannot run inside an agent turn.")


@contextmanager
def _cell_errors() -> Iterator[None]:
    """:class:`~agent_kernel.kernel.turn_cells.CellsError` shown as a ``UsageError``."""
    from agent_kernel.kernel.turn_cells import CellsError

    try:
        yield
    except CellsError as exc:
        raise UsageError(str(exc)) from None


def _placed_line(turn: TurnSteps, placed: Placed) -> str:
    steps = len(turn.steps)
    code = (
        f"{steps} code cell{'s' if steps != 1 else ''}"
        if steps
        else "no code cell (the turn ran no code that succeeded here)"
    )
    where = "into the notebook" if placed.where == "notebook" else f"into {placed.where}"
    below = "below the turn's %agent cell" if placed.after else "at the end"
    return f"Inserted turn {turn.turn} of session {turn.session_name!r} {where} {below}: its prompt and answer, {code}."


# -- the rewrite into an awaited call ----------------------------------------------------------

_LINE = re.compile(r"^%agent_cells(?=\s|$)(.*)$")
_CALL = "await __import__('agent_kernel.magics.cells', fromlist=['run_cells_magic']).run_cells_magic"


def rewrite_cells_lines(lines: list[str]) -> list[str]:
    """IPython cleanup transformer: a top-level ``%agent_cells`` line becomes an awaited call."""
    if not lines or lines[0].startswith("%%"):
        return lines
    rewritten = []
    for text in lines:
        match = _LINE.match(text.rstrip("\n"))
        rewritten.append(f"{_CALL}({match.group(1).strip()!r})\n" if match else text)
    return rewritten


async def run_cells_magic(line: str) -> None:
    """What a rewritten ``%agent_cells`` line awaits."""
    from agent_kernel.magics import agent as magics

    for registered in magics._REGISTERED:
        if isinstance(registered, CellMagics):
            await registered.cells(line)
            return
    raise UsageError("agent_kernel is not loaded: run %load_ext agent_kernel first.")
