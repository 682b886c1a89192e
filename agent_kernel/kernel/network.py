"""Which of the user's cells reached the network, seen by Python's own audit events.

What a cell that fetched a page returns or prints may carry instructions, so the agent
reads it as untrusted content. Guessing from the cell's source misses a helper defined
elsewhere (``load_report()``) and names nobody can list; every Python connection instead
raises the ``socket.connect`` audit event (``requests``, ``httpx``, ``urllib``,
``aiohttp``, a database driver written in Python), with the address. So an audit hook
notes the execution count of the user's cell running when a connection to anything but
this machine is made.

Audit hooks cannot be removed and run for every audited event in the process, so there is
one per process, and it compares the event's name first and returns. A connection made by
a thread the cell started after the cell ended (or during the next cell), or by C code that bypasses Python's
sockets, is not seen; the source check in :func:`agent_kernel.kernel.cells.fetches`
still applies beside it.
"""

from __future__ import annotations

import ipaddress
import sys
from collections import OrderedDict
from typing import TYPE_CHECKING

from agent_kernel.kernel.printed import AGENT_MAGICS

if TYPE_CHECKING:
    from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult, InteractiveShell

KEPT_CELLS = 1_000
_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


class NetworkLog:
    """The execution counts of the user's cells that connected beyond this machine."""

    def __init__(self, shell: InteractiveShell) -> None:
        self._shell = shell
        self._running: int | None = None  # the user's cell running now, if any
        self._reached: OrderedDict[int, None] = OrderedDict()

    def reached(self, count: int) -> bool:
        return count in self._reached

    def started(self, info: ExecutionInfo) -> None:
        """A ``pre_run_cell`` callback: a user's cell (not the agent's nested runs) starts."""
        if not getattr(info, "store_history", False) or getattr(info, "silent", False):
            return
        if (getattr(info, "raw_cell", "") or "").lstrip().startswith(AGENT_MAGICS):
            self._running = None  # the agent's own requests are not the cell's content
            return
        count = getattr(self._shell, "execution_count", None)
        self._running = count - 1 if isinstance(count, int) else None  # counted up already

    def finished(self, result: ExecutionResult) -> None:
        """A ``post_run_cell`` callback: no user's cell runs any more."""
        info = getattr(result, "info", None)
        if info is not None and getattr(info, "store_history", False):
            self._running = None

    def audit(self, event: str, args: tuple[object, ...]) -> None:
        if event != "socket.connect":
            return
        count = self._running
        if count is None or count in self._reached:
            return
        try:
            address = args[1]
            host = address[0] if isinstance(address, tuple) else address
        except (IndexError, TypeError):
            return
        if _is_local(host):
            return
        self._reached[count] = None
        while len(self._reached) > KEPT_CELLS:
            self._reached.popitem(last=False)


def _is_local(host: object) -> bool:
    """Whether ``host`` is this machine (loopback) or a Unix socket path."""
    if isinstance(host, (bytes, bytearray)) or (isinstance(host, str) and host.startswith("/")):
        return True  # AF_UNIX
    if not isinstance(host, str):
        return False
    if host.lower() in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


_INSTALLED: dict[int, NetworkLog] = {}


def install(shell: InteractiveShell) -> NetworkLog | None:
    """Start noting which of ``shell``'s cells reach the network (once per process)."""
    events = getattr(shell, "events", None)
    if events is None:
        return None
    if _INSTALLED:
        return None  # the process's one hook watches another shell
    log = NetworkLog(shell)
    events.register("pre_run_cell", log.started)
    events.register("post_run_cell", log.finished)
    sys.addaudithook(log.audit)
    _INSTALLED[id(shell)] = log
    return log
