"""Vega-Lite to PNG in a separate process, so a renderer crash cannot take the kernel down.

vl-convert is native code: some inputs make it abort the whole process (a Rust panic
that does not unwind), and a pathological spec can run for minutes. The kernel keeps one
worker process (started on the first chart, about a second) and sends it one spec per
line of JSON on stdin; the worker answers one line: ``{"png": base64}`` or
``{"error": message}``. When the worker dies or exceeds the time limit, the chart's call
fails with :class:`RenderError` and the next chart starts a new worker.

The PNG is drawn at scale 1 (a chart's own size; JupyterLab draws the interactive chart
from its Vega-Lite spec, so the PNG serves viewers without Vega) and its image data
deflated again at the highest level: vl-convert compresses for speed, and the same
pixels take a third to a twentieth of the bytes (a year of monthly values in three
series: 74 KB as drawn, 21 KB deflated again), which is what a saved notebook keeps.

Run as ``python -m agent_kernel.display.png_worker``.
"""

from __future__ import annotations

import atexit
import base64
import json
import struct
import subprocess
import sys
import threading
import zlib
from collections.abc import Mapping

TIMEOUT_S = 30.0


class RenderError(RuntimeError):
    """The PNG could not be rendered (the worker failed, crashed or took too long)."""


class PngWorker:
    """The kernel's side: one worker process, one request at a time."""

    def __init__(self, timeout_s: float = TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def render(self, spec: Mapping[str, object], scale: float = 1) -> bytes:
        request = json.dumps({"spec": spec, "scale": scale}, ensure_ascii=True).encode("ascii") + b"\n"
        with self._lock:
            process = self._ensure()
            timed_out = threading.Event()

            def stop() -> None:
                timed_out.set()
                process.kill()

            timer = threading.Timer(self.timeout_s, stop)
            timer.start()
            try:
                assert process.stdin is not None and process.stdout is not None
                process.stdin.write(request)
                process.stdin.flush()
                line = process.stdout.readline()
            except (BrokenPipeError, OSError):
                line = b""
            finally:
                timer.cancel()
            if not line:
                self._discard()
                code = process.poll()
                if timed_out.is_set():
                    raise RenderError(f"the chart renderer took longer than {self.timeout_s:g} s and was stopped")
                if code is not None and code < 0:
                    raise RenderError(f"the chart renderer crashed (signal {-code})")
                raise RenderError(f"the chart renderer exited (code {code})")
        answer = json.loads(line)
        if "error" in answer:
            raise RenderError(answer["error"])
        return base64.b64decode(answer["png"])

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "agent_kernel.display.png_worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,  # a panic's backtrace; the exit status says enough
            )
        return self._process

    def _discard(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:  # a write still buffered to a dead process
                        pass

    def close(self) -> None:
        with self._lock:
            self._discard()


WORKER = PngWorker()
atexit.register(WORKER.close)


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def deflated_again(png: bytes) -> bytes:
    """The same PNG with its image data deflated at the highest level, in one IDAT chunk.

    Lossless: the pixels and every other chunk stay as they are. A PNG this cannot parse
    is returned unchanged.
    """
    if not png.startswith(PNG_SIGNATURE):
        return png
    chunks: list[tuple[bytes, bytes]] = []
    position = len(PNG_SIGNATURE)
    while position + 12 <= len(png):
        (length,) = struct.unpack(">I", png[position : position + 4])
        chunks.append((png[position + 4 : position + 8], png[position + 8 : position + 8 + length]))
        position += 12 + length
    data = b"".join(body for kind, body in chunks if kind == b"IDAT")
    if not data or position != len(png):
        return png
    try:
        pixels = zlib.decompress(data)
    except zlib.error:
        return png
    image = zlib.compress(pixels, 9)
    out, written = [PNG_SIGNATURE], False
    for kind, body in chunks:
        if kind == b"IDAT":
            if written:
                continue
            kind, body, written = b"IDAT", image, True
        out.append(struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body)))
    smaller = b"".join(out)
    return smaller if len(smaller) < len(png) else png


def serve() -> None:
    """The worker's loop: a spec per line in, a PNG (or an error) per line out."""
    import vl_convert  # noqa: PLC0415 - vl-convert's renderer loads in the worker process only, never the kernel

    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
            png = vl_convert.vegalite_to_png(request["spec"], scale=request.get("scale", 1), allowed_base_urls=[])
            answer = {"png": base64.b64encode(deflated_again(bytes(png))).decode("ascii")}
        except Exception as exc:  # noqa: BLE001 - reported to the kernel as the chart's error
            answer = {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
