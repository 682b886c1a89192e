"""The notebooks in ``notebooks/``, executed for the docs the way ``make demo`` runs them.

Before Sphinx reads its sources, each notebook is run headless with papermill against the
offline scripted model (:func:`agent_kernel.demo.run_demo`), in a temporary working
directory and with a DuckDB file of its own, into ``docs/examples/`` (git-ignored), where
myst-nb renders it with its outputs. The answers are the scripted model's, and say so.
A notebook is executed again only when it or the package's code changed, so a second
``make docs`` costs nothing here.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.util import logging

logger = logging.getLogger(__name__)

NOTEBOOKS = ("quickstart.ipynb", "daily_digest.ipynb")
# Variables of the developer's environment that would make a run talk to Claude or use
# their agent's data; the run sets its own.
_ISOLATED = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "AGENT_KERNEL_DB",
    "AGENT_KERNEL_HOME",
    "AGENT_KERNEL_MODEL",
    "AGENT_KERNEL_SECRET_ENV",
)


def fingerprint(notebook: Path, package: Path) -> str:
    """What the executed notebook depends on: its own bytes and the package's Python code."""
    digest = hashlib.sha256(notebook.read_bytes())
    for source in sorted(package.rglob("*.py")):
        digest.update(str(source.relative_to(package)).encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


@contextmanager
def _own_environment(home: Path) -> Iterator[None]:
    saved = dict(os.environ)
    for name in _ISOLATED:
        os.environ.pop(name, None)
    os.environ["AGENT_KERNEL_HOME"] = str(home)
    os.environ["AGENT_KERNEL_DB"] = str(home / "agent.duckdb")
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def execute(notebook: Path, output: Path) -> None:
    from agent_kernel.demo import run_demo

    with tempfile.TemporaryDirectory(prefix="agent-kernel-docs-") as scratch:
        home = Path(scratch)
        with _own_environment(home / "home"):
            run_demo(notebook, output, workdir=home / "work", scripted=True)
    drop_blank_outputs(output)


def drop_blank_outputs(path: Path) -> None:
    """Remove displays that show nothing (an empty ``text/plain``), which a page would draw as an empty box."""
    import nbformat

    executed = nbformat.read(path, as_version=4)
    for cell in executed.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not _blank(o)]
    nbformat.write(executed, path)


def _blank(output: Any) -> bool:
    data = output.get("data")
    return (
        output.get("output_type") == "display_data"
        and data is not None
        and set(data) == {"text/plain"}
        and not data["text/plain"].strip()
    )


def execute_notebooks(app: Sphinx, config: Config) -> None:
    repo = Path(app.srcdir).parent
    target = Path(app.srcdir) / "examples"
    target.mkdir(exist_ok=True)
    for name in NOTEBOOKS:
        notebook = repo / "notebooks" / name
        output = target / name
        stamp = target / f".{name}.sha256"
        key = fingerprint(notebook, repo / "agent_kernel")
        if output.exists() and stamp.exists() and stamp.read_text() == key:
            continue
        logger.info("executing notebooks/%s with the scripted model", name)
        execute(notebook, output)
        stamp.write_text(key)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("config-inited", execute_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
