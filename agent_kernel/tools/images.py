"""The images run_code's code displays, sent back to the model with the call's result.

While the code runs, every display the kernel publishes is looked at (never changed):
PNG and JPEG outputs (matplotlib and seaborn figures, ``display(Image)``, PIL images) and
Vega-Lite charts (Altair, the ``chart`` block), which are rasterised with vl-convert.
At most ``images_per_result`` are kept per call and ``images_per_turn`` per turn; the
result says how many were left out. Each is downscaled to what the API recommends
(:mod:`agent_kernel.model.images`) and attached to the tool result as an image block.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_kernel.display.png_worker import WORKER
from agent_kernel.model.images import ImageError, image_block

if TYPE_CHECKING:
    from agent_kernel.model.shapes import ContentBlock
    from agent_kernel.tools.context import ToolContext

VEGA_LITE = "application/vnd.vegalite.v"


@dataclass
class Seen:
    """The images displayed during one run: the first ``keep`` of them, and how many in all."""

    keep: int
    found: list[tuple[str, Any]] = field(default_factory=list)  # (media type, data)
    total: int = 0
    chart_formatted: bool = False  # an Altair chart was formatted; its display is counted

    def look(self, data: Any) -> None:
        """A display the kernel publishes (its mimebundle)."""
        if not isinstance(data, dict):
            return
        chart, self.chart_formatted = self.chart_formatted, False
        kind = next((k for k in ("image/png", "image/jpeg") if k in data), None)
        if kind is None:
            kind = next((k for k in data if isinstance(k, str) and k.startswith(VEGA_LITE)), None)
        if kind is None or (chart and kind.startswith(VEGA_LITE)):
            return
        self._add(kind, data[kind])

    def look_at_object(self, value: Any) -> None:
        """An object being formatted for display: an Altair chart is kept as its Vega-Lite
        spec, whichever renderer (HTML, mimebundle, PNG) Altair uses to show it."""
        if not type(value).__module__.startswith("altair.") or not callable(getattr(value, "to_dict", None)):
            return
        self._add(VEGA_LITE, lambda: value.to_dict())
        self.chart_formatted = True

    def _add(self, kind: str, data: Any) -> None:
        self.total += 1
        if len(self.found) < self.keep:
            self.found.append((kind, data() if callable(data) else data))


@contextmanager
def watching(shell: Any, keep: int) -> Iterator[Seen]:
    """Note the images ``shell`` displays in this block (its display publisher, tapped)."""
    seen = Seen(keep)
    publisher = getattr(shell, "display_pub", None)
    if publisher is None:
        yield seen
        return
    had_own = "publish" in vars(publisher)
    original = publisher.publish

    def publish(data: Any, *args: Any, **kwargs: Any) -> Any:
        with suppress(Exception):  # the display itself must go on
            seen.look(data)
        return original(data, *args, **kwargs)

    formatter = getattr(shell, "display_formatter", None)
    formatter_had_own = formatter is not None and "format" in vars(formatter)
    original_format = getattr(formatter, "format", None)

    def format(value: Any, *args: Any, **kwargs: Any) -> Any:
        with suppress(Exception):  # the display itself must go on
            seen.look_at_object(value)
        return original_format(value, *args, **kwargs)  # type: ignore[misc]

    publisher.publish = publish
    if formatter is not None:
        formatter.format = format
    try:
        yield seen
    finally:
        if had_own:
            publisher.publish = original
        else:
            del publisher.publish
        if formatter is not None:
            if formatter_had_own:
                formatter.format = original_format
            else:
                del formatter.format


async def blocks(seen: Seen) -> tuple[list[ContentBlock], list[str]]:
    """The image blocks of what was ``seen`` and a line per image that could not be sent."""
    made: list[ContentBlock] = []
    problems: list[str] = []
    for kind, data in seen.found:
        try:
            if kind.startswith(VEGA_LITE):
                made.append(image_block(await asyncio.to_thread(_vega_png, data), "image/png"))
            else:
                made.append(await asyncio.to_thread(image_block, _raw(data), kind))
        except (ImageError, ValueError, TypeError, RuntimeError) as exc:
            problems.append(f"{kind}: {str(exc)[:200]}")
    return made, problems


def _raw(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, str):
        try:
            return base64.b64decode(data, validate=False)
        except binascii.Error as exc:
            raise ValueError(f"not base64: {exc}") from None
    raise ValueError(f"image data of type {type(data).__name__}")


def _vega_png(spec: Any) -> bytes:
    if isinstance(spec, str):
        spec = json.loads(spec)
    if not isinstance(spec, dict):
        raise TypeError("a Vega-Lite spec is a JSON object")
    return WORKER.render(spec, scale=1)


def note(sent: int, total: int, problems: list[str], *, per_result: int, turn_left: int, off: bool) -> str:
    """What the result says about the images its code displayed."""
    if total == 0:
        return ""
    if off:
        return f"{total} image(s) displayed; image feedback is off (AgentKernel.image_feedback)."
    parts = [f"{sent} of {total} image(s) the code displayed are attached below, in display order."]
    if sent < total:
        parts.append(
            f"Left out: {total - sent} (at most {per_result} per result, {turn_left} more this turn); "
            "display fewer, or combine them into one figure."
        )
    parts += [f"Not sent: {p}" for p in problems]
    return " ".join(parts)


def attach_png(context: ToolContext, png: bytes) -> bool:
    """Attach a PNG a tool drew (a ``chart`` block) to the running call's result, when image
    feedback is on and the turn has images left; whether it was attached."""
    settings = context.settings
    if not settings.image_feedback or context.images_sent >= settings.images_per_turn:
        return False
    try:
        block = image_block(png, "image/png")
    except ImageError:
        return False
    context.report.attach_image(block)
    context.images_sent += 1
    return True
