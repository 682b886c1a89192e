"""Standing grants: what an unattended run may do after untrusted content, said in advance.

With nobody to approve (papermill, a scheduled run, CI), a session that read untrusted
content runs no writing action and reaches no new host: each is refused with a message
the model can act on. A job can carry grants the person set when creating or enabling it
(``agent-kernel jobs add --allow-host HOST --allow-after-untrusted TOOL``, the jobs
manager): the hosts its runs may reach and the writing tools they may run after untrusted
content. The scheduler hands them to the run's kernel in ``AGENT_KERNEL_GRANTS`` (JSON);
:func:`standing` reads them there. They widen nothing when a person is present: the
person is asked as usual.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypedDict

__all__ = ["ENV", "RUN_ID", "GrantsJson", "StandingGrants", "host_name", "of", "parse", "standing", "tool_name"]

ENV = "AGENT_KERNEL_GRANTS"
RUN_ID = "AGENT_KERNEL_RUN_ID"  # set by the scheduler in every run's environment
ENVIRON_BYTES = 1 << 20  # at most this much of /proc/self/environ is read
MOST_ITEMS = 100  # hosts or tools one job may name
ITEM_CHARS = 253  # a DNS name's longest spelling
_HOST = re.compile(r"[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?")
_TOOL = re.compile(r"[A-Za-z0-9_-]{1,128}")  # an API tool name; MCP tools are SERVER__TOOL


class GrantsJson(TypedDict, total=False):
    """Grants as a job stores them and the scheduler passes them on."""

    hosts: list[str]
    after_untrusted: list[str]


@dataclass(frozen=True)
class StandingGrants:
    """The grants of the run this kernel serves (empty outside a job's run)."""

    hosts: frozenset[str] = field(default_factory=frozenset)
    after_untrusted: frozenset[str] = field(default_factory=frozenset)

    def allows_tool(self, name: str) -> bool:
        """Whether writing tool ``name`` may run unreviewed after untrusted content."""
        return name in self.after_untrusted

    def allows_host(self, host: str) -> bool:
        """Whether requests may go to ``host`` (a host name, any case, or an IP address) unreviewed."""
        try:
            return host_name(host) in self.hosts
        except ValueError:
            return False

    def __bool__(self) -> bool:
        return bool(self.hosts or self.after_untrusted)

    def as_json(self) -> GrantsJson:
        return {"hosts": sorted(self.hosts), "after_untrusted": sorted(self.after_untrusted)}

    def describe(self) -> str:
        """One line for a person: what an unattended run may do after untrusted content."""
        if not self:
            return "no standing grants: after untrusted content, writing actions and new hosts are refused"
        tools = ", ".join(sorted(self.after_untrusted)) or "nothing"
        hosts = ", ".join(sorted(self.hosts)) or "none"
        return f"after untrusted content may: {tools}; hosts: {hosts}"


def parse(value: object) -> StandingGrants:
    """Grants from their JSON shape; raises ``ValueError`` with a sentence when malformed.

    Hosts are host names or IP addresses (no scheme, port or path: a URL grants nothing);
    tools are tool names as the API spells them (``run_code``, ``SERVER__TOOL``).
    """
    if value is None:
        return StandingGrants()
    if not isinstance(value, dict):
        raise ValueError("grants are an object {hosts: [...], after_untrusted: [...]}")
    unknown = set(value) - {"hosts", "after_untrusted"}
    if unknown:
        raise ValueError(f"grants take hosts and after_untrusted, not {', '.join(sorted(map(str, unknown)))[:200]}")
    hosts = frozenset(host_name(item) for item in _items(value, "hosts"))
    tools = frozenset(tool_name(item) for item in _items(value, "after_untrusted"))
    return StandingGrants(hosts, tools)


def of(hosts: Iterable[str] = (), after_untrusted: Iterable[str] = ()) -> StandingGrants:
    """Grants from the names a person typed (``--allow-host``, ``--allow-after-untrusted``),
    checked as :func:`parse` checks them."""
    return parse({"hosts": list(hosts), "after_untrusted": list(after_untrusted)})


def host_name(item: object) -> str:
    """``item`` as a granted host (lower case, no trailing dot), or ``ValueError``."""
    text = _name(item, "hosts")
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        pass
    host = text.lower().rstrip(".")
    if not _HOST.fullmatch(host) or ".." in host:
        raise ValueError(
            f"grants' hosts are host names such as api.example.com (no scheme, port or path), not {text[:80]!r}"
        )
    return host


def tool_name(item: object) -> str:
    """``item`` as a granted tool name (letters, digits, ``_`` and ``-``), or ``ValueError``."""
    text = _name(item, "after_untrusted")
    if not _TOOL.fullmatch(text):
        raise ValueError(
            f"grants' after_untrusted are tool names such as run_code (letters, digits, _ and -), not {text[:80]!r}"
        )
    return text


def _items(value: dict[object, object], key: str) -> list[object]:
    items = value.get(key, [])
    if not isinstance(items, list) or len(items) > MOST_ITEMS:
        raise ValueError(f"grants' {key} is a list of at most {MOST_ITEMS} names")
    return items


def _name(item: object, key: str) -> str:
    if not isinstance(item, str) or not 1 <= len(item) <= ITEM_CHARS or not item.isprintable() or " " in item:
        raise ValueError(f"grants' {key} holds names of 1 to {ITEM_CHARS} characters without spaces, not {item!r:.80}")
    return item


def standing() -> StandingGrants:
    """The grants the scheduler gave this run (``AGENT_KERNEL_GRANTS``); none when unset
    or unreadable (a malformed value grants nothing).

    In a scheduled run's kernel (its environment started with ``AGENT_KERNEL_RUN_ID``) they
    are read from the environment the process started with (``/proc/self/environ``), not
    from ``os.environ``: code run in the kernel that sets the variable widens nothing.
    """
    started = _started_environment()
    raw = started.get(ENV) if started is not None and RUN_ID in started else os.environ.get(ENV)
    if not raw:
        return StandingGrants()
    try:
        return parse(json.loads(raw))
    except ValueError:
        return StandingGrants()


def _started_environment() -> dict[str, str] | None:
    """The environment this process started with (Linux's ``/proc/self/environ``: what
    ``os.environ`` changes leave alone), or None where it cannot be read."""
    global _started
    if _started is _UNREAD:
        try:
            with open("/proc/self/environ", "rb") as file:
                block = file.read(ENVIRON_BYTES)
        except OSError:
            _started = None
        else:
            pairs = (item.partition(b"=") for item in block.split(b"\0") if item)
            _started = {key.decode("utf-8", "replace"): value.decode("utf-8", "replace") for key, _, value in pairs}
    return _started if isinstance(_started, dict) else None


_UNREAD = object()
_started: object = _UNREAD
