"""Running an agent-defined tool's code: in the kernel process or in a fresh subprocess.

In the kernel the code becomes an ``async def`` of ``args`` and ``state`` in a namespace
of its own, run under the turn's time limit and interrupt like ``run_code``; its prints go
to the cell. Isolated, a subprocess (bubblewrap-sandboxed where the machine allows, see
:mod:`.isolation`) gets the code, the input and every library's source, and asks the
kernel for each ``state`` access over its stdin/stdout. A failure raises
:class:`StoredToolError` with the error and the traceback's last frames, which the
dispatcher turns into an ``is_error`` result.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import json
import linecache
import os
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agent_kernel.errors import ToolInputError
from agent_kernel.kernel import libraries
from agent_kernel.kernel.interrupts import CODE_FRAMES, TURN_FRAMES, CodeTimeout, TurnInterrupted
from agent_kernel.store import agent_tools as stored
from agent_kernel.store import provenance
from agent_kernel.store.state import State
from agent_kernel.tools import current_context
from agent_kernel.tools.code import _tee_streams
from agent_kernel.tools.data import with_connection
from agent_kernel.tools.isolation import isolation

if TYPE_CHECKING:
    import duckdb

    from agent_kernel.store import Store
    from agent_kernel.tools.context import ToolContext

T = TypeVar("T")

TIMEOUT_S = 60.0  # as run_code's default
TRACEBACK_FRAMES = 3
OUTPUT_CHARS = 2_000

__all__ = ["StoredToolError", "run_stored_tool"]


class StoredToolError(ToolInputError):
    """The tool's code failed; the message, as it is, is what the model reads."""


async def run_stored_tool(definition: stored.ToolVersion, args: dict[str, Any]) -> Any:
    """The JSON value ``definition``'s code returns for ``args``."""
    if definition.isolated:
        value = await _run_isolated(definition, args)
    else:
        value = await _run_in_kernel(definition, args)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StoredToolError(
            f"{definition.name} returned a value that is not JSON ({exc}); return dicts, lists, "
            "strings, numbers, booleans or None."
        ) from None
    return value


class KernelState:
    """``state`` in the kernel: the state tools' store, read and written directly."""

    def __init__(self, store: Store, tool: str, writes: bool) -> None:
        self._store, self._tool, self._writes = store, tool, writes

    def get(self, key: str) -> Any:
        return self._with(lambda s: s.get(key))

    def set(self, key: str, value: Any) -> None:
        self._refuse_write()
        json.dumps(value, allow_nan=False)  # a value JSON cannot hold fails here, in the tool
        self._with(lambda s: s.set(key, value))

    def delete(self, key: str) -> bool:
        self._refuse_write()
        return self._with(lambda s: s.delete(key))

    def keys(self, prefix: str | None = None) -> list[str]:
        return self._with(lambda s: s.keys(prefix))

    def _refuse_write(self) -> None:
        if not self._writes:
            raise PermissionError(f"{self._tool} is declared writes: false, so it may not change state.")

    def _with(self, action: Callable[[State], T]) -> T:
        with self._store.connect() as con:
            return action(State(con))


# -- in the kernel --------------------------------------------------------------------------


def compile_tool(definition: stored.ToolVersion) -> Any:
    """The tool's code as the code object of ``async def tool(args, state)``."""
    filename = f"<agent tool {definition.name} v{definition.version}>"
    body = ast.parse(definition.code, filename=filename).body or [ast.Pass()]
    module = ast.parse("async def tool(args, state):\n    pass\n", filename=filename)
    module.body[0].body = body  # type: ignore[attr-defined]
    ast.fix_missing_locations(module)
    # Tracebacks show the code's lines (a name in <> is never looked up on disk).
    linecache.cache[filename] = (len(definition.code), None, definition.code.splitlines(True), filename)
    return compile(module, filename, "exec", dont_inherit=True)


