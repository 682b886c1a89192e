"""The ``code`` group: ``run_code`` and ``inspect_namespace``.

``run_code`` runs in the live kernel through ``shell.run_cell_async``, so prints,
displays and errors land in the running cell and variables stay for the user. An error
is shown as its traceback on stderr, not as an ``error`` output: the turn goes on, and
papermill fails a notebook that holds any ``error`` output (see outcome.py). What the
model gets back is bounded: stdout and stderr keep their head and tail, the last
expression is a short repr (``_repr_llm_`` first), a traceback keeps its last frames.

What the cell shows is bounded too, and nothing is accumulated on the way: one call
shows at most :data:`CELL_OUTPUT_CHARS` of printed text (stdout and stderr together),
then one line saying how much was left out; a traceback shows its head and tail up to
:data:`CELL_TRACEBACK_CHARS`. The model's copy keeps only the head and tail of each
stream (:class:`_Ends`), so printing a gigabyte costs the kernel a few megabytes beyond
what the code itself allocates.
"""

from __future__ import annotations

import asyncio
import linecache
import os
import re
import signal
import sys
import tempfile
import time
import traceback
import types
import uuid
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from agent_kernel.kernel.cells import users_frame
from agent_kernel.kernel.interrupts import CODE_FRAMES, TURN_FRAMES, CodeTimeout, TurnInterrupted
from agent_kernel.kernel.namespace import describe, describe_namespace
from agent_kernel.secrets import redact
from agent_kernel.tools import Tool, current_context, images
from agent_kernel.tools.isolation import isolation

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel.kernel.interrupts import TurnInterrupts
    from agent_kernel.tools.context import ToolContext

    # sys.exc_info() of the error IPython's input transformers raised, or nothing.
    _ExcInfo = tuple[type[BaseException] | None, BaseException | None, types.TracebackType | None]

STREAM_CHARS = 8_000
RESULT_CHARS = 2_000
TRACEBACK_CHARS = 4_000
MESSAGE_CHARS = 2_000  # an error's message, in the model's copy
CELL_OUTPUT_CHARS = 2_000_000  # printed text one run_code call shows in the cell
CELL_TRACEBACK_CHARS = 50_000  # a traceback shown in the cell: its head and tail
# The head and the tail kept of a stream for the model's copy: past STREAM_CHARS and
# TRACEBACK_CHARS by a margin, so redaction sees any secret whole before the cut.
KEPT_CHARS = 64_000
CODE_CHARS = 200_000  # the most source one run_code call takes
LONGEST_TIMEOUT_S = 3_600.0  # the longest timeout_s a call may ask for
NAME_CHARS = 256
NAMES = 200  # the most variables one inspect_namespace call describes

Seconds = Annotated[float, Field(gt=0, le=LONGEST_TIMEOUT_S, allow_inf_nan=False)]


class CodeError(TypedDict):
    """Why a run failed: the exception's type and message, and the code's own frames."""

    type: str
    message: str
    traceback: str


class RunOutcome(TypedDict):
    """What one run produced, in the kernel or in an isolated process."""

    success: bool
    stdout: str
    stderr: str
    result: NotRequired[str]  # the final expression's value, shortened
    error: NotRequired[CodeError]
    images: NotRequired[str]  # what the result says about the images the code displayed


class CodeReply(RunOutcome):
    """``run_code``'s reply: the run's outcome, how long it took and the id it is traced under."""

    duration_ms: float
    execution_id: str


class NamespaceReply(TypedDict):
    """``inspect_namespace``'s reply: one entry per variable (see agent_kernel.kernel.namespace)."""

    variables: Sequence[Mapping[str, object]]


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# Frames from these packages are plumbing, not the model's code.
_PLUMBING = ("IPython", "ipykernel", "agent_kernel", "asyncio")


