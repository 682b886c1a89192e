"""The Stop button shown while a turn runs.

A click tells the kernel through the widget's comm, which the turn receives whenever the
event loop is free (the model streaming, code awaiting), and answers "stopped" from that
loop. Synchronous code the model is running holds the loop; so when no answer comes
within a second, and the front end exposes the kernel (JupyterLab, Notebook 7), the click
also interrupts the kernel. An interrupt sent at once would arrive after a turn that
stopped by its comm message had ended, and stop whatever the cell did next.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import traitlets
from IPython import get_ipython

from agent_kernel.display.presence import AckWidget
from agent_kernel.display.scripts import widget_script

_JS = Path(__file__).with_name("js")

# How long the button waits for the turn's answer before it interrupts the kernel.
INTERRUPT_AFTER_MS = 1000

# The button's script, after the delay it waits for.
_ESM = widget_script("stop.js", constants={"INTERRUPT_AFTER_MS": INTERRUPT_AFTER_MS})

_CSS = """
.agent-kernel-stop {
  font: inherit; font-size: 0.85em; padding: 1px 10px; border-radius: 4px; cursor: pointer;
  border: 1px solid #cf222e; color: #cf222e; background: transparent;
}
.agent-kernel-stop:disabled { opacity: 0.6; cursor: default; }
"""


class StopButton(AckWidget):
    """A button that stops the running turn (its rendering also tells the kernel a person is there)."""

    _esm = _ESM
    _css = _CSS
    clicked = traitlets.Bool(False).tag(sync=True)

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the turn's event loop when Stop is clicked, then tell the
        button (which otherwise interrupts the kernel; see the module's docstring)."""

        def stop() -> None:
            callback()
            if self.comm is not None:
                self.send({"type": "stopped"})

        def on_message(_widget: Any, content: Any, _buffers: Any) -> None:
            if isinstance(content, dict) and content.get("type") == "stop":
                self._call_soon(stop)

        self.on_msg(on_message)
        self.observe(lambda change: self._call_soon(callback) if change["new"] else None, names=["clicked"])

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # Only the widget: a client that draws no widgets has nothing to click (its way to
        # stop is interrupting the kernel), so it shows nothing rather than the object's repr.
        bundle = super()._repr_mimebundle_(**kwargs)
        assert bundle is not None, "a widget with a view has a bundle"
        data, metadata = bundle
        data["text/plain"] = ""
        return data, metadata


_PREPARED: list[StopButton] = []  # made ahead for the next turn


def prepare() -> None:
    """Make the next turn's Stop button ahead of it: the warm-up does for the first turn,
    after ``%load_ext``, and each turn for the next while its last saves go out.

    Its model reaches the front end now, so the widget code a front end loads for the
    first widget of a page (a few hundred milliseconds in JupyterLab) is loaded before the
    turn, and the turn's Stop button shows at once, without the ~2 ms of making it.
    """
    if getattr(get_ipython(), "kernel", None) is None or _PREPARED:
        return
    _PREPARED.append(StopButton())


def stop_button() -> StopButton:
    """A Stop button for the turn starting on the running loop: the prepared one, else a new one."""
    while _PREPARED:
        button = _PREPARED.pop()
        if button.comm is not None:
            button.adopt()
            return button
    return StopButton()
