"""Blocks: what ``render_blocks`` shows, checked, and rendered for the running cell.

Each block becomes one output of the cell. Static blocks (markdown, code, image, alert,
json, chart) are plain display bundles that JupyterLab renders natively and a saved
notebook keeps: Markdown/HTML, Vega-Lite with a PNG, ``application/json``. Tables and
forms are widgets in a live front end, and carry a static HTML rendering in the same
bundle for viewers that have no widget state (GitHub, nbconvert, papermill output).

:func:`check_blocks` validates what the model sent and says exactly what to fix.
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from typing import Any

from ..errors import ToolInputError

Bundle = dict[str, Any]

BLOCK_TYPES = ("markdown", "table", "chart", "form", "code", "image", "alert", "json")
ALERT_VARIANTS = ("info", "warning", "danger", "success")
CHART_TYPES = ("line", "bar", "pie", "area")
FIELD_TYPES = ("text", "number", "select", "checkbox", "textarea", "date")
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".svg": "image/svg+xml",
}
IMAGE_BYTES = 5_000_000
JSON_CHARS = 100_000

_ROWS_OR_VARIABLE = (
    "Give `data` (a list of row objects) or `variable` (the name of a pandas DataFrame in "
    "the user's kernel; best for large data, which then never passes through you)."
)

# The JSON schema of one block, sent to the model as part of render_blocks' input schema.
BLOCK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One block. `type` decides which other fields apply.",
    "properties": {
        "type": {"type": "string", "enum": list(BLOCK_TYPES)},
        "content": {"type": "string", "description": "markdown, code, alert: the text (markdown for markdown blocks)"},
        "language": {"type": "string", "description": "code: language for highlighting, e.g. python, sql"},
        "variant": {"type": "string", "enum": list(ALERT_VARIANTS), "description": "alert: its kind"},
        "columns": {
            "type": "array",
            "description": "table: columns to show, in order (default: all keys of the rows)",
            "items": {
                "type": "object",
                "properties": {"key": {"type": "string"}, "label": {"type": "string"}},
                "required": ["key"],
            },
        },
        "data": {
            "description": "table: list of row objects. chart: {labels: [...], datasets: "
            "[{label, data: [numbers]}]} or a list of row objects with `x` and `y`. json: any JSON value.",
        },
        "variable": {
            "type": "string",
            "description": "table, chart: name of a pandas DataFrame in the user's kernel to show instead of `data`",
        },
        "chartType": {"type": "string", "enum": list(CHART_TYPES), "description": "chart: its kind"},
        "x": {"type": "string", "description": "chart from rows or a DataFrame: the column on the x axis (or pie labels)"},
        "y": {
            "description": "chart from rows or a DataFrame: the column(s) plotted (a string or a list)",
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
        },
        "title": {"type": "string", "description": "table, chart, form: a caption"},
        "xLabel": {"type": "string"},
        "yLabel": {"type": "string"},
        "fields": {
            "type": "array",
            "description": "form: its fields",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "label": {"type": "string"},
                    "type": {"type": "string", "enum": list(FIELD_TYPES)},
                    "options": {"type": "array", "items": {"type": "string"}, "description": "select: the choices"},
                    "required": {"type": "boolean"},
                    "default": {"description": "the value filled in at first"},
                },
                "required": ["name", "label", "type"],
            },
        },
        "submitLabel": {"type": "string", "description": "form: the submit button's text"},
        "url": {
            "type": "string",
            "description": "image: an http(s) URL, or a file path relative to the kernel's working directory",
        },
        "alt": {"type": "string", "description": "image: a text alternative"},
    },
    "required": ["type"],
}


def check_blocks(blocks: Any) -> list[dict[str, Any]]:
    """``blocks`` as validated dicts; a :class:`ToolInputError` names the first problem."""
    if not isinstance(blocks, list) or not blocks:
        raise ToolInputError("render_blocks needs `blocks`: a non-empty list of block objects.")
    checked = []
    forms = 0
    for index, block in enumerate(blocks):
        where = f"blocks[{index}]"
        if not isinstance(block, dict):
            raise ToolInputError(f"{where} must be an object with a `type`.")
        kind = block.get("type")
        if kind not in BLOCK_TYPES:
            raise ToolInputError(f"{where}.type must be one of {', '.join(BLOCK_TYPES)}; got {kind!r}.")
        _CHECKS[kind](block, where)
        forms += kind == "form"
        checked.append(block)
    if forms > 1:
        raise ToolInputError("render_blocks shows at most one form per call; call it again for the next form.")
    return checked


def _text(block: dict[str, Any], where: str, name: str = "content") -> None:
    if not isinstance(block.get(name), str):
        raise ToolInputError(f"{where} needs `{name}`: a string.")


def _check_code(block: dict[str, Any], where: str) -> None:
    _text(block, where)
    if not isinstance(block.get("language", ""), str):
        raise ToolInputError(f"{where}.language must be a string such as 'python'.")


def _check_alert(block: dict[str, Any], where: str) -> None:
    _text(block, where)
    if block.get("variant", "info") not in ALERT_VARIANTS:
        raise ToolInputError(f"{where}.variant must be one of {', '.join(ALERT_VARIANTS)}.")


def _check_image(block: dict[str, Any], where: str) -> None:
    _text(block, where, "url")


def _check_json(block: dict[str, Any], where: str) -> None:
    if "data" not in block:
        raise ToolInputError(f"{where} needs `data`: any JSON value.")


def _check_table(block: dict[str, Any], where: str) -> None:
    has_data, has_variable = "data" in block, "variable" in block
    if has_data == has_variable:
        raise ToolInputError(f"{where} is a table. {_ROWS_OR_VARIABLE}")
    if has_data:
        rows = block["data"]
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ToolInputError(f"{where}.data must be a list of row objects like {{\"month\": \"Jan\", \"total\": 3}}.")
    columns = block.get("columns")
    if columns is not None and (
        not isinstance(columns, list)
        or not all(isinstance(c, dict) and isinstance(c.get("key"), str) for c in columns)
    ):
        raise ToolInputError(f"{where}.columns must be a list of {{key, label}} objects.")


def _check_chart(block: dict[str, Any], where: str) -> None:
    if block.get("chartType") not in CHART_TYPES:
        raise ToolInputError(f"{where}.chartType must be one of {', '.join(CHART_TYPES)}.")
    if ("data" in block) == ("variable" in block):
        raise ToolInputError(
            f"{where} is a chart: give `data` ({{labels, datasets}} or a list of rows with `x` and `y`) "
            "or `variable` (a DataFrame in the kernel, with `x` and `y` columns)."
        )


def _check_form(block: dict[str, Any], where: str) -> None:
    from .form import check_fields

    check_fields(block.get("fields"), where)
    if not isinstance(block.get("submitLabel", "Submit"), str):
        raise ToolInputError(f"{where}.submitLabel must be a string.")


_CHECKS = {
    "markdown": _text,
    "code": _check_code,
    "alert": _check_alert,
    "image": _check_image,
    "json": _check_json,
    "table": _check_table,
    "chart": _check_chart,
    "form": _check_form,
}


# -- static bundles -------------------------------------------------------------------------


def markdown_bundle(text: str) -> Bundle:
    return {"text/markdown": text, "text/plain": text}


def title_bundle(title: str) -> Bundle:
    return {"text/markdown": f"### {title}", "text/plain": title}


def code_bundle(block: dict[str, Any]) -> Bundle:
    content, language = block["content"], block.get("language") or ""
    longest = max((len(run) for run in re.findall(r"`+", content)), default=0)
    fence = "`" * max(3, longest + 1)
    return {"text/markdown": f"{fence}{language}\n{content}\n{fence}", "text/plain": content}


_ALERT_STYLE = {
    "info": ("#0969da", "rgba(9,105,218,0.08)", "Note"),
    "warning": ("#9a6700", "rgba(191,135,0,0.10)", "Warning"),
    "danger": ("#cf222e", "rgba(207,34,46,0.08)", "Danger"),
    "success": ("#1a7f37", "rgba(26,127,55,0.08)", "Success"),
}


def alert_bundle(block: dict[str, Any]) -> Bundle:
    variant = block.get("variant", "info")
    color, background, word = _ALERT_STYLE[variant]
    body = "<br>".join(html.escape(line) for line in block["content"].splitlines())
    markup = (
        f'<div class="agent-kernel-alert agent-kernel-alert-{variant}" role="alert" '
        f'style="border-left:4px solid {color};background:{background};padding:6px 12px;margin:4px 0">'
        f'<strong style="color:{color}">{word}</strong> {body}</div>'
    )
    return {"text/html": markup, "text/plain": f"[{word}] {block['content']}"}


def json_bundle(block: dict[str, Any]) -> Bundle:
    data = block["data"]
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    shown = text if len(text) <= JSON_CHARS else text[:JSON_CHARS] + f"\n... ({len(text):,} characters in all)"
    if isinstance(data, dict):
        summary = f"JSON object · {len(data)} key{'s' if len(data) != 1 else ''}"
    elif isinstance(data, list):
        summary = f"JSON array · {len(data)} item{'s' if len(data) != 1 else ''}"
    else:
        summary = "JSON value"
    markup = (
        f'<details class="agent-kernel-json"><summary>{summary}</summary>'
        f'<pre style="white-space:pre-wrap">{html.escape(shown)}</pre></details>'
    )
    return {"application/json": data, "text/html": markup, "text/plain": shown}


def image_bundle(block: dict[str, Any], cwd: Path) -> Bundle:
    """An image from a URL (the browser fetches it) or from a file in ``cwd`` (embedded)."""
    url, alt = block["url"], block.get("alt") or ""
    if re.match(r"^(https?:|data:image/)", url):
        markup = f'<img src="{html.escape(url, quote=True)}" alt="{html.escape(alt, quote=True)}" style="max-width:100%">'
        return {"text/html": markup, "text/markdown": f"![{alt}]({url})", "text/plain": alt or url}
    root = cwd.resolve()
    path = (root / url).resolve()
    if not path.is_relative_to(root):
        raise ToolInputError(
            f"image url {url!r} is outside the kernel's working directory ({root}); "
            "use a path inside it or an http(s) URL."
        )
    mime = IMAGE_TYPES.get(path.suffix.lower())
    if mime is None:
        raise ToolInputError(f"image {url!r}: use one of {', '.join(sorted(IMAGE_TYPES))}.")
    if not path.is_file():
        raise ToolInputError(f"image file {url!r} does not exist in {root}.")
    size = path.stat().st_size
    if size > IMAGE_BYTES:
        raise ToolInputError(f"image {url!r} is {size:,} bytes; the limit is {IMAGE_BYTES:,}.")
    raw = path.read_bytes()
    payload = raw.decode("utf-8") if mime == "image/svg+xml" else base64.b64encode(raw).decode("ascii")
    return {mime: payload, "text/plain": alt or path.name}
