"""The API key set in the chat's key field, in a real JupyterLab 4 with Chromium whose server
and kernels start with no key: the field stores it through the server (outside every
notebook), then an ``%agent`` cell and an inline completion reach the scripted model with
it, and the saved notebook holds it nowhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agent_kernel.testing import say
from tests.support.browser import cell, open_chat, run_cell, run_notebook, save_screenshot, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-2")]

KEY = "sk-ant-api03-" + "b" * 30 + "-typed-in-the-panel"


@pytest.fixture(scope="module")
def jupyterlab(lab_model: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """This module's server: the scripted model's address, and no key anywhere."""
    from tests.support.jupyterlab import chromium_missing, lab_server

    missing = chromium_missing()
    if missing:
        pytest.fail(missing)
    env = {**lab_model.env(), "ANTHROPIC_API_KEY": "", "ANTHROPIC_AUTH_TOKEN": ""}
    config = {"ServerApp": {"jpserver_extensions": {"agent_kernel": True}}, "AgentKernelServer": {"scheduler": False}}
    with lab_server(tmp_path_factory.mktemp("keyless-lab"), env, config=config) as lab:
        yield lab


def sent_key(headers: dict[str, str]) -> str | None:
    """The key a request carried (``x-api-key``, or ``Authorization: Bearer`` as SDK 2 sends it)."""
    lower = {name.lower(): value for name, value in headers.items()}
    return lower.get("x-api-key") or lower.get("authorization", "").removeprefix("Bearer ") or None


def test_a_key_set_in_the_panel_serves_a_turn_and_a_completion_and_no_notebook_holds_it(
    lab_page, jupyterlab, lab_model
):
    page = lab_page
    run_notebook(page, jupyterlab, "keyed", ["%load_ext agent_kernel\nvalues = [3, 5, 8]"])
    wait_idle(page, timeout=120_000)
    # No key: the status bar says completion is off, and the chat's key field is open.
    off = page.locator(".ak-completion-status")
    off.wait_for(state="visible", timeout=60_000)
    assert off.inner_text() == "Completion off: no API key" and "agent-kernel key set" in off.get_attribute("title")
    chat = open_chat(page)
    field = chat.locator(".ak-chat-key")
    field.locator(".ak-chat-key-status").filter(has_text="No key").wait_for(timeout=60_000)
    assert field.get_attribute("open") is not None
    assert field.locator(".ak-chat-key-summary").inner_text() == "API key: none"
    save_screenshot(field, "chat-key-field.png")
    box = field.locator(".ak-chat-key-input")
    assert box.get_attribute("type") == "password"
    box.fill(KEY)
    field.locator(".ak-chat-key-save").click()
    field.locator(".ak-chat-key-summary").filter(has_text="API key: stored in a file").wait_for(timeout=60_000)
    assert box.input_value() == "" and KEY not in page.content()
    key_file = jupyterlab.root.parent / "agent-home" / "anthropic-api-key"
    assert key_file.read_text().strip() == KEY and key_file.stat().st_mode & 0o777 == 0o600
    off.wait_for(state="hidden", timeout=60_000)

    # A turn in the kernel started before the key was stored.
    lab_model.add(say("Hello from the model."))
    out = run_cell(page, "%agent say hello", 1)
    out.filter(has_text="Hello from the model.").first.wait_for(timeout=120_000)
    wait_idle(page, timeout=120_000)

    # A completion through the server.
    lab_model.responder = lambda request: say("sum(values)")
    try:
        page.evaluate(
            """() => {
              const nb = window.jupyterapp.shell.currentWidget.content;
              nb.model.sharedModel.insertCell(nb.model.cells.length, {cell_type: 'code', source: ''});
              nb.activeCellIndex = nb.model.cells.length - 1;
            }"""
        )
        editor = cell(page, 2).locator(".cm-content")
        editor.click()
        page.keyboard.type("total = ", delay=40)
        page.wait_for_function(
            "() => document.querySelector('.jp-GhostText')?.textContent === 'sum(values)'", timeout=60_000
        )
    finally:
        lab_model.responder = None
    assert lab_model.headers and all(sent_key(h) == KEY for h in lab_model.headers)
    assert len(lab_model.headers) >= 2  # the turn's request and the completion's

    page.keyboard.press("Escape")
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    saved = jupyterlab.root / "keyed.ipynb"
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=60_000)
    text = saved.read_text()
    assert "Hello from the model." in text and "%agent say hello" in text
    assert KEY not in text and KEY[-20:] not in text
    assert not [p for p in jupyterlab.root.rglob("*") if p.is_file() and KEY in p.read_text(errors="replace")]
