"""How the API's web search and fetch appear in a cell: a card line each, and the sources.

A server tool's card says what was searched or fetched and what came back (the number
of results, or the API's error code). The pages the answer cites are listed under it as
links: markup built here with every value escaped, then passed through the same
allow-list as the model's text (http(s) links only, ``rel="noopener noreferrer"``).
"""

from __future__ import annotations

import html
from typing import Any

from agent_kernel.display.safe import clean_text, sanitize_html
from agent_kernel.model.shapes import ContentBlock

Bundle = dict[str, object]


def result_summary(block: ContentBlock) -> tuple[str, str]:
    """The card's status (``ok`` or ``error``) and detail for a server tool's result block."""
    content = block.get("content")
    if isinstance(content, list):
        count = sum(1 for item in content if isinstance(item, dict) and item.get("type") == "web_search_result")
        return "ok", f"{count} result{'s' if count != 1 else ''}"
    if isinstance(content, dict):
        if "error_code" in content:
            return "error", f"the API reported {content['error_code']}"
        if content.get("type") == "tool_search_tool_search_result":  # the API's tool search
            names = [str(r.get("tool_name")) for r in content.get("tool_references") or () if isinstance(r, dict)]
            return "ok", f"found {', '.join(names)}" if names else "found no tool"
        if content.get("type") == "web_fetch_result":
            fetched = content.get("content")
            document: dict[str, Any] = fetched if isinstance(fetched, dict) else {}
            title = str(document.get("title") or "").strip()
            return "ok", f"fetched{': ' + title[:80] if title else ''}"
    return "ok", ""


def sources_bundle(sources: list[dict[str, str]]) -> Bundle:
    """The cited pages as numbered links (HTML) and lines (plain text)."""
    items = "".join(
        f'<li><a href="{html.escape(s["url"], quote=True)}">{html.escape(clean_text(s["title"]))}</a></li>'
        for s in sources
    )
    links = sanitize_html(f"<ol>{items}</ol>")
    markup = f'<div class="agent-kernel-sources" style="font-size:0.92em;color:#57606a">Sources:{links}</div>'
    plain = "Sources:\n" + "\n".join(
        f"{n}. {clean_text(s['title'])} <{clean_text(s['url'])}>" for n, s in enumerate(sources, 1)
    )
    return {"text/html": markup, "text/plain": plain}
