"""Notebooks for tests: building one on disk, reading back what its cells printed."""

from __future__ import annotations


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