async def run_code(
    code: Annotated[str, Field(max_length=CODE_CHARS)], timeout_s: Seconds = 60, isolated: bool = False
) -> CodeReply:
    """Run Python code in the user's live Jupyter kernel and return what happened.

    Variables you define stay in the user's namespace; prints, plots and displays appear
    in the user's notebook cell. Top-level ``await`` works. The value of a final
    expression is returned as ``result``. Use ``isolated: true`` to try risky code in a
    fresh Python process that cannot touch the user's variables.

    (The model reads :func:`_run_code_description`, which says what ``isolated`` means on
    this machine.)

    Args:
        code: Python source to run (IPython syntax, e.g. ``%timeit`` or ``!ls``, works too).
        timeout_s: Seconds after which the code is stopped (at most an hour).
        isolated: Run in a fresh Python subprocess with a stripped environment instead.
    """
    context = current_context()
    execution_id = uuid.uuid4().hex[:12]
    started = time.perf_counter()
    if isolated:
        outcome = await _run_isolated(code, timeout_s)
    else:
        outcome = await _run_in_kernel(code, timeout_s)
    reply: CodeReply = {
        **outcome,
        "duration_ms": round((time.perf_counter() - started) * 1000, 1),
        "execution_id": execution_id,
    }
    context.report.ran_code({**reply, "code": code})
    if context.interrupts.reason is not None:
        raise TurnInterrupted(context.interrupts.reason)
    return reply


async def inspect_namespace(
    names: Annotated[list[Annotated[str, Field(max_length=NAME_CHARS)]] | None, Field(max_length=NAMES)] = None,
) -> NamespaceReply:
    """Describe the user's kernel variables: type, summary, shape; DataFrame columns with dtypes and samples.

    Args:
        names: Variables; omit for all.
    """
    context = current_context()
    namespace = context.namespace
    if names is None:
        return {"variables": describe_namespace(namespace, context.hidden_names)}
    variables = [
        describe(name, namespace[name])
        if name in namespace
        else {"name": name, "type": "undefined", "summary": "not defined in the kernel"}
        for name in names
    ]
    return {"variables": variables}


def _run_code_description() -> str:
    """run_code's description, with what isolation this machine gives (see isolation.py)."""
    return (
        "Run Python in the user's live kernel: variables stay in their namespace; prints, plots "
        "and displays appear in their cell; top-level await works; a final expression is "
        "`result`. `isolated: true` runs risky code in a fresh process that cannot touch the "
        "user's variables. " + isolation().describe()
    )


TOOLS = [
    Tool(run_code, name="run_code", group="code", writes=True, description=_run_code_description, runs_input=True),
    Tool(inspect_namespace, name="inspect_namespace", group="code"),
]


# -- in the kernel ------------------------------------------------------------------------


# One live run at a time per event loop: sub-sessions share the user's namespace, and
# IPython runs one cell at a time (its execution count, display hook, output capture).
_LIVE_RUNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


def _live_lock() -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    lock = _LIVE_RUNS.get(loop)
    if lock is None:
        lock = _LIVE_RUNS[loop] = asyncio.Lock()
    return lock


async def _run_in_kernel(code: str, timeout_s: float) -> RunOutcome:
    lock = _live_lock()
    if not lock.locked():
        async with lock:
            return await _run_live(code, timeout_s)
    context = current_context()
    use_id = context.tool_use_id
    if use_id is not None:  # the card says so while another session's code runs
        context.transcript.tool_waiting(use_id, True, why="waiting for another session's code")
    async with lock:
        if use_id is not None:
            context.transcript.tool_waiting(use_id, False)
        return await _run_live(code, timeout_s)


