"""Which session a turn continues when its notebook is renamed, moved, copied or its kernel
restarted: real kernels, the extension's channel messages sent as JupyterLab sends them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from agent_kernel.store import Store
from agent_kernel.store.sessions import Sessions
from agent_kernel.testing import say
from tests.support.calls import texts_of
from tests.support.frontend import NotebookChannel, wait_for
from tests.support.kernel import Kernel


def hello(path: str, root: Path) -> dict[str, Any]:
    return {"type": "hello", "protocol": 1, "notebook": path, "root": str(root)}


def attach(kernel: Kernel, path: str, root: Path) -> NotebookChannel:
    """A JupyterLab view of the notebook at ``path`` (relative to ``root``) on ``kernel``."""
    front = NotebookChannel(kernel)
    front.cells = []  # answers the turn's reads: an empty notebook
    front.open(hello(path, root))
    kernel.ok("pass", on_message=front.hook)
    assert front.types()[:1] == ["welcome"]
    return front


def prompts(request: dict[str, Any]) -> list[str]:
    """The person's prompts a model request carries, in order."""
    return [text for role, text in texts_of(request) if role == "user" and text != "tool_result"]


def filed(store: Store) -> dict[str, str | None]:
    with store.connect() as con:
        return {s.name: s.notebook for s in Sessions(con).list()}


