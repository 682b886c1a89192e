"""A front end's part in the widget protocol, for kernel tests without a browser.

It sends the kernel exactly the comm messages JupyterLab's widget manager sends for our
widgets, whose JavaScript reports everything with ``model.send`` (a ``custom`` message):
``{"type": "rendered"}`` when a widget renders, then its clicks and submissions. The browser tests check that the
real JavaScript sends them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@dataclass
class Widget:
    model_id: str
    kind: str  # the class name: FormWidget, ChoiceCard, TableWidget, StopButton
    state: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)  # custom messages from the kernel


def _kind(state: dict[str, Any]) -> str:
    """A widget's class name from its state ("" before the state is known)."""
    return str(state.get("_anywidget_id", state.get("_model_name", ""))).rsplit(".", 1)[-1]


class FrontEnd:
    """Watches a cell's iopub messages; acknowledges and answers widgets as a person would.

    ``answer[kind]`` is called with ``(front_end, widget)`` when a widget of that class is
    displayed (after its acknowledgement, unless ``renders`` is false).
    """

    def __init__(self, kernel: Any, *, renders: bool = True) -> None:
        self.kernel = kernel
        self.renders = renders
        self.widgets: dict[str, Widget] = {}
        self.shown: list[Widget] = []
        self.answer: dict[str, Callable[[FrontEnd, Widget], None]] = {}

    def hook(self, message: dict[str, Any], _kernel: Any = None) -> None:
        kind, content = message["msg_type"], message["content"]
        if kind == "comm_open" and content.get("target_name") == "jupyter.widget":
            state = content["data"]["state"]
            self.widgets[content["comm_id"]] = Widget(content["comm_id"], _kind(state), dict(state))
        elif kind == "comm_msg" and content["comm_id"] in self.widgets:
            widget = self.widgets[content["comm_id"]]
            data = content["data"]
            if data.get("method") == "update":
                widget.state.update(data.get("state", {}))
                if not widget.kind and _kind(widget.state):  # the state asked for below
                    widget.kind = _kind(widget.state)
                    self._show(widget)
            elif data.get("method") == "custom":
                widget.messages.append(data["content"])
        elif kind == "display_data" and WIDGET_VIEW in content.get("data", {}):
            model_id = content["data"][WIDGET_VIEW]["model_id"]
            widget = self.widgets.get(model_id)
            if widget is None:
                # Made before this front end watched (the warm-up makes the first turn's
                # Stop button ahead of it): ask for its state, as a widget manager does.
                self.widgets[model_id] = Widget(model_id, "", {})
                self.send(self.widgets[model_id], {"method": "request_state"})
                return
            self._show(widget)

    def _show(self, widget: Widget) -> None:
        self.shown.append(widget)
        if self.renders:
            self.custom(widget, type="rendered")
        action = self.answer.get(widget.kind)
        if action is not None:
            action(self, widget)

    # -- what a person's clicks send -----------------------------------------------------

    def send(self, widget: Widget, data: dict[str, Any]) -> None:
        client = self.kernel.client
        message = client.session.msg("comm_msg", {"comm_id": widget.model_id, "data": data})
        client.shell_channel.send(message)

    def custom(self, widget: Widget, **content: Any) -> None:
        self.send(widget, {"method": "custom", "content": content})

    def of_kind(self, kind: str) -> list[Widget]:
        return [w for w in self.shown if w.kind == kind]


def wait_for(predicate: Callable[[], Any], timeout: float = 5.0) -> Any:
    """Poll ``predicate`` until it returns something truthy (for state the kernel writes)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


class NotebookChannel:
    """The extension's end of the notebook channel (``agent_kernel.notebook`` comm), as
    jupyter_client messages: opens it, sends messages, collects what the kernel sends back.

    Feed :meth:`hook` the iopub messages (``Kernel.execute(..., on_message=channel.hook)``).
    """

    TARGET = "agent_kernel.notebook"

    def __init__(self, kernel: Any, client: str | None = None) -> None:
        """``client``: the kernel client session its messages name (another browser's);
        by default the one that runs the test's cells."""
        import uuid

        self.kernel = kernel
        self.client = client
        self.comm_id = uuid.uuid4().hex
        self.received: list[dict[str, Any]] = []
        self.closed_by_kernel = False
        self.cells: list[dict[str, Any]] | None = None  # answers ``read`` and ``edit`` requests when set
        self.edits: list[dict[str, Any]] = []  # the edits it applied
        self.refuse_edits: str | None = None  # refuses every edit with this reason when set
        self.rejects: bool = False  # the person rejects every ask-mode diff when set
        self.silent: bool = False  # never answers edits (a diff nobody looks at) when set

    def open(self, data: Any) -> None:
        content = {"comm_id": self.comm_id, "target_name": self.TARGET, "data": data}
        self._send("comm_open", content)

    def send(self, data: Any) -> None:
        self._send("comm_msg", {"comm_id": self.comm_id, "data": data})

    def close(self) -> None:
        self._send("comm_close", {"comm_id": self.comm_id, "data": {}})

    def _send(self, kind: str, content: dict[str, Any]) -> None:
        client = self.kernel.client
        message = client.session.msg(kind, content)
        if self.client is not None:
            message["header"]["session"] = self.client
        client.shell_channel.send(message)

    def hook(self, message: dict[str, Any], _kernel: Any = None) -> None:
        content = message["content"]
        if content.get("comm_id") != self.comm_id:
            return
        if message["msg_type"] == "comm_msg":
            self.received.append(content["data"])
            request = content["data"]
            if request.get("type") == "read" and self.cells is not None:
                self.send({"type": "cells", "id": request["id"], "cells": self.cells})
            elif request.get("type") == "edit" and self.silent:
                return
            elif request.get("type") == "edit" and request.get("ask") and self.rejects:
                answer = {"type": "edited", "id": request["id"], "error": "rejected", "rejected": True}
                self.send(answer)
            elif request.get("type") == "edit" and self.refuse_edits is not None:
                self.send({"type": "edited", "id": request["id"], "error": self.refuse_edits})
            elif request.get("type") == "edit" and self.cells is not None:
                self.edits.append(request)
                made = f"new-{len(self.edits)}" if request["op"] == "insert" else request["cell"]
                self.send({"type": "edited", "id": request["id"], "cell": made})
        elif message["msg_type"] == "comm_close":
            self.closed_by_kernel = True

    def types(self) -> list[str]:
        return [str(m.get("type")) for m in self.received]

    def requests(self) -> list[dict[str, Any]]:
        """What the kernel asked of this front end (its turn announcements left out)."""
        return [m for m in self.received if m.get("type") != "turn_ended"]
