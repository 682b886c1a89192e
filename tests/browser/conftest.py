"""The browser tests' fixtures: one JupyterLab server and one Chromium per test module, and a
fresh page for each test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.paths import ARTIFACTS

# Module scope, not session: Playwright's sync API keeps an event loop running in the main
# thread while it is open, and later in-process tests run their own loops there.


@pytest.fixture(scope="module")
def lab_model() -> Iterator[Any]:
    """The scripted model the JupyterLab server's kernels talk to (shared by browser tests)."""
    from agent_kernel.testing import ScriptedModel

    with ScriptedModel() as model:
        yield model


@pytest.fixture(scope="module")
def jupyterlab(lab_model: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.support.jupyterlab import chromium_missing, lab_server

    missing = chromium_missing()
    if missing:
        pytest.fail(missing)
    # agent-kernel's server extension (the API, the scheduler) whether or not it is enabled
    # in this environment; the JupyterLab extension is the one installed here.
    config = {
        "ServerApp": {"jpserver_extensions": {"agent_kernel": True}},
        "AgentKernelServer": {"scheduler_poll_s": 0.5},
    }
    with lab_server(tmp_path_factory.mktemp("jupyterlab"), lab_model.env(), config=config) as lab:
        yield lab


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    from tests.support.jupyterlab import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def lab_page(request: pytest.FixtureRequest, jupyterlab: Any, lab_model: Any, chromium: Any) -> Iterator[Any]:
    """A fresh browser page; a failing test leaves a screenshot of it in tests/artifacts, and
    none leaves scripted replies for the next."""
    context = chromium.new_context(viewport={"width": 1200, "height": 1500})
    page = context.new_page()
    try:
        yield page
    finally:
        if request.node.stash.get(_FAILED, False):
            folder = ARTIFACTS
            folder.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(folder / f"FAILED-{request.node.name}.png"), full_page=True)
        context.close()
        jupyterlab.shutdown_kernels()
        lab_model.clear()
