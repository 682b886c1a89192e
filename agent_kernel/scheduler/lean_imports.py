"""Imports the scheduler's own processes refuse because nothing they do uses them.

nbformat (which papermill and the scheduler use to read and write notebooks) validates
with jsonschema, and jsonschema imports every format checker it finds installed. One of
them, ``rfc3987_syntax`` (the ``iri`` format, pulled in by ``jsonschema[format-nongpl]``),
builds ~35 Earley parsers when imported: 1.5-2 s of CPU in every process that reads a
notebook. No notebook or Jupyter schema uses that format; refused, jsonschema simply
leaves the format unchecked. Only the processes agent-kernel starts itself (the
``agent-kernel`` command, a run's runner) call this, never a shared one like the server.
"""

from __future__ import annotations

import sys

__all__ = ["refuse_unused_slow_imports"]

UNUSED_SLOW_IMPORTS = ("rfc3987_syntax",)


def refuse_unused_slow_imports() -> None:
    """Make ``import rfc3987_syntax`` fail in this process (unless it is imported already)."""
    for name in UNUSED_SLOW_IMPORTS:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None: the import fails
