"""Notebooks for tests: building one on disk, reading back what its cells printed."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat import NotebookNode

PYTHON3 = {"name": "python3", "display_name": "Python 3", "language": "python"}


def notebook(*cells: str | NotebookNode, parameters: str | None = None, kernelspec: bool = True) -> NotebookNode:
    """A notebook of these cells: a string is a code cell, a node (a markdown cell, a cell with
    outputs, an id or metadata) goes in as it is. ``parameters``: a code cell tagged
    ``parameters`` first (papermill's). ``kernelspec``: the python3 kernel in its metadata."""
    nb = nbformat.v4.new_notebook()
    if kernelspec:
        nb.metadata["kernelspec"] = dict(PYTHON3)
    if parameters is not None:
        nb.cells.append(nbformat.v4.new_code_cell(parameters, metadata={"tags": ["parameters"]}))
    nb.cells += [nbformat.v4.new_code_cell(c) if isinstance(c, str) else c for c in cells]
    return nb


def write_notebook(
    path: Path, *cells: str | NotebookNode, parameters: str | None = None, kernelspec: bool = True
) -> Path:
    """:func:`notebook` written to ``path`` (its folder made if needed); the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook(*cells, parameters=parameters, kernelspec=kernelspec), path)
    return path


def outputs_text(cell) -> str:
    """What a run notebook's cell printed and displayed, as one text."""
    parts = []
    for output in cell.get("outputs", []):
        parts.append(output.get("text", ""))
        data = output.get("data", {})
        parts.append(data.get("text/markdown") or data.get("text/plain", ""))
    return "\n".join(parts)


# Code that draws thirty inline figures: more images than one tool result keeps.
THIRTY = """
import matplotlib
matplotlib.use("module://matplotlib_inline.backend_inline")
import matplotlib.pyplot as plt
for i in range(30):
    plt.figure(figsize=(3, 2), dpi=50)
    plt.plot([0, i])
    plt.show()
"""
