"""The stored conversation the agent keeps between turns (agent_kernel.turn.loaded)."""

from __future__ import annotations

import copy

from agent_kernel.kernel.namespace import ALL_VARIABLES, CHANGED_VARIABLES, REMOVED, known_variables
from agent_kernel.model.conversation import CONTEXT_END, CONTEXT_START, context_texts, repair
from agent_kernel.store.compactions import Compaction
from agent_kernel.turn.budget import fingerprint
from agent_kernel.turn.loaded import LoadedConversation


def context(*lines):
    return {"type": "text", "text": CONTEXT_START + "\n".join(lines) + CONTEXT_END}


def exchange(n, variables):
    """A turn: the prompt with its context block, a tool call, its result, the answer."""
    return [
        {"role": "user", "content": [context(*variables), {"type": "text", "text": f"step {n}"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "run_code", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "x" * 50}]},
        {"role": "assistant", "content": [{"type": "text", "text": f"done {n}"}]},
    ]


def session():
    listing = [ALL_VARIABLES, "- `a` (int): 1", "- `b` (int): 2"]
    changed = [CHANGED_VARIABLES, "- `a` (int): 3", "- `c` (str): 'x'"]
    removed = [CHANGED_VARIABLES, f"{REMOVED} `b`"]
    messages = exchange(0, listing) + exchange(1, changed) + exchange(2, removed)
    messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": "cut", "name": "x", "input": {}}]})
    return messages  # it ends with a call that was never answered


def test_extended_turn_by_turn_it_is_the_whole_conversation_read_at_once():
    messages = session()
    whole = LoadedConversation().extended(copy.deepcopy(messages))
    assert whole.repaired.messages() == repair(messages)
    assert dict(whole.known) == known_variables(context_texts(messages))
    assert dict(whole.known) == {"a": "- `a` (int): 3", "c": "- `c` (str): 'x'"}
    assert whole.count == len(messages)
    step = LoadedConversation()
    for at in range(0, len(messages), 4):
        step = step.extended(copy.deepcopy(messages[at : at + 4]))
    assert step.repaired == whole.repaired
    assert step.known == whole.known


def test_a_turn_gets_copies_of_what_its_requests_can_send():
    messages = session()
    loaded = LoadedConversation().extended(copy.deepcopy(messages))
    before = copy.deepcopy(loaded.repaired.messages())
    covers = 4
    compaction = Compaction(covers=covers, trimmed=covers, summary="s", fingerprint=fingerprint(before, covers))
    for stored in ([compaction], []):
        given = loaded.for_turn(stored).messages()
        assert given == before
        sent_from = covers if stored else 0
        for message in given[sent_from:]:
            message["content"].append({"type": "text", "text": "changed by the turn"})
            message["content"][0]["changed"] = True
        assert loaded.repaired.messages() == before
