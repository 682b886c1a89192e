"""A frame's layout and the pages a fork of this process no longer shares (Linux)."""

from __future__ import annotations

import os
from typing import Self

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from agent_kernel.sql import pages

pytestmark = pytest.mark.skipif(not pages.tracks_writes(), reason="needs /proc/self/pagemap (Linux 4.2+)")


def frame(rows: int = 1_000_000) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": np.arange(rows),
            "amount": np.linspace(0, 1, rows),
            "region": pd.Categorical.from_codes(np.arange(rows) % 3, ["EU", "NA", "XX"]),
            "name": pd.array(["x"] * rows, dtype="str"),
            "count": pd.array(np.arange(rows), dtype="Int64"),
            "at": pd.date_range("2020-01-01", periods=rows, freq="s", tz="UTC"),
        }
    )


class _Fork:
    """A child that shares this process's pages until it is told to leave."""

    def __enter__(self) -> Self:
        self._read, self._write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.read(self._read, 1)
            os._exit(0)
        return self

    def __exit__(self, *exc: object) -> None:
        os.write(self._write, b"x")
        os.waitpid(self.pid, 0)
        os.close(self._read)
        os.close(self._write)


def test_a_frame_not_shared_with_a_fork_counts_as_changed():
    """Without a fork every page of it is this process's alone: nothing may be trusted."""
    sales = frame()
    assert not pages.unchanged(sales, pages.layout(sales))


def test_a_write_in_place_is_seen_and_nothing_else_is():
    sales = frame()
    seen = pages.layout(sales)
    with _Fork():
        [pd.DataFrame({"n": range(1000)}) for _ in range(100)]  # other memory written meanwhile
        assert pages.unchanged(sales, seen)
        sales.loc[500_000, "amount"] = -1.0  # in place: the same arrays at the same addresses
        assert pages.layout(sales).key == seen.key and pages.written(seen.pages)
        assert not pages.unchanged(sales, seen)


def test_bytes_outside_whole_pages_are_compared_by_digest():
    """A buffer's first and last page (and a small buffer) share pages with other data,
    written all the time: their bytes are compared, not the pages."""
    sales = frame()
    seen = pages.layout(sales)
    with _Fork():
        ids = sales._mgr.iget_values(0)
        ids.flags.writeable = True
        ids[0] = -1  # the buffer's first bytes, on a page it may share
        assert not pages.unchanged(sales, seen)
    small = pd.DataFrame({"n": [1, 2, 3]})
    seen = pages.layout(small)
    assert seen.pages == ()
    with _Fork():
        assert pages.unchanged(small, seen)
        small.loc[1, "n"] = 5
        assert not pages.unchanged(small, seen)


@pytest.mark.parametrize(
    "change",
    [
        lambda f: f.__setitem__("amount", f["amount"] * 2),
        lambda f: f.__setitem__("extra", 1),
        lambda f: f.__delitem__("name"),
        lambda f: setattr(f, "columns", [*f.columns[:-1], "renamed"]),
        lambda f: f.__setitem__("region", f["region"].cat.add_categories(["ZZ"])),
    ],
    ids=["column replaced", "column added", "column dropped", "column renamed", "categories changed"],
)
def test_a_changed_column_changes_the_layout(change):
    sales = frame(10_000)
    before = pages.layout(sales)
    change(sales)
    assert pages.layout(sales) != before


def test_every_buffer_of_each_column_kind_is_covered():
    """The ranges cover the numbers, the categorical codes, the strings, the mask and the
    times: a write to any of them is seen."""
    sales = frame()
    middle = len(sales) // 2
    writes = {
        "amount": lambda: sales._mgr.iget_values(1).__setitem__(middle, 9.0),
        "codes": lambda: sales["region"].array._codes.__setitem__(middle, 2),
        "mask": lambda: sales["count"].array._mask.__setitem__(middle, True),
        "times": lambda: sales["at"].array._ndarray.__setitem__(middle, 0),
    }
    for name, write in writes.items():
        seen = pages.layout(sales)
        with _Fork():
            assert pages.unchanged(sales, seen), name
            write()
            assert not pages.unchanged(sales, seen), name


def test_arrow_tables_and_batches_have_layouts():
    table = pa.table({"n": np.arange(100_000), "s": pa.array(["a", "b"] * 50_000).dictionary_encode()})
    layout = pages.layout(table)
    assert layout is not None and len(layout.pages) >= 2  # the values and the indices
    assert pages.layout(table.to_batches()[0]) is not None
    assert pages.layout(table.append_column("m", pa.array(np.arange(100_000)))) != layout


@pytest.mark.parametrize(
    "value",
    [
        pd.DataFrame({"tags": [["a"], ["b"]]}),  # objects that can change with no write to the column
        pd.DataFrame({"n": [1, 2]}).astype(object),
        {"n": [1, 2]},
        pa.table({"s": pa.array([{"k": "x"}]).cast(pa.struct([("k", pa.dictionary(pa.int8(), pa.string()))]))}),
    ],
    ids=["lists", "objects", "dict", "nested dictionary"],
)
def test_layouts_not_known_are_none(value):
    assert pages.layout(value) is None