async def _run_live(code: str, timeout_s: float) -> RunOutcome:
    context = current_context()
    shell = context.shell
    interrupts = context.interrupts
    try:
        transformed = shell.transform_cell(code)
        preprocessing_error = None
    except Exception:  # noqa: BLE001 - run_cell_async reports it like a cell would
        transformed, preprocessing_error = code, sys.exc_info()
    with (
        _tracebacks_on_stderr(shell),
        _bounded_result_display(shell),
        _tee_streams() as (stdout, stderr),
        _quiet_stops(shell, interrupts),
        _no_exit(shell),
        images.watching(shell, _images_wanted(context)) as seen,
    ):
        value, error = await interrupts.run_code(_execute(shell, code, transformed, preprocessing_error), timeout_s)
    outcome: RunOutcome = {
        "success": error is None,
        "stdout": stdout.kept.bounded(STREAM_CHARS),
        "stderr": stderr.kept.bounded(STREAM_CHARS),
    }
    stdout.retire()
    stderr.retire()
    if value is not None:
        outcome["result"] = _short_repr(value)
    if error is not None:
        outcome["error"] = _describe_error(error, timed_out=interrupts.timed_out, timeout_s=timeout_s)
    shown = await _attach_images(context, seen)
    if shown:
        outcome["images"] = shown
    return outcome


def _images_wanted(context: ToolContext) -> int:
    """How many of the images this run displays may go back to the model."""
    settings = context.settings
    if not settings.image_feedback:
        return 0
    wanted: int = min(settings.images_per_result, settings.images_per_turn - context.images_sent)
    return max(0, wanted)


async def _attach_images(context: ToolContext, seen: images.Seen) -> str:
    """Attach the images ``seen`` to the call's result; the line the result says about them."""
    settings = context.settings
    made, problems = await images.blocks(seen) if seen.found else ([], [])
    for block in made:
        context.report.attach_image(block)
    context.images_sent += len(made)
    return images.note(
        len(made), seen.total, problems, per_result=settings.images_per_result,
        turn_left=max(0, settings.images_per_turn - context.images_sent), off=not settings.image_feedback,
    )  # fmt: skip


async def _execute(
    shell: InteractiveShell, code: str, transformed: str, preprocessing_error: _ExcInfo | None
) -> tuple[object, BaseException | None]:
    """Run a nested cell; return its last value and its error.

    This frame is where a SIGINT-raised ``KeyboardInterrupt`` (or a cancellation) stops,
    should it land outside the part of IPython that catches it: it must never reach the
    event loop (see interrupts.py).
    """
    try:
        result = await shell.run_cell_async(
            code,
            store_history=False,
            transformed_cell=transformed,
            preprocessing_exc_tuple=preprocessing_error,
        )
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        return None, exc
    return result.result, result.error_before_exec or result.error_in_exec


TURN_FRAMES.add(_execute.__code__)
CODE_FRAMES.add(_execute.__code__)


@contextmanager
def _quiet_stops(shell: InteractiveShell, interrupts: TurnInterrupts) -> Iterator[None]:
    """Show a stopped run as one line instead of a CancelledError, CodeTimeout or (Stop, an
    interrupt) KeyboardInterrupt traceback.

    Uses IPython's own hook for this (``set_custom_exc``), for the nested run only; the
    user's handler, if any, is put back afterwards.
    """
    saved = shell.custom_exceptions, shell.CustomTB

    def one_line(_shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> list[str]:
        if type(value) is KeyboardInterrupt and interrupts.reason is None:  # the code's own
            return list(shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset))
        if isinstance(value, CodeTimeout) or interrupts.timed_out:
            line = f"run_code was stopped after its time limit ({interrupts.timeout_s:g} s).\n"
        else:
            line = f"run_code was stopped{_where(shell, tb)}.\n"
        # Shown even when the code's own output has used up what the cell shows.
        getattr(sys.stderr, "notice", sys.stderr.write)(line)
        return []

    shell.set_custom_exc((KeyboardInterrupt, asyncio.CancelledError), one_line)
    try:
        yield
    finally:
        shell.custom_exceptions, shell.CustomTB = saved


