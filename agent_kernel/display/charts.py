"""The chart block: line, bar, pie and area charts as Vega-Lite, with a PNG beside it.

JupyterLab renders ``application/vnd.vegalite.v5+json`` itself (interactive, with
tooltips); GitHub, nbconvert, nbviewer and other viewers fall back to the PNG, which
vl-convert renders offline in the kernel (a bundled Vega engine: no browser, no network)
at scale 1 and deflated again (see :mod:`.png_worker`): about 7–25 KB a chart.

The fallback is a PNG, not an SVG, although an SVG would be sharper: JupyterLab's Vega
renderer adds a PNG of its own (drawn by the browser, two to three times larger) to any
Vega output that has none, and that is what a saved notebook would then keep; and once
deflated again the PNG is also the smaller of the two (a 2,000-point line: 15 KB against
35 KB of SVG).

The model may give the data three ways:

- ``data: {labels: [...], datasets: [{label, data: [...]}, ...]}`` (Chart.js' shape);
- ``data: [{...}, ...]`` rows, with ``x`` (a column) and ``y`` (a column or a list);
- ``variable: "df"``, a DataFrame in the kernel, with ``x`` and ``y`` (its index counts
  as a column), so large data never passes through the model.
"""

from __future__ import annotations

import base64
import math
import numbers
from collections.abc import Mapping
from typing import Any

from agent_kernel.display.blocks import LABEL_CHARS, Bundle, ChartBlock
from agent_kernel.display.png_worker import WORKER, RenderError
from agent_kernel.display.safe import clean_text
from agent_kernel.display.table_widget import _frame
from agent_kernel.errors import ToolInputError

VEGA_LITE_MIME = "application/vnd.vegalite.v5+json"
SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
MAX_POINTS = 5_000
TEXT_CHARS = LABEL_CHARS  # a title, an axis label, an x value or a series name
FEW_VALUES = 30  # distinct numbers on x that a bar chart draws as bands (any whole numbers are)


def chart_spec(block: ChartBlock, namespace: Mapping[str, object]) -> dict[str, object]:
    """The Vega-Lite spec of a chart block (data inline), every text in it cleaned and clipped."""
    spec = _tidy(_spec(block, namespace))
    assert isinstance(spec, dict)
    return spec


def _tidy(value: object) -> object:
    """Each string as vl-convert accepts it (no control characters, non-characters or lone
    surrogates; they abort its process) and at most ``TEXT_CHARS`` long."""
    if isinstance(value, str):
        value = clean_text(value)
        return value if len(value) <= TEXT_CHARS else value[: TEXT_CHARS - 1] + "…"
    if isinstance(value, dict):
        return {_tidy(k): _tidy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tidy(v) for v in value]
    return value


def _spec(block: ChartBlock, namespace: Mapping[str, object]) -> dict[str, object]:
    xs, series, x_title = _series(block, namespace)
    points = [{"x": x, "series": name, "value": value} for name, values in series for x, value in zip(xs, values)]
    if len(points) > MAX_POINTS:
        raise ToolInputError(
            f"The chart has {len(points):,} points; the most is {MAX_POINTS:,}. Aggregate first "
            "(e.g. resample or group with run_code) and chart the result."
        )
    kind = block["chartType"]
    names = [name for name, _ in series]
    y_title = block.get("yLabel") or (names[0] if len(names) == 1 else None)
    tooltip = [
        {"field": "x", "title": x_title or "x"},
        {"field": "series", "title": "series"},
        {"field": "value", "type": "quantitative", "title": y_title or "value"},
    ]
    spec: dict[str, object] = {
        "$schema": SCHEMA,
        "data": {"values": points},
        "width": 520,
        "height": 280,
    }
    if block.get("title"):
        spec["title"] = block["title"]
    # JupyterLab's Vega renderer: keep the export menu, but not "View Source", which writes
    # the spec's text into a new same-origin window unescaped.
    spec["usermeta"] = {
        "embedOptions": {"actions": {"export": True, "source": False, "compiled": False, "editor": False}}
    }
    color = {"field": "series", "type": "nominal", "sort": names, "title": None}
    if kind == "pie":
        first = names[0]
        spec.update(width=300, height=300)
        spec["transform"] = [{"filter": {"field": "series", "equal": first}}]
        spec["mark"] = {"type": "arc", "tooltip": True}
        spec["encoding"] = {
            "theta": {"field": "value", "type": "quantitative", "stack": True},
            "color": {"field": "x", "type": "nominal", "sort": None, "title": x_title},
            "order": {"field": "order", "type": "quantitative"},
            "tooltip": tooltip,
        }
        spec["data"] = {"values": [dict(p, order=i) for i, p in enumerate(points)]}
        return spec
    numeric_x = all(_numeric(x) for x in xs if x is not None) and any(x is not None for x in xs)
    whole_x = numeric_x and all(isinstance(x, int) for x in xs if x is not None)
    # Bars over a few numbers, or over whole numbers (years, months, ids), stand on a band
    # per value: on a continuous axis they are hairlines between ticks at 0.5, 1.5, ...
    banded = kind == "bar" and numeric_x and (whole_x or len(set(xs)) <= FEW_VALUES)
    axis: dict[str, object] = {"labelOverlap": "parity"}
    x_encoding: dict[str, object] = {
        "field": "x",
        "type": "quantitative" if numeric_x and not banded else "ordinal",
        "title": block.get("xLabel") or x_title,
        "axis": axis,
    }
    if banded:
        axis["labelAngle"] = 0  # numbers read level, ascending
    elif numeric_x:
        if whole_x:  # no ticks between whole numbers, and years without a thousands comma
            axis.update(tickMinStep=1, format="d")
    else:
        x_encoding["sort"] = None  # keep the order the data came in
    encoding: dict[str, object] = {
        "x": x_encoding,
        "y": {"field": "value", "type": "quantitative", "title": y_title, "stack": "zero" if kind == "area" else None},
        "tooltip": tooltip,
    }
    if len(names) > 1:
        encoding["color"] = color
        if kind == "bar":
            encoding["xOffset"] = {"field": "series", "sort": names}
    spec["mark"] = {
        "line": {"type": "line", "point": len(xs) <= 60},
        "bar": {"type": "bar"},
        "area": {"type": "area", "opacity": 0.85},
    }[kind]
    spec["encoding"] = encoding
    return spec