async def _run_in_kernel(definition: stored.ToolVersion, args: dict[str, Any]) -> Any:
    context = current_context()
    libraries.install(lambda: context.store)
    namespace: dict[str, Any] = {"__name__": f"agent_tool_{definition.name}", "__builtins__": builtins}
    exec(compile_tool(definition), namespace)  # noqa: S102 - defines the tool's function
    state = KernelState(context.store, definition.name, definition.writes is not False)
    with _tee_streams() as (stdout, _stderr):
        value, error = await context.interrupts.run_code(_execute(namespace["tool"], args, state), TIMEOUT_S)
    if context.interrupts.reason is not None:
        raise TurnInterrupted(context.interrupts.reason)
    if error is not None:
        if context.interrupts.timed_out or isinstance(error, (CodeTimeout, asyncio.CancelledError, KeyboardInterrupt)):
            raise StoredToolError(f"{definition.name} was stopped after its time limit of {TIMEOUT_S:g} s.")
        raise StoredToolError(_describe(definition.name, error, stdout.getvalue()))
    return value


async def _execute(function: Any, args: dict[str, Any], state: KernelState) -> tuple[Any, BaseException | None]:
    """Run the tool's function; return its value and its error (an interrupt stops here)."""
    try:
        return await function(args, state), None
    except (Exception, KeyboardInterrupt, asyncio.CancelledError) as exc:  # noqa: BLE001 - reported to the model
        return None, exc


TURN_FRAMES.add(_execute.__code__)
CODE_FRAMES.add(_execute.__code__)


def _describe(name: str, error: BaseException, output: str = "") -> str:
    frames = [
        f for f in traceback.extract_tb(error.__traceback__)
        if f.filename.startswith(("<agent tool", "agent_libs/")) or f"{os.sep}agent_kernel{os.sep}" not in f.filename
    ]  # fmt: skip
    text = "".join(traceback.format_list(frames[-TRACEBACK_FRAMES:]))
    text += "".join(traceback.format_exception_only(type(error), error))
    message = f"{name} failed with {type(error).__name__}: {error}\nTraceback (last frames):\n{text.strip()}"
    if output.strip():
        message += f"\nIt printed:\n{output[-OUTPUT_CHARS:]}"
    return message


# -- isolated -------------------------------------------------------------------------------

# Runs in the subprocess: stdin/stdout carry JSON lines (state requests, then the outcome);
# the tool's own prints are captured and sent with the outcome.
_BOOTSTRAP = r"""
import ast, importlib.abc, importlib.machinery, io, json, linecache, sys, traceback, asyncio
spec = json.load(open(sys.argv[1], encoding="utf-8"))
wire_in, wire_out = sys.stdin, sys.stdout
sys.stdin, sys.stdout = io.StringIO(), io.StringIO()

def send(message):
    wire_out.write(json.dumps(message) + "\n")
    wire_out.flush()

class State:
    def _ask(self, **request):
        send({"state": request})
        answer = json.loads(wire_in.readline())
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer.get("value")
    def get(self, key): return self._ask(op="get", key=key)
    def set(self, key, value): self._ask(op="set", key=key, value=value)
    def delete(self, key): return self._ask(op="delete", key=key)
    def keys(self, prefix=None): return self._ask(op="keys", prefix=prefix)

class Libraries(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == "agent_libs":
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        package, _, name = fullname.partition(".")
        if package == "agent_libs" and name in spec["refused"]:
            raise ImportError(spec["refused"][name], name=fullname)
        if package == "agent_libs" and name in spec["libraries"]:
            return importlib.machinery.ModuleSpec(fullname, self, origin="agent_libs/%s.py" % name)
    def create_module(self, module_spec): return None
    def exec_module(self, module):
        if module.__name__ == "agent_libs":
            module.__path__ = []
            return
        name = module.__name__.partition(".")[2]
        source, filename = spec["libraries"][name], "agent_libs/%s.py" % name
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)

sys.meta_path.append(Libraries())
filename = spec["filename"]
linecache.cache[filename] = (len(spec["code"]), None, spec["code"].splitlines(True), filename)
body = ast.parse(spec["code"], filename=filename).body or [ast.Pass()]
module = ast.parse("async def tool(args, state):\n    pass\n", filename=filename)
module.body[0].body = body
ast.fix_missing_locations(module)
namespace = {"__name__": "agent_tool"}
try:
    exec(compile(module, filename, "exec", dont_inherit=True), namespace)
    value = asyncio.run(namespace["tool"](spec["args"], State()))
    json.dumps(value, allow_nan=False)
    send({"value": value, "stdout": sys.stdout.getvalue()})
except BaseException as exc:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename or f.filename.startswith("agent_libs/")]
    text = "".join(traceback.format_list(frames[-3:])) + "".join(traceback.format_exception_only(type(exc), exc))
    send({"error": type(exc).__name__, "message": str(exc), "traceback": text, "stdout": sys.stdout.getvalue()})
"""