def _where(shell: InteractiveShell, tb: types.TracebackType | None) -> str:
    """ " at line N: SOURCE" of the code's own line the stop landed in ("" when none): the
    code's cell number would name a cell that is not on the screen."""
    cells = getattr(getattr(shell, "compile", None), "_filename_map", {})
    found = ""
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename in cells:
            source = linecache.getline(code.co_filename, tb.tb_lineno).strip()
            found = f" at line {tb.tb_lineno}" + (f": {source[:80]}" if source else "")
        tb = tb.tb_next
    return found


class KernelExitRefused(RuntimeError):
    """The agent's code asked the kernel to exit."""


@contextmanager
def _no_exit(shell: Any) -> Iterator[None]:  # Any: it replaces the shell's methods for the run
    """Refuse ``exit()``, ``quit()`` and ``get_ipython().ask_exit()`` in the nested run.

    In ipykernel they stop the kernel's event loop a moment later, ending the user's
    kernel and everything in it; the agent's code gets an error it can read instead.
    """
    had_own = "ask_exit" in vars(shell)
    saved = vars(shell).get("ask_exit")

    def refuse() -> None:
        raise KernelExitRefused("run_code cannot exit or restart the user's kernel; the kernel keeps running.")

    shell.ask_exit = refuse
    try:
        yield
    finally:
        if had_own:
            shell.ask_exit = saved
        else:
            del shell.ask_exit


@contextmanager
def _tracebacks_on_stderr(shell: Any) -> Iterator[None]:  # Any: it replaces the shell's methods for the run
    """Show the nested run's tracebacks on the cell's stderr instead of as ``error`` outputs.

    The traceback keeps IPython's formatting (colours, the code's own frames) minus frames
    of this package (a Ctrl-C arrives through the turn's SIGINT handler). It goes to the
    stream as it was before the model's copy (``_tee_streams``) starts, since the model
    gets the error in its result already.
    """
    stdout, stderr = sys.stdout, sys.stderr
    had_own = "_showtraceback" in vars(shell)
    saved = vars(shell).get("_showtraceback")

    def show(etype: type, evalue: BaseException, stb: list[str]) -> None:
        tb = evalue.__traceback__ if isinstance(evalue, BaseException) else None
        if tb is not None and _own_frames(tb):
            try:
                stb = shell.InteractiveTB.structured_traceback(etype, evalue, _without_own_frames(tb))
            except Exception:  # noqa: BLE001 - keep IPython's rendering
                pass
        stdout.flush()
        stderr.write(_cell_traceback(shell.InteractiveTB.stb2text(stb)) + "\n")
        stderr.flush()

    shell._showtraceback = show
    try:
        yield
    finally:
        if had_own:
            shell._showtraceback = saved
        else:
            del shell._showtraceback


@contextmanager
def _bounded_result_display(shell: Any) -> Iterator[None]:  # Any: it replaces the shell's methods for the run
    """Show the final expression's value in the cell with at most :data:`CELL_OUTPUT_CHARS`
    of text: a long string or bytes value is formatted from its head only (formatting all
    of a gigabyte would copy it); a value with any longer form is shown as its cut plain
    text, and a line says so."""
    hook = shell.displayhook
    had_own = "compute_format_data" in vars(hook)
    original = hook.compute_format_data

    def compute(result: Any) -> Any:
        formatted = result
        if isinstance(result, (str, bytes)) and len(result) > CELL_OUTPUT_CHARS:
            formatted = result[:CELL_OUTPUT_CHARS]
        data, metadata = original(formatted)
        if not isinstance(data, dict):
            return data, metadata
        text = data.get("text/plain")
        too_long = any(isinstance(form, (str, bytes)) and len(form) > CELL_OUTPUT_CHARS for form in data.values())
        if formatted is not result or too_long:
            cut = text[:CELL_OUTPUT_CHARS] if isinstance(text, str) else ""
            data = {
                "text/plain": cut + f"\n[run_code: the value ({type(result).__name__}) was cut here to fit the "
                f"cell; all of it is still in the kernel.]"
            }
        return data, metadata

    hook.compute_format_data = compute
    try:
        yield
    finally:
        if had_own:
            hook.compute_format_data = original
        else:
            del hook.compute_format_data


