"""Nothing the person types is lost, in a real JupyterLab 4 with Chromium: an agent's edit
applies only to the text it was made against (typing while a diff card waits, or between
the model's read and its edit), and a turn whose kernel died says so in its cell.

Run it with the extension built from this checkout first on ``JUPYTER_PATH``.
"""

from __future__ import annotations

import os
import re
import signal
import threading
from typing import Any

import pytest
from playwright.sync_api import expect

from agent_kernel.testing import call, say
from tests.support.browser import (
    ASKING_TO_EDIT,
    SOURCES,
    cell,
    open_with_ids,
    run_notebook,
    save_screenshot,
    type_while_the_diff_waits,
    wait_idle,
)
from tests.support.calls import tool_results
from tests.support.held_replies import for_the_turn, held, turn_requests, type_at_end, wait_requests

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-2")]


def test_typing_while_a_diff_waits_makes_accept_ask_again_and_the_typing_survives(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    lab_model.add(
        *for_the_turn(
            lab_model, call("replace_cell", cell="plot", source="kind = 'barh'"), say("I left your cell as it is.")
        )
    )
    open_with_ids(page, jupyterlab, "typing-ask", ASKING_TO_EDIT)
    diff = type_while_the_diff_waits(page, page, "\n# my own line")
    diff.get_by_role("button", name="Accept").click()
    # Accept did not apply: the card shows what the cell holds now and asks again.
    expect(diff.locator(".ak-edit-diff-changed")).to_contain_text("This cell changed while the proposal waited")
    expect(diff.locator(".ak-edit-old pre")).to_have_text("kind = 'line'\n# my own line")
    assert page.evaluate(SOURCES)[2] == "kind = 'line'\n# my own line"
    save_screenshot(cell(page, 2), "edit-diff-asks-again.png")
    diff.get_by_role("button", name="Reject").click()
    cell(page, 1).get_by_text("I left your cell as it is.").wait_for(timeout=60_000)
    assert page.evaluate(SOURCES)[2] == "kind = 'line'\n# my own line"
    rejected = tool_results(turn_requests(lab_model, start)[1])[0]
    assert rejected["is_error"] and "The person rejected this edit" in str(rejected["content"])


def test_accept_after_asking_again_applies_the_proposal_the_person_saw(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    lab_model.add(
        *for_the_turn(lab_model, call("replace_cell", cell="plot", source="kind = 'bar'"), say("Changed it."))
    )
    open_with_ids(page, jupyterlab, "typing-ask-twice", ASKING_TO_EDIT)
    diff = type_while_the_diff_waits(page, page, "  # keep?")
    diff.get_by_role("button", name="Accept").click()
    expect(diff.locator(".ak-edit-old pre")).to_have_text("kind = 'line'  # keep?")
    assert page.evaluate(SOURCES)[2] == "kind = 'line'  # keep?"
    diff.get_by_role("button", name="Accept").click()  # the person has seen the text it replaces
    cell(page, 1).get_by_text("Changed it.").wait_for(timeout=60_000)
    assert page.evaluate(SOURCES)[2] == "kind = 'bar'"
    assert not tool_results(turn_requests(lab_model, start)[1])[0].get("is_error")


def test_an_auto_edit_after_the_person_typed_is_refused_with_the_cell_as_it_reads_now(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    typed = threading.Event()
    lab_model.add(
        *for_the_turn(
            lab_model,
            call("read_notebook"),
            call("replace_cell", cell="plot", source="kind = 'bar'"),  # unchanged since the read: applied
            held(typed, call("replace_cell", cell="plot", source="kind = 'barh'")),
            say("You changed the cell; I left it."),
        )
    )
    try:
        open_with_ids(page, jupyterlab, "typing-auto", [
            ("load", "%load_ext agent_kernel"), ("turn", "%agent use bars"), ("plot", "kind = 'line'"),
        ])  # fmt: skip
        wait_requests(lab_model, start, 3)  # the model has read and edited the cell, and is thinking
        page.wait_for_function(f"() => ({SOURCES})()[2] === \"kind = 'bar'\"", timeout=30_000)
        type_at_end(page, cell(page, 2), "\n# my own line")
        page.wait_for_function(f"() => ({SOURCES})()[2] === \"kind = 'bar'\\n# my own line\"", timeout=30_000)
    finally:
        typed.set()
    cell(page, 1).get_by_text("You changed the cell; I left it.").wait_for(timeout=90_000)
    assert page.evaluate(SOURCES)[2] == "kind = 'bar'\n# my own line"
    assert not tool_results(turn_requests(lab_model, start)[2])[0].get("is_error")
    refused = tool_results(turn_requests(lab_model, start)[3])[0]
    text = str(refused["content"])
    assert refused["is_error"] and "Cell plot changed since you read it" in text
    assert "# my own line" in text and "call replace_cell again" in text
    wait_idle(page)


def test_an_ask_edit_made_against_text_the_person_changed_since_is_refused_before_any_card(
    lab_page, jupyterlab, lab_model
):
    page = lab_page
    start = len(lab_model.requests)
    typed = threading.Event()
    lab_model.add(
        *for_the_turn(
            lab_model,
            call("read_notebook"),
            held(typed, call("replace_cell", cell="plot", source="kind = 'barh'")),
            say("You changed it; tell me if bars still fit."),
        )
    )
    try:
        open_with_ids(page, jupyterlab, "typing-ask-read", [
            ("load", "%load_ext agent_kernel"), ("turn", "%agent --approve ask use bars"), ("plot", "kind = 'line'"),
        ])  # fmt: skip
        wait_requests(lab_model, start, 2)  # the model has read the cell and is thinking
        type_at_end(page, cell(page, 2), "\n# my own line")
        page.wait_for_function(f"() => ({SOURCES})()[2] === \"kind = 'line'\\n# my own line\"", timeout=30_000)
    finally:
        typed.set()
    cell(page, 1).get_by_text("You changed it; tell me if bars still fit.").wait_for(timeout=90_000)
    assert page.locator(".ak-edit-diff").count() == 0  # no card proposed over text the model never saw
    assert page.evaluate(SOURCES)[2] == "kind = 'line'\n# my own line"
    refused = tool_results(turn_requests(lab_model, start)[2])[0]
    assert refused["is_error"] and "Cell plot changed since you read it" in str(refused["content"])
    wait_idle(page)


def test_a_turn_whose_kernel_died_says_so_in_its_cell(lab_page, jupyterlab, lab_model):
    page = lab_page
    start = len(lab_model.requests)
    answer = threading.Event()
    lab_model.add(held(answer, say("Too late.")))
    try:
        run_notebook(page, jupyterlab, "kernel-dies", ["%load_ext agent_kernel", "%agent wait"])
        wait_requests(lab_model, start, 1)  # the model holds its answer
        turn = cell(page, 1)
        turn.get_by_text("waiting for the model…").wait_for(timeout=60_000)
        expect(turn.get_by_role("button", name="Stop")).to_be_visible()
        os.kill(_kernel_pid(jupyterlab), signal.SIGKILL)
        turn.get_by_text("The kernel stopped during this turn.").wait_for(timeout=60_000)
        expect(turn.get_by_text("waiting for the model…")).to_have_count(0)
        expect(turn.get_by_role("button", name="Stop")).to_have_count(0)
        save_screenshot(turn, "turn-kernel-stopped.png")
    finally:
        answer.set()


def _kernel_pid(lab: Any) -> int:
    """The process id of the busy kernel (the one running the turn), found by its connection
    file's name among the machine's processes."""
    kernels = [k for k in lab.kernels() if k.get("execution_state") in ("busy", "idle")]
    ids = {k["id"] for k in kernels}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read().decode(errors="replace")
        except OSError:
            continue
        found = re.search(r"kernel-([0-9a-f-]{36})\.json", command)
        if found and found[1] in ids and "ipykernel" in command:
            busy = [k for k in kernels if k["id"] == found[1] and k["execution_state"] == "busy"]
            if busy:
                return int(entry)
    raise AssertionError(f"no busy kernel process among {ids}")