async def _run_isolated(definition: stored.ToolVersion, args: dict[str, Any]) -> Any:
    context = current_context()
    sources, refused = await with_connection(context.store, lambda con: _libraries_for(con, context))
    filename = f"<agent tool {definition.name} v{definition.version}>"
    where = isolation()
    with tempfile.TemporaryDirectory(prefix="agent-kernel-tool-") as tmp:
        workdir = os.path.realpath(tmp)
        spec_file = Path(workdir, "tool.json")
        spec_file.write_text(
            json.dumps(
                {
                    "code": definition.code,
                    "args": args,
                    "libraries": sources,
                    "refused": refused,
                    "filename": filename,
                }
            ),
            encoding="utf-8",
        )
        command = where.command([sys.executable, "-I", "-c", _BOOTSTRAP, str(spec_file)], workdir)
        process = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=where.environment(workdir), cwd=workdir,
            start_new_session=True, limit=2**24,
        )  # fmt: skip
        state = KernelState(context.store, definition.name, definition.writes is not False)
        try:
            outcome = await asyncio.wait_for(_converse(process, state), TIMEOUT_S)
        except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await process.wait()
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise StoredToolError(
                f"{definition.name} (isolated) was killed after its time limit of {TIMEOUT_S:g} s."
            ) from None
    if outcome.get("stdout"):
        print(outcome["stdout"], end="")  # the tool's prints, in the cell as in the kernel
    if "error" in outcome:
        message = (
            f"{definition.name} failed with {outcome['error']}: {outcome.get('message', '')}\n"
            f"Traceback (last frames):\n{outcome.get('traceback', '').strip()}"
        )
        if outcome.get("stdout", "").strip():
            message += f"\nIt printed:\n{outcome['stdout'][-OUTPUT_CHARS:]}"
        raise StoredToolError(message)
    return outcome.get("value")


def _libraries_for(con: duckdb.DuckDBPyConnection, context: ToolContext) -> tuple[dict[str, str], dict[str, str]]:
    """The sources of the libraries this call may import, and why the others (tainted) may not."""
    found = {lib.name: lib.code for lib in stored.Libraries(con).list()}
    refused = {}
    for name, origin in provenance.latest(con, "library", list(found)).items():
        refusal = libraries.tainted_refusal(name, origin, context) if origin.tainted else None
        if refusal is not None:
            refused[name] = refusal
            del found[name]
    return found, refused


async def _converse(process: asyncio.subprocess.Process, state: KernelState) -> dict[str, Any]:
    """Answer the subprocess's state requests until it sends its outcome."""
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    while True:
        line = await process.stdout.readline()
        if not line:
            errors = (await process.stderr.read()).decode(errors="replace").strip()
            await process.wait()
            last = errors.splitlines()[-1] if errors else f"exit status {process.returncode}"
            return {"error": "ProcessError", "message": f"the isolated process ended without a result: {last}"}
        try:
            message = json.loads(line)
        except ValueError:
            continue  # output written straight to the file descriptor: not ours
        if "state" not in message:
            process.stdin.close()
            await process.wait()
            answer: dict[str, Any] = message
            return answer
        request = message["state"]
        try:
            answer = {"value": await asyncio.to_thread(_state_call, state, request)}
        except Exception as exc:  # noqa: BLE001 - raised again in the tool's code
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        process.stdin.write((json.dumps(answer) + "\n").encode())
        await process.stdin.drain()


def _state_call(state: KernelState, request: dict[str, Any]) -> Any:
    op = request.get("op")
    if op == "get":
        return state.get(request["key"])
    if op == "set":
        return state.set(request["key"], request.get("value"))
    if op == "delete":
        return state.delete(request["key"])
    if op == "keys":
        return state.keys(request.get("prefix"))
    raise ValueError(f"unknown state operation {op!r}")
