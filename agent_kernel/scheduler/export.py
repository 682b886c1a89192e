"""A session made into a notebook that re-runs without the model, and can be scheduled.

``agent-kernel export SESSION OUT.ipynb`` and ``%agent_export OUT.ipynb`` write:

1. a markdown cell naming the session;
2. a code cell tagged ``parameters`` (papermill injects a run's parameters after it) with
   the session's *inputs* (see :func:`find_parameters`);
3. for each turn that ran code: a markdown cell quoting its prompt, then its successful
   ``run_code`` steps (:mod:`agent_kernel.store.steps`), one cell each.

There is no ``%agent`` cell: nothing in it calls the model. ``%load_ext agent_kernel``
comes first only when the code needs the extension (``agent_libs``, an ``%agent_*``
magic). A step that itself ran a ``%agent`` turn is left out.

Cells of turns that ran after the session read untrusted content keep the untrusted mark
(:mod:`agent_kernel.cellmark`; which turns: :mod:`agent_kernel.store.turn_taint`), and so
does the ``parameters`` cell when any of them gave it an input: a hostile page may have
steered that code. The scheduler refuses to run the notebook until the person reviewed
and cleared them (``agent-kernel cells clear OUT``), and :func:`verify`, which runs the
code, is for the caller to run only with the person's consent (:func:`consent_question`).

:func:`verify` runs the notebook headless, as the scheduler would (papermill in a runner
process, :func:`~agent_kernel.scheduler.execute.execute_run`), with the model out of reach
(``ANTHROPIC_BASE_URL`` on a closed local port, no API key), and says whether it passed,
why not, and whether each cell printed what it printed when the agent ran it.
"""

from __future__ import annotations

import ast
import math
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kernel import cellmark
from agent_kernel.scheduler import ScheduleError
from agent_kernel.scheduler.execute import execute_run
from agent_kernel.scheduler.runs import SUCCEEDED
from agent_kernel.scheduler.service import JobFields, SchedulerService
from agent_kernel.scheduler.spec import RunSpec
from agent_kernel.secrets import redact
from agent_kernel.store.provenance import Provenance
from agent_kernel.store.sessions import Sessions
from agent_kernel.store.steps import TurnSteps, mark, session_steps

if TYPE_CHECKING:
    from nbformat import NotebookNode

    from agent_kernel.scheduler.jobs import Job
    from agent_kernel.store import Store
    from agent_kernel.store.sessions import Session

__all__ = [
    "MAX_PARAMETERS",
    "NO_MODEL_ENV",
    "Exported",
    "Verdict",
    "build_notebook",
    "export_session",
    "find_parameters",
    "find_session",
    "verify",
]  # fmt: skip

MAX_PARAMETERS = 50
MAX_TEXT_PARAMETER = 1024  # characters of a string parameter (a path, a date)
VERIFY_TIMEOUT_S = 600.0
# The model is unreachable in the verifying run: a closed port on this machine, no key.
NO_MODEL_ENV = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "ANTHROPIC_API_KEY": "", "ANTHROPIC_AUTH_TOKEN": ""}
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}

_NESTED_TURN = re.compile(r"^\s*%%?agent(\s|$)", re.MULTILINE)
_NEEDS_EXTENSION = re.compile(r"\bagent_libs\b|^\s*%%?agent_\w", re.MULTILINE)
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}$")


# -- the session ------------------------------------------------------------------------------


def find_session(store: Store, key: str) -> Session:
    """The session named ``key``, or whose id is (or starts with, uniquely) ``key``."""
    with store.connect() as con:
        sessions = Sessions(con)
        found = sessions.by_name(key) or sessions.get(key)
        if found is None and len(key) >= 4:
            matches = [s for s in sessions.list() if s.id.startswith(key)]
            found = matches[0] if len(matches) == 1 else None
    if found is None:
        raise ScheduleError(
            f"No session {key!r}: name a session by its name or id (`%agent_sessions --all` lists them)."
        )
    return found


# -- the inputs, found in the code ------------------------------------------------------------


@dataclass
class _Source:
    code: str
    tree: ast.Module | None  # None: not plain Python (IPython syntax); never searched for inputs


