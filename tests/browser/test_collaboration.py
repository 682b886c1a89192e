"""The notebook channel under real-time collaboration: a JupyterLab server with
jupyter-collaboration and two Chromium contexts (two people) on one notebook. The agent's
edits go through the shared document, so the person who did not run the turn sees the
inserted cell and its output too.

jupyter-collaboration is not in the venv (it would make every test server collaborative):
``make install`` puts it in ``.venv/collaboration`` and only this module's server uses it.
Run it with the extension built from this checkout first on ``JUPYTER_PATH``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from agent_kernel.testing import call, say
from tests.support.browser import (
    ASKING_TO_EDIT,
    KERNEL_READY,
    SOURCES,
    cell,
    open_with_ids,
    save_screenshot,
    type_while_the_diff_waits,
    wait_idle,
)
from tests.support.held_replies import for_the_turn
from tests.support.jupyterlab import COLLABORATION, JupyterLab, lab_server

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-2")]

COLLABORATIVE = "() => window.jupyterapp.shell.currentWidget.context.model.collaborative === true"


@pytest.fixture(scope="module")
def jupyterlab(lab_model: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLab]:
    """A JupyterLab server with real-time collaboration on (this module's lab_page uses it)."""
    if not (COLLABORATION / "jupyter_collaboration").is_dir():
        pytest.fail(f"jupyter-collaboration is not installed in {COLLABORATION}: run `make install`.")
    config = {
        "ServerApp": {
            "jpserver_extensions": {"agent_kernel": True, "jupyter_server_ydoc": True, "jupyter_server_fileid": True}
        }
    }
    base = tmp_path_factory.mktemp("jupyterlab-rtc")
    with lab_server(base, lab_model.env(), config=config, extra_site=COLLABORATION) as lab:
        yield lab


@pytest.fixture
def second_page(jupyterlab: JupyterLab, chromium: Any) -> Iterator[Any]:
    """A second person's browser: a context of its own (its own storage and workspace)."""
    context = chromium.new_context(viewport={"width": 1200, "height": 1200})
    try:
        yield context.new_page()
    finally:
        context.close()


def open_beside(page: Any, lab: JupyterLab, name: str) -> None:
    """Open the notebook ``name`` that another context has open, in a workspace of its own."""
    page.goto(f"{lab.url}/lab/workspaces/{name}-second/tree/{name}.ipynb?reset&token={lab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(KERNEL_READY, timeout=60_000)


def keep_waiting(page: Any) -> None:
    """Answer jupyter-collaboration's "taking some time to load" dialog as a patient person
    does: it opens after 5 s without the document's first sync, which a loaded machine's
    server can take, and it would cover whatever the test clicks next."""
    dialog = page.get_by_role("dialog", name="Loading")
    page.add_locator_handler(dialog, lambda: dialog.get_by_role("button", name="Continue waiting").click())


def open_together(first: Any, second: Any, lab: JupyterLab, name: str, cells: list[tuple[str, str]]) -> None:
    """Write the notebook ``name`` (cells given as (id, source)), open it in both pages
    and run it all in the first."""
    keep_waiting(first)
    keep_waiting(second)
    open_with_ids(first, lab, name, cells, run_all=False)
    open_beside(second, lab, name)
    assert first.evaluate(COLLABORATIVE) and second.evaluate(COLLABORATIVE)
    first.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def test_the_second_person_sees_the_cell_the_agent_inserted_and_ran(lab_page, second_page, jupyterlab, lab_model):
    lab_model.add(
        call("insert_cell", source="print(6 * 7)", run=True), say("Inserted a cell; it runs after this turn.")
    )
    cells = [("load", "%load_ext agent_kernel"), ("turn", "%agent add a cell")]
    open_together(lab_page, second_page, jupyterlab, "shared", cells)
    cell(lab_page, 1).get_by_text("Inserted a cell").wait_for(timeout=60_000)
    for page in (lab_page, second_page):
        cell(page, 2).locator(".jp-OutputArea").get_by_text("42").wait_for(timeout=30_000)
        assert page.evaluate(SOURCES) == ["%load_ext agent_kernel", "%agent add a cell", "print(6 * 7)"]
    wait_idle(lab_page)
    assert lab_page.locator(".jp-Notebook .jp-Cell").count() == 3  # applied once, not once per person
    assert second_page.locator(".jp-Notebook .jp-Cell").count() == 3
    save_screenshot(second_page.locator(".jp-Notebook"), "collaboration-second-person.png")


def test_an_edit_the_turns_sender_accepts_reaches_the_other_person(lab_page, second_page, jupyterlab, lab_model):
    lab_model.add(call("replace_cell", cell="plot", source="kind = 'barh'"), say("Changed it to horizontal bars."))
    cells = [
        ("load", "%load_ext agent_kernel"), ("turn", "%agent --approve ask use bars"), ("plot", "kind = 'line'")
    ]  # fmt: skip
    open_together(lab_page, second_page, jupyterlab, "shared-ask", cells)
    diff = lab_page.locator(".ak-edit-diff")  # the diff shows to the person who ran the turn
    diff.wait_for(timeout=60_000)
    assert second_page.locator(".ak-edit-diff").count() == 0
    assert second_page.evaluate(SOURCES)[2] == "kind = 'line'"
    diff.get_by_role("button", name="Accept").click()
    cell(lab_page, 1).get_by_text("Changed it to horizontal bars.").wait_for(timeout=60_000)
    second_page.wait_for_function(f"() => ({SOURCES})()[2] === \"kind = 'barh'\"", timeout=30_000)
    assert lab_page.evaluate(SOURCES)[2] == "kind = 'barh'" and len(second_page.evaluate(SOURCES)) == 3


def test_the_other_person_sees_the_turns_output_as_its_sender_does(lab_page, second_page, jupyterlab, lab_model):
    lab_model.add(
        call("run_code", code="x = 6 * 7"),
        call("run_code", code="print(x)"),
        call("run_code", code="y = x + 1"),
        say("x is **42**."),
    )
    cells = [("load", "%load_ext agent_kernel"), ("turn", "%agent compute x")]
    open_together(lab_page, second_page, jupyterlab, "shared-view", cells)
    cell(lab_page, 1).get_by_text("x is").first.wait_for(timeout=60_000)
    wait_idle(lab_page)
    sender = cell(lab_page, 1).locator(".jp-OutputArea")
    other = cell(second_page, 1).locator(".jp-OutputArea")
    sender.get_by_role("button", name="Insert as cells").wait_for(timeout=30_000)
    # Outputs another person wrote are untrusted in this browser: the button's widget shows
    # its static line, which says how to do the same.
    button_line = "Insert as cells: %agent_cells with the turn's number, in a running kernel."
    expected = sender.inner_text().replace("Insert as cells", button_line)
    deadline = time.monotonic() + 30
    while other.inner_text() != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    seen = other.inner_text()
    assert seen == expected
    assert "⏳" not in seen and "waiting for the model" not in seen and seen.count("✓") == 3
    assert seen.index("x = 6 * 7") < seen.index("print(x)") < seen.index("y = x + 1") < seen.index("x is 42")
    save_screenshot(cell(second_page, 1), "collaboration-turn-output.png")


def test_the_other_persons_typing_while_a_diff_waits_is_kept(lab_page, second_page, jupyterlab, lab_model):
    lab_model.add(
        *for_the_turn(lab_model, call("replace_cell", cell="plot", source="kind = 'barh'"), say("Left it as it is."))
    )
    open_together(lab_page, second_page, jupyterlab, "shared-typing", ASKING_TO_EDIT)
    diff = type_while_the_diff_waits(lab_page, second_page, "\n# theirs", timeout=60_000)
    diff.get_by_role("button", name="Accept").click()
    expect(diff.locator(".ak-edit-diff-changed")).to_contain_text("This cell changed while the proposal waited")
    expect(diff.locator(".ak-edit-old pre")).to_have_text("kind = 'line'\n# theirs")
    diff.get_by_role("button", name="Reject").click()
    cell(lab_page, 1).get_by_text("Left it as it is.").wait_for(timeout=60_000)
    for page in (lab_page, second_page):
        assert page.evaluate(SOURCES)[2] == "kind = 'line'\n# theirs"
