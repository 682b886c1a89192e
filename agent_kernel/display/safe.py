"""Model-written text made safe to show: HTML that runs nothing, text renderers accept.

JupyterLab trusts the outputs of a running kernel (and of a notebook someone trusted):
raw HTML in a ``text/markdown`` or ``text/html`` output runs its scripts and event
handlers. So the model's Markdown never reaches the page as Markdown. It is rendered
here with markdown-it (raw HTML off: it appears as text) and the result is cleaned by
ammonia (``nh3``) with a short allow-list: no scripts, event handlers, styles, frames,
forms, or URLs other than http(s) and mailto. The project's own markup is built with
:func:`html.escape` around every value that came from the model.

Nothing the model writes makes the browser fetch anything by itself: an image in its
Markdown becomes a link to the image (the person clicks to open it), and the allow-list
has no element that loads a resource (no ``img``, ``video``, ``audio``, ``source``,
``link``, frames, ``srcset``, ``poster``, ``background``, ``ping`` or styles with URLs).
A remote image would be fetched each time the notebook is opened, with whatever the
model put in its URL (a key in the query string), to a host the model chose.

:func:`clean_text` removes what makes renderers fail: control characters (vl-convert's
SVG step aborts the whole process on them), XML non-characters and lone surrogates.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from typing import Any

import nh3

Bundle = dict[str, object]

# What Markdown can produce (images as links), and nothing that runs, loads a resource,
# or overlays the page.
ALLOWED_TAGS = {
    "p",
    "br",
    "hr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "em",
    "strong",
    "del",
    "s",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "a",
    "span",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
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
    from markdown_it import MarkdownIt  # noqa: PLC0415 - markdown-it takes 0.1 s; the CLI's tables import this module and render no Markdown

    # html=False: raw HTML in the source is shown as text. markdown-it's link check also
    # refuses javascript:, vbscript:, file: and non-image data: URLs.
    md = MarkdownIt("commonmark", {"html": False, "breaks": False}).enable(["table", "strikethrough"])
    md.add_render_rule("image", _image_as_link)
    return md


IMAGE_LINK_CLASS = "agent-kernel-image-link"
_SHOWN_URL_CHARS = 80


def image_link(url: str, alt: str, *, title: str = "", linked: bool = True) -> str:
    """An image as a link the person clicks to open it: "🖼 image: alt (host/path)".

    ``linked=False`` (an image inside a link, or a URL that is not fetched over the web)
    gives the label alone. Every value is escaped here; the caller sanitises the result.
    """
    shown = shown_url(url)
    words = f"🖼 image: {alt} ({shown})" if alt else f"🖼 image: {shown}"
    label = html.escape(words)
    if not linked:
        return f'<span class="{IMAGE_LINK_CLASS}">{label}</span>'
    hint = html.escape(f"{title} · {url}" if title else url, quote=True)
    return f'<a class="{IMAGE_LINK_CLASS}" href="{html.escape(url, quote=True)}" title="{hint}">{label}</a>'


def shown_url(url: str) -> str:
    """``url`` without its scheme and query, clipped: where an image link goes, readably."""
    if url.lower().startswith("data:"):
        return "embedded data"
    without_scheme = re.sub(r"^[a-z][a-z0-9+.-]*:(?=//)", "", url, flags=re.IGNORECASE).lstrip("/")
    base = re.split(r"[?#]", without_scheme, maxsplit=1)[0]
    return base if len(base) <= _SHOWN_URL_CHARS else base[: _SHOWN_URL_CHARS - 1] + "…"


def _image_as_link(renderer: Any, tokens: list[Any], idx: int, options: Any, env: Any) -> str:
    """markdown-it's rule for ``![alt](url)`` (inline and reference style): a link, not an
    ``<img>``, so opening the output fetches nothing."""
    token = tokens[idx]
    url = token.attrGet("src") or ""
    alt = renderer.renderInlineAsText(token.children or [], options, env)
    inside_link = _link_depths(tokens, env)[idx] > 0
    remote = not url.lower().startswith("data:")
    return image_link(url, alt, title=token.attrGet("title") or "", linked=remote and not inside_link)


def _link_depths(tokens: list[Any], env: Any) -> list[int]:
    """How many links each inline token is inside, computed once per token list (a long
    answer can hold thousands of images)."""
    known = env.setdefault("agent_kernel_link_depths", {})
    if id(tokens) not in known:
        depth, depths = 0, []
        for token in tokens:
            depths.append(depth)
            depth += token.nesting if token.type in ("link_open", "link_close") else 0
        known[id(tokens)] = depths
    found: list[int] = known[id(tokens)]
    return found


def sanitize_html(markup: str) -> str:
    """``markup`` reduced to the allow-list (ammonia); links get ``rel="noopener noreferrer"``."""
    return nh3.clean(
        markup,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        allowed_classes={"a": {IMAGE_LINK_CLASS}, "span": {IMAGE_LINK_CLASS}},
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