_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent) + os.sep


def _own_frames(tb: types.TracebackType | None) -> bool:
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR):
            return True
        tb = tb.tb_next
    return False


def _without_own_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    kept = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR):
            kept.append(tb)
        tb = tb.tb_next
    chain = None
    for item in reversed(kept):
        chain = types.TracebackType(chain, item.tb_frame, item.tb_lasti, item.tb_lineno)
    return chain


def _cell_traceback(text: str) -> str:
    """A traceback as the cell shows it: whole when short, else its head and its tail (where
    the error's type and message are) around a line saying how much was left out."""
    if len(text) <= CELL_TRACEBACK_CHARS:
        return text
    half = CELL_TRACEBACK_CHARS // 2
    left_out = len(text) - 2 * half
    return text[:half] + f"\n[... {left_out:,} characters of this traceback left out of the cell ...]\n" + text[-half:]


class _Ends:
    """The head and the tail of a text written in pieces, and its length; never the middle.

    The model's copy of a stream: keeping it costs at most about ``3 * keep`` characters
    however much is written.
    """

    def __init__(self, keep: int = KEPT_CHARS) -> None:
        self.keep = keep
        self.total = 0
        self._head: list[str] = []
        self._head_chars = 0
        self._tail: list[str] = []
        self._tail_chars = 0

    @classmethod
    def of(cls, text: str, keep: int = KEPT_CHARS) -> _Ends:
        ends = cls(keep)
        ends.write(text)
        return ends

    def write(self, text: str) -> None:
        self.total += len(text)
        if self._head_chars < self.keep:
            part = text[: self.keep - self._head_chars]
            self._head.append(part)
            self._head_chars += len(part)
        if len(text) >= self.keep:
            self._tail, self._tail_chars = [text[-self.keep :]], self.keep
            return
        self._tail.append(text)
        self._tail_chars += len(text)
        if self._tail_chars > 2 * self.keep:
            tail = "".join(self._tail)[-self.keep :]
            self._tail, self._tail_chars = [tail], len(tail)

    def head(self) -> str:
        return "".join(self._head)

    def tail(self) -> str:
        return "".join(self._tail)[-self.keep :]

    def whole(self) -> str | None:
        """All that was written, when the head and the tail still hold all of it."""
        if self.total <= self.keep:
            return self.head()
        if self.total <= 2 * self.keep:
            return self.head() + self.tail()[self.keep - (self.total - self.keep) :]
        return None

    def text(self) -> str:
        """All of it when it was short; else the head and the tail around an omission marker."""
        whole = self.whole()
        if whole is not None:
            return whole
        return self.head() + f"\n[... {self.total - 2 * self.keep:,} characters omitted ...]\n" + self.tail()

    def bounded(self, limit: int, *, keep_head: bool = True, clean: Callable[[str], str] | None = None) -> str:
        """At most about ``limit`` characters for the model, as :func:`_bounded` makes them:
        the head and tail (or only the tail), redacted before the cut. ``clean`` is applied
        to each kept end first (ANSI escapes)."""
        clean = clean or _unchanged
        whole = self.whole()
        if whole is not None:
            return _bounded(clean(whole), limit, keep_head=keep_head)
        head, tail = redact(clean(self.head())), redact(clean(self.tail()))
        omitted = max(self.total - limit, 0)
        if not keep_head:
            return f"[... {omitted:,} characters omitted]\n" + tail[-limit:]
        half = limit // 2
        return head[:half] + f"\n[... {omitted:,} characters omitted ...]\n" + tail[-half:]


