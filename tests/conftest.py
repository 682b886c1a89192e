from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .support.kernel import Kernel
from .support.paths import ARTIFACTS

RAM_DISK = Path("/dev/shm")
RAM_DISK_FREE = 4 * 1024**3  # the suite's files take far less; smaller RAM disks (containers') are left alone


def pytest_configure(config: pytest.Config) -> None:
    """Put the tests' temporary directories (their DuckDB files among them) on a RAM disk
    when the machine has a roomy one.

    A DuckDB commit waits for the disk (fsync); a 500-turn session commits 500 times, and
    on a busy disk that wait was most of the test's time. Files on tmpfs behave the same to
    every process, a killed kernel's writes included; only a power cut would differ.
    xdist's workers take their directories from the controller, so only it decides.
    """
    # Kernels that papermill, the scheduler and subprocesses start run their first cell right
    # after %load_ext: a background warm-up would only compete with it. Live kernels
    # (tests/support/kernel.py, JupyterLab's) and tests/turn/test_warmup.py keep it on.
    os.environ.setdefault("AGENT_KERNEL_WARM_UP", "0")
    # As in the scheduler's processes: nbformat here without jsonschema's IRI grammar.
    from agent_kernel.scheduler.lean_imports import refuse_unused_slow_imports

    refuse_unused_slow_imports()
    if config.option.basetemp or hasattr(config, "workerinput") or os.environ.get("PYTEST_DEBUG_TEMPROOT"):
        return
    try:
        roomy = os.access(RAM_DISK, os.W_OK) and shutil.disk_usage(RAM_DISK).free >= RAM_DISK_FREE
    except OSError:
        roomy = False
    if roomy:
        tempfile.tempdir = str(RAM_DISK)


@pytest.fixture(autouse=True)
def _real_main_module() -> Iterator[None]:
    """Put back the real ``__main__`` after each test.

    IPython's ``InteractiveShell`` (the in-process tests use it) installs its user module as
    ``__main__``; multiprocessing's spawn, which Dask's nanny uses, needs the real one.
    """
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


@pytest.fixture
def agent_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh DuckDB file for the agent, also for kernels the test starts."""
    path = tmp_path / "agent.duckdb"
    monkeypatch.setenv("AGENT_KERNEL_DB", str(path))
    monkeypatch.setenv("AGENT_KERNEL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    return path


@pytest.fixture
def store(agent_db: Path):
    """The test's agent database (also what kernels and subprocesses of the test use)."""
    from agent_kernel.store import Store

    return Store(agent_db)


@pytest.fixture
def home(agent_db: Path) -> Path:
    """AGENT_KERNEL_HOME of the test: run directories go under it."""
    return Path(os.environ["AGENT_KERNEL_HOME"])


@pytest.fixture
def kernel(scripted_model, agent_db: Path, tmp_path: Path) -> Iterator[Kernel]:
    """A real ipykernel talking to the scripted model, with agent_kernel loaded."""
    k = Kernel({}, cwd=str(tmp_path))
    try:
        k.ok("%load_ext agent_kernel")
        yield k
    finally:
        k.shutdown()


@pytest.fixture
def shell_agent(scripted_model, agent_db: Path):
    """Whole turns in this process: an Agent on IPython's shell, requests to ``scripted_model``
    through its in-process transport (see tests/support/inprocess.py)."""
    from .support.inprocess import shell_agent

    with shell_agent(scripted_model.http_client) as agent:
        yield agent


# -- browser tests: one JupyterLab server and one Chromium for the browser tests' module -----
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
    from .support.jupyterlab import chromium_missing, lab_server

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

    from .support.jupyterlab import CHROMIUM, CHROMIUM_ARGS

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
