"""The table block's widget: rows from the model or a DataFrame from the kernel, paged and sortable.

The rows stay in the kernel. The widget receives one page at a time (``page_size`` rows,
as text) and asks for another page or another sort order through its traits, so a
DataFrame with a million rows costs the browser what 25 rows cost. Sorting happens in
the kernel (pandas' stable sort for a DataFrame).

Numbers show with thousands separators (``1,234,567.5``), as the chart and the footer
show them, except in columns whose name says they hold a year, an id or a code.

The static rendering (for saved notebooks and unattended runs) is the first page as an
HTML table with a note of how many rows there are. The widget's bundle carries it, and
carries the widget view a second time under
:data:`~agent_kernel.display.fallback.WIDGET_WITH_FALLBACK_MIME`: the
JupyterLab extension ranks that first and shows the static page until the widget
manager draws the view, and keeps it when the kernel that held the widget is gone (a
reopened notebook), where the plain widget view would say "model not found".
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import traitlets

from agent_kernel.display.fallback import Bundle, with_fallback_view
from agent_kernel.display.presence import AckWidget
from agent_kernel.display.scripts import widget_script
from agent_kernel.display.text_tables import Table
from agent_kernel.errors import ToolInputError

_JS = Path(__file__).with_name("js")
CELL_CHARS = 200
# Integer columns that are labels rather than amounts: no thousands separators in them.
_LABEL_NUMBERS = re.compile(r"(?:^|[^a-z])(?:year|yr|id|code|zip|postcode|phone|number|no)s?$", re.IGNORECASE)


class TableSource:
    """Rows to show: a list of dicts or a pandas DataFrame, with columns and sorting."""

    def __init__(self, block: dict[str, Any], namespace: Mapping[str, Any]) -> None:
        self.frame: Any = None
        self.records: list[dict[str, Any]] = []
        wanted = block.get("columns")
        if "variable" in block:
            self.frame = _frame(block["variable"], namespace)
            keys = [str(c) for c in self.frame.columns]
            self._by_key = dict(zip(keys, self.frame.columns))
        else:
            self.records = block["data"]
            keys = list(dict.fromkeys(k for row in self.records[:1000] for k in row))
            self._by_key = {k: k for k in keys}
        if wanted:
            unknown = [c["key"] for c in wanted if c["key"] not in self._by_key]
            if unknown:
                raise ToolInputError(
                    f"table columns {', '.join(map(repr, unknown))} are not in the data; "
                    f"its columns are {', '.join(keys[:30])}."
                )
            self.columns = [{"key": c["key"], "label": str(c.get("label") or c["key"])} for c in wanted]
        else:
            self.columns = [{"key": k, "label": k} for k in keys]
        self.numeric = [c["key"] for c in self.columns if self._is_numeric(c["key"])]
        self._grouped = [c["key"] in self.numeric and not _LABEL_NUMBERS.search(c["key"]) for c in self.columns]
        self._order: tuple[tuple[str, bool], list[int] | Any] | None = None

    @property
    def row_count(self) -> int:
        return len(self.frame) if self.frame is not None else len(self.records)

    def page(self, page: int, size: int, sort_key: str = "", descending: bool = False) -> list[list[str]]:
        """One page of rows as display text, in the requested order."""
        start = max(page, 0) * size
        keys = [c["key"] for c in self.columns]
        if self.frame is not None:
            frame = self._sorted_frame(sort_key, descending) if sort_key in self._by_key else self.frame
            chunk = frame.iloc[start : start + size]
            columns = [self._by_key[k] for k in keys]
            return [self._texts(row) for row in chunk[columns].itertuples(index=False, name=None)]
        order = self._sorted_records(sort_key, descending) if sort_key in self._by_key else None
        indices = (
            order[start : start + size] if order is not None else range(start, min(start + size, len(self.records)))
        )
        return [self._texts([self.records[i].get(k) for k in keys]) for i in indices]

    def _texts(self, values: Any) -> list[str]:
        return [cell_text(v, grouped) for v, grouped in zip(values, self._grouped)]

    def _sorted_frame(self, key: str, descending: bool) -> Any:
        if self._order is None or self._order[0] != (key, descending):
            frame = self.frame.sort_values(
                by=self._by_key[key], ascending=not descending, kind="stable", na_position="last"
            )
            self._order = ((key, descending), frame)
        return self._order[1]

    def _sorted_records(self, key: str, descending: bool) -> list[int]:
        if self._order is None or self._order[0] != (key, descending):
            present = [i for i, row in enumerate(self.records) if not _missing(row.get(key))]
            missing = [i for i, row in enumerate(self.records) if _missing(row.get(key))]
            try:
                present.sort(key=lambda i: self.records[i][key], reverse=descending)
            except TypeError:  # mixed types: compare as text
                present.sort(key=lambda i: str(self.records[i][key]), reverse=descending)
            self._order = ((key, descending), present + missing)
        return self._order[1]

    def _is_numeric(self, key: str) -> bool:
        if self.frame is not None:
            from pandas.api.types import is_bool_dtype, is_numeric_dtype  # noqa: PLC0415 - pandas is heavy; only a DataFrame source needs it

            dtype = self.frame[self._by_key[key]].dtype
            return bool(is_numeric_dtype(dtype) and not is_bool_dtype(dtype))
        values = [row.get(key) for row in self.records[:1000] if not _missing(row.get(key))]
        return bool(values) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)

    def static(self, title: str, size: int) -> Bundle:
        """The first page as HTML and text, saying how many rows there are."""
        rows = self.page(0, size)
        count = self.row_count
        note = f"Rows 1–{len(rows)} of {count:,}." if count > len(rows) else ""
        right = [i for i, c in enumerate(self.columns) if c["key"] in self.numeric]
        table = Table([c["label"] for c in self.columns], rows, title=title, note=note, right=right)
        return {"text/html": table._repr_html_(), "text/plain": repr(table)}


def _frame(name: str, namespace: Mapping[str, Any]) -> Any:
    if name not in namespace:
        raise ToolInputError(f"There is no variable {name!r} in the kernel; inspect_namespace lists them.")
    value = namespace[name]
    if hasattr(value, "to_frame") and not hasattr(value, "columns"):  # a Series
        value = value.to_frame()
    if not (hasattr(value, "columns") and hasattr(value, "iloc")):
        raise ToolInputError(f"{name!r} is a {type(value).__name__}, not a pandas DataFrame; give `data` rows instead.")
    index = value.index
    if not (type(index).__name__ == "RangeIndex" and index.name is None):
        try:  # a meaningful index (a groupby result's keys) becomes the first columns
            value = value.reset_index()
        except ValueError:  # a column already has the index's name
            pass
    return value


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def cell_text(value: Any, grouped: bool = False) -> str:
    """A cell as text: empty for missing values, floats to 10 significant digits, numbers
    with thousands separators when ``grouped``."""
    if value is None:
        return ""
    comma = "," if grouped else ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:{comma}.10g}"
    if grouped and isinstance(value, numbers.Number) and not isinstance(value, bool):
        return _grouped_number(value)
    try:
        if value != value:  # noqa: PLR0124 - NaT and pd.NA are the values unequal to themselves
            return ""
    except (TypeError, ValueError):
        pass
    text = str(value)
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def _grouped_number(value: Any) -> str:
    """An int, a numpy number or a Decimal with thousands separators."""
    try:
        if isinstance(value, numbers.Integral):
            return f"{int(value):,}"
        if isinstance(value, numbers.Real):
            number = float(value)
            return "" if math.isnan(number) else f"{number:,.10g}"
        return f"{value:,}"
    except (TypeError, ValueError, OverflowError):
        return str(value)


class TableWidget(AckWidget):
    """The interactive table; its bundle carries the static first page as a fallback."""

    _esm = widget_script("table.js")
    _css = (_JS / "widgets.css").read_text(encoding="utf-8")

    title = traitlets.Unicode("").tag(sync=True)
    columns: traitlets.List[dict[str, Any]] = traitlets.List().tag(sync=True)
    numeric: traitlets.List[str] = traitlets.List().tag(sync=True)
    rows: traitlets.List[list[Any]] = traitlets.List().tag(sync=True)
    row_count = traitlets.Int(0).tag(sync=True)
    page = traitlets.Int(0).tag(sync=True)
    page_size = traitlets.Int(25).tag(sync=True)
    sort_key = traitlets.Unicode("").tag(sync=True)
    sort_desc = traitlets.Bool(False).tag(sync=True)

    def __init__(self, source: TableSource, *, title: str = "", page_size: int = 25) -> None:
        self.source = source
        super().__init__(
            title=title,
            columns=source.columns,
            numeric=source.numeric,
            row_count=source.row_count,
            page_size=max(page_size, 1),
            rows=source.page(0, max(page_size, 1)),
        )
        self.on_msg(self._on_view)

    def _on_view(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """The front end asks for a page and an order (see table.js)."""
        if not isinstance(content, dict) or content.get("type") != "view":
            return
        key = content.get("sort_key") or ""
        if key and key not in {c["key"] for c in self.columns}:
            return
        pages = max(1, math.ceil(self.row_count / self.page_size))
        page = min(max(int(content.get("page") or 0), 0), pages - 1)
        descending = bool(content.get("sort_desc")) and bool(key)
        with self.hold_sync():
            self.page, self.sort_key, self.sort_desc = page, key, descending
            self.rows = self.source.page(page, self.page_size, key, descending)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        assert bundle is not None, "a widget with a view has a bundle"
        data, metadata = bundle
        static = self.source.static(self.title, self.page_size)
        return with_fallback_view({**static, **data, "text/plain": static["text/plain"]}), metadata
