"""The API's tool search: tool definitions found on demand instead of sent loaded.

A tool definition marked ``defer_loading`` travels with every request but is not part of
the prompt: the model does not see it until it searches with the tool search server tool.
The search runs inside the API's response (a ``server_tool_use`` block, then a
``tool_search_tool_result`` block whose ``tool_reference`` blocks name the tools found),
and from that point of the conversation on the referenced definitions are loaded, appended
where the result is. So the prompt prefix (tools, then system) holds only the loaded
definitions and the search tool, whatever is deferred: adding a deferred tool (an MCP
server's, one the agent defines) leaves the cached prefix as it was.

The result blocks are stored with the assistant message and sent back unchanged on later
turns (the referenced tools stay loaded); :func:`referenced` reads which tools they name.

Models without tool search (the Claude 3 family, Claude Opus 4 and 4.1, Claude Sonnet 4)
get every tool loaded instead. A model name this module does not know is assumed to have
it (``AgentKernel.tool_search = False`` loads every tool for a proxy whose model has not).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final, TypeVar

__all__ = [
    "RESULT_TYPE", "SEARCH_TOOL", "SEARCH_TOOL_NAME", "deferred_request", "prompt_tools", "referenced", "supports_tool_search",
]  # fmt: skip

SEARCH_TOOL_NAME = "tool_search_tool_bm25"
# BM25 takes the model's words as they come ("schedule a notebook every morning"); the
# regex variant would need a pattern that matches the tools' own wording.
SEARCH_TOOL: dict[str, str] = {"type": "tool_search_tool_bm25_20251119", "name": SEARCH_TOOL_NAME}
RESULT_TYPE: Final = "tool_search_tool_result"

_Tool = TypeVar("_Tool", bound=Mapping[str, object])

# Models the API's tool search does not serve; a dated snapshot or -latest alias counts as its model.
_WITHOUT_SEARCH = re.compile(r"^claude-(3-|3\.|2|instant|opus-4(-0|-1)?$|sonnet-4(-0)?$)")
_SUFFIX = re.compile(r"-(\d{8}|latest)$")


def supports_tool_search(model: str | None) -> bool:
    """Whether ``model`` can search deferred tools (unknown names are assumed to)."""
    if not model:
        return True
    return _WITHOUT_SEARCH.match(_SUFFIX.sub("", model.strip().lower())) is None


def deferred_request(model: str | None, setting: object = True) -> bool:
    """Whether a request to ``model`` defers tools (``setting``: ``AgentKernel.tool_search``)."""
    return bool(setting) and supports_tool_search(model)


def prompt_tools(tools: Iterable[_Tool] | None) -> list[_Tool]:
    """The definitions of ``tools`` that are part of the prompt (not deferred)."""
    return [t for t in tools or () if not t.get("defer_loading")]


def referenced(messages: Iterable[Mapping[str, object]]) -> list[str]:
    """The tools the tool search results in ``messages`` loaded, in the order found."""
    found: dict[str, None] = {}
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, Mapping) or block.get("type") != RESULT_TYPE:
                continue
            result = block.get("content")
            references = result.get("tool_references") if isinstance(result, Mapping) else None
            for reference in references if isinstance(references, list) else ():
                if isinstance(reference, Mapping) and isinstance(reference.get("tool_name"), str):
                    found[reference["tool_name"]] = None
    return list(found)
