"""run_code's figures and charts go back to the model as image blocks, within the caps."""

from __future__ import annotations

import base64
import hashlib
import io
import json

from PIL import Image

from agent_kernel.model.images import LONG_SIDE_PX
from agent_kernel.testing import call, say
from tests.support.notebooks import THIRTY

FIGURE_AND_CHART = """
import matplotlib
matplotlib.use("module://matplotlib_inline.backend_inline")
import matplotlib.pyplot as plt
import altair as alt
import pandas as pd
fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
ax.plot([1, 2, 3], [3, 1, 2], color="red")
plt.show()
display(alt.Chart(pd.DataFrame({"x": [1, 2, 3], "y": [2, 4, 1]})).mark_bar().encode(x="x:O", y="y:Q"))
"""


def _images(request: dict) -> tuple[dict, list[dict]]:
    """The run_code result block in ``request``'s last message and its image blocks."""
    result = next(b for b in request["messages"][-1]["content"] if b["type"] == "tool_result")
    content = result["content"]
    assert isinstance(content, list), content
    return result, [b for b in content if b["type"] == "image"]


def _decoded(block: dict) -> bytes:
    return base64.b64decode(block["source"]["data"])


def test_a_figure_and_an_altair_chart_reach_the_model_as_images(kernel, scripted_model):
    scripted_model.add(call("run_code", code=FIGURE_AND_CHART), say("A red line and three bars."))
    run = kernel.ok("%agent plot it")
    bundles = [m["content"]["data"] for m in run.of_type("display_data")]
    displayed = [base64.b64decode(b["image/png"]) for b in bundles if "image/png" in b]
    result, images = _images(scripted_model.requests[1])
    assert len(images) == 2
    for block in images:
        width, height = Image.open(io.BytesIO(_decoded(block))).size
        assert max(width, height) <= LONG_SIDE_PX
    figure = _decoded(images[0])
    assert hashlib.sha256(figure).hexdigest() in {hashlib.sha256(d).hexdigest() for d in displayed}
    pixels = Image.open(io.BytesIO(figure)).convert("RGB")
    assert 400 <= pixels.size[0] <= 600 and 250 <= pixels.size[1] <= 400  # inline figures are cropped to their content
    reds = sum(
        1 for x in range(pixels.width) for y in range(0, pixels.height, 4) if pixels.getpixel((x, y)) == (255, 0, 0)
    )
    assert reds > 50  # the red line the cell drew
    chart = Image.open(io.BytesIO(_decoded(images[1])))
    assert chart.size[0] > 50 and chart.size[1] > 50
    note = json.loads(result["content"][0]["text"])["images"]
    assert note.startswith("2 of 2 image(s)")


def test_thirty_figures_send_at_most_the_cap_with_a_note(kernel, scripted_model):
    scripted_model.add(call("run_code", code=THIRTY), say("Thirty lines."))
    kernel.ok("%agent draw thirty")
    result, images = _images(scripted_model.requests[1])
    assert len(images) == 4  # images_per_result
    note = json.loads(result["content"][0]["text"])["images"]
    assert "4 of 30" in note and "Left out: 26" in note


def test_image_feedback_off_sends_text_only(kernel, scripted_model):
    kernel.ok("%config AgentKernel.image_feedback = False")
    scripted_model.add(call("run_code", code=THIRTY), say("ok"))
    kernel.ok("%agent draw thirty")
    result = next(b for b in scripted_model.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result")
    assert isinstance(result["content"], str)
    assert "image feedback is off" in json.loads(result["content"])["images"]
