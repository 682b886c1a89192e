"""Sessions follow their notebook: a rename or move re-files them and is remembered."""

from __future__ import annotations

import pytest

from agent_kernel.store import Store
from agent_kernel.store.sessions import Sessions


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "agent.duckdb")


def test_a_renamed_notebook_takes_its_sessions_and_its_old_path_resolves(store):
    with store.connect() as con:
        sessions = Sessions(con)
        kept = sessions.create("Untitled", notebook="/root/Untitled.ipynb")
        other = sessions.create("other", notebook="/root/other.ipynb")
        assert sessions.move_notebook("/root/Untitled.ipynb", "/root/analysis.ipynb", by="server") == 1
        assert sessions.latest_for_notebook("/root/analysis.ipynb") == sessions.get(kept.id)
        assert sessions.latest_for_notebook("/root/Untitled.ipynb") is None
        assert sessions.get(other.id).notebook == "/root/other.ipynb"
        assert sessions.moved_to("/root/Untitled.ipynb") == "/root/analysis.ipynb"
        assert sessions.moved_to("/root/other.ipynb") is None
        # moved again, into a folder: a kernel that knows the first name still finds it
        sessions.move_notebook("/root/analysis.ipynb", "/root/work/analysis.ipynb", by="kernel")
        assert sessions.moved_to("/root/Untitled.ipynb") == "/root/work/analysis.ipynb"
        assert sessions.get(kept.id).notebook == "/root/work/analysis.ipynb"
        assert sessions.move_notebook("/root/x.ipynb", "/root/x.ipynb", by="kernel") == 0


def test_a_moved_folder_takes_the_sessions_of_every_notebook_below_it(store):
    with store.connect() as con:
        sessions = Sessions(con)
        deep = sessions.create("deep", notebook="/root/a/b/deep.ipynb")
        beside = sessions.create("beside", notebook="/root/ab/beside.ipynb")  # not below /root/a
        assert sessions.move_notebook("/root/a", "/root/z", by="server") == 1
        assert sessions.get(deep.id).notebook == "/root/z/b/deep.ipynb"
        assert sessions.get(beside.id).notebook == "/root/ab/beside.ipynb"
        assert sessions.moved_to("/root/a/b/deep.ipynb") == "/root/z/b/deep.ipynb"
        assert sessions.moved_to("/root/ab/beside.ipynb") is None


def test_renamed_back_and_a_new_notebook_at_an_old_path(store):
    with store.connect() as con:
        sessions = Sessions(con)
        sessions.move_notebook("/r/a.ipynb", "/r/b.ipynb", by="server")
        sessions.move_notebook("/r/b.ipynb", "/r/a.ipynb", by="server")
        assert sessions.moved_to("/r/a.ipynb") is None  # back where it started
        assert sessions.moved_to("/r/b.ipynb") == "/r/a.ipynb"
        sessions.move_notebook("/r/a.ipynb", "/r/c.ipynb", by="server")
        assert sessions.moved_to("/r/a.ipynb") == "/r/c.ipynb"
        sessions.forget_moves_from("/r/a.ipynb")  # a new Untitled-like file was made there
        assert sessions.moved_to("/r/a.ipynb") is None


def test_a_notebook_id_finds_its_sessions_after_a_move_on_disk_and_a_copy_starts_fresh(store, tmp_path):
    first, moved = tmp_path / "a.ipynb", tmp_path / "work" / "a.ipynb"
    first.write_text("{}")
    with store.connect() as con:
        sessions = Sessions(con)
        kept = sessions.create("a", notebook=str(first))
        assert sessions.follow_document("0f8b1c2d-0000-4000-8000-000000000001", str(first)) == 0
        copy = tmp_path / "copy.ipynb"  # cp: the original is still where the id was seen
        assert sessions.follow_document("0f8b1c2d-0000-4000-8000-000000000001", str(copy)) == 0
        assert sessions.latest_for_notebook(str(copy)) is None
        moved.parent.mkdir()
        first.rename(moved)  # mv while no kernel ran: nothing recorded the move
        assert sessions.follow_document("0f8b1c2d-0000-4000-8000-000000000001", str(moved)) == 1
        assert sessions.get(kept.id).notebook == str(moved)
        assert sessions.moved_to(str(first)) == str(moved)
        # a move Jupyter saw carries the record along: the id is known at the new path
        sessions.move_notebook(str(tmp_path / "work"), str(tmp_path / "done"), by="server")
        row = con.execute("SELECT path FROM notebook_documents").fetchone()
        assert row == (str(tmp_path / "done" / "a.ipynb"),)
