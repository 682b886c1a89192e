"""Charts: Vega-Lite from any of the three data shapes, and a PNG rendered offline at
scale 1 and deflated again, small enough for a notebook file."""

from __future__ import annotations

import struct
import zlib

import pandas as pd
import pytest

from agent_kernel.display.charts import MAX_POINTS, TEXT_ROWS, chart_bundle, chart_png, chart_spec, chart_text
from agent_kernel.errors import ToolInputError

DATASETS = {
    "labels": ["Jan", "Feb"],
    "datasets": [{"label": "North", "data": [1, 2]}, {"label": "South", "data": [3, None]}],
}


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


@pytest.mark.parametrize(
    "xs",
    [
        [1, 2, 3, 4, 5, 6, 7, 8],  # months as numbers: ticks would fall at 0.5 ... 7.5
        [2019, 2020, 2021, 2022],  # years
        [1007, 2, 350, 41],  # ids
        [0.5, 1.5, 2.5],  # a few numbers
    ],
)
def test_bars_over_whole_or_few_numbers_stand_on_bands(xs):
    rows = [{"x": x, "n": i + 1} for i, x in enumerate(xs)]
    spec = chart_spec({"chartType": "bar", "data": rows, "x": "x", "y": "n"}, {})
    x = spec["encoding"]["x"]
    assert x["type"] == "ordinal" and "sort" not in x  # one band per value, in ascending order
    assert x["axis"]["labelAngle"] == 0
    assert [v["x"] for v in spec["data"]["values"]] == xs  # the values stay numbers (tooltips, sort)


def test_bars_over_many_fractional_numbers_keep_a_continuous_axis():
    rows = [{"x": i / 7, "n": i} for i in range(40)]
    spec = chart_spec({"chartType": "bar", "data": rows, "x": "x", "y": "n"}, {})
    assert spec["encoding"]["x"]["type"] == "quantitative"


def test_grouped_bars_over_years_are_offset_within_each_band():
    data = {"labels": [2023, 2024], "datasets": [{"label": "a", "data": [1, 2]}, {"label": "b", "data": [3, 4]}]}
    spec = chart_spec({"chartType": "bar", "data": data}, {})
    assert spec["encoding"]["x"]["type"] == "ordinal" and spec["encoding"]["xOffset"]["field"] == "series"
    assert chart_png(spec).startswith(b"\x89PNG")


def test_a_line_over_whole_numbers_has_no_ticks_between_them():
    rows = [{"year": 2020 + i, "v": i} for i in range(5)]
    x = chart_spec({"chartType": "line", "data": rows, "x": "year"}, {})["encoding"]["x"]
    assert x["type"] == "quantitative" and x["axis"]["tickMinStep"] == 1 and x["axis"]["format"] == "d"


def test_pie_uses_the_first_series():
    spec = chart_spec({"chartType": "pie", "data": DATASETS}, {})
    assert spec["mark"]["type"] == "arc" and spec["transform"] == [{"filter": {"field": "series", "equal": "North"}}]


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"chartType": "bar", "data": {"labels": ["a"]}}, "needs `labels` (a list) and `datasets`"),
        (
            {"chartType": "bar", "data": {"labels": ["a"], "datasets": [{"data": ["x"]}]}},
            "has a value that is not a number: 'x'",
        ),
        ({"chartType": "line", "data": [{"a": 1}], "y": "b"}, "chart columns 'b' not found"),
        (
            {"chartType": "line", "data": [{"i": i, "v": i} for i in range(MAX_POINTS + 1)], "x": "i"},
            "the most is 5,000. Aggregate first",
        ),
    ],
)
def test_unusable_chart_data(block, message):
    with pytest.raises(ToolInputError) as caught:
        chart_spec(block, {})
    assert message in str(caught.value)