def test_a_renamed_and_moved_notebook_keeps_its_session_through_a_kernel_restart(scripted_model, store, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    untitled = root / "Untitled.ipynb"
    untitled.write_text("{}")
    started = {"JPY_SESSION_NAME": str(untitled)}  # what Jupyter Server gives the kernel, once
    for answer in ("one", "two", "three", "four", "five"):
        scripted_model.add(say(answer))
    kernel = Kernel(started, cwd=str(root))
    try:
        kernel.ok("%load_ext agent_kernel")
        front = attach(kernel, "Untitled.ipynb", root)
        kernel.ok("%agent first", on_message=front.hook)
        kernel.ok("%agent second", on_message=front.hook)
        (root / "work").mkdir()
        untitled.rename(root / "work" / "analysis.ipynb")  # no server here: the kernel re-files
        front.send({"type": "moved", "notebook": "work/analysis.ipynb", "old": "Untitled.ipynb"})
        kernel.ok("%agent third", on_message=front.hook)
        assert prompts(scripted_model.requests[2]) == ["first", "second", "third"]
        assert filed(store) == {"Untitled": str(root / "work" / "analysis.ipynb")}
        wait_for(lambda: kernel.ok("pass", on_message=front.hook) and front.types().count("turn_ended") == 3)
        (session_id,) = {m["session"] for m in front.received if m["type"] == "turn_ended"}
        with store.connect() as con:
            assert Sessions(con).by_name("Untitled").id == session_id
    finally:
        kernel.shutdown()
    # JupyterLab restarts a kernel with the environment it first started it with: the old name.
    restarted = Kernel(started, cwd=str(root))
    try:
        restarted.ok("%load_ext agent_kernel")
        front = attach(restarted, "work/analysis.ipynb", root)
        restarted.ok("%agent fourth", on_message=front.hook)
    finally:
        restarted.shutdown()
    assert prompts(scripted_model.requests[3]) == ["first", "second", "third", "fourth"]
    # Without a front end (a reminder set before the rename, a console) the old name resolves too.
    headless = Kernel(started, cwd=str(root))
    try:
        headless.ok("%load_ext agent_kernel")
        headless.ok("%agent fifth")
    finally:
        headless.shutdown()
    assert prompts(scripted_model.requests[4]) == ["first", "second", "third", "fourth", "fifth"]
    assert filed(store) == {"Untitled": str(root / "work" / "analysis.ipynb")}


def test_sessions_filed_under_the_name_a_kernel_started_with_follow_the_notebook(scripted_model, store, tmp_path):
    """Sessions left under an old name (renamed while nothing re-filed them) are found again
    the first time the notebook's kernel runs a turn."""
    root = tmp_path / "root"
    root.mkdir()
    with store.connect() as con:
        Sessions(con).create("report", notebook=str(root / "Untitled.ipynb"))
    (root / "report.ipynb").write_text("{}")
    scripted_model.add(say("found"))
    kernel = Kernel({"JPY_SESSION_NAME": str(root / "Untitled.ipynb")}, cwd=str(root))
    try:
        kernel.ok("%load_ext agent_kernel")
        front = attach(kernel, "report.ipynb", root)
        kernel.ok("%agent again", on_message=front.hook)
    finally:
        kernel.shutdown()
    assert filed(store) == {"report": str(root / "report.ipynb")}


def test_save_as_starts_a_session_of_its_own_and_the_original_keeps_its(scripted_model, store, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    original = root / "analysis.ipynb"
    original.write_text("{}")
    scripted_model.add(say("one"))
    scripted_model.add(say("two"))
    scripted_model.add(say("three"))
    kernel = Kernel({"JPY_SESSION_NAME": str(original)}, cwd=str(root))
    try:
        kernel.ok("%load_ext agent_kernel")
        front = attach(kernel, "analysis.ipynb", root)
        kernel.ok("%agent first", on_message=front.hook)
        shutil.copy(original, root / "copy.ipynb")  # Save As: the original file stays
        front.send({"type": "moved", "notebook": "copy.ipynb", "old": "analysis.ipynb"})
        kernel.ok("%agent in the copy", on_message=front.hook)
    finally:
        kernel.shutdown()
    assert prompts(scripted_model.requests[1]) == ["in the copy"]
    assert filed(store) == {"analysis": str(original), "copy": str(root / "copy.ipynb")}
    reopened = Kernel({"JPY_SESSION_NAME": str(original)}, cwd=str(root))
    try:
        reopened.ok("%load_ext agent_kernel")
        reopened.ok("%agent back in the original")
    finally:
        reopened.shutdown()
    assert prompts(scripted_model.requests[2]) == ["first", "back in the original"]


def test_a_session_two_notebooks_continue_by_name_stays_the_one_each_continues(scripted_model, store, tmp_path):
    """Filed under whichever notebook used it last; neither notebook moved, so neither
    takes it for a copy."""
    root = tmp_path / "root"
    root.mkdir()
    for name in ("a", "b"):
        (root / f"{name}.ipynb").write_text("{}")
    for answer in ("one", "two", "three"):
        scripted_model.add(say(answer))
    a = Kernel({"JPY_SESSION_NAME": str(root / "a.ipynb")}, cwd=str(root))
    b = Kernel({"JPY_SESSION_NAME": str(root / "b.ipynb")}, cwd=str(root))
    try:
        for kernel in (a, b):
            kernel.ok("%load_ext agent_kernel")
        b.ok("%agent --session shared from b")
        a.ok("%agent --session shared from a")
        b.ok("%agent again from b")
    finally:
        a.shutdown()
        b.shutdown()
    assert prompts(scripted_model.requests[2]) == ["from b", "from a", "again from b"]


def test_a_notebook_moved_on_disk_while_no_kernel_ran_finds_its_session_by_its_id(scripted_model, store, tmp_path):
    """The id the first save wrote (sent after that save) is recorded at once; after ``mv``
    the notebook's hello names it from the new folder, and its sessions follow it there. A
    copy with the same id (``cp``) starts a session of its own."""
    document = "6c1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6"
    root = tmp_path / "root"
    root.mkdir()
    first = root / "analysis.ipynb"
    first.write_text("{}")
    for answer in ("one", "two", "three"):
        scripted_model.add(say(answer))
    kernel = Kernel({"JPY_SESSION_NAME": str(first)}, cwd=str(root))
    try:
        kernel.ok("%load_ext agent_kernel")
        front = attach(kernel, "analysis.ipynb", root)  # opened before any save: no id yet
        kernel.ok("%agent first", on_message=front.hook)
        front.send({"type": "moved", "notebook": "analysis.ipynb", "old": "analysis.ipynb", "document": document})
        kernel.ok("pass", on_message=front.hook)
    finally:
        kernel.shutdown()
    (root / "elsewhere").mkdir()
    moved = root / "elsewhere" / "analysis.ipynb"
    first.rename(moved)
    reopened = Kernel({"JPY_SESSION_NAME": str(moved)}, cwd=str(root))
    try:
        reopened.ok("%load_ext agent_kernel")
        front = NotebookChannel(reopened)
        front.cells = []
        front.open({**hello("elsewhere/analysis.ipynb", root), "document": document})
        reopened.ok("%agent second", on_message=front.hook)
    finally:
        reopened.shutdown()
    assert prompts(scripted_model.requests[1]) == ["first", "second"]
    assert filed(store) == {"analysis": str(moved)}
    shutil.copy(moved, root / "copy.ipynb")
    copied = Kernel({"JPY_SESSION_NAME": str(root / "copy.ipynb")}, cwd=str(root))
    try:
        copied.ok("%load_ext agent_kernel")
        front = NotebookChannel(copied)
        front.cells = []
        front.open({**hello("copy.ipynb", root), "document": document})
        copied.ok("%agent in the copy", on_message=front.hook)
    finally:
        copied.shutdown()
    assert prompts(scripted_model.requests[2]) == ["in the copy"]
    assert filed(store)["analysis"] == str(moved)
