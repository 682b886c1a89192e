"""Charts: Vega-Lite from any of the three data shapes, and a PNG rendered offline."""

from __future__ import annotations

import pandas as pd
import pytest

from agent_kernel.display.charts import MAX_POINTS, chart_bundle, chart_png, chart_spec
from agent_kernel.errors import ToolInputError

DATASETS = {"labels": ["Jan", "Feb"], "datasets": [{"label": "North", "data": [1, 2]}, {"label": "South", "data": [3, None]}]}


def test_grouped_bars_from_datasets_keep_the_label_order():
    spec = chart_spec({"chartType": "bar", "data": DATASETS, "title": "Sales"}, {})
    assert spec["$schema"].endswith("vega-lite/v5.json") and spec["mark"] == {"type": "bar"}
    assert spec["encoding"]["x"]["sort"] is None and spec["encoding"]["xOffset"]["field"] == "series"
    assert spec["data"]["values"][:3] == [
        {"x": "Jan", "series": "North", "value": 1},
        {"x": "Feb", "series": "North", "value": 2},
        {"x": "Jan", "series": "South", "value": 3},
    ]


def test_rows_and_dataframes_with_x_and_y():
    rows = [{"day": 1, "temp": 3.5, "rain": 0}, {"day": 2, "temp": 4.0, "rain": 2}]
    spec = chart_spec({"chartType": "line", "data": rows, "x": "day"}, {})
    assert spec["encoding"]["x"]["type"] == "quantitative"  # numbers on x: a continuous axis
    assert {v["series"] for v in spec["data"]["values"]} == {"temp", "rain"}
    frame = pd.DataFrame({"month": pd.period_range("2025-01", periods=3, freq="M"), "revenue": [5, 6, 7]})
    area = chart_spec({"chartType": "area", "variable": "monthly", "x": "month", "y": "revenue"}, {"monthly": frame})
    assert [v["x"] for v in area["data"]["values"]] == ["2025-01", "2025-02", "2025-03"]
    assert area["encoding"]["y"]["title"] == "revenue"


def test_pie_uses_the_first_series():
    spec = chart_spec({"chartType": "pie", "data": DATASETS}, {})
    assert spec["mark"]["type"] == "arc" and spec["transform"] == [{"filter": {"field": "series", "equal": "North"}}]


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"chartType": "bar", "data": {"labels": ["a"]}}, "needs `labels` (a list) and `datasets`"),
        ({"chartType": "bar", "data": {"labels": ["a"], "datasets": [{"data": ["x"]}]}}, "has a value that is not a number: 'x'"),
        ({"chartType": "line", "data": [{"a": 1}], "y": "b"}, "chart columns 'b' not found"),
        ({"chartType": "line", "data": [{"i": i, "v": i} for i in range(MAX_POINTS + 1)], "x": "i"}, "the most is 5,000. Aggregate first"),
    ],
)
def test_unusable_chart_data(block, message):
    with pytest.raises(ToolInputError) as caught:
        chart_spec(block, {})
    assert message in str(caught.value)


def test_png_is_rendered_offline():
    spec = chart_spec({"chartType": "bar", "data": DATASETS}, {})
    png = chart_png(spec)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5_000
    bundle = chart_bundle(spec, png)
    assert set(bundle) == {"application/vnd.vegalite.v5+json", "image/png", "text/plain"}
