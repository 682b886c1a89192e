"""Whether a kernel frame is still what a fork of the kernel sees: same object, same
buffers, the same bytes in them.

A fork shares the kernel's memory page by page until one of the two writes a page; the
writer then gets a copy of its own. Linux tells a process, for each of its pages, whether
the page is mapped by it alone (``/proc/self/pagemap``, bit 56, "exclusively mapped",
readable without privileges since Linux 4.2). So while a fork of the kernel lives, a page
of a frame's buffer that the kernel still shares holds what the fork sees; one it maps
alone has been written since (or it was swapped out, bit 62: counted as written too).
The first and last page of a buffer are often shared with other data that is written
all the time, so for those bytes (and a buffer smaller than a page) a digest of the bytes
themselves is compared with the fork's. With the frame's layout unchanged too (the same
arrays at the same addresses: a column replaced, added or dropped, rows appended or a
frame rebound all change it), the fork reads exactly the frame the kernel has now,
without copying or hashing more than a few pages of it.

The fork takes its own :func:`layout` of the frames, as they are in it, and sends it to
the kernel, which compares it with the frame's now (:func:`unchanged`). This holds while
the fork is the only process sharing those pages: any other fork of the kernel made after
it shares them too, so :mod:`agent_kernel.sql.worker` counts forks (``os.register_at_fork``)
and trusts a fork only while none was made since.

Only layouts whose every buffer is known take part (pandas frames of numpy, masked,
categorical, datetime and Arrow-backed columns; pyarrow tables and record batches). A
column of Python objects does not: an object it points to (a list, a dict) can change
with no write to the column's own buffer.
"""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["Layout", "layout", "tracks_writes", "unchanged", "written"]

_PAGE = mmap.PAGESIZE
_PRESENT, _SWAPPED, _EXCLUSIVE = 1 << 63, 1 << 62, 1 << 56
# Exclusive and swapped are in the top byte of each little-endian entry: 1 for a byte with either.
_WRITTEN_BYTE = bytes(1 if b & ((_SWAPPED | _EXCLUSIVE) >> 56) else 0 for b in range(256))

Range = tuple[int, int]  # start address, bytes


@dataclass(frozen=True)
class Layout:
    """A frame's columns, types and buffers; equal layouts are the same arrays in the same places.

    ``pages``: the whole pages of the buffers (see :func:`written`); ``edges``: a digest of
    the buffers' bytes outside them.
    """

    key: tuple[Any, ...]
    pages: tuple[Range, ...]
    edges: bytes


