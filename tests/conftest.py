from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .support.kernel import Kernel

RAM_DISK = Path("/dev/shm")
RAM_DISK_FREE = 4 * 1024**3  # the suite's files take far less; smaller RAM disks (containers') are left alone


def pytest_configure(config: pytest.Config) -> None:
    """Put the tests' temporary directories (their DuckDB files among them) on a RAM disk
    when the machine has a roomy one.

    A DuckDB commit waits for the disk (fsync); a 150-turn session commits 150 times, and
    on a busy disk that wait was most of the test's time. Files on tmpfs behave the same to
    every process, a killed kernel's writes included; only a power cut would differ.
    xdist's workers take their directories from the controller, so only it decides.
    """
    # Kernels that papermill, the scheduler and subprocesses start run their first cell right
    # after %load_ext: a background warm-up would only compete with it. Live kernels
    # (tests/support/kernel.py, JupyterLab's) and tests/turn/test_warmup.py keep it on.
    os.environ.setdefault("AGENT_KERNEL_WARM_UP", "0")
    # A key a test stores goes to its own file, never the person's OS keyring: every process the
    # tests start sees keyring's refusing backend (tests of the keyring path choose their own).
    os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
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
