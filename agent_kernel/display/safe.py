"""Model-written text made safe to show: HTML that runs nothing, text renderers accept.

JupyterLab trusts the outputs of a running kernel (and of a notebook someone trusted):
raw HTML in a ``text/markdown`` or ``text/html`` output runs its scripts and event
handlers. So the model's Markdown never reaches the page as Markdown. It is rendered
here with markdown-it (raw HTML off: it appears as text) and the result is cleaned by
ammonia (``nh3``) with a short allow-list: no scripts, event handlers, styles, frames,
forms, or URLs other than http(s) and mailto. The project's own markup is built with
:func:`html.escape` around every value that came from the model.

:func:`clean_text` removes what makes renderers fail: control characters (vl-convert's
SVG step aborts the whole process on them), XML non-characters and lone surrogates.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

Bundle = dict[str, Any]

# What Markdown can produce, and nothing that runs, loads frames, or overlays the page.
ALLOWED_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "em", "strong", "del", "s", "code",
    "pre", "blockquote", "ul", "ol", "li", "a", "img", "table", "thead", "tbody", "tr", "th", "td",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "ol": {"start"},
    "th": {"style"},
    "td": {"style"},
}
URL_SCHEMES = {"http", "https", "mailto"}
STYLE_PROPERTIES = {"text-align"}  # a table column's alignment; nothing that positions

# Characters outside XML 1.0's Char production (C0 controls but tab and newlines, lone
# surrogates, U+FFFE, U+FFFF); carriage returns become newlines first.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def clean_text(text: str) -> str:
    """``text`` without the characters renderers reject: control characters, lone surrogates
    (replaced by U+FFFD) and XML non-characters."""
    if not _NOT_XML.search(text) and "\r" not in text:
        return text
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _NOT_XML.sub(lambda m: "\ufffd" if "\ud800" <= m.group() <= "\udfff" else "", text)


def clean_value(value: Any, depth: int = 0) -> Any:
    """A JSON-like value with :func:`clean_text` applied to every string in it."""
    if isinstance(value, str):
        return clean_text(value)
    if depth > 50:
        return None
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_value(v, depth + 1) for v in value]
    return value


@lru_cache(maxsize=1)
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    # html=False: raw HTML in the source is shown as text. markdown-it's link check also
    # refuses javascript:, vbscript:, file: and non-image data: URLs.
    return MarkdownIt("commonmark", {"html": False, "breaks": False}).enable(["table", "strikethrough"])


def sanitize_html(markup: str) -> str:
    """``markup`` reduced to the allow-list (ammonia); links get ``rel="noopener noreferrer"``."""
    import nh3

    return nh3.clean(
        markup,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        filter_style_properties=STYLE_PROPERTIES,
        strip_comments=True,
        link_rel="noopener noreferrer",
    )


def markdown_html(text: str) -> str:
    """The model's Markdown as HTML that runs nothing."""
    return sanitize_html(_markdown().render(clean_text(text)))


def markdown_bundle(text: str, *, plain: str | None = None) -> Bundle:
    """A display bundle for model-written Markdown: sanitised HTML plus the plain text.

    There is deliberately no ``text/markdown`` entry: a front end renders that itself,
    and JupyterLab lets raw HTML through in trusted Markdown.
    """
    markup = f'<div class="agent-kernel-markdown">{markdown_html(text)}</div>'
    return {"text/html": markup, "text/plain": clean_text(text if plain is None else plain)}