def layout(frame: Any) -> Layout | None:
    """The layout of ``frame``, or None when one of its buffers is not known (see the module)."""
    try:
        module = type(frame).__module__.split(".")[0]
        if module == "pandas" and type(frame).__name__ == "DataFrame":
            parts = _pandas_frame(frame)
        elif module == "pyarrow" and type(frame).__name__ in ("Table", "RecordBatch"):
            parts = _arrow_frame(frame)
        else:
            return None
    except (AttributeError, TypeError, ValueError, IndexError):  # a library version laid out otherwise
        return None
    if parts is None:
        return None
    key, ranges = parts
    whole: list[Range] = []
    edges = hashlib.blake2b(digest_size=16)
    for start, size in ranges:
        if size <= 0:
            continue
        first, end = -(-start // _PAGE) * _PAGE, (start + size) // _PAGE * _PAGE
        if first >= end:  # within one or two pages, none of them whole
            edges.update(ctypes.string_at(start, size))
            continue
        whole.append((first, end - first))
        edges.update(ctypes.string_at(start, first - start))
        edges.update(ctypes.string_at(end, start + size - end))
    return Layout(key, tuple(whole), edges.digest())


def unchanged(frame: Any, seen: Layout) -> bool:
    """Whether ``frame`` holds what a fork that took ``seen`` of it sees (while that fork lives)."""
    return layout(frame) == seen and not written(seen.pages)


def written(ranges: tuple[Range, ...]) -> bool:
    """Whether any page of ``ranges`` (whole pages) is mapped by this process alone, or swapped out."""
    try:
        fd = _pagemap()
        for start, size in ranges:
            count = size // _PAGE
            entries = os.pread(fd, count * 8, start // _PAGE * 8)
            if len(entries) != count * 8 or 1 in entries[7::8].translate(_WRITTEN_BYTE):
                return True
    except OSError:
        return True
    return False


_tracks: bool | None = None
_fd: int | None = None
_fd_lock = threading.Lock()


def tracks_writes() -> bool:
    """Whether this system reports which pages a process maps alone (checked once on a page of its own)."""
    global _tracks
    if _tracks is None:
        try:
            page = mmap.mmap(-1, _PAGE)
            try:
                page[0] = 1
                address = _buffer_address(page)
                entry = int.from_bytes(os.pread(_pagemap(), 8, address // _PAGE * 8), "little")
                _tracks = entry & (_PRESENT | _EXCLUSIVE) == _PRESENT | _EXCLUSIVE
            finally:
                page.close()
        except (OSError, ValueError):
            _tracks = False
    return _tracks


def _pagemap() -> int:
    global _fd
    with _fd_lock:
        if _fd is None:
            _fd = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
        return _fd


def _buffer_address(buffer: Any) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(buffer))


# -- pandas -----------------------------------------------------------------------------------


def _pandas_frame(frame: Any) -> tuple[tuple[Any, ...], list[Range]] | None:
    manager = frame._mgr  # the frame's arrays, one a column (views of 2-D blocks for numpy columns)
    columns = tuple(frame.columns)
    ranges: list[Range] = []
    parts = []
    for position in range(len(columns)):
        part = _pandas_array(manager.iget_values(position), ranges, objects=False)
        if part is None:
            return None
        parts.append(part)
    return ("pandas", id(frame), columns, tuple(parts)), ranges


def _pandas_array(array: Any, ranges: list[Range], *, objects: bool) -> tuple[Any, ...] | None:
    """The key of one column's array; its buffers are added to ``ranges``.

    ``objects``: whether an array of Python objects may take part (an Index's values,
    which pandas never changes in place, such as a categorical's categories).
    """
    import numpy as np  # noqa: PLC0415 - only a frame's arrays need it; the warm-up imports this module

    kind = type(array).__name__
    if isinstance(array, np.ndarray):
        return _numpy(array, ranges, objects=objects)
    if kind == "Categorical":
        codes = _numpy(array._codes, ranges, objects=False)
        categories = _pandas_array(array.categories._values, ranges, objects=True)
        if codes is None or categories is None:
            return None
        return ("categorical", bool(array.ordered), codes, categories)
    if hasattr(array, "_pa_array"):  # Arrow-backed (the default str dtype with pyarrow)
        chunks = _arrow_chunks(array._pa_array.chunks, ranges)
        return None if chunks is None else ("arrow", str(array.dtype), chunks)
    if hasattr(array, "_data") and hasattr(array, "_mask"):  # Int64, Float64, boolean
        data = _numpy(array._data, ranges, objects=False)
        mask = _numpy(array._mask, ranges, objects=False)
        if data is None or mask is None:
            return None
        return ("masked", str(array.dtype), data, mask)
    if hasattr(array, "_ndarray"):  # datetime, timedelta, numpy-backed extension arrays, python str
        strings = kind == "StringArray"  # pandas keeps only str (immutable) and NA in it
        values = _numpy(array._ndarray, ranges, objects=objects or strings)
        return None if values is None else (kind, str(array.dtype), values)
    return None


def _numpy(array: Any, ranges: list[Range], *, objects: bool) -> tuple[Any, ...] | None:
    if array.dtype.hasobject and not objects:
        return None
    interface = array.__array_interface__
    start = interface["data"][0]
    low = high = 0
    for length, stride in zip(array.shape, array.strides):
        if length == 0:
            return ("numpy", str(array.dtype), array.shape)
        reach = (length - 1) * stride
        low, high = (low + reach, high) if reach < 0 else (low, high + reach)
    ranges.append((start + low, high - low + array.itemsize))
    return ("numpy", str(array.dtype), array.shape, array.strides, start)


# -- pyarrow ----------------------------------------------------------------------------------


def _arrow_frame(frame: Any) -> tuple[tuple[Any, ...], list[Range]] | None:
    ranges: list[Range] = []
    parts = []
    for column in frame.columns:
        chunks = column.chunks if hasattr(column, "chunks") else [column]
        part = _arrow_chunks(chunks, ranges)
        if part is None:
            return None
        parts.append(part)
    return ("arrow", id(frame), frame.schema.to_string(), frame.num_rows, tuple(parts)), ranges


def _arrow_chunks(chunks: Any, ranges: list[Range]) -> tuple[Any, ...] | None:
    """The buffers of Arrow arrays (children's included), a dictionary's values too."""
    key = []
    for chunk in chunks:
        for buffer in chunk.buffers():
            if buffer is not None:
                ranges.append((buffer.address, buffer.size))
                key.append((buffer.address, buffer.size))
        if hasattr(chunk, "dictionary"):
            inner = _arrow_chunks([chunk.dictionary], ranges)
            if inner is None:
                return None
            key.append(inner)
        elif "dictionary<" in str(chunk.type):  # a dictionary below the top: its values are not listed
            return None
    return tuple(key)
