"""What the user's cells printed (stdout and stderr), by execution count.

The kernel's history keeps a cell's source and value but not what it printed, which is
often its real result (``print(df.describe())``, a warning, a progress line). ipykernel's
output streams let a hook see every ``stream`` message just before it is sent, with the
request it answers; a ``pre_run_cell`` callback says which execution count that request
runs. So nothing replaces ``sys.stdout``: the hook only reads the messages.

Only the head and the tail of each cell's text are kept (:data:`KEPT_CHARS` each), for
the newest :data:`KEPT_CELLS` cells. Hooks run on ipykernel's I/O thread; the callback on
the main thread; both only add to bounded dictionaries. In a plain IPython shell (no
ipykernel streams) nothing is recorded.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from IPython.core.interactiveshell import ExecutionInfo, InteractiveShell

KEPT_CHARS = 1_000  # of a cell's printed text: its head, and its tail
KEPT_CELLS = 200
AGENT_MAGICS = ("%agent", "%%agent")  # the agent's own cells: their text is the turn itself


class _HeadTail:
    """The head and tail of a text written in pieces, and its length."""

    def __init__(self) -> None:
        self.head = ""
        self.tail = ""
        self.total = 0

    def write(self, text: str) -> None:
        self.total += len(text)
        if len(self.head) < KEPT_CHARS:
            self.head += text[: KEPT_CHARS - len(self.head)]
        self.tail = (self.tail + text)[-KEPT_CHARS:]

    def text(self) -> str:
        if self.total <= KEPT_CHARS:
            return self.head
        if self.total <= 2 * KEPT_CHARS:
            return self.head + self.tail[KEPT_CHARS - (self.total - KEPT_CHARS) :]
        left_out = self.total - 2 * KEPT_CHARS
        return self.head + f"\n[... {left_out:,} characters not kept ...]\n" + self.tail


class PrintedLog:
    """Printed text per execution count, fed by ipykernel's stream hooks."""

    def __init__(self, shell: InteractiveShell) -> None:
        self._shell = shell
        self._counts: OrderedDict[str, int] = OrderedDict()  # request msg_id -> execution count
        self._texts: OrderedDict[int, _HeadTail] = OrderedDict()

    def text(self, count: int) -> str:
        """What the cell ``count`` printed (its head and tail when long), "" if nothing."""
        kept = self._texts.get(count)
        return kept.text() if kept is not None else ""

    def started(self, info: ExecutionInfo) -> None:
        """A ``pre_run_cell`` callback: the request now running is the user's next cell."""
        if not getattr(info, "store_history", False) or getattr(info, "silent", False):
            return  # the agent's nested runs, silent runs
        source = getattr(info, "raw_cell", "") or ""
        if source.lstrip().startswith(AGENT_MAGICS):
            return
        header = getattr(self._shell, "parent_header", None) or {}
        msg_id = (header.get("header") or {}).get("msg_id")
        count = getattr(self._shell, "execution_count", None)  # counted up already, before running
        if not isinstance(msg_id, str) or not isinstance(count, int):
            return
        self._counts[msg_id] = count - 1
        while len(self._counts) > KEPT_CELLS:
            self._counts.popitem(last=False)

    def hook(self, message: dict[str, Any]) -> dict[str, Any]:
        """An ipykernel stream hook: note the text, pass the message on unchanged."""
        try:
            msg_id = (message.get("parent_header") or {}).get("msg_id")
            count = self._counts.get(msg_id) if isinstance(msg_id, str) else None
            text = (message.get("content") or {}).get("text")
            if count is not None and isinstance(text, str):
                kept = self._texts.get(count)
                if kept is None:
                    kept = self._texts[count] = _HeadTail()
                    while len(self._texts) > KEPT_CELLS:
                        self._texts.popitem(last=False)
                kept.write(text)
        except Exception:  # noqa: BLE001, S110 - a hook must never stop the kernel's output
            pass
        return message


def install(shell: InteractiveShell) -> PrintedLog | None:
    """Start recording what the user's cells print (in ipykernel); the log, or None."""
    streams = [s for s in (sys.stdout, sys.stderr) if hasattr(s, "register_hook") and hasattr(s, "pub_thread")]
    events = getattr(shell, "events", None)
    if not streams or events is None:
        return None
    log = PrintedLog(shell)
    events.register("pre_run_cell", log.started)
    for stream in streams:
        # Hooks are per thread, and the stream sends from its I/O thread.
        stream.pub_thread.schedule(lambda stream=stream: stream.register_hook(log.hook))
    return log
