"""Images sent to the model: downscaled to the size the API recommends, and counted.

The API resizes any image whose long side is over about 1,568 px (or whose area is over
about 1.15 megapixels) before the model sees it, and an image costs about
``width × height / 750`` input tokens. An image is downscaled here to that size, so what
is sent, stored and counted is what the model reads.

Sizes are counted as tokens, never as base64 characters: :func:`sent_chars` is the size
of a request's JSON with each image counted as the characters its tokens stand for, so
the context budget and the input estimate (about four characters a token) see an image
as what it costs.
"""

from __future__ import annotations

import base64
import binascii
import functools
import io
import json
from collections.abc import Mapping

from agent_kernel.model.shapes import ContentBlock

LONG_SIDE_PX = 1_568
MOST_PIXELS = 1_150_000
TOKEN_PIXELS = 750  # about one input token per this many pixels
CHARS_PER_TOKEN = 4
MEDIA_TYPES = ("image/png", "image/jpeg")


class ImageError(ValueError):
    """The bytes are not an image this module reads."""


def fitted(width: int, height: int) -> tuple[int, int]:
    """The size an image of ``width`` × ``height`` is sent at (never larger)."""
    scale = min(1.0, LONG_SIDE_PX / max(width, height, 1), (MOST_PIXELS / max(width * height, 1)) ** 0.5)
    return max(1, int(width * scale)), max(1, int(height * scale))


def image_block(data: bytes, media_type: str = "image/png") -> ContentBlock:
    """An API image block of ``data``, downscaled to fit (a PNG stays PNG, a JPEG JPEG)."""
    # Pillow (~30 ms) only where an image is: this module also counts tokens for every request.
    from PIL import Image, UnidentifiedImageError  # noqa: PLC0415

    if media_type not in MEDIA_TYPES:
        raise ImageError(f"{media_type} is not one of {', '.join(MEDIA_TYPES)}")
    try:
        image: Image.Image = Image.open(io.BytesIO(data))
        size = fitted(*image.size)
        if size != image.size:
            image = image.convert("RGBA" if media_type == "image/png" else "RGB").resize(size, Image.Resampling.LANCZOS)
            out = io.BytesIO()
            image.save(out, format="PNG" if media_type == "image/png" else "JPEG", quality=85)
            data = out.getvalue()
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise ImageError(f"not a readable {media_type}: {exc}") from None
    encoded = base64.b64encode(data).decode("ascii")
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media_type, "data": encoded},
    }


def is_image(block: object) -> bool:
    return isinstance(block, dict) and block.get("type") == "image"


@functools.lru_cache(maxsize=512)
def _size_of(data: str) -> tuple[int, int]:
    from PIL import Image, UnidentifiedImageError  # noqa: PLC0415 - see image_block

    try:
        return Image.open(io.BytesIO(base64.b64decode(data))).size
    except (UnidentifiedImageError, OSError, ValueError, binascii.Error):
        return LONG_SIDE_PX, LONG_SIDE_PX * 3 // 4  # counted as a large image


def size(block: Mapping[str, object]) -> tuple[int, int]:
    """The pixel size of a base64 image block (a large one assumed when unreadable)."""
    source = block.get("source") or {}
    data = source.get("data") if isinstance(source, dict) else None
    if not isinstance(data, str):
        return LONG_SIDE_PX, LONG_SIDE_PX * 3 // 4
    return _size_of(data)


def tokens(block: Mapping[str, object]) -> int:
    """About the input tokens ``block`` costs (as the API counts an image it did not resize)."""
    width, height = fitted(*size(block))
    return -(-width * height // TOKEN_PIXELS)


def placeholder(block: Mapping[str, object], what: str = "an image") -> ContentBlock:
    """A one-line text block standing for an image left out of a request."""
    width, height = size(block)
    return {
        "type": "text",
        "text": f"[{what} ({width}x{height} px) was here; left out to save context]",
    }


def sent_chars(value: object) -> int:
    """Characters of ``value``'s JSON with every image counted as its tokens' characters."""
    text = json.dumps(value, default=str)
    if _IMAGE_TYPE not in text:  # no image block anywhere: no walk through it in Python
        return len(text)
    return len(text) + sum(tokens(b) * CHARS_PER_TOKEN - len(json.dumps(b)) for b in blocks_in(value))


# How every image block's type is written in ``json.dumps`` output (default separators).
_IMAGE_TYPE = json.dumps({"type": "image"})[1:-1]


def blocks_in(value: object) -> list[dict[str, object]]:
    """The image blocks anywhere in ``value`` (messages, their content, tool results)."""
    found: list[dict[str, object]] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict) and is_image(item):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(v for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, (dict, list)))
    return found
