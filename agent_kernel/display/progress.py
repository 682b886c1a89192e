"""A progress bar that a saved notebook keeps as it ended.

tqdm draws the bar; in a kernel its lines go to one display that is updated in place,
rather than to tqdm's widget, whose saved form is the bar as it started ("0/20") wherever
widget state is not saved: papermill, scheduled runs, a notebook reopened later. Outside a
kernel the bar goes to stderr as usual.
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm

__all__ = ["progress_bar"]


class _DisplayFile:
    """A file for tqdm: each line it draws replaces the one before in a single display."""

    encoding = "utf-8"  # tqdm draws its bar with block characters, not "#"

    def __init__(self) -> None:
        self._handle: Any = None
        self._shown = ""

    def write(self, text: str) -> int:
        lines = [part.strip() for part in text.replace("\r", "\n").split("\n")]
        line = next((part for part in reversed(lines) if part), "")
        if line and line != self._shown:
            self._shown = line
            self._show({"text/plain": line})
        return len(text)

    def flush(self) -> None:
        pass

    def _show(self, bundle: dict[str, str]) -> None:
        from IPython.display import display  # noqa: PLC0415 - IPython only in a kernel: a script's bar goes to stderr

        if self._handle is None:
            self._handle = display(bundle, raw=True, display_id=True)
        else:
            self._handle.update(bundle, raw=True)


def progress_bar(total: int, description: str, unit: str) -> Any:
    """A tqdm bar over ``total`` items: an updated display in a kernel, else on stderr."""
    shell: Any = None
    if "IPython" in sys.modules:
        from IPython import get_ipython  # noqa: PLC0415 - IPython only in a kernel: a script's bar goes to stderr

        shell = get_ipython()
    if getattr(shell, "kernel", None) is not None:
        # A fixed width (the display has no terminal to measure); redrawn at most 4 times a
        # second, so a thousand calls do not become a thousand display updates.
        return tqdm(total=total, desc=description, unit=unit, file=_DisplayFile(), ncols=90, mininterval=0.25)
    return tqdm(total=total, desc=description, unit=unit, file=sys.stderr, dynamic_ncols=True)
