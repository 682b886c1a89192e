"""The API's tool search, emulated for the scripted model.

What the API checks, the scripted model checks (a request that fails them is answered
400, as the API answers it):

- a tool with ``defer_loading`` needs a tool search tool in ``tools``, which itself is
  never deferred, and not every tool may be deferred;
- a ``tool_reference`` in the conversation must name a tool of the request;
- a deferred tool can be called only once a tool search result in the conversation (or
  earlier in the same response) referenced it: the API loads it no sooner.

A scripted reply searches with :func:`~agent_kernel.testing.script.tool_search`; its result
is worked out here against the request's deferred tools: the regex variant runs the
pattern with ``re.search`` over each tool's name, description and parameter names and
descriptions, the BM25 variant ranks them by the query's words (a plain BM25 over the
same text, words split at underscores and crudely stemmed, a name's words weighing more). Either returns at most
:data:`MAX_REFERENCES` tools.

A scripted call of a deferred tool that no search found gets one in front of it, in the
same response, unless the model was made with ``implicit_search=False`` (then the reply
is refused with 400): scripts written before a tool was deferred keep working, and a test
of the search itself scripts it and turns the shortcut off.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace

from agent_kernel.model.shapes import Block, ServerToolUseBlock, WebResultBlock
from agent_kernel.model.tool_search import RESULT_TYPE, referenced
from agent_kernel.testing.script import Reply, server_tool_use
from agent_kernel.testing.wire import MessagesRequest, ToolSpec

__all__ = ["MAX_REFERENCES", "SearchError", "request_problem", "resolve", "search"]

MAX_REFERENCES = 5
NAME_WEIGHT = 3
PATTERN_CHARS = 200  # the longest regex the API takes
VARIANTS = {
    "tool_search_tool_bm25_20251119": "bm25", "tool_search_tool_bm25": "bm25",
    "tool_search_tool_regex_20251119": "regex", "tool_search_tool_regex": "regex",
}  # fmt: skip
SEARCH_NAMES = {"tool_search_tool_bm25", "tool_search_tool_regex"}


class SearchError(ValueError):
    """A request or scripted reply the API would refuse for its tool search."""


def search_tool(tools: Iterable[ToolSpec]) -> ToolSpec | None:
    """The tool search tool among ``tools``, if any."""
    return next((t for t in tools if t.get("type") in VARIANTS), None)


def deferred_tools(body: MessagesRequest) -> dict[str, ToolSpec]:
    """The request's deferred tools by name, in the order sent."""
    return {str(t.get("name")): t for t in body.get("tools") or () if t.get("defer_loading")}


def request_problem(body: MessagesRequest) -> str | None:
    """The API's complaint about the request's deferred tools and references, else None."""
    tools = list(body.get("tools") or ())
    deferred = [t for t in tools if t.get("defer_loading")]
    finder = search_tool(tools)
    if tools and len(deferred) == len(tools):
        return "At least one tool must not have defer_loading."
    if deferred and finder is None:
        return "Tools with defer_loading need a tool search tool (tool_search_tool_bm25 or tool_search_tool_regex) in tools."
    if finder is not None and finder.get("defer_loading"):
        return "The tool search tool cannot itself have defer_loading."
    names = {t.get("name") for t in tools}
    for name in referenced(body.get("messages") or ()):
        if name not in names:
            return f"Tool reference '{name}' not found in available tools."
    return None


def resolve(body: MessagesRequest, reply: Reply, *, implicit: bool = True) -> Reply:
    """``reply`` as the API would send it for ``body``: each scripted search's result found
    among the request's deferred tools, a search in front of a call of a deferred tool no
    search found (``implicit``), or :class:`SearchError` for what the API would refuse."""
    deferred = deferred_tools(body)
    finder = search_tool(body.get("tools") or ())
    loaded = set(referenced(body.get("messages") or ()))
    asked: dict[str, ServerToolUseBlock] = {}
    content: list[Block] = []
    for block in reply.content:
        kind = block.get("type")
        if block["type"] == "server_tool_use" and block["name"] in SEARCH_NAMES:
            if finder is None or finder.get("name") != block["name"]:
                raise SearchError(
                    f"The scripted reply searches with {block['name']}, which the request does not offer."
                )
            asked[str(block["id"])] = block
        elif block["type"] == RESULT_TYPE:
            block = _result(block, asked, deferred, finder)
        elif block["type"] == "tool_use" and block["name"] in deferred and block["name"] not in loaded:
            if not implicit or finder is None:
                raise SearchError(
                    f"The scripted reply calls {block['name']}, a deferred tool that no tool search in this "
                    "conversation found: script tool_search(...) before the call (the API loads a deferred "
                    "tool only from a search result)."
                )
            use = server_tool_use(str(finder.get("name")), {"query": str(block["name"])})
            found = [block["name"], *(n for n in search(finder, str(block["name"]), deferred) if n != block["name"])]
            content += [use, _found(use["id"], found[:MAX_REFERENCES])]
            loaded.add(block["name"])
        if kind == RESULT_TYPE:
            loaded.update(referenced([{"content": [block]}]))
        content.append(block)
    return replace(reply, content=content) if content != reply.content else reply


