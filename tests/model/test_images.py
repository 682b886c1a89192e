"""Images are downscaled to what the API recommends, and counted as tokens, not base64."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from agent_kernel.model import images
from agent_kernel.model.usage import request_chars
from agent_kernel.turn.budget import chars, trim_result


def _png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 200, 30)).save(out, format="PNG")
    return out.getvalue()


def test_a_large_image_is_downscaled_to_the_long_side_and_area_the_api_recommends():
    block = images.image_block(_png(4000, 3000))
    width, height = Image.open(io.BytesIO(base64.b64decode(block["source"]["data"]))).size
    assert max(width, height) <= images.LONG_SIDE_PX and width * height <= images.MOST_PIXELS
    assert abs(width / height - 4 / 3) < 0.01
    assert images.tokens(block) == -(-width * height // 750)


def test_a_small_image_is_sent_as_it_is():
    data = _png(300, 200)
    assert base64.b64decode(images.image_block(data)["source"]["data"]) == data


def test_what_is_not_an_image_is_refused():
    with pytest.raises(images.ImageError):
        images.image_block(b"not a png")
    with pytest.raises(images.ImageError):
        images.image_block(_png(10, 10), "image/gif")


def test_requests_and_the_budget_count_an_image_by_its_tokens():
    block = images.image_block(_png(1200, 900))
    message = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "ok"}, block]}],
    }
    counted = request_chars({"messages": [message]})
    assert counted == chars([message])
    assert counted < len(block["source"]["data"])  # not the base64 characters
    assert counted >= images.tokens(block) * 4


def test_an_old_result_keeps_a_one_line_placeholder_for_its_image():
    block = images.image_block(_png(640, 480))
    result = {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "drawn"}, block]}
    trimmed = trim_result(result)
    assert "image" not in [b.get("type") for b in trimmed["content"]] if isinstance(trimmed["content"], list) else True
    assert "an image the tool returned (640x480 px) was here" in str(trimmed["content"])
    assert result["content"][1] is block  # the stored message is left alone