def _is_input(value: Any) -> bool:
    """A number, an ISO date or time, or a string that looks like a file path."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return math.isfinite(value)
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT_PARAMETER:
        return False
    if any(c in value for c in "\n\r\x00") or "://" in value:
        return False
    if _is_iso_date(value):
        return True
    return "/" in value or "\\" in value or bool(_EXTENSION.search(value))


def _is_iso_date(value: str) -> bool:
    for parse in (date.fromisoformat, datetime.fromisoformat):
        try:
            parse(value)
        except ValueError:
            continue
        return len(value) >= 10
    return False


def _literal(node: ast.expr) -> tuple[bool, Any]:
    """(True, value) for a constant or a signed number; (False, None) otherwise."""
    if isinstance(node, ast.Constant):
        return True, node.value
    if (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd))
        and isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float))
        and not isinstance(node.operand.value, bool)
    ):  # fmt: skip
        value = node.operand.value
        return True, -value if isinstance(node.op, ast.USub) else value
    return False, None


def _bound_names(tree: ast.AST) -> list[str]:
    """Every name the code binds, anywhere (assignments, loops, imports, definitions, globals)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.append(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [(a.asname or a.name).split(".")[0] for a in node.names]
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names += node.names
    return names


def _loaded_before(tree: ast.AST, name: str, line: int | None) -> bool:
    """Whether ``tree`` reads ``name`` (before ``line``, when given)."""
    return any(
        isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)
        and (line is None or node.lineno < line)
        for node in ast.walk(tree)
    )  # fmt: skip


