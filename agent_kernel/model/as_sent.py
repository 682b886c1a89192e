"""Tool inputs as the model sent them, for the calls whose recorded input is redacted.

A response is scrubbed as it arrives (:func:`agent_kernel.model.client._stream_once`):
secrets and text in a credential's format become ``[secret NAME]`` in everything the
conversation keeps, shows and sends back (the transcript, the store, the next request).
The tool itself runs the input as the model wrote it: code holding
``"https://alice:pw@example.org/data.csv"`` must run with those characters, not with a
21-character marker in their place.

So each tool call whose input the redaction changed is kept here, by its ``tool_use``
id, as a pair: the redacted input the conversation records, and the input as sent
(made encodable and depth-bounded like everything else, only not redacted). The
dispatcher asks :func:`take` with the recorded input and gets the one as sent, which it
gives a tool that runs its input as code (``Tool.runs_input``: ``run_code``); every other
tool gets the recorded copy, as what it shows is the screen and what it sends leaves the
machine. The pair is dropped then. A recorded input that is no longer the kept one (changed on the way)
is run as recorded. The store is bounded: pairs nobody took (a turn stopped before its
calls ran) give way to newer ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from agent_kernel.redaction import scrub

__all__ = ["keep", "take"]

# Calls whose pairs are kept at most: far more than one response's calls.
KEPT_CALLS = 256

_kept: OrderedDict[str, tuple[object, object]] = OrderedDict()  # id -> (recorded, as sent)
_lock = threading.Lock()


def keep(sent: Iterable[Mapping[str, object]], recorded: Iterable[Mapping[str, object]]) -> None:
    """Keep the inputs of the ``tool_use`` blocks of ``sent`` (a response's content as it
    arrived) whose ``recorded`` copies (the same blocks, scrubbed) differ from them."""
    for raw, kept in zip(sent, recorded):
        call_id = kept.get("id")
        if kept.get("type") != "tool_use" or not isinstance(call_id, str):
            continue
        # Encodable and depth-bounded as the recorded copy (walked at the same depth), not
        # redacted. Not the input alone: one holding no string ({}) comes back unfilled.
        runnable = scrub([raw])[0].get("input")
        if runnable == kept.get("input"):
            continue
        with _lock:
            _kept[call_id] = (kept.get("input"), runnable)
            while len(_kept) > KEPT_CALLS:
                _kept.popitem(last=False)


def take(tool_use_id: str | None, recorded: Any) -> Any:
    """The input to run for call ``tool_use_id``: as the model sent it when ``recorded``
    is its redacted copy, else ``recorded``."""
    if tool_use_id is None:
        return recorded
    with _lock:
        pair = _kept.pop(tool_use_id, None)
    if pair is None or not _same(pair[0], recorded):
        return recorded
    return pair[1]


def _same(kept: object, recorded: object) -> bool:
    try:
        return bool(kept == recorded)
    except Exception:  # noqa: BLE001 - not comparable: run what was recorded
        return False
