"""A session's stored conversation as turns start from it, kept between turns.

A turn needs the stored messages repaired (:func:`agent_kernel.model.conversation.repair`) and
the kernel variables their turn-context blocks listed last
(:func:`agent_kernel.kernel.namespace.known_variables`). Both are folds over the messages in
order, so the agent keeps their state with the session and each turn adds only the
messages it stored: a turn of a long session costs what it sends and adds, not what the
session ever said. (The store keeps every message; ``%agent_history`` reads them there.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from agent_kernel.kernel.namespace import known_variables
from agent_kernel.model.conversation import Message, Repair, context_texts
from agent_kernel.store.compactions import Compaction
from agent_kernel.turn.budget import applicable

__all__ = ["LoadedConversation"]


@dataclass(frozen=True)
class LoadedConversation:
    """The repair of a session's stored messages so far and the variables they listed.

    It owns the messages it was given (decoded for it, not shared with a turn) and never
    changes them: :meth:`for_turn` gives a turn copies of those it may send.
    """

    repaired: Repair = field(default_factory=Repair)
    known: Mapping[str, str] | None = None  # read-only; None: no variable list yet
    count: int = 0  # stored messages read into it

    def extended(self, messages: Iterable[Message]) -> LoadedConversation:
        """This conversation followed by ``messages`` (stored after it; now owned by it)."""
        messages = list(messages)
        texts = context_texts(messages)
        known = self.known
        if texts:
            found = known_variables(texts, known)
            known = MappingProxyType(found) if found is not None else None
        return LoadedConversation(self.repaired.extend(messages), known, self.count + len(messages))

    def for_turn(self, compactions: list[Compaction]) -> Repair:
        """The repaired conversation for a turn to continue, under the session's stored
        ``compactions`` (newest first).

        The messages from the cut of the compaction that applies to it on are copies: a
        request sends those (and a compaction summarises them), so what the turn does to
        them cannot change this conversation. The ones before the cut are shared: a
        request never sends them, a compaction only reads its fingerprint from the last.
        """
        fixed = self.repaired.fixed
        cut = applicable(compactions, list(fixed)).covers if compactions else 0
        # Through JSON: its C encoder and decoder copy a long conversation several times
        # faster than a walk over it in Python.
        copies = tuple(json.loads(json.dumps(fixed[cut:])))
        return Repair(fixed[:cut] + copies, self.repaired.pending)
