"""The cells the user ran: their sources, whether they raised, and what they returned.

The kernel's input history (``In``, ``Out``) holds the sources and results in every
client (JupyterLab, a console, papermill, the scheduler). Whether a cell raised is not in
it, so a ``post_run_cell`` callback (registered by ``%load_ext``) keeps each failing
cell's error, already described: its type, message and the user's own frames (cell code
and the user's modules, not IPython's, the standard library's or an installed
package's). Nothing keeps an exception object (its frames would hold memory).

:func:`turn_section` is the part of the turn context that says what happened in the
notebook since the agent's last turn; :func:`cells` is what the ``notebook_cells`` tool
returns. Everything passes :func:`agent_kernel.secrets.redact`; a cell's result, which
may hold any data (a fetched page), is shown inside the untrusted envelope.
"""

from __future__ import annotations

import functools
import os
import re
import sysconfig
import traceback
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_kernel.kernel import network, printed
from agent_kernel.kernel.namespace import describe
from agent_kernel.kernel.network import NetworkLog
from agent_kernel.kernel.printed import AGENT_MAGICS, PrintedLog
from agent_kernel.secrets import redact
from agent_kernel.untrusted import mark_untrusted, neutralise

if TYPE_CHECKING:
    from IPython.core.interactiveshell import ExecutionResult, InteractiveShell

