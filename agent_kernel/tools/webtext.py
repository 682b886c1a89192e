"""A fetched body as text the model can read: HTML as readable text, JSON pretty-printed.

HTML goes through BeautifulSoup (Python's own parser): scripts, styles and other
non-content elements are dropped, block elements become line breaks, and links keep
their target in brackets so the model can follow them.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["body_text", "charset_of", "kind_of"]

_DROPPED = ("script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "head")
_BLOCKS = (
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "nav",
    "aside",
    "li",
    "tr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "pre",
    "blockquote",
    "table",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "figure",
    "figcaption",
    "form",
    "br",
    "hr",
)


def kind_of(content_type: str) -> str:
    """``html``, ``json``, ``csv``, ``text`` or ``binary`` for a Content-Type header."""
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime in ("text/html", "application/xhtml+xml"):
        return "html"
    if mime == "application/json" or mime.endswith("+json"):
        return "json"
    if mime in ("text/csv", "application/csv", "text/tab-separated-values"):
        return "csv"
    if (
        mime.startswith("text/")
        or mime
        in (
            "application/xml",
            "application/javascript",
            "application/x-ndjson",
            "application/yaml",
            "application/x-yaml",
            "application/toml",
            "",
        )
        or mime.endswith("+xml")
    ):
        return "text"
    return "binary"


def charset_of(content_type: str) -> str | None:
    match = re.search(r"charset\s*=\s*\"?([\w.:-]+)", content_type, re.IGNORECASE)
    return match.group(1) if match else None


def _decode(body: bytes, content_type: str) -> str:
    charset = charset_of(content_type) or "utf-8"
    try:
        return body.decode(charset, errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


def html_text(body: bytes, content_type: str = "") -> str:
    """The readable text of an HTML page, its title first."""
    from bs4 import BeautifulSoup  # noqa: PLC0415 - bs4 takes 0.15 s to import and only an HTML page needs it

    soup = BeautifulSoup(body, "html.parser", from_encoding=charset_of(content_type))
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for element in soup.find_all(_DROPPED):
        element.decompose()
    for link in soup.find_all("a", href=True):
        href = str(link["href"])
        label = link.get_text(" ", strip=True)
        if href.startswith(("http://", "https://")) and label and href != label:
            link.append(f" [{href}]")
    for element in soup.find_all(_BLOCKS):
        element.insert_before("\n")
        element.insert_after("\n")
    lines = (re.sub(r"[ \t\r\f\v\xa0]+", " ", line).strip() for line in soup.get_text().splitlines())
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return f"# {title}\n\n{text}" if title and not text.startswith(title) else text


def body_text(body: bytes, content_type: str, *, truncated: bool) -> tuple[str | None, str | None]:
    """The text for the model and a hint about it (``None`` when there is nothing to add)."""
    kind = kind_of(content_type)
    if kind == "binary":
        return None, f"{content_type or 'binary'} content ({len(body):,} bytes) is not shown as text."
    if kind == "html":
        return html_text(body, content_type), None
    text = _decode(body, content_type)
    if kind == "json":
        if truncated:
            return text, "The JSON was cut at max_bytes, so it is shown as it came."
        try:
            value: Any = json.loads(text)
        except ValueError:
            return text, "The body is not valid JSON; it is shown as it came."
        return json.dumps(value, indent=2, ensure_ascii=False), None
    if kind == "csv":
        return text, (
            "CSV data: to analyse it, put it in a DataFrame with run_code, e.g. "
            "pd.read_csv(io.StringIO(text))" + (" (this is only the first max_bytes of it)." if truncated else ".")
        )
    return text, None
