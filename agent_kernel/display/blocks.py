"""Blocks: what ``render_blocks`` shows, checked, and rendered for the running cell.

Each block becomes one output of the cell. Static blocks (markdown, code, image, alert,
json, chart) are plain display bundles that JupyterLab renders natively and a saved
notebook keeps: Markdown/HTML, Vega-Lite with an SVG (or a PNG where smaller),
``application/json``. Tables and forms are widgets in a live front end, and carry a
static HTML rendering in the same bundle for viewers that have no widget state (GitHub,
nbconvert, nbviewer, papermill output, a notebook reopened after its kernel stopped);
a form is replaced by its static record once answered.

What one turn of typical blocks adds to a saved notebook stays under
:data:`TURN_NOTEBOOK_BYTES` (checked by tests/browser/test_reopen.py): a table costs its
first page whatever its length, a chart its spec and picture.

:func:`check_blocks` validates what the model sent and says exactly what to fix.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from typing_extensions import NotRequired, TypedDict

from agent_kernel.display import safe
from agent_kernel.display.form import FieldError, coerce
from agent_kernel.errors import ToolInputError

Bundle = dict[str, object]


class CodeBlock(TypedDict):
    """A ``code`` block as :func:`check_blocks` passed it."""

    type: Literal["code"]
    content: str
    language: NotRequired[str | None]


class AlertBlock(TypedDict):
    """An ``alert`` block as :func:`check_blocks` passed it."""

    type: Literal["alert"]
    content: str
    variant: NotRequired[Literal["info", "warning", "danger", "success"]]


class JsonBlock(TypedDict):
    """A ``json`` block as :func:`check_blocks` passed it: any JSON value in ``data``."""

    type: Literal["json"]
    data: object


class ChartBlock(TypedDict):
    """A ``chart`` block as :func:`check_blocks` passed it: its data inline (Chart.js'
    ``{labels, datasets}`` or row objects with ``x`` and ``y``) or a kernel ``variable``."""

    type: Literal["chart"]
    chartType: Literal["line", "bar", "pie", "area"]
    data: NotRequired[object]
    variable: NotRequired[str]
    x: NotRequired[str]
    y: NotRequired[str | list[str]]
    title: NotRequired[str]
    xLabel: NotRequired[str]
    yLabel: NotRequired[str]


class ImageSpec(TypedDict):
    """An ``image`` block as :func:`check_blocks` passed it (the checks take the model's
    JSON objects as they came, of unknown values)."""

    type: Literal["image"]
    url: str
    alt: NotRequired[str | None]


BLOCK_TYPES = ("markdown", "table", "chart", "form", "code", "image", "alert", "json", "component")
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
_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|gif|webp|svg\+xml);base64,", re.IGNORECASE)
JSON_CHARS = 100_000
# The most a turn of typical blocks (a table of any length, a few charts of a few hundred
# points, a form) may add to the saved notebook file, as JupyterLab writes it.
TURN_NOTEBOOK_BYTES = 150_000

# Size limits, checked before any work: what a person can read in a cell, and well under
# what makes a renderer slow (a chart title of 100,000 characters took minutes to draw).
MAX_BLOCKS = 20
TEXT_CHARS = 50_000  # markdown, code and alert content
SOURCE_CHARS = 65_536  # a component's html, css or js (tools/components.py checks their sum)
LABEL_CHARS = 300  # titles, axis and column labels, field labels, options, x values
NAME_CHARS = 200  # keys, field names, variable and column names
URL_CHARS = 4_000  # an http(s) URL or a path
DATA_URL_CHARS = IMAGE_BYTES * 4 // 3 + 100  # a data:image URL (base64)
MAX_COLUMNS = 200
MAX_FIELDS = 50
MAX_OPTIONS = 200
MAX_SERIES = 20
DATA_ITEMS = 5_000  # rows of a table, labels and values of a chart, items of any JSON list
DATA_STRING_CHARS = 10_000  # one string inside `data`
DATA_DEPTH = 20
DATA_NODES = 200_000  # values in one block's `data` in all
FIELD_CHARS = {
    "type": 40,
    "variant": 40,
    "chartType": 40,
    "language": 40,
    "content": TEXT_CHARS,
    "title": LABEL_CHARS,
    "xLabel": LABEL_CHARS,
    "yLabel": LABEL_CHARS,
    "submitLabel": LABEL_CHARS,
    "alt": 1_000,
    "variable": NAME_CHARS,
    "x": NAME_CHARS,
    "name": NAME_CHARS,
    "html": SOURCE_CHARS,
    "css": SOURCE_CHARS,
    "js": SOURCE_CHARS,
    "description": 2_000,
}

_ROWS_OR_VARIABLE = (
    "Give `data` (a list of row objects) or `variable` (the name of a pandas DataFrame in "
    "the user's kernel; best for large data, which then never passes through you)."
)

# The JSON schema of one block, sent to the model as part of render_blocks' input schema.
BLOCK_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": list(BLOCK_TYPES)},
        "content": {"type": "string", "maxLength": TEXT_CHARS, "description": "markdown, code, alert"},
        "language": {"type": "string", "description": "code"},
        "variant": {"type": "string", "enum": list(ALERT_VARIANTS), "description": "alert"},
        "columns": {
            "type": "array",
            "description": "table (default: all)",
            "items": {
                "type": "object",
                "properties": {"key": {"type": "string"}, "label": {"type": "string"}},
                "required": ["key"],
            },
        },
        "data": {
            "description": "table: row objects. chart: {labels, datasets: [{label, data}]} or row "
            "objects with x, y. json: any value.",
        },
        "variable": {
            "type": "string",
            "description": "table, chart: a kernel DataFrame's name, instead of data",
        },
        "chartType": {"type": "string", "enum": list(CHART_TYPES), "description": "chart"},
        "x": {"type": "string", "description": "chart: x column (pie: labels)"},
        "y": {
            "description": "chart: y column(s)",
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
        },
        "title": {"type": "string", "maxLength": LABEL_CHARS, "description": "table, chart, form"},
        "xLabel": {"type": "string", "maxLength": LABEL_CHARS},
        "yLabel": {"type": "string", "maxLength": LABEL_CHARS},
        "fields": {
            "type": "array",
            "description": "form",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "label": {"type": "string"},
                    "type": {"type": "string", "enum": list(FIELD_TYPES)},
                    "options": {"type": "array", "items": {"type": "string"}, "description": "select"},
                    "required": {"type": "boolean"},
                    "default": {},
                },
                "required": ["name", "label", "type"],
            },
        },
        "submitLabel": {"type": "string", "description": "form"},
        "url": {
            "type": "string",
            "description": "image: http(s) or data: URL, or a path relative to the kernel's directory",
        },
        "alt": {"type": "string", "maxLength": 1_000, "description": "image"},
        "name": {"type": "string", "description": "component (see create_ui_component; inline: its fields)"},
        "state": {"type": "object", "description": "component"},
    },
    "required": ["type"],
}


def check_blocks(blocks: object) -> list[dict[str, object]]:
    """``blocks`` as validated dicts; a :class:`ToolInputError` names the first problem."""
    if not isinstance(blocks, list) or not blocks:
        raise ToolInputError("render_blocks needs `blocks`: a non-empty list of block objects.")
    if len(blocks) > MAX_BLOCKS:
        raise ToolInputError(f"render_blocks shows at most {MAX_BLOCKS} blocks per call; got {len(blocks)}.")
    checked = []
    forms = 0
    for index, block in enumerate(blocks):
        where = f"blocks[{index}]"
        if not isinstance(block, dict):
            raise ToolInputError(f"{where} must be an object with a `type`.")
        kind = block.get("type")
        if kind not in BLOCK_TYPES:
            raise ToolInputError(f"{where}.type must be one of {', '.join(BLOCK_TYPES)}; got {kind!r}.")
        check_sizes(block, where)
        _CHECKS[kind](block, where)
        forms += kind == "form"
        checked.append(block)
    if forms > 1:
        raise ToolInputError("render_blocks shows at most one form per call; call it again for the next form.")
    return checked


def too_long(where: str, value: str, limit: int) -> ToolInputError:
    return ToolInputError(f"{where} is {len(value):,} characters; the limit is {limit:,}. Shorten it.")


def check_text(value: object, where: str, limit: int) -> None:
    """Refuse a string over ``limit`` characters (other types are left to the type checks)."""
    if isinstance(value, str) and len(value) > limit:
        raise too_long(where, value, limit)


def check_list(value: object, where: str, limit: int, item_chars: int | None = None) -> None:
    if isinstance(value, list):
        if len(value) > limit:
            raise ToolInputError(f"{where} has {len(value):,} items; the limit is {limit:,}.")
        if item_chars is not None:
            for index, item in enumerate(value):
                check_text(item, f"{where}[{index}]", item_chars)


def check_data(value: object, where: str) -> None:
    """Bound any JSON value: list and object sizes, string lengths, depth and total size."""
    stack = [(value, where, 0)]
    nodes = 0
    while stack:
        item, at, depth = stack.pop()
        nodes += 1
        if nodes > DATA_NODES:
            raise ToolInputError(f"{where} holds more than {DATA_NODES:,} values; aggregate it or pass `variable`.")
        if depth > DATA_DEPTH:
            raise ToolInputError(f"{at} is nested more than {DATA_DEPTH} levels deep.")
        if isinstance(item, str):
            check_text(item, at, DATA_STRING_CHARS)
        elif isinstance(item, list):
            check_list(item, at, DATA_ITEMS)
            stack.extend((v, f"{at}[{i}]", depth + 1) for i, v in enumerate(item))
        elif isinstance(item, dict):
            if len(item) > MAX_COLUMNS:
                raise ToolInputError(f"{at} has {len(item):,} keys; the limit is {MAX_COLUMNS:,}.")
            for key, v in item.items():
                check_text(key, f"{at} key", NAME_CHARS)
                stack.append((v, f"{at}.{key}"[: len(at) + 60], depth + 1))


def check_sizes(block: Mapping[str, object], where: str) -> None:
    """Every string and list of one block within its limit, before anything is built from it."""
    for name, value in block.items():
        at = f"{where}.{name}"
        if name == "url":
            limit = DATA_URL_CHARS if isinstance(value, str) and value[:5].lower() == "data:" else URL_CHARS
            check_text(value, at, limit)
        elif name == "data":
            check_data(value, at)
        elif name == "y":
            check_text(value, at, NAME_CHARS)
            check_list(value, at, MAX_SERIES, NAME_CHARS)
        elif name == "columns":
            check_list(value, at, MAX_COLUMNS)
            for index, column in enumerate(value if isinstance(value, list) else []):
                if isinstance(column, dict):
                    check_text(column.get("key"), f"{at}[{index}].key", NAME_CHARS)
                    check_text(column.get("label"), f"{at}[{index}].label", LABEL_CHARS)
        elif name == "fields":
            check_list(value, at, MAX_FIELDS)
            for index, field in enumerate(value if isinstance(value, list) else []):
                if isinstance(field, dict):
                    _check_field_sizes(field, f"{at}[{index}]")
        elif isinstance(value, str):
            check_text(value, at, FIELD_CHARS.get(name, LABEL_CHARS))
        elif isinstance(value, (list, dict)):
            check_data(value, at)


def _check_field_sizes(field: Mapping[str, object], where: str) -> None:
    check_text(field.get("name"), f"{where}.name", NAME_CHARS)
    check_text(field.get("label"), f"{where}.label", LABEL_CHARS)
    check_text(field.get("type"), f"{where}.type", 40)
    check_text(field.get("default"), f"{where}.default", DATA_STRING_CHARS)
    check_list(field.get("options"), f"{where}.options", MAX_OPTIONS, LABEL_CHARS)


def _text(block: Mapping[str, object], where: str, name: str = "content") -> None:
    if not isinstance(block.get(name), str):
        raise ToolInputError(f"{where} needs `{name}`: a string.")


def _check_code(block: Mapping[str, object], where: str) -> None:
    _text(block, where)
    if not isinstance(block.get("language", ""), str):
        raise ToolInputError(f"{where}.language must be a string such as 'python'.")


def _check_alert(block: Mapping[str, object], where: str) -> None:
    _text(block, where)
    if block.get("variant", "info") not in ALERT_VARIANTS:
        raise ToolInputError(f"{where}.variant must be one of {', '.join(ALERT_VARIANTS)}.")


def _check_image(block: Mapping[str, object], where: str) -> None:
    _text(block, where, "url")


def _check_json(block: Mapping[str, object], where: str) -> None:
    if "data" not in block:
        raise ToolInputError(f"{where} needs `data`: any JSON value.")


def _check_table(block: Mapping[str, object], where: str) -> None:
    has_data, has_variable = "data" in block, "variable" in block
    if has_data == has_variable:
        raise ToolInputError(f"{where} is a table. {_ROWS_OR_VARIABLE}")
    if has_data:
        rows = block["data"]
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ToolInputError(f'{where}.data must be a list of row objects like {{"month": "Jan", "total": 3}}.')
    columns = block.get("columns")
    if columns is not None and (
        not isinstance(columns, list) or not all(isinstance(c, dict) and isinstance(c.get("key"), str) for c in columns)
    ):
        raise ToolInputError(f"{where}.columns must be a list of {{key, label}} objects.")


def _check_chart(block: Mapping[str, object], where: str) -> None:
    if block.get("chartType") not in CHART_TYPES:
        raise ToolInputError(f"{where}.chartType must be one of {', '.join(CHART_TYPES)}.")
    if ("data" in block) == ("variable" in block):
        raise ToolInputError(
            f"{where} is a chart: give `data` ({{labels, datasets}} or a list of rows with `x` and `y`) "
            "or `variable` (a DataFrame in the kernel, with `x` and `y` columns)."
        )


def _check_form(block: Mapping[str, object], where: str) -> None:
    check_fields(block.get("fields"), where)
    if not isinstance(block.get("submitLabel", "Submit"), str):
        raise ToolInputError(f"{where}.submitLabel must be a string.")


def check_fields(fields: object, where: str) -> None:
    """Raise :class:`ToolInputError` for a field list the form cannot show."""
    if not isinstance(fields, list) or not fields:
        raise ToolInputError(f"{where} needs `fields`: a non-empty list of {{name, label, type}} objects.")
    seen: set[str] = set()
    for index, field in enumerate(fields):
        at = f"{where}.fields[{index}]"
        if not isinstance(field, dict) or not isinstance(field.get("name"), str) or not field["name"]:
            raise ToolInputError(f"{at} needs a `name` (the key of its value in the result).")
        if field["name"] in seen:
            raise ToolInputError(f"{at}: the name {field['name']!r} is used twice.")
        seen.add(field["name"])
        if field.get("type") not in FIELD_TYPES:
            raise ToolInputError(f"{at}.type must be one of {', '.join(FIELD_TYPES)}.")
        if not isinstance(field.get("label", field["name"]), str):
            raise ToolInputError(f"{at}.label must be a string.")
        if field["type"] == "select":
            options = field.get("options")
            if not isinstance(options, list) or not options or not all(isinstance(o, str) for o in options):
                raise ToolInputError(f"{at}: a select needs `options`, a non-empty list of strings.")
        if field.get("default") is not None:
            try:
                coerce(field, field["default"])
            except FieldError as exc:
                raise ToolInputError(f"{at}.default: {exc}") from None


def _check_component(block: Mapping[str, object], where: str) -> None:
    # The definition itself is checked where it is resolved (agent_kernel.tools.components).
    if not isinstance(block.get("name"), str) and not isinstance(block.get("html"), str):
        raise ToolInputError(f"{where}: a component needs `name` (a stored component) or `html` (an inline one).")


_CHECKS = {
    "markdown": _text,
    "code": _check_code,
    "alert": _check_alert,
    "image": _check_image,
    "json": _check_json,
    "table": _check_table,
    "chart": _check_chart,
    "form": _check_form,
    "component": _check_component,
}


# -- static bundles -------------------------------------------------------------------------


def markdown_bundle(text: str) -> Bundle:
    return safe.markdown_bundle(text)


def title_bundle(title: str) -> Bundle:
    title = safe.clean_text(title)
    return {"text/html": f'<h3 class="agent-kernel-title">{html.escape(title)}</h3>', "text/plain": title}


def code_bundle(block: CodeBlock) -> Bundle:
    content = safe.clean_text(block["content"])
    language = safe.clean_text(block.get("language") or "")
    label = f'<div style="color:#57606a;font-size:0.85em">{html.escape(language)}</div>' if language else ""
    markup = (
        f'<div class="agent-kernel-code">{label}'
        f'<pre style="white-space:pre-wrap;margin:2px 0"><code>{html.escape(content)}</code></pre></div>'
    )
    return {"text/html": markup, "text/plain": content}


_ALERT_STYLE = {
    "info": ("#0969da", "rgba(9,105,218,0.08)", "Note"),
    "warning": ("#9a6700", "rgba(191,135,0,0.10)", "Warning"),
    "danger": ("#cf222e", "rgba(207,34,46,0.08)", "Danger"),
    "success": ("#1a7f37", "rgba(26,127,55,0.08)", "Success"),
}


def alert_bundle(block: AlertBlock) -> Bundle:
    variant = block.get("variant", "info")
    color, background, word = _ALERT_STYLE[variant]
    content = safe.clean_text(block["content"])
    body = "<br>".join(html.escape(line) for line in content.splitlines())
    markup = (
        f'<div class="agent-kernel-alert agent-kernel-alert-{variant}" role="alert" '
        f'style="border-left:4px solid {color};background:{background};padding:6px 12px;margin:4px 0">'
        f'<strong style="color:{color}">{word}</strong> {body}</div>'
    )
    return {"text/html": markup, "text/plain": f"[{word}] {content}"}


def json_bundle(block: JsonBlock) -> Bundle:
    data = safe.clean_value(block["data"])
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


def image_bundle(block: ImageSpec, cwd: Path) -> Bundle:
    """An image from a file in ``cwd`` or a data: URL (embedded), or a link to an http(s) image."""
    url, alt = block["url"].strip(), safe.clean_text(block.get("alt") or "")
    if safe.clean_text(url) != url:
        raise ToolInputError("image url contains control characters; give a plain URL or path.")
    inline = _DATA_IMAGE.match(url)
    if inline:
        mime, payload = f"image/{inline.group(1).lower()}", url[inline.end() :]
        try:
            raw = base64.b64decode(payload, validate=True)
        except ValueError:
            raise ToolInputError("image url: the data: URL's base64 payload is not valid base64.") from None
        if mime == "image/svg+xml":
            return {mime: raw.decode("utf-8", "replace"), "text/plain": alt or "image"}
        return {mime: base64.b64encode(raw).decode("ascii"), "text/plain": alt or "image"}
    if re.match(r"^https?://", url, re.IGNORECASE):
        # A link the person clicks, never an <img>: opening the notebook fetches nothing.
        markup = safe.image_link(url, alt)
        plain = f"image: {alt} <{url}>" if alt else f"image: <{url}>"
        return {"text/html": safe.sanitize_html(markup), "text/plain": plain}
    if re.match(r"^[a-z][a-z0-9+.-]*:", url, re.IGNORECASE) and not re.match(r"^[a-z]:[\\/]", url, re.IGNORECASE):
        raise ToolInputError(
            f"image url: only http(s) URLs, data:image/...;base64 URLs and file paths are shown; got {url[:40]!r}."
        )
    root = cwd.resolve()
    path = (root / url).resolve()
    if not path.is_relative_to(root):
        raise ToolInputError(
            f"image url {url!r} is outside the kernel's working directory ({root}); "
            "use a path inside it or an http(s) URL."
        )
    file_mime = IMAGE_TYPES.get(path.suffix.lower())
    if file_mime is None:
        raise ToolInputError(f"image {url!r}: use one of {', '.join(sorted(IMAGE_TYPES))}.")
    if not path.is_file():
        raise ToolInputError(f"image file {url!r} does not exist in {root}.")
    size = path.stat().st_size
    if size > IMAGE_BYTES:
        raise ToolInputError(f"image {url!r} is {size:,} bytes; the limit is {IMAGE_BYTES:,}.")
    raw = path.read_bytes()
    payload = raw.decode("utf-8") if file_mime == "image/svg+xml" else base64.b64encode(raw).decode("ascii")
    return {file_mime: payload, "text/plain": alt or path.name}