def png_size(png: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def png_pixels(png: bytes) -> bytes:
    """The PNG's decompressed image data (its rows, with their filter bytes)."""
    position, data = 8, b""
    while position < len(png):
        (length,) = struct.unpack(">I", png[position : position + 4])
        if png[position + 4 : position + 8] == b"IDAT":
            data += png[position + 8 : position + 8 + length]
        position += 12 + length
    return zlib.decompress(data)


def test_png_is_rendered_offline_at_scale_1():
    spec = chart_spec({"chartType": "bar", "data": DATASETS}, {})
    png = chart_png(spec)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1_000
    width, height = png_size(png)
    assert spec["width"] < width < spec["width"] + 200 and spec["height"] < height < spec["height"] + 200
    bundle = chart_bundle(spec, png)
    assert set(bundle) == {"application/vnd.vegalite.v5+json", "image/png", "text/plain"}


def test_a_year_of_three_series_costs_a_notebook_little():
    months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    data = {
        "labels": months,
        "datasets": [{"label": f"s{s}", "data": [m * 100 + s for m in range(12)]} for s in range(3)],
    }
    spec = chart_spec({"chartType": "line", "data": data, "title": "Revenue"}, {})
    assert len(chart_png(spec)) < 30_000  # about 74 KB as vl-convert writes it


def test_deflating_again_keeps_every_pixel_and_chunk():
    import vl_convert

    from agent_kernel.display.png_worker import deflated_again

    spec = chart_spec({"chartType": "bar", "data": DATASETS, "title": "Sales"}, {})
    drawn = bytes(vl_convert.vegalite_to_png(spec, scale=1))
    smaller = deflated_again(drawn)
    assert len(smaller) < len(drawn) / 2
    assert png_pixels(smaller) == png_pixels(drawn) and smaller[:33] == drawn[:33]  # signature and IHDR
    assert smaller.endswith(drawn[-12:])  # IEND
    assert deflated_again(b"not a png") == b"not a png"
    assert deflated_again(drawn[:-5]) == drawn[:-5]  # cut short: left as it is


def test_chart_text_is_cleaned_and_clipped_for_the_renderer():
    block = {
        "chartType": "bar",
        "title": "Sales\x00\x01\x1b\ufffe\ud800",
        "xLabel": "x\x00",
        "data": {"labels": ["Jan\x00", "F" * 5_000], "datasets": [{"label": "N\x00", "data": [1, 2]}]},
    }
    spec = chart_spec(block, {})
    assert spec["title"] == "Sales\ufffd" and spec["encoding"]["x"]["title"] == "x"
    xs = [v["x"] for v in spec["data"]["values"]]
    assert xs[0] == "Jan" and len(xs[1]) == 300 and xs[1].endswith("…")
    assert spec["data"]["values"][0]["series"] == "N"
    assert spec["usermeta"]["embedOptions"]["actions"]["source"] is False
    assert chart_png(spec).startswith(b"\x89PNG")


def test_a_renderer_crash_is_an_error_and_the_next_chart_still_draws():
    from agent_kernel.display.png_worker import PngWorker, RenderError

    worker = PngWorker()
    good = chart_spec({"chartType": "bar", "data": DATASETS}, {})
    try:
        crashing = dict(good, title="a\x01b")  # vl-convert aborts its whole process on this
        with pytest.raises(RenderError, match="crashed"):
            worker.render(crashing)
        assert worker.render(good).startswith(b"\x89PNG")  # a new worker took over
        slow = PngWorker(timeout_s=0.001)
        with pytest.raises(RenderError, match="longer than"):
            slow.render(good)
        slow.close()
    finally:
        worker.close()


def test_a_chart_as_text_has_its_title_axes_and_values_in_columns():
    spec = chart_spec({"chartType": "bar", "data": DATASETS, "title": "Sales", "xLabel": "month"}, {})
    assert chart_text(spec, image="/home/me/charts/sales.png").splitlines() == [
        "Sales (bar chart: 2 x values, 2 series)",
        "x: month",
        "          North       South",
        "Jan           1           3",
        "Feb           2           –",
        "Image: /home/me/charts/sales.png",
    ]
    png = chart_png(spec)
    assert chart_bundle(spec, png)["text/plain"] == chart_text(spec)  # what nbconvert's text export shows


def test_a_long_series_as_text_shows_its_ends_and_its_extremes():
    rows = [{"day": day, "temp": day % 10 - 3} for day in range(40)]
    lines = chart_text(chart_spec({"chartType": "line", "data": rows, "x": "day", "title": "Temp"}, {})).splitlines()
    assert lines[:2] == ["Temp (line chart: 40 x values)", "x: day · y: temp"]
    assert len(lines) == 2 + TEXT_ROWS + 1 and lines[8] == " …  (29 more)"
    assert lines[2] == "0   " + "▒" * 16 + " -3" and lines[-2] == "39  " + "█" * 32 + " 6"  # below zero: lighter
    assert lines[-1] == "min -3 at 0, max 6 at 9"
