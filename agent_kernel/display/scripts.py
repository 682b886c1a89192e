"""A widget's ES module, assembled from the script files in ``display/js/``.

anywidget takes one module per widget (``_esm``). What several widgets share lives in files
of its own, put before a widget's own script: ``ack.js`` starts every one (the front end
tells the kernel it drew the widget, :mod:`agent_kernel.display.presence`), ``attention.js``
the cards that wait for the person (their live-region announcement and focus). The files
stay plain scripts, so ``tsc`` checks each of them (labextension's ``tsconfig.widgets.json``)
and their shared functions are names every widget's own script sees.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path

__all__ = ["SCRIPTS", "widget_script"]

SCRIPTS = Path(__file__).with_name("js")
ACK = "ack.js"


@functools.cache
def _read(name: str) -> str:
    text = (SCRIPTS / name).read_text(encoding="utf-8")
    return text if text.endswith("\n") else text + "\n"


def widget_script(own: str, *shared: str, constants: Mapping[str, int | float | str] | None = None) -> str:
    """The module for a widget whose own script is ``js/<own>``: ``ack.js``, then the
    ``shared`` files in order, then each of ``constants`` as a ``const`` (a value the Python
    decides, e.g. a delay), then the widget's script."""
    parts = [_read(ACK), *(_read(name) for name in shared)]
    parts += [f"const {name} = {json.dumps(value)};\n" for name, value in (constants or {}).items()]
    parts.append(_read(own))
    return "".join(parts)
