"""What changed between two runs of a job: parameters, each cell's outputs, errors, durations.

Both runs' output notebooks are read as papermill wrote them; cells are matched by their
place among the code cells, skipping the cell papermill injects for parameters (whose
values are compared on their own). A cell's output is its text (streams, ``text/plain``)
plus a short hash of each image, so a changed chart shows as a changed hash. Text changes
come as a bounded unified diff. Nothing here calls a model: ``explain.py`` reads this.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agent_kernel.scheduler import ScheduleError
from agent_kernel.scheduler.runs import Runs

if TYPE_CHECKING:
    import duckdb
    from nbformat import NotebookNode

    from agent_kernel.scheduler.records import CellChangeJson, ComparisonJson
    from agent_kernel.scheduler.runs import Run

__all__ = ["CellChange", "Comparison", "compare", "runs_compared"]

DIFF_LINES = 40  # of one cell's text diff
TEXT_CHARS = 20_000  # of one cell's output text, before diffing
SLOWER = 1.5  # a cell this many times slower (and 1 s or more) is reported
MIN_SECONDS = 1.0


@dataclass(frozen=True)
class CellChange:
    """One code cell whose outcome differs between the runs."""

    index: int  # among the notebook's code cells (papermill's injected cell not counted), from 1
    source: str  # its first line
    kinds: list[str]  # "output", "new error", "error gone", "images", "slower", "faster", "source"
    diff: str = ""  # the unified diff of its text output
    error: str = ""  # the error it raised in the later run
    seconds: tuple[float | None, float | None] = (None, None)


@dataclass
class Comparison:
    """Two runs of a job compared (``before`` the earlier, ``after`` the later)."""

    before: str
    after: str
    parameters: dict[str, tuple[object, object]] = field(default_factory=dict)  # name: (before, after)
    changes: list[CellChange] = field(default_factory=list)
    first_error: CellChange | None = None  # the first cell that raised in the later run
    seconds: tuple[float | None, float | None] = (None, None)
    cells: tuple[int, int] = (0, 0)

    def text(self) -> str:
        """The comparison as a person (or the explaining model) reads it."""
        lines = [f"Run {self.after} compared with run {self.before}."]
        for name, (old, new) in self.parameters.items():
            lines.append(f"Parameter {name}: {old!r} -> {new!r}")
        if self.seconds != (None, None):
            lines.append(f"Duration: {_secs(self.seconds[0])} -> {_secs(self.seconds[1])}")
        if self.cells[0] != self.cells[1]:
            lines.append(f"Code cells: {self.cells[0]} -> {self.cells[1]}")
        if self.first_error is not None:
            lines.append(f"First failing cell: [{self.first_error.index}] {self.first_error.source}")
            lines.append(f"  {self.first_error.error}")
        if not self.changes:
            lines.append("No cell's output changed.")
        for change in self.changes:
            lines.append(f"Cell [{change.index}] {change.source}: {', '.join(change.kinds)}")
            if "slower" in change.kinds or "faster" in change.kinds:
                lines.append(f"  time {_secs(change.seconds[0])} -> {_secs(change.seconds[1])}")
            if change.diff:
                lines.extend("  " + line for line in change.diff.splitlines())
        return "\n".join(lines)

    def as_json(self) -> ComparisonJson:
        return {
            "before": self.before,
            "after": self.after,
            "parameters": {k: {"before": a, "after": b} for k, (a, b) in self.parameters.items()},
            "seconds": {"before": self.seconds[0], "after": self.seconds[1]},
            "first_error": _change_json(self.first_error) if self.first_error else None,
            "changes": [_change_json(c) for c in self.changes],
        }


@dataclass(frozen=True)
class _Cell:
    source: str
    text: str
    images: tuple[str, ...]
    error: str
    seconds: float | None


def compare(before: str | Path, after: str | Path, *, before_id: str = "before", after_id: str = "after") -> Comparison:
    """Compare two output notebooks of one job (``before`` the earlier run's)."""
    old, new = _read(before), _read(after)
    comparison = Comparison(before_id, after_id)
    old_parameters, new_parameters = _parameters(old), _parameters(new)
    for name in sorted(set(old_parameters) | set(new_parameters)):
        if old_parameters.get(name) != new_parameters.get(name):
            comparison.parameters[name] = (old_parameters.get(name), new_parameters.get(name))
    comparison.seconds = (_duration(old), _duration(new))
    old_cells, new_cells = _cells(old), _cells(new)
    comparison.cells = (len(old_cells), len(new_cells))
    for index, cell in enumerate(new_cells, 1):
        earlier = old_cells[index - 1] if index <= len(old_cells) else None
        change = _change(index, earlier, cell)
        if change is not None:
            comparison.changes.append(change)
        if cell.error and comparison.first_error is None:
            comparison.first_error = change or CellChange(index, _first_line(cell.source), ["error"], error=cell.error)
    return comparison


def runs_compared(con: duckdb.DuckDBPyConnection, run: Run, before: Run | None = None) -> Comparison:
    """``run`` compared with ``before`` (default: its job's last successful run before it,
    else the run before it), both by their output notebooks."""
    if before is None:
        earlier = [r for r in Runs(con).list(job_id=run.job_id, limit=500)
                   if r.created_at < run.created_at and r.output_path]  # fmt: skip
        before = next((r for r in earlier if r.status == "SUCCEEDED"), earlier[0] if earlier else None)
        if before is None:
            raise ScheduleError(f"Run {run.id} is its job's first run: there is nothing to compare it with.")
    if before.job_id != run.job_id:
        raise ScheduleError(f"Runs {before.id} and {run.id} belong to different jobs.")
    for either in (before, run):
        if not either.output_path or not Path(either.output_path).exists():
            raise ScheduleError(f"Run {either.id} has no output notebook to compare.")
    assert before.output_path is not None and run.output_path is not None
    return compare(before.output_path, run.output_path, before_id=before.id, after_id=run.id)


def _change(index: int, earlier: _Cell | None, cell: _Cell) -> CellChange | None:
    kinds: list[str] = []
    if earlier is None:
        return CellChange(index, _first_line(cell.source), ["new cell"], error=cell.error, seconds=(None, cell.seconds))
    if earlier.source != cell.source:
        kinds.append("source")
    if cell.error and not earlier.error:
        kinds.append("new error")
    elif earlier.error and not cell.error:
        kinds.append("error gone")
    diff = ""
    if earlier.text != cell.text:
        kinds.append("output")
        lines = list(
            difflib.unified_diff(earlier.text.splitlines(), cell.text.splitlines(), "before", "after", lineterm="", n=1)
        )
        diff = "\n".join(lines[2 : 2 + DIFF_LINES]) + ("\n..." if len(lines) > DIFF_LINES + 2 else "")
    if earlier.images != cell.images:
        kinds.append("images")
    a, b = earlier.seconds, cell.seconds
    if a is not None and b is not None and max(a, b) >= MIN_SECONDS:
        if b >= a * SLOWER:
            kinds.append("slower")
        elif a >= b * SLOWER:
            kinds.append("faster")
    if not kinds:
        return None
    return CellChange(index, _first_line(cell.source), kinds, diff, cell.error, (a, b))


def _read(path: str | Path) -> NotebookNode:
    import nbformat  # noqa: PLC0415 - heavy (jsonschema, ~1.5 s): only reading or writing a notebook needs it

    try:
        notebook: NotebookNode = nbformat.read(str(path), as_version=4)
        return notebook
    except FileNotFoundError:
        raise ScheduleError(f"No output notebook at {path}.") from None
    except (OSError, ValueError) as exc:
        raise ScheduleError(f"Cannot read the output notebook {path}: {exc}.") from None


def _parameters(notebook: NotebookNode) -> dict[str, object]:
    """The run's parameters: the defaults of the cell tagged ``parameters`` (its literal
    assignments, read with ``ast``), then the values papermill injected."""
    values: dict[str, object] = {}
    for cell in notebook.cells:
        if cell.cell_type == "code" and "parameters" in (cell.metadata.get("tags") or []):
            try:
                tree = ast.parse(cell.source)
            except SyntaxError:
                break
            for node in tree.body:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    try:
                        values[node.targets[0].id] = ast.literal_eval(node.value)
                    except ValueError:
                        continue
            break
    papermill = notebook.metadata.get("papermill") or {}
    values.update(papermill.get("default_parameters") or {})
    values.update(papermill.get("parameters") or {})
    return values


def _duration(notebook: NotebookNode) -> float | None:
    value = (notebook.metadata.get("papermill") or {}).get("duration")
    return float(value) if isinstance(value, (int, float)) else None


def _cells(notebook: NotebookNode) -> list[_Cell]:
    cells = []
    for cell in notebook.cells:
        if cell.cell_type != "code" or "injected-parameters" in (cell.metadata.get("tags") or []):
            continue
        texts, images, error = [], [], ""
        for output in cell.get("outputs", []):
            kind = output.get("output_type")
            if kind == "stream":
                texts.append(str(output.get("text", "")))
            elif kind == "error":
                error = f"{output.get('ename', '')}: {output.get('evalue', '')}"[:1000]
            elif kind in ("execute_result", "display_data"):
                data = output.get("data", {})
                for mime in ("image/png", "image/jpeg", "image/svg+xml"):
                    if mime in data:
                        images.append(hashlib.sha256(str(data[mime]).encode()).hexdigest()[:12])
                if "text/plain" in data and not any(m.startswith("image/") for m in data):
                    texts.append(str(data["text/plain"]) + "\n")
        seconds = (cell.metadata.get("papermill") or {}).get("duration")
        cells.append(_Cell(cell.source, "".join(texts)[:TEXT_CHARS], tuple(images), error,
                           float(seconds) if isinstance(seconds, (int, float)) else None))  # fmt: skip
    return cells


def _first_line(source: str) -> str:
    line = next((line for line in source.splitlines() if line.strip()), "")
    return line.strip()[:80]


def _secs(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f} s"


def _change_json(change: CellChange) -> CellChangeJson:
    return {
        "cell": change.index, "source": change.source, "kinds": change.kinds, "diff": change.diff,
        "error": change.error, "seconds": {"before": change.seconds[0], "after": change.seconds[1]},
    }  # fmt: skip
