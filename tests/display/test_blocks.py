"""Blocks: what the model may send, and the static rendering every block leaves behind."""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib

import nbformat
import papermill
import pytest

from agent_kernel.display import blocks as B
from agent_kernel.errors import ToolInputError
from agent_kernel.testing import call, say
from tests.support.notebooks import write_notebook


def tiny_png(width: int = 3, height: int = 2) -> bytes:
    """A real PNG file (red pixels), written without any imaging library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        ([], "render_blocks needs `blocks`: a non-empty list"),
        (
            [{"type": "video"}],
            "blocks[0].type must be one of markdown, table, chart, form, code, image, alert, json, component; got 'video'",
        ),
        ([{"type": "markdown"}], "blocks[0] needs `content`: a string"),
        (
            [{"type": "alert", "content": "x", "variant": "loud"}],
            "blocks[0].variant must be one of info, warning, danger, success",
        ),
        ([{"type": "table"}], "blocks[0] is a table. Give `data` (a list of row objects) or `variable`"),
        ([{"type": "table", "data": [1, 2]}], "blocks[0].data must be a list of row objects"),
        ([{"type": "chart", "chartType": "bar"}], "blocks[0] is a chart: give `data`"),
        ([{"type": "form", "fields": []}], "blocks[0] needs `fields`"),
        ([{"type": "form", "fields": [{"name": "a", "label": "A", "type": "select"}]}], "a select needs `options`"),
        (
            [{"type": "form", "fields": [{"name": "a", "label": "A", "type": "number", "default": "many"}]}],
            "fields[0].default: must be a number, not 'many'",
        ),
        (
            [
                {
                    "type": "form",
                    "fields": [
                        {"name": "a", "label": "A", "type": "text"},
                        {"name": "a", "label": "B", "type": "text"},
                    ],
                }
            ],
            "the name 'a' is used twice",
        ),
        ([{"type": "form", "fields": [{"name": "a", "label": "A", "type": "text"}]}] * 2, "at most one form per call"),
    ],
)
def test_bad_blocks_are_refused_with_what_to_fix(blocks, message):
    with pytest.raises(ToolInputError) as caught:
        B.check_blocks(blocks)
    assert message in str(caught.value)


def test_code_is_shown_as_escaped_text():
    bundle = B.code_bundle({"content": "print('```')\n</code><b>x</b>", "language": "python"})
    assert (
        "<pre" in bundle["text/html"]
        and "print(&#x27;```&#x27;)\n&lt;/code&gt;&lt;b&gt;x&lt;/b&gt;" in bundle["text/html"]
    )
    assert bundle["text/plain"] == "print('```')\n</code><b>x</b>" and "text/markdown" not in bundle


def test_image_paths_stay_inside_the_working_directory(tmp_path):
    (tmp_path / "plot.png").write_bytes(tiny_png())
    bundle = B.image_bundle({"url": "plot.png", "alt": "a plot"}, tmp_path)
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG") and bundle["text/plain"] == "a plot"
    with pytest.raises(ToolInputError, match="outside the kernel's working directory"):
        B.image_bundle({"url": "../secret.png"}, tmp_path)
    with pytest.raises(ToolInputError, match="does not exist"):
        B.image_bundle({"url": "missing.png"}, tmp_path)
    url = B.image_bundle({"url": "https://example.org/a.png", "alt": "<b>"}, tmp_path)
    assert url["text/html"] == (
        '<a class="agent-kernel-image-link" href="https://example.org/a.png" title="https://example.org/a.png" '
        'rel="noopener noreferrer">🖼 image: &lt;b&gt; (example.org/a.png)</a>'
    )  # a link: the browser fetches the image only when the person opens it


def test_every_block_leaves_a_static_rendering_in_the_saved_notebook(scripted_model, agent_db, tmp_path):
    """A papermill run keeps every block's static rendering: markdown text, table values, the chart's PNG..."""
    (tmp_path / "logo.png").write_bytes(tiny_png())
    blocks = [
        {"type": "markdown", "content": "Revenue rose **12%** this quarter."},
        {
            "type": "table",
            "data": [{"region": "North", "revenue": 1200.5}, {"region": "South", "revenue": 980}],
            "columns": [{"key": "region", "label": "Region"}, {"key": "revenue", "label": "Revenue"}],
        },
        {"type": "table", "variable": "big", "title": "All orders"},
        {
            "type": "chart",
            "chartType": "line",
            "title": "Monthly revenue",
            "data": {"labels": ["Jan", "Feb", "Mar"], "datasets": [{"label": "Revenue", "data": [10, 12, 9]}]},
        },
        {"type": "chart", "chartType": "pie", "variable": "shares", "x": "region", "y": "share"},
        {"type": "form", "fields": [{"name": "threshold", "label": "Threshold", "type": "number", "default": 5}]},
        {"type": "code", "language": "sql", "content": "SELECT region, sum(revenue) FROM sales GROUP BY 1"},
        {"type": "image", "url": "logo.png", "alt": "company logo"},
        {"type": "alert", "variant": "warning", "content": "March is incomplete."},
        {"type": "json", "data": {"source": "sales.csv", "rows": 2}},
    ]
    scripted_model.add(call("render_blocks", title="Quarterly review", blocks=blocks), say("Shown."))
    source, output = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    write_notebook(
        source,
        "import pandas as pd\n%load_ext agent_kernel\n"
        "big = pd.DataFrame({'order': range(5000), 'amount': [i % 97 for i in range(5000)]})\n"
        "shares = pd.DataFrame({'region': ['North', 'South'], 'share': [0.6, 0.4]})",
        "%agent review the quarter",
    )
    papermill.execute_notebook(str(source), str(output), kernel_name="python3", progress_bar=False, cwd=str(tmp_path))
    outputs = nbformat.read(output, as_version=4).cells[1].outputs
    data = [o.get("data", {}) for o in outputs]

    def having(mime: str) -> list:
        return [d[mime] for d in data if mime in d]

    html = "\n".join(having("text/html"))
    assert not having("text/markdown")  # the model's Markdown is rendered and sanitised in the kernel
    assert '<h3 class="agent-kernel-title">Quarterly review</h3>' in html
    assert "Revenue rose <strong>12%</strong> this quarter." in html
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", html)
    assert cells[cells.index("North") : cells.index("North") + 2] == ["North", "1,200.5"]
    assert "<strong>All orders</strong>" in html and "Rows 1–25 of 5,000." in html  # a page, not 5,000 rows
    pngs = [base64.b64decode(p) for p in having("image/png")]
    assert len(pngs) == 3 and all(p.startswith(b"\x89PNG") for p in pngs)  # two charts, one image
    assert pngs[2] == tiny_png()
    [line, pie] = having("application/vnd.vegalite.v5+json")
    assert line["title"] == "Monthly revenue" and [v["value"] for v in line["data"]["values"]] == [10, 12, 9]
    assert pie["mark"]["type"] == "arc" and {v["x"] for v in pie["data"]["values"]} == {"North", "South"}
    assert "<code>SELECT region, sum(revenue) FROM sales GROUP BY 1</code>" in html
    assert "agent-kernel-alert-warning" in html and "March is incomplete." in html
    assert having("application/json") == [{"source": "sales.csv", "rows": 2}]
    assert "agent-kernel-form-static" in html and "Threshold" in html and "No user present" in html
    assert not having("application/vnd.jupyter.widget-view+json")  # nothing needs widget state
    content = scripted_model.requests[1]["messages"][-1]["content"][0]["content"]
    result = json.loads(content[0]["text"])  # then the charts as images the model sees
    assert [block["type"] for block in content[1:]] == ["image", "image"]
    assert result["data"] == {"threshold": 5} and result["defaults_only"] is True
