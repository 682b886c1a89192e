"""Table pages: sorting, missing values, DataFrames with a meaningful index."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from agent_kernel.display.table_widget import TableSource, cell_text
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
    frame = pd.DataFrame({"month": ["2025-01", "2025-02", "2025-03"], "revenue": [3.0, 1.0, math.nan]}).set_index("month")
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
