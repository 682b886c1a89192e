"""The Stop button shown while a turn runs.

A click does two things. It tells the kernel through the widget's comm, which the turn
receives whenever the event loop is free (the model streaming, code awaiting). And where
the front end exposes the kernel (JupyterLab, Notebook 7), it interrupts the kernel, so
the click also stops synchronous code the model is running, which holds the event loop
and would otherwise only see the comm message after it finished.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import traitlets

from agent_kernel.display.presence import ACK_JS, AckWidget

_ESM = ACK_JS + """
function render({ model, el }) {
  const button = document.createElement("button");
  button.className = "agent-kernel-stop";
  button.textContent = "\u25A0 Stop";
  button.title = "Stop this agent turn";
  button.addEventListener("click", () => {
    if (button.disabled) return;
    button.disabled = true;
    button.textContent = "Stopping\u2026";
    model.set("clicked", true);
    model.save_changes();
    model.send({ type: "stop" });
    const kernel = model.widget_manager && model.widget_manager.kernel;
    if (kernel && typeof kernel.interrupt === "function") {
      kernel.interrupt().catch(() => {});
    }
  });
  el.appendChild(button);
  acknowledge(model);
}
export default { render };
"""

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
        def on_message(_widget: Any, content: Any, _buffers: Any) -> None:
            if isinstance(content, dict) and content.get("type") == "stop":
                callback()

        self.on_msg(on_message)
        self.observe(lambda change: callback() if change["new"] else None, names=["clicked"])

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # Only the widget: a client that draws no widgets has nothing to click (its way to
        # stop is interrupting the kernel), so it shows nothing rather than the object's repr.
        bundle = super()._repr_mimebundle_(**kwargs)
        assert bundle is not None, "a widget with a view has a bundle"
        data, metadata = bundle
        data["text/plain"] = ""
        return data, metadata