SECTION_CHARS = 6_000  # the notebook part of one turn context
NEWEST_CHARS = 4_000  # the newest cell's source is kept whole up to this
OLDER_CHARS = 600  # an older cell's source: its head up to this
RESULT_CHARS = 200  # a cell's result summary in the turn context
PRINTED_CHARS = 300  # what a cell printed, in the turn context (its tail)
SECTION_CELLS = 20  # the most cells one turn context lists
KEPT_ERRORS = 200  # errors remembered (the newest)
ERROR_FRAMES = 8  # the user's frames kept of a traceback (the innermost)
MESSAGE_CHARS = 1_000

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """Where the standard library and installed packages live (read on the first error)."""
    paths = {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(os.path.realpath(p) + os.sep for p in paths if p)


# Sources that fetch from the network: what their cells return may be a page's text. A
# database cursor's fetchone/fetchall/fetchdf (DuckDB, sqlite3) reads local data, and
# fetch_allow is a setting: neither is a fetch.
_FETCHES = re.compile(
    r"requests\.|httpx\.|urlopen|urllib|aiohttp|fetch(?!one|all|many|df|_df|arrow|_arrow|numpy|_allow)"
    r"|read_html|BeautifulSoup|curl |wget "
)


# Sources that certainly fetch: what later cells print may be what they fetched. Narrower
# than _FETCHES: "fetch" alone is also DuckDB's fetchall() and a setting's name.
_FETCHES_PAGES = re.compile(
    r"requests\.(?:get|post|put|request|Session)|httpx\.|urlopen|urllib\.request|aiohttp|read_html|curl |wget "
)


def fetches(source: str) -> bool:
    """Whether a cell's ``source`` fetches from the network (its result is then untrusted)."""
    return _FETCHES.search(source) is not None


@dataclass(frozen=True)
class CellError:
    """What a failing cell raised, as the model reads it."""

    type: str
    message: str
    frames: str  # the user's frames, formatted, innermost last

    def text(self) -> str:
        head = f"{self.type}: {self.message}" if self.message else self.type
        return (self.frames + head) if self.frames else head


class CellLog:
    """The errors of the user's cells, and how far the agent's turns have seen."""

    def __init__(self, shell: InteractiveShell) -> None:
        self._shell = weakref.ref(shell)
        self.errors: OrderedDict[int, CellError] = OrderedDict()
        self.seen = 0  # the execution count of the cell of the agent's last turn
        self.shown_untrusted: list[str] = []  # what the last turn section showed as untrusted content
        self.printed: PrintedLog | None = None  # what the cells printed (in ipykernel)
        self.network: NetworkLog | None = None  # which cells reached the network

    def printed_text(self, count: int) -> str:
        return self.printed.text(count) if self.printed is not None else ""

    def reached_network(self, count: int) -> bool:
        return self.network is not None and self.network.reached(count)

    def finished(self, result: ExecutionResult) -> None:
        """A ``post_run_cell`` callback: keep the cell's error, if it raised."""
        info = getattr(result, "info", None)
        count = getattr(result, "execution_count", None)
        if info is None or not getattr(info, "store_history", False) or not isinstance(count, int):
            return  # the agent's own nested runs, silent runs
        error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        if error is None:
            return
        shell = self._shell()
        self.errors[count] = describe_error(error, shell)
        while len(self.errors) > KEPT_ERRORS:
            self.errors.popitem(last=False)


_LOGS: weakref.WeakKeyDictionary[InteractiveShell, CellLog] = weakref.WeakKeyDictionary()


def log_for(shell: InteractiveShell) -> CellLog:
    """The shell's cell log, created (and its callback registered) on first use."""
    log = _LOGS.get(shell)
    if log is None:
        log = _LOGS[shell] = CellLog(shell)
        events = getattr(shell, "events", None)
        if events is not None:
            events.register("post_run_cell", log.finished)
        log.printed = printed.install(shell)
        log.network = network.install(shell)
    return log


def describe_error(error: BaseException, shell: InteractiveShell | None = None) -> CellError:
    """``error`` with only the user's frames, cell files named as ``Cell [N]``."""
    names = _cell_names(shell)
    frames = [f for f in traceback.extract_tb(error.__traceback__) if users_frame(f.filename)][-ERROR_FRAMES:]
    for frame in frames:
        if frame.filename in names:
            frame.filename = names[frame.filename]
    message = (
        str(error) if not isinstance(error, SyntaxError) else "".join(traceback.format_exception_only(error)).strip()
    )
    if len(message) > MESSAGE_CHARS:
        message = redact(message)[:MESSAGE_CHARS] + " [...]"
    return CellError(type(error).__name__, redact(message), redact("".join(traceback.format_list(frames))))


def users_frame(filename: str) -> bool:
    """Whether a frame of ``filename`` is the user's code: a cell or the user's own module,
    not this package, the standard library or an installed package."""
    if filename.startswith(("<frozen", _PACKAGE_DIR)):
        return False
    if filename.startswith("<"):
        return True  # <ipython-input-...>, <string>
    return not os.path.realpath(filename).startswith(_library_dirs())


def _cell_names(shell: InteractiveShell | None) -> dict[str, str]:
    mapping = getattr(getattr(shell, "compile", None), "_filename_map", None)
    if not isinstance(mapping, dict):
        return {}
    return {name: f"Cell [{count}]" for name, count in mapping.items() if isinstance(count, int)}


# -- what the model reads ------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One cell the user ran."""

    count: int
    source: str
    result: str  # a short summary of its value (``Out``), "" when it had none
    error: CellError | None
    printed: str = ""  # what it printed on stdout and stderr (head and tail when long)
    fetched: bool = False  # it reached the network (or its source looks like it): untrusted
    after_fetch: int | None = None  # else: the earlier cell that did (its data may be in a variable)

    @property
    def untrusted(self) -> bool:
        """Whether what it returned or printed may hold fetched content (see :func:`history`)."""
        return self.fetched or self.after_fetch is not None

    def why_untrusted(self) -> str:
        if self.fetched:
            return "the cell reached the network"
        if self.after_fetch is not None:
            return f"it ran after cell [{self.after_fetch}] reached the network"
        return ""

    def as_dict(self, result_chars: int) -> dict[str, Any]:
        """The cell as the model reads it: its result and printed output bounded to
        ``result_chars`` each, inside the untrusted envelope."""
        entry: dict[str, Any] = {"execution_count": self.count, "source": redact(self.source)}
        if self.result:
            entry["result"] = mark_untrusted(_cut(self.result, result_chars), f"cell [{self.count}] result")
        if self.printed:
            entry["printed"] = mark_untrusted(
                _cut_middle(redact(self.printed), result_chars), f"cell [{self.count}] printed output"
            )
        if self.error is not None:
            entry["error"] = self.error.text()
        return entry


def history(
    shell: InteractiveShell, first: int = 1, last: int | None = None, matching: str | None = None
) -> list[Cell]:
    """The cells with execution counts ``first``..``last`` (the cell running now excluded),
    only those whose source contains ``matching`` (any case) when it is given; a negative
    ``first`` (with no ``last`` or ``matching``) means the last ``-first`` execution counts.

    A cell that reached the network is ``fetched``; every later cell is ``after_fetch``:
    what it prints may be the fetched data, passed on in a variable (``print(page)``)."""
    sources = list(getattr(getattr(shell, "history_manager", None), "input_hist_raw", []) or [])
    outputs = shell.user_ns.get("Out", {}) if isinstance(shell.user_ns.get("Out"), dict) else {}
    log = log_for(shell)
    errors = log.errors
    running = _running(shell)
    end = min(len(sources) - 1, running - 1, last if last is not None else running)
    if last is None and matching is None and first < 0:
        first = end + 1 + first  # the last -first cells
    first_fetch = _first_fetch(sources, log, end)
    found = []
    for count in range(max(first, 1), end + 1):
        source = sources[count]
        if not isinstance(source, str) or not source.strip():
            continue
        if matching is not None and matching.casefold() not in source.casefold():
            continue
        fetched = _fetched(log, count, source)
        found.append(
            Cell(
                count,
                source,
                _result(outputs.get(count, None), count in outputs),
                errors.get(count),
                log.printed_text(count),
                fetched,
                first_fetch if not fetched and first_fetch is not None and first_fetch < count else None,
            )
        )
    return found


def _fetched(log: CellLog, count: int, source: str) -> bool:
    """Whether the user's cell ``count`` reached the network (the agent's own cells are not
    the user's: what their turns read is their session's taint)."""
    if source.lstrip().startswith(AGENT_MAGICS):
        return False
    return log.reached_network(count) or fetches(source)


def _first_fetch(sources: Sequence[object], log: CellLog, end: int) -> int | None:
    """The execution count of the first cell up to ``end`` that reached the network (seen
    by the network log, or a source that certainly fetches: a page served on this machine
    is not in the log)."""
    for count in range(1, end + 1):
        source = sources[count] if count < len(sources) else None
        if not isinstance(source, str) or source.lstrip().startswith(AGENT_MAGICS):
            continue
        if log.reached_network(count) or _FETCHES_PAGES.search(source):
            return count
    return None


def ran_here(shell: InteractiveShell, count: object, source: str) -> Cell | None:
    """The cell this kernel ran as execution ``count``, when its source was ``source``
    (``None``: the notebook's cell did not run here as it reads now: in an earlier kernel,
    another kernel, or edited since; what its outputs hold is then not known)."""
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return None
    found = history(shell, first=count, last=count)
    if not found or found[0].count != count or found[0].source.rstrip() != source.rstrip():
        return None
    return found[0]


def _running(shell: InteractiveShell) -> int:
    """The execution count of the cell running now (IPython counts it up before running it)."""
    count = getattr(shell, "execution_count", 1)
    return count - 1 if isinstance(count, int) else 0


def _result(value: object, present: bool) -> str:
    if not present:
        return ""
    entry = describe("_", value)
    return redact(f"{entry['type']}: {entry.get('summary', '')}")


def turn_section(shell: InteractiveShell, *, limit: int = SECTION_CHARS) -> str:
    """What the notebook ran since the agent's last turn (marks those cells seen).

    The newest cell comes whole (up to :data:`NEWEST_CHARS`), older ones by their head,
    newest first until ``limit``; a cell that raised shows its error, the cell just before
    this turn's with the user's frames of its traceback.
    """
    log = log_for(shell)
    running = _running(shell)
    cells = history(shell, first=max(log.seen + 1, running - SECTION_CELLS))
    log.seen = running
    log.shown_untrusted = []
    if not cells:
        return ""
    lines: list[str] = []
    used = 0
    left_out = 0
    for position, cell in enumerate(reversed(cells)):
        text = _cell_text(cell, newest=position == 0, just_before=cell.count == running - 1)
        if used + len(text) > limit and lines:
            left_out = len(cells) - position
            break
        lines.append(text)
        used += len(text)
        if cell.untrusted and (cell.printed or (cell.result and cell.error is None)):
            log.shown_untrusted.append(f"notebook cell [{cell.count}] output (in the turn context)")
    lines.reverse()
    head = "Cells run in the notebook since your last turn (notebook_cells shows more):"
    if left_out:
        head += f" ({left_out} older left out)"
    return "\n".join([head, *lines])


def section_untrusted(shell: InteractiveShell) -> list[str]:
    """The untrusted content the last :func:`turn_section` showed (outputs of cells that
    reached the network): the turn reads them, so its session counts as having read them."""
    return list(log_for(shell).shown_untrusted)


def _cell_text(cell: Cell, *, newest: bool, just_before: bool) -> str:
    source = redact(cell.source.rstrip())
    source = _cut(source, NEWEST_CHARS if newest else OLDER_CHARS)
    parts = [f"In [{cell.count}]:\n{source}"]
    if cell.printed:
        parts.append(f"Printed: {_shown(cell, _tail(redact(cell.printed), PRINTED_CHARS), 'printed output')}")
    if cell.error is not None:
        if just_before:
            parts.append(f"It raised (the error before this turn):\n{cell.error.text()}")
        else:
            parts.append(f"It raised {cell.error.type}: {_cut(cell.error.message, RESULT_CHARS)}")
    elif cell.result:
        parts.append(f"Out [{cell.count}]: {_shown(cell, _cut(cell.result, RESULT_CHARS), 'result')}")
    return "\n".join(parts)


def _shown(cell: Cell, text: str, what: str) -> str:
    """A cell's result or printed text in the turn context: in the untrusted envelope when
    the cell fetched from the network, else with anything that looks like the envelope's
    markers neutralised."""
    return mark_untrusted(text, f"cell [{cell.count}] {what}") if cell.untrusted else neutralise(text)


def _tail(text: str, limit: int) -> str:
    text = text.rstrip()
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit:,} characters before] " + text[-limit:]


def _cut_middle(text: str, limit: int) -> str:
    """``text``, or its head and its tail around a marker when longer than ``limit``."""
    if len(text) <= limit + 100:
        return text
    half = limit // 2
    return text[:half] + f"\n[... {len(text) - 2 * half:,} characters left out ...]\n" + text[-half:]


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f" [... {len(text) - limit:,} more characters]"
