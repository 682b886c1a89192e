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

import json
import os
from dataclasses import dataclass, field
from typing import TypedDict

__all__ = ["ENV", "GrantsJson", "StandingGrants", "parse", "standing"]

ENV = "AGENT_KERNEL_GRANTS"
MOST_ITEMS = 100  # hosts or tools one job may name
ITEM_CHARS = 253  # a DNS name's longest spelling


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
        """Whether requests may go to ``host`` (a host name, any case) unreviewed."""
        return host.lower().rstrip(".") in self.hosts

    def __bool__(self) -> bool:
        return bool(self.hosts or self.after_untrusted)

    def as_json(self) -> GrantsJson:
        return {"hosts": sorted(self.hosts), "after_untrusted": sorted(self.after_untrusted)}


def parse(value: object) -> StandingGrants:
    """Grants from their JSON shape; raises ``ValueError`` with a sentence when malformed."""
    if value is None:
        return StandingGrants()
    if not isinstance(value, dict):
        raise ValueError("grants are an object {hosts: [...], after_untrusted: [...]}")
    unknown = set(value) - {"hosts", "after_untrusted"}
    if unknown:
        raise ValueError(f"grants take hosts and after_untrusted, not {', '.join(sorted(unknown))}")
    lists: dict[str, frozenset[str]] = {}
    for key in ("hosts", "after_untrusted"):
        items = value.get(key, [])
        if not isinstance(items, list) or len(items) > MOST_ITEMS:
            raise ValueError(f"grants' {key} is a list of at most {MOST_ITEMS} names")
        for item in items:
            if not isinstance(item, str) or not 1 <= len(item) <= ITEM_CHARS or not item.isprintable() or " " in item:
                raise ValueError(f"grants' {key} holds names of 1 to {ITEM_CHARS} characters without spaces, not {item!r}")
        lists[key] = frozenset(i.lower().rstrip(".") if key == "hosts" else i for i in items)
    return StandingGrants(lists["hosts"], lists["after_untrusted"])


def standing() -> StandingGrants:
    """The grants the scheduler gave this run (``AGENT_KERNEL_GRANTS``); none when unset
    or unreadable (a malformed value grants nothing)."""
    raw = os.environ.get(ENV)
    if not raw:
        return StandingGrants()
    try:
        return parse(json.loads(raw))
    except ValueError:
        return StandingGrants()
