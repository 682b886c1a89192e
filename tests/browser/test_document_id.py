"""A notebook carries an id of its own (``metadata.agent_kernel.document``) and its session
follows it even when the file is moved on disk while no kernel runs: opened (and not marked
changed), a turn, a save that writes the id, closed, ``mv`` into another folder, opened there,
and the next request carries the earlier turn.
"""

from __future__ import annotations

import json
import platform
import re
from typing import Any

import pytest

from tests.support.browser import KERNEL_READY, agent_turn, run_and_wait
from tests.support.calls import prompts_of

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

PATH = "() => window.jupyterapp.shell.currentWidget?.context?.path ?? null"
DIRTY = "() => window.jupyterapp.shell.currentWidget?.context?.model?.dirty ?? null"
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def document_on_disk(path) -> Any:
    """The id in the saved notebook's metadata (None when it has none)."""
    return json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("agent_kernel", {}).get("document")


def as_lab_keeps_it(path) -> None:
    """The kernel's name and language as JupyterLab writes them once a kernel started, so
    opening the notebook changes nothing."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    notebook["metadata"] = {
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
        "language_info": {
            "name": "python",
            "version": platform.python_version(),
            "mimetype": "text/x-python",
            "codemirror_mode": {"name": "ipython", "version": 3},
            "pygments_lexer": "ipython3",
            "nbconvert_exporter": "python",
            "file_extension": ".py",
        },
    }
    path.write_text(json.dumps(notebook), encoding="utf-8")


def open_notebook(page, path: str) -> None:
    page.evaluate(f"() => {{ window.jupyterapp.commands.execute('docmanager:open', {{path: {json.dumps(path)}}}); }}")
    page.wait_for_function(f"() => ({PATH})() === {json.dumps(path)}", timeout=60_000)
    page.wait_for_function(KERNEL_READY, timeout=120_000)


def test_a_notebook_moved_on_disk_while_no_kernel_ran_keeps_its_session(lab_page, jupyterlab, lab_model):
    page = lab_page
    jupyterlab.notebook("notes", ["1 + 1"])
    saved = jupyterlab.root / "notes.ipynb"
    as_lab_keeps_it(saved)
    page.goto(f"{jupyterlab.url}/lab/workspaces/document-id?reset&token={jupyterlab.token}")
    page.wait_for_selector(".jp-LabShell", timeout=60_000)
    open_notebook(page, "notes.ipynb")
    page.wait_for_timeout(1_000)
    assert page.evaluate(DIRTY) is False  # opening gives it no id: nothing to save
    assert document_on_disk(saved) is None
    run_and_wait(page, "%load_ext agent_kernel")
    assert prompts_of(agent_turn(page, lab_model, "first")) == ["first"]

    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function(f"() => ({DIRTY})() === false", timeout=30_000)
    document = document_on_disk(saved)
    assert isinstance(document, str) and UUID.match(document), document
    page.wait_for_timeout(1_000)  # the kernel hears the new id after the save
    page.evaluate("() => window.jupyterapp.shell.currentWidget.close()")
    jupyterlab.shutdown_kernels()

    (jupyterlab.root / "elsewhere").mkdir()
    saved.rename(jupyterlab.root / "elsewhere" / "notes.ipynb")  # mv: Jupyter never hears of it
    open_notebook(page, "elsewhere/notes.ipynb")
    assert page.evaluate(DIRTY) is False
    run_and_wait(page, "%load_ext agent_kernel")
    assert prompts_of(agent_turn(page, lab_model, "second")) == ["first", "second"]
    assert document_on_disk(jupyterlab.root / "elsewhere" / "notes.ipynb") == document