def chart_png(spec: Mapping[str, object]) -> bytes:
    """The chart as a PNG at scale 1, rendered offline by vl-convert (no network access
    allowed) in a worker process; a failure is a :class:`ToolInputError` the model can act on."""
    try:
        return WORKER.render(spec)
    except RenderError as exc:
        raise ToolInputError(
            f"The chart could not be drawn: {exc}. Simplify its text and data and try again, "
            "or show the numbers as a table."
        ) from None


def chart_bundle(spec: Mapping[str, object], png: bytes) -> Bundle:
    return {
        VEGA_LITE_MIME: spec,
        "image/png": base64.b64encode(png).decode("ascii"),
        "text/plain": chart_text(spec),
    }


# -- the chart as text, for a terminal ----------------------------------------------------

TEXT_ROWS = 12  # x values listed in full; more are shown as the first and last few
BAR_CHARS = 32  # the longest bar of a text bar chart
LABEL_WIDTH = 20  # an x value's column


def chart_text(spec: Mapping[str, Any], image: str | None = None) -> str:
    """The chart as a terminal shows it: its title and kind, its axes, its values as text
    bars (one series) or columns (several), and where its ``image`` was saved.

    Every text in ``spec`` was cleaned by :func:`chart_spec` (no control characters, so no
    terminal escapes), so it prints as it is.
    """
    values = spec["data"]["values"]
    encoding = spec["encoding"]
    kind = {"arc": "pie"}.get(spec["mark"]["type"], spec["mark"]["type"])
    if kind == "pie":
        x_title, y_title = encoding["color"].get("title"), encoding["tooltip"][2].get("title")
        first = spec["transform"][0]["filter"]["equal"]
        values = [v for v in values if v["series"] == first]
    else:
        x_title, y_title = encoding["x"].get("title"), encoding["y"].get("title")
    names = list(dict.fromkeys(v["series"] for v in values))
    xs = list(dict.fromkeys(_label(v["x"]) for v in values))
    table: dict[str, dict[str, float | None]] = {x: {} for x in xs}
    for v in values:
        table[_label(v["x"])][v["series"]] = v["value"]
    title = spec.get("title") or "Chart"
    series = f", {len(names)} series" if len(names) > 1 else ""
    lines = [f"{title} ({kind} chart: {len(xs)} x values{series})"]
    axes = [f"{axis}: {name}" for axis, name in (("x", x_title), ("y", y_title)) if name]
    lines += [" · ".join(axes)] if axes else []
    shown = xs if len(xs) <= TEXT_ROWS else [*xs[: TEXT_ROWS // 2], None, *xs[-(TEXT_ROWS // 2 - 1) :]]
    width = min(LABEL_WIDTH, max(len(x) for x in xs) if xs else 1)
    if len(names) == 1:
        numbers = [n for n in (table[x].get(names[0]) for x in xs) if n is not None]
        top = max((abs(n) for n in numbers), default=0) or 1
        for x in shown:
            if x is None:
                lines.append(f"{'…':>{width}}  ({len(xs) - len(shown) + 1} more)")
                continue
            n = table[x].get(names[0])
            mark = "▒" if n is not None and n < 0 else "█"  # below zero: a lighter bar
            bar = "" if n is None else mark * max(1 if n else 0, round(abs(n) / top * BAR_CHARS))
            lines.append(f"{_fit(x, width)}  {bar} {_figure(n)}".rstrip())
    else:
        columns = [_fit(name, 12).rstrip() for name in names]
        cell = max(10, *map(len, columns))
        lines.append(" " * width + "".join(f"  {c:>{cell}}" for c in columns))
        for x in shown:
            if x is None:
                lines.append(f"{'…':>{width}}  ({len(xs) - len(shown) + 1} more)")
                continue
            lines.append(_fit(x, width) + "".join(f"  {_figure(table[x].get(n)):>{cell}}" for n in names))
    if len(xs) > TEXT_ROWS:
        for name in names:
            found = [(n, x) for x in xs if (n := table[x].get(name)) is not None]
            if found:
                low, high = min(found, key=lambda p: p[0]), max(found, key=lambda p: p[0])
                prefix = f"{name}: " if len(names) > 1 else ""
                lines.append(f"{prefix}min {_figure(low[0])} at {low[1]}, max {_figure(high[0])} at {high[1]}")
    if image:
        lines.append(f"Image: {image}")
    return "\n".join(lines)


def _label(x: object) -> str:
    return "" if x is None else str(x)


def _fit(text: str, width: int) -> str:
    return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"


def _figure(n: float | None) -> str:
    if n is None:
        return "–"
    return f"{n:,}" if isinstance(n, int) else f"{n:,.4g}"


# -- the data, whatever shape it came in ------------------------------------------------------


def _series(
    block: ChartBlock, namespace: Mapping[str, object]
) -> tuple[list[object], list[tuple[str, list[float | None]]], str | None]:
    """x values, ``[(series name, y values)]`` and the x axis title."""
    data = block.get("data")
    if isinstance(data, dict):
        return _from_datasets(data)
    if "variable" in block:
        rows = _frame_rows(block["variable"], namespace)
    elif isinstance(data, list) and all(isinstance(r, dict) for r in data):
        rows = data
    else:
        raise ToolInputError(
            "chart data must be {labels: [...], datasets: [{label, data: [numbers]}]} "
            "or a list of row objects with `x` and `y`."
        )
    if not rows:
        raise ToolInputError("The chart has no data.")
    keys = list(dict.fromkeys(k for row in rows[:100] for k in row))
    x = block.get("x") or keys[0]
    ys = block.get("y") or [k for k in keys if k != x and _numeric(rows[0].get(k))]
    ys = [ys] if isinstance(ys, str) else list(ys)
    missing = [k for k in [x, *ys] if k not in keys]
    if missing or not ys:
        raise ToolInputError(
            f"chart columns {', '.join(map(repr, missing)) or '(y)'} not found; the data has "
            f"{', '.join(map(str, keys[:30]))}. Set `x` and `y` to columns of it."
        )
    xs = [_jsonable(row.get(x)) for row in rows]
    return xs, [(str(y), [_number(row.get(y), y) for row in rows]) for y in ys], str(x)


def _from_datasets(
    data: Mapping[object, object],
) -> tuple[list[object], list[tuple[str, list[float | None]]], str | None]:
    labels, datasets = data.get("labels"), data.get("datasets")
    if not isinstance(labels, list) or not isinstance(datasets, list) or not datasets:
        raise ToolInputError("chart data needs `labels` (a list) and `datasets` (a non-empty list of {label, data}).")
    series = []
    for index, dataset in enumerate(datasets):
        if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
            raise ToolInputError(f"chart datasets[{index}] needs `data`: a list of numbers, one per label.")
        name = str(dataset.get("label") or f"series {index + 1}")
        series.append((name, [_number(v, name) for v in dataset["data"][: len(labels)]]))
    return [_jsonable(v) for v in labels], series, None


def _frame_rows(name: str, namespace: Mapping[str, object]) -> list[dict[str, object]]:
    frame = _frame(name, namespace)
    if len(frame) > MAX_POINTS:
        raise ToolInputError(
            f"{name!r} has {len(frame):,} rows; a chart takes at most {MAX_POINTS:,}. Aggregate "
            "it first (e.g. resample or group with run_code) and chart the result."
        )
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]


def _numeric(value: object) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _number(value: Any, series: str) -> float | None:
    if value is None:
        return None
    if _numeric(value):
        number = float(value)
        return (
            None
            if math.isnan(number) or math.isinf(number)
            else (int(number) if number.is_integer() and abs(number) < 2**53 else number)
        )
    raise ToolInputError(f"chart series {series!r} has a value that is not a number: {value!r}.")


def _jsonable(value: Any) -> object:
    if value is None or isinstance(value, (str, bool)):
        return value
    if _numeric(value):
        number = float(value)
        if math.isnan(number):
            return None
        return int(number) if number.is_integer() and abs(number) < 2**53 else number
    if hasattr(value, "isoformat"):
        text = value.isoformat()
        return text[:10] if text.endswith("T00:00:00") else text
    return str(value)