class _CellBudget:
    """How much more printed text this run_code call may show in the cell."""

    def __init__(self, chars: int = CELL_OUTPUT_CHARS) -> None:
        self.chars = chars
        self.remaining = chars

    def take(self, text: str) -> str:
        """The part of ``text`` the cell still shows (all of it, a head, or nothing)."""
        if len(text) <= self.remaining:
            self.remaining -= len(text)
            return text
        shown = text[: self.remaining]
        self.remaining = 0
        return shown


class _Tee:
    """Writes to the cell's stream (within the call's budget) and keeps the ends for the model."""

    def __init__(self, stream: TextIO, budget: _CellBudget) -> None:
        self._stream = stream
        self._budget = budget
        self.kept = _Ends()
        self.left_out = 0
        self._retired = False

    def retire(self) -> None:
        """Stop keeping text for the model: the call is over, its result already made.

        A thread's ``print`` still under way may write here once more (see :data:`_RETIRED`).
        """
        self._retired = True
        self.kept = _Ends()

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if not self._retired:
            self.kept.write(text)
        shown = self._budget.take(text)
        self.left_out += len(text) - len(shown)
        if shown:
            if not shown.isascii():  # a lone surrogate would fail the kernel's message encoding
                shown = shown.encode("utf-8", "replace").decode("utf-8")
            self._stream.write(shown)
        return len(text)

    def notice(self, text: str) -> None:
        """Write ``text`` to the cell whatever the budget (a line about the run itself)."""
        if not self._retired:
            self.kept.write(text)
        self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        """The code may close its stdout; the cell's stream stays open for the user."""
        self._stream.flush()

    def getvalue(self) -> str:
        """What was written: all of it when short, else its head and tail (see :class:`_Ends`)."""
        return self.kept.text()

    def note_left_out(self) -> None:
        """One line in the cell saying how much of this stream it did not show."""
        if self.left_out:
            self._stream.write(
                f"\n[run_code: {self.left_out:,} more characters of output were left out of this cell "
                f"(it shows the first {self._budget.chars:,} of each call); the values the code made "
                "are still in the kernel.]\n"
            )
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


# Tees of calls that have ended, kept alive a while longer. CPython 3.11's ``print`` holds
# ``sys.stdout`` as a borrowed reference across its several ``write`` calls: a thread the
# code started, printing while the call puts the kernel's streams back, would otherwise
# write through a freed tee and crash the kernel (a segmentation fault).
_RETIRED: deque[_Tee] = deque(maxlen=1024)


@contextmanager
def _tee_streams() -> Iterator[tuple[_Tee, _Tee]]:
    saved = sys.stdout, sys.stderr
    budget = _CellBudget()
    out, err = _Tee(sys.stdout, budget), _Tee(sys.stderr, budget)
    sys.stdout, sys.stderr = out, err
    try:
        yield out, err
    finally:
        sys.stdout, sys.stderr = saved
        out.note_left_out()
        err.note_left_out()
        _RETIRED.extend((out, err))


def _describe_error(error: BaseException, *, timed_out: bool, timeout_s: float) -> CodeError:
    if timed_out and isinstance(error, (CodeTimeout, asyncio.CancelledError, KeyboardInterrupt)):
        return {
            "type": "TimeoutError",
            "message": f"The code was stopped after its time limit of {timeout_s:g} s (timeout_s).",
            "traceback": _traceback(error),
        }
    return {
        "type": type(error).__name__,
        "message": _Ends.of(str(error)).bounded(MESSAGE_CHARS, clean=_strip_ansi),
        "traceback": _traceback(error),
    }


def _traceback(error: BaseException) -> str:
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not any(f"{os.sep}{pkg}{os.sep}" in frame.filename for pkg in _PLUMBING) and users_frame(frame.filename)
    ]
    text = "".join(traceback.format_list(frames))
    text += "".join(traceback.format_exception_only(type(error), error))
    return _Ends.of(text).bounded(TRACEBACK_CHARS, keep_head=False, clean=_strip_ansi)


