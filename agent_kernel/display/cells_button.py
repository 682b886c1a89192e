"""The "Insert as cells" button under a finished turn's footer.

Shown only while a notebook front end with the extension is attached (the caller checks;
headless there is nothing to click and ``%agent_cells`` writes the file instead). A click
tells the kernel through the widget's comm (``{"type": "insert"}``); the kernel runs the
action it was given (what ``%agent_cells TURN`` does for this turn) on its event loop and
answers ``{"type": "done" | "failed", "text": ...}``, which the button shows as plain
text beside it. The button is then disabled: a second click would insert the cells twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agent_kernel.display.fallback import with_fallback_view
from agent_kernel.display.presence import AckWidget
from agent_kernel.display.scripts import widget_script

_JS = Path(__file__).with_name("js")
STATIC_HTML = (
    '<div style="color:#57606a;font-size:0.85em">'
    "Insert as cells: <code>%agent_cells</code> with the turn's number, in a running kernel.</div>"
)
MAX_ANSWER_CHARS = 500

_ESM = widget_script("insert_cells.js")

_CSS = """
.agent-kernel-insert-cells {
  font: inherit; font-size: 0.85em; padding: 1px 10px; border-radius: 4px; cursor: pointer;
  border: 1px solid #0969da; color: #0969da; background: transparent;
}
.agent-kernel-insert-cells:disabled { opacity: 0.6; cursor: default; }
.agent-kernel-insert-cells-said { margin-left: 8px; font-size: 0.85em; color: #57606a; }
"""


class InsertCellsButton(AckWidget):
    """A button that inserts a finished turn as cells through ``action``.

    ``action`` is awaited on the kernel's event loop; it returns the line to show, or
    raises ``ValueError`` whose text is shown instead (the button can then be clicked again).
    """

    _esm = _ESM
    _css = _CSS

    def __init__(self, action: Callable[[], Awaitable[str]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._action = action
        self._busy = False
        self.tasks: set[asyncio.Future[None]] = set()
        self.on_msg(self._on_click)

    def _on_click(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "insert":
            self._call_soon(self._start)

    def _start(self) -> None:
        if self._busy:
            return
        self._busy = True
        task = asyncio.ensure_future(self._run())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(self) -> None:
        try:
            text = await self._action()
            kind = "done"
        except ValueError as refusal:
            text, kind = str(refusal), "failed"
        except Exception as exc:  # noqa: BLE001 - the button says it failed, the kernel goes on
            text, kind = f"Could not insert the cells: {type(exc).__name__}: {exc}", "failed"
        finally:
            self._busy = False
        if self.comm is not None:
            self.send({"type": kind, "text": text[:MAX_ANSWER_CHARS]})

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # The widget, and for a notebook opened without its kernel a line saying what the
        # button did; a client that draws no widgets shows nothing rather than the repr.
        bundle = super()._repr_mimebundle_(**kwargs)
        assert bundle is not None, "a widget with a view has a bundle"
        data, metadata = bundle
        data["text/plain"] = ""
        data["text/html"] = STATIC_HTML
        return with_fallback_view(data), metadata
