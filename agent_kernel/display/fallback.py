"""The view of a widget output that still shows something once its kernel is gone.

JupyterLab renders the widget view ahead of every other type in an output, and says
"model not found" when the notebook is reopened without the kernel that made the widget.
The agent-kernel extension renders the same view under its own type first: the output's
static text/html until the widget is drawn, and in its place when it cannot be.
"""

from __future__ import annotations

Bundle = dict[str, object]

WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
# The same view, under a type the agent-kernel JupyterLab extension renders ahead of the
# widget view: the bundle's static text/html until the widget is drawn, and instead of
# it when the widget's kernel is gone (where the plain view says "model not found").
WIDGET_WITH_FALLBACK_MIME = "application/vnd.agent-kernel.widget-view+json"


def with_fallback_view(data: Bundle) -> Bundle:
    """A widget's bundle (which carries its static text/html) with the view the extension
    renders, static first."""
    return {**data, WIDGET_WITH_FALLBACK_MIME: data[WIDGET_VIEW_MIME]}
