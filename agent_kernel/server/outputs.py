"""A run's output notebook as a static page, to read without copying it or starting a kernel.

The page is nbconvert's HTML of the notebook as the run left it (outputs included; a
widget shows the static rendering saved with it). What a run printed is not trusted: the
panel shows the page in an iframe sandboxed without scripts, and the page carries a
Content-Security-Policy that allows no script and no request either, should it be opened
some other way.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agent_kernel.server.job_request import BadRequest

if TYPE_CHECKING:
    from agent_kernel.scheduler.runs import Run

__all__ = ["MAX_OUTPUT_BYTES", "PAGE_POLICY", "output_page"]

MAX_OUTPUT_BYTES = 50 * 1024 * 1024  # larger notebooks are opened as a copy instead
# For the page itself: inline styles and embedded images only.
PAGE_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:"


def output_page(run: Run) -> str:
    """The HTML page of ``run``'s output notebook; :class:`BadRequest` when there is none to show."""
    path = Path(run.output_path) if run.output_path else None
    if path is None or not path.is_file():
        raise BadRequest(f"Run {run.id!r} left no output notebook ({run.status}).")
    size = path.stat().st_size
    if size > MAX_OUTPUT_BYTES:
        raise BadRequest(
            f"The output notebook is {size / 1024 / 1024:,.0f} MB, too large to show here "
            f"(at most {MAX_OUTPUT_BYTES // 1024 // 1024} MB): open a copy to edit instead."
        )
    import nbformat  # noqa: PLC0415 - heavy (jsonschema, ~1.5 s): only showing a run's output needs it
    from nbconvert import HTMLExporter  # noqa: PLC0415 - nbconvert (heavy): only showing a run's output needs it

    try:
        notebook = nbformat.read(path, as_version=4)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same answer
        raise BadRequest(f"The output notebook {path.name} cannot be read: {exc}") from None
    exporter = HTMLExporter(template_name="lab", exclude_anchor_links=True)  # type: ignore[no-untyped-call]
    body, _ = exporter.from_notebook_node(notebook)
    policy = f'<meta http-equiv="Content-Security-Policy" content="{PAGE_POLICY}">'
    return body.replace("<head>", "<head>\n" + policy, 1)