def _result(
    block: WebResultBlock,
    asked: Mapping[str, ServerToolUseBlock],
    deferred: Mapping[str, ToolSpec],
    finder: ToolSpec | None,
) -> WebResultBlock:
    """A scripted result block, its references worked out when the script left them out."""
    use = asked.get(str(block.get("tool_use_id")))
    if use is None or finder is None:
        raise SearchError("A tool_search_tool_result must follow the tool search server_tool_use it answers.")
    given = block.get("content")
    if given is not None:
        names = referenced([{"content": [block]}])
        unknown = [n for n in names if n not in deferred]
        if unknown:
            raise SearchError(
                f"The scripted search result references {', '.join(unknown)}, not deferred tools of the request."
            )
        return block.copy()
    query = (use.get("input") or {}).get("query")
    if not isinstance(query, str) or not query.strip():
        return _error(str(use["id"]), "invalid_tool_input", "query must be a non-empty string")
    try:
        found = search(finder, query, deferred)
    except SearchError as exc:
        return _error(str(use["id"]), "invalid_tool_input", str(exc))
    return _found(str(use["id"]), found)


def _found(tool_use_id: str, names: list[str]) -> WebResultBlock:
    references = [{"type": "tool_reference", "tool_name": name} for name in names]
    content = {"type": "tool_search_tool_search_result", "tool_references": references}
    return {"type": RESULT_TYPE, "tool_use_id": tool_use_id, "content": content}


def _error(tool_use_id: str, code: str, message: str) -> WebResultBlock:
    content = {"type": "tool_search_tool_result_error", "error_code": code, "error_message": message}
    return {"type": RESULT_TYPE, "tool_use_id": tool_use_id, "content": content}


# -- the searches ---------------------------------------------------------------------------


def search(finder: ToolSpec, query: str, deferred: Mapping[str, ToolSpec]) -> list[str]:
    """The deferred tools the search tool ``finder`` returns for ``query``, best first."""
    texts = {name: searched_text(tool) for name, tool in deferred.items()}
    if VARIANTS.get(str(finder.get("type"))) == "regex":
        return regex_search(query, texts)
    return bm25_search(query, texts)


def searched_text(tool: ToolSpec) -> str:
    """What a search looks at: the tool's name, description, and parameter names and descriptions."""
    parts = [str(tool.get("name", "")), str(tool.get("description", ""))]
    schema = tool.get("input_schema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    for name, spec in (properties if isinstance(properties, Mapping) else {}).items():
        parts.append(str(name))
        if isinstance(spec, Mapping) and isinstance(spec.get("description"), str):
            parts.append(spec["description"])
    return "\n".join(parts)


def regex_search(pattern: str, texts: Mapping[str, str]) -> list[str]:
    """Tools whose text ``re.search`` finds ``pattern`` in, in the order sent."""
    if len(pattern) > PATTERN_CHARS:
        raise SearchError(f"the pattern is over {PATTERN_CHARS} characters")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise SearchError(f"invalid regular expression: {exc}") from None
    return [name for name, text in texts.items() if compiled.search(text)][:MAX_REFERENCES]


def bm25_search(query: str, texts: Mapping[str, str], k1: float = 1.2, b: float = 0.75) -> list[str]:
    """Tools ranked by BM25 for the words of ``query`` (those scoring above zero)."""
    # A tool's name says most about it: its words count as often as NAME_WEIGHT mentions.
    documents = {name: Counter(_words(text) + _words(name) * (NAME_WEIGHT - 1)) for name, text in texts.items()}
    if not documents:
        return []
    average = sum(sum(d.values()) for d in documents.values()) / len(documents)
    terms = set(_words(query))
    frequency = {t: sum(1 for d in documents.values() if t in d) for t in terms}
    scores = {}
    for name, words in documents.items():
        length = sum(words.values())
        score = 0.0
        for term in terms:
            count = words.get(term, 0)
            if count:
                idf = math.log((len(documents) - frequency[term] + 0.5) / (frequency[term] + 0.5) + 1)
                score += idf * count * (k1 + 1) / (count + k1 * (1 - b + b * length / average))
        if score > 0:
            scores[name] = score
    order = list(texts)
    return sorted(scores, key=lambda n: (-scores[n], order.index(n)))[:MAX_REFERENCES]


_SUFFIXES = ("ing", "ed", "er", "es", "ly", "e", "s")
_STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "any",
        "as",
        "at",
        "be",
        "by",
        "each",
        "for",
        "from",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "the",
        "this",
        "that",
        "to",
        "with",
    ]
)


def _words(text: str) -> list[str]:
    """Lower-case words (split at underscores, stop words left out), each with one common suffix cut."""
    words = []
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word in _STOP_WORDS:
            continue
        for suffix in _SUFFIXES:
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        words.append(word)
    return words