def find_parameters(codes: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """The session's inputs and the code without their assignments.

    An input is a top-level statement ``NAME = LITERAL`` (one plain name; the literal a
    number, an ISO date or datetime string, or a string that looks like a file path: it
    holds ``/`` or ``\\`` or ends in a file extension; never a URL, a bool or other text)
    where, across all the session's code, ``NAME`` is bound nowhere else (no second
    assignment, ``+=``, loop, import, ``def`` or ``global``), is not read before it, the
    statement has its lines to itself, and the name does not start with ``_``. Code that
    is not plain Python (IPython syntax) is never searched, and a name it mentions is no
    input. Found by :mod:`ast` only: nothing is run. At most :data:`MAX_PARAMETERS`.

    The assignment moves into the ``parameters`` cell (so papermill's values, injected
    after it, are the ones used); a cell left empty is dropped.
    """
    sources = [_Source(code, _parse(code)) for code in codes]
    bound: dict[str, int] = {}
    for source in sources:
        if source.tree is not None:
            for name in _bound_names(source.tree):
                bound[name] = bound.get(name, 0) + 1
    opaque = "\n".join(s.code for s in sources if s.tree is None)
    found: dict[str, Any] = {}
    cuts: dict[int, list[tuple[int, int]]] = {}
    for index, source in enumerate(sources):
        if source.tree is None:
            continue
        statements = source.tree.body
        for position, statement in enumerate(statements):
            if len(found) >= MAX_PARAMETERS:
                break
            picked = _input_of(statement)
            if picked is None:
                continue
            name, value = picked
            if (
                name.startswith("_") or name in found or bound.get(name) != 1
                or re.search(rf"\b{re.escape(name)}\b", opaque)
                or _loaded_before(source.tree, name, statement.lineno)
                or any(s.tree is not None and _loaded_before(s.tree, name, None) for s in sources[:index])
                or not _own_lines(statements, position)
            ):  # fmt: skip
                continue
            found[name] = value
            cuts.setdefault(index, []).append((statement.lineno, statement.end_lineno or statement.lineno))
    return found, [_without_lines(s.code, cuts.get(i, [])) for i, s in enumerate(sources)]


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _input_of(statement: ast.stmt) -> tuple[str, Any] | None:
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target, value = statement.targets[0], statement.value
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None and statement.simple:
        target, value = statement.target, statement.value
    else:
        return None
    if not isinstance(target, ast.Name):
        return None
    ok, literal = _literal(value)
    return (target.id, literal) if ok and _is_input(literal) else None


def _own_lines(statements: list[ast.stmt], position: int) -> bool:
    """Whether no other statement shares a line with ``statements[position]`` (``a = 1; b = 2``)."""
    this = statements[position]
    before = statements[position - 1] if position > 0 else None
    after = statements[position + 1] if position + 1 < len(statements) else None
    if before is not None and (before.end_lineno or before.lineno) >= this.lineno:
        return False
    return not (after is not None and after.lineno <= (this.end_lineno or this.lineno))


def _without_lines(code: str, cuts: list[tuple[int, int]]) -> str:
    if not cuts:
        return code
    lines = code.splitlines(keepends=True)
    dropped = {n for first, last in cuts for n in range(first, last + 1)}
    kept = "".join(line for number, line in enumerate(lines, start=1) if number not in dropped)
    return kept.strip("\n") if kept.strip() else ""


# -- the notebook -----------------------------------------------------------------------------


@dataclass
class Exported:
    """What an export wrote."""

    path: Path
    session: str
    turns: int  # turns with code in the notebook
    code_cells: int
    parameters: dict[str, Any]
    load_ext: bool
    recorded: list[str] = field(default_factory=list)  # each code cell's stdout when the agent ran it
    untrusted: tuple[str, ...] = ()  # what the session had read when its marked cells' turns ran
    marked_cells: int = 0  # cells that keep the untrusted mark

    def describe(self) -> str:
        found = ", ".join(f"{name} = {value!r}" for name, value in self.parameters.items())
        plural = "s" if self.turns != 1 else ""
        text = (
            f"Exported session {self.session!r} ({self.turns} turn{plural}, {self.code_cells} code cells) "
            f"to {self.path}; parameters: {found or 'none found'}"
            + ("; it loads agent_kernel (its code uses the extension)." if self.load_ext else ".")
        )
        if self.marked_cells:
            text += (
                f"\n{self.marked_cells} cells come from turns that ran after the session read untrusted content "
                f"({'; '.join(self.untrusted[: cellmark.MOST_SOURCES])}) and keep that mark: review them; "
                f"the scheduler runs the notebook only once you clear it (agent-kernel cells clear {self.path})."
            )
        return text


def consent_question(exported: Exported) -> str:
    """What to ask the person before :func:`verify` runs code of a tainted session ("" for
    a clean one: it runs unasked)."""
    if not exported.marked_cells:
        return ""
    return (
        f"Session {exported.session!r} read untrusted content ({'; '.join(exported.untrusted[: cellmark.MOST_SOURCES])}) "
        f"before the turns that made {exported.marked_cells} cells of {exported.path}; such content may have "
        "steered their code. Verifying runs that code now, headless. Review the notebook first. Run it? [y/N] "
    )


def build_notebook(session: Session, turns: Sequence[TurnSteps]) -> tuple[NotebookNode, Exported]:
    """The notebook of ``turns`` (see the module docstring) and what it holds."""
    import nbformat  # noqa: PLC0415 - heavy (jsonschema, ~1.5 s): only reading or writing a notebook needs it

    kept = [(turn, step) for turn in turns for step in turn.steps if not _NESTED_TURN.search(step.code)]
    if not kept:
        raise ScheduleError(f"Session {session.name!r} ran no code that succeeded in the kernel: nothing to export.")
    originals = [redact(step.code) for _, step in kept]
    parameters, codes = find_parameters(originals)
    tainted = [turn for turn, _ in kept if turn.untrusted]
    # The parameters cell is marked when an input was taken out of a tainted turn's code.
    tainted_inputs = [
        turn for (turn, _), code, original in zip(kept, codes, originals) if turn.untrusted and code != original
    ]
    load_ext = any(_NEEDS_EXTENSION.search(code) for code in codes)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["agent_kernel"] = {"exported_from": {"session": session.id, "name": session.name}}
    intro = (
        f"# {session.name}\n\nThe code agent-kernel session `{session.name}` ran, exported to re-run "
        "without the model. Its inputs are in the cell tagged `parameters` (papermill sets them)."
    )
    cells = [nbformat.v4.new_markdown_cell(intro)]
    lines = [f"{name} = {value!r}" for name, value in parameters.items()]
    parameter_cell = nbformat.v4.new_code_cell(
        "\n".join(["# Parameters (papermill puts a run's values after this cell)", *lines])
    )
    parameter_cell.metadata["tags"] = ["parameters"]
    if tainted_inputs:
        parameter_cell.metadata.update(mark(tainted_inputs[0]))
    cells.append(parameter_cell)
    if load_ext:
        cells.append(nbformat.v4.new_code_cell("%load_ext agent_kernel"))
    recorded: list[str] = []
    shown_turns: list[int] = []
    for (turn, step), code in zip(kept, codes):
        if turn.turn not in shown_turns:
            shown_turns.append(turn.turn)
            prompt = "\n".join(
                "> " + line if line else ">" for line in redact(turn.prompt or "(no prompt)").splitlines()
            )
            cells.append(nbformat.v4.new_markdown_cell(f"**Turn {turn.turn}**\n\n{prompt}", metadata=mark(turn)))
        if code:
            cells.append(nbformat.v4.new_code_cell(code, metadata=mark(turn)))
            recorded.append(step.stdout)
    nb.cells = cells
    marked = len(cellmark.marked_cells(cells))
    sources = tainted[0].untrusted if tainted else ()
    exported = Exported(
        Path(), session.name, len(shown_turns), len(recorded), parameters, load_ext, recorded, sources, marked
    )
    return nb, exported


def export_session(store: Store, key: str, out: str | Path, *, overwrite: bool = False) -> Exported:
    """Write session ``key``'s notebook to ``out`` (an ``.ipynb`` path)."""
    import nbformat  # noqa: PLC0415 - heavy (jsonschema, ~1.5 s): only reading or writing a notebook needs it

    path = Path(os.path.expanduser(str(out))).absolute()
    if path.suffix != ".ipynb":
        raise ScheduleError(f"The exported notebook is an .ipynb file, not {str(out)!r}.")
    if path.exists() and not overwrite:
        raise ScheduleError(f"{path} exists; choose another path or overwrite it (--force).")
    session = find_session(store, key)
    with store.connect() as con:
        turns = session_steps(con, session.id)
    nb, exported = build_notebook(session, turns)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.tmp")
    nbformat.write(nb, partial)
    os.replace(partial, path)
    exported.path = path
    return exported


# -- the headless run -------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """How the headless run of an exported notebook went."""

    passed: bool
    reason: str  # why not (empty when it passed)
    seconds: float | None
    same_output: int  # code cells that printed what they printed for the agent
    compared: int  # code cells compared
    output_path: str | None  # the executed notebook (kept only when it failed)

    def describe(self) -> str:
        if not self.passed:
            where = f" (the executed notebook: {self.output_path})" if self.output_path else ""
            return f"Verification FAILED: {self.reason}{where}"
        took = f" in {self.seconds:.1f} s" if self.seconds is not None else ""
        same = (
            f"; {self.same_output} of {self.compared} code cells printed what they printed for the agent"
            if self.compared
            else ""
        )
        return f"Verification passed: papermill ran it headless, with no model reachable{took}{same}."


def verify(exported: Exported, *, cwd: str | Path | None = None, timeout_s: float = VERIFY_TIMEOUT_S) -> Verdict:
    """Run the exported notebook with papermill as the scheduler would, the model out of reach.

    It runs the session's code: for a session that read untrusted content, only once the
    person said yes to :func:`consent_question` (the callers ask)."""
    if not 0 < timeout_s <= 24 * 3600:
        raise ScheduleError(f"The verifying run's timeout is 1 s to a day, not {timeout_s:g} s.")
    folder = Path(tempfile.mkdtemp(prefix="agent-kernel-verify-"))
    spec = RunSpec(
        run_id="verify", job_id="export", job_name=exported.session, attempt=1, run_dir=str(folder),
        input_path=str(exported.path), output_path=str(folder / "output.ipynb"),
        cwd=str(Path(cwd or Path.cwd()).absolute()), timeout_s=timeout_s, lease_s=timeout_s + 60,
        env=dict(NO_MODEL_ENV),
    )  # fmt: skip
    result = execute_run(spec.to_dict())
    seconds = (spec.dir.runner_report() or {}).get("seconds")
    if result["status"] != SUCCEEDED:
        cell = f"cell {result['error_cell']}: " if result.get("error_cell") is not None else ""
        reason = cell + str(result.get("error") or result.get("status"))[:2000]
        return Verdict(False, reason, seconds, 0, 0, spec.output_path)
    same, compared = _compare(Path(spec.output_path), exported.recorded)
    shutil.rmtree(folder, ignore_errors=True)
    return Verdict(True, "", seconds, same, compared, None)


def _compare(executed: Path, recorded: list[str]) -> tuple[int, int]:
    """How many of the executed notebook's code cells (after the parameters and the
    extension) printed what the session recorded (stdout, as kept: bounded)."""
    import nbformat  # noqa: PLC0415 - heavy (jsonschema, ~1.5 s): only reading or writing a notebook needs it

    nb = nbformat.read(executed, as_version=4)
    code = [
        c for c in nb.cells
        if c.cell_type == "code" and "agent_kernel" in c.metadata and "parameters" not in c.metadata.get("tags", [])
    ]  # fmt: skip
    same = 0
    for cell, before in zip(code, recorded):
        printed = "".join(
            o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream" and o.get("name") == "stdout"
        )
        same += printed.strip() == before.strip()
    return same, min(len(code), len(recorded))


def schedule(
    store: Store,
    exported: Exported,
    cron: str,
    *,
    name: str | None = None,
    timezone: str | None = None,
    cwd: str | Path | None = None,
) -> Job:
    """Create the job that runs the exported notebook on ``cron`` (the person's job)."""
    fields = JobFields(
        name=name or exported.path.stem, kind="notebook", notebook=str(exported.path), cron=cron,
        timezone=timezone, cwd=str(Path(cwd or Path.cwd()).absolute()), parameters={},
    )  # fmt: skip
    return SchedulerService(store).create(fields, by=Provenance.person(), created_by="export").job
