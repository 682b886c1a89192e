"""Table pages: sorting, missing values, DataFrames with a meaningful index, numbers with
thousands separators, and the static page the widget's output carries."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from agent_kernel.display.fallback import WIDGET_VIEW_MIME, WIDGET_WITH_FALLBACK_MIME
from agent_kernel.display.table_widget import TableSource, TableWidget, cell_text
from agent_kernel.errors import ToolInputError

ROWS = [{"name": "b", "n": 2}, {"name": "a", "n": None}, {"name": "c", "n": 10}, {"name": "d", "n": 1.5}]


def test_rows_sort_with_missing_values_last_and_page():
    source = TableSource({"data": ROWS}, {})
    assert source.numeric == ["n"]
    assert source.page(0, 10, "n") == [["d", "1.5"], ["b", "2"], ["c", "10"], ["a", ""]]
    assert source.page(0, 10, "n", descending=True)[0] == ["c", "10"]
    assert source.page(1, 2, "name") == [["c", "10"], ["d", "1.5"]]
    assert source.page(0, 10, "no-such-column") == source.page(0, 10)  # unsortable: original order


def test_mixed_types_sort_as_text():
    source = TableSource({"data": [{"v": 3}, {"v": "x"}, {"v": 1}]}, {})
    assert [row[0] for row in source.page(0, 5, "v")] == ["1", "3", "x"]


def test_columns_choose_and_label():
    source = TableSource({"data": ROWS, "columns": [{"key": "n", "label": "Count"}]}, {})
    assert source.columns == [{"key": "n", "label": "Count"}] and source.page(0, 1) == [["2"]]
    with pytest.raises(ToolInputError, match="table columns 'total' are not in the data"):
        TableSource({"data": ROWS, "columns": [{"key": "total"}]}, {})


def test_dataframe_index_becomes_columns_and_sorts_in_pandas():
    frame = pd.DataFrame({"month": ["2025-01", "2025-02", "2025-03"], "revenue": [3.0, 1.0, math.nan]}).set_index(
        "month"
    )
    source = TableSource({"variable": "monthly"}, {"monthly": frame})
    assert [c["key"] for c in source.columns] == ["month", "revenue"]
    assert source.page(0, 5, "revenue") == [["2025-02", "1"], ["2025-01", "3"], ["2025-03", ""]]
    series = TableSource({"variable": "s"}, {"s": pd.Series([1, 2], name="x")})
    assert series.columns == [{"key": "x", "label": "x"}]
    with pytest.raises(ToolInputError, match="'n' is a int, not a pandas DataFrame"):
        TableSource({"variable": "n"}, {"n": 3})


def test_cells_are_short_text():
    assert cell_text(0.1 + 0.2) == "0.3" and cell_text(None) == "" and cell_text(pd.NaT) == ""
    assert cell_text("x" * 500).endswith("…") and len(cell_text("x" * 500)) == 200


def test_static_table_is_the_first_page():
    source = TableSource({"data": [{"i": i} for i in range(30)]}, {})
    bundle = source.static("Numbers", 10)
    assert "Rows 1–10 of 30." in bundle["text/html"] and bundle["text/plain"].splitlines()[0] == "Numbers"


def test_numbers_have_thousands_separators_except_in_year_and_id_columns():
    rows = [{"order_id": 10234, "year": 2024, "region": "North", "amount": 1234567.5, "units": 12000, "code": "12000"}]
    source = TableSource({"data": rows}, {})
    assert source.page(0, 1) == [["10234", "2024", "North", "1,234,567.5", "12,000", "12000"]]
    frame = pd.DataFrame({"Year": [2025], "revenue": [np.int64(-1500000)], "share": [np.float64(0.25)]})
    assert TableSource({"variable": "df"}, {"df": frame}).page(0, 1) == [["2025", "-1,500,000", "0.25"]]
    assert source.page(0, 1, "amount") == source.page(0, 1)  # sorting is on the numbers, not the text
    assert cell_text(Decimal("12345.5"), grouped=True) == "12,345.5" and cell_text(True, grouped=True) == "True"
    assert cell_text(1e20, grouped=True) == "1e+20" and cell_text(12345) == "12345"


def test_the_static_page_aligns_numbers_right_with_their_separators():
    source = TableSource({"data": [{"region": "North", "amount": 1234.5}, {"region": "South", "amount": 12}]}, {})
    bundle = source.static("", 10)
    assert "<th style='text-align:right'>amount</th>" in bundle["text/html"]
    assert "<td style='text-align:right;vertical-align:top;white-space:pre-wrap'>1,234.5</td>" in bundle["text/html"]
    assert bundle["text/plain"].splitlines()[2:] == ["North   1,234.5", "South        12"]


def test_the_widget_output_carries_its_static_page_and_the_view_for_the_extension():
    source = TableSource({"data": [{"i": i} for i in range(30)]}, {})
    data, _ = TableWidget(source, title="Numbers", page_size=10)._repr_mimebundle_()
    # The extension's renderer (ranked first) gets the same view, and the static page to
    # show until the widget is drawn, or instead of it when its kernel is gone.
    assert data[WIDGET_WITH_FALLBACK_MIME] == data[WIDGET_VIEW_MIME] and data[WIDGET_VIEW_MIME]["model_id"]
    assert "Rows 1–10 of 30." in data["text/html"] and data["text/plain"].startswith("Numbers")