def _short_repr(value: Any) -> str:
    llm = getattr(type(value), "_repr_llm_", None)
    if llm is None and isinstance(value, (str, bytes)) and len(value) > KEPT_CHARS:
        # Its ends, without copying all of it into a repr.
        head, tail = repr(value[: RESULT_CHARS // 2]), repr(value[-(RESULT_CHARS // 2) :])
        return redact(head + f" [... {len(value) - RESULT_CHARS:,} characters omitted ...] " + tail)
    try:
        text = llm(value) if callable(llm) else repr(value)
    except Exception as exc:  # noqa: BLE001
        text = f"<repr failed: {type(exc).__name__}: {exc}>"
    return _bounded(_strip_ansi(str(text)), RESULT_CHARS)


def _unchanged(text: str) -> str:
    return text


def _strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _bounded(text: str, limit: int, *, keep_head: bool = True) -> str:
    """``text`` if short, else its head and tail (or only its tail) with a marker.

    Secrets are redacted before the cut, so a head or tail never ends inside one.
    """
    if len(text) <= limit:
        return text
    text = redact(text)
    if len(text) <= limit:
        return text
    omitted = len(text) - limit
    if not keep_head:
        return f"[... {omitted:,} characters omitted]\n" + text[-limit:]
    half = limit // 2
    return text[:half] + f"\n[... {omitted:,} characters omitted ...]\n" + text[-half:]


# -- isolated -----------------------------------------------------------------------------

_BOOTSTRAP = r"""
import ast, json, sys
path, out = sys.argv[1], sys.argv[2]
source = open(path, encoding="utf-8").read()
tree = ast.parse(source, filename="<isolated>")
last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
namespace = {"__name__": "__main__"}
exec(compile(tree, "<isolated>", "exec"), namespace)
if last is not None:
    value = eval(compile(ast.Expression(last.value), "<isolated>", "eval"), namespace)
    if value is not None:
        with open(out, "w", encoding="utf-8") as f:
            f.write(repr(value))
"""


async def _run_isolated(code: str, timeout_s: float) -> RunOutcome:
    where = isolation()
    with tempfile.TemporaryDirectory(prefix="agent-kernel-isolated-") as tmp:
        workdir = os.path.realpath(tmp)
        source, result_file = Path(workdir, "code.py"), Path(workdir, "result.txt")
        source.write_text(code, encoding="utf-8")
        command = where.command([sys.executable, "-I", "-c", _BOOTSTRAP, str(source), str(result_file)], workdir)
        process = await asyncio.create_subprocess_exec(
            *command,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=where.environment(workdir),
            cwd=workdir,
            start_new_session=True,
        )
        timed_out = False
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), timeout_s)
        except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
            timed_out = isinstance(exc, asyncio.TimeoutError)
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            stdout, stderr = await process.communicate()
            if not timed_out:
                raise
        out_text = stdout.decode(errors="replace")
        err_text = stderr.decode(errors="replace")
        outcome: RunOutcome = {
            "success": process.returncode == 0 and not timed_out,
            "stdout": _bounded(out_text, STREAM_CHARS),
            "stderr": _bounded(err_text, STREAM_CHARS) if process.returncode == 0 else "",
        }
        if result_file.exists():
            outcome["result"] = _bounded(result_file.read_text(encoding="utf-8"), RESULT_CHARS)
        if timed_out:
            outcome["error"] = {
                "type": "TimeoutError",
                "message": f"The isolated process was killed after {timeout_s:g} s (timeout_s).",
                "traceback": "",
            }
        elif process.returncode != 0:
            outcome["error"] = _isolated_error(err_text, process.returncode)
    return outcome


def _isolated_error(stderr: str, returncode: int | None) -> CodeError:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else f"exit status {returncode}"
    kind, _, message = last.partition(": ")
    if not kind.isidentifier():
        kind, message = "ProcessError", last
    return {"type": kind, "message": message, "traceback": _bounded(stderr, TRACEBACK_CHARS, keep_head=False)}
