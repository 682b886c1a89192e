"""Installed as a user installs it: the wheel built from this checkout, in a fresh venv.

The wheel is built from the sdist (``uv build``), so the sdist holds everything a wheel
needs: the JupyterLab extension (the one ``make install`` built; the build packages it
rather than running jlpm again), its ``install.json`` and the quickstart. One venv holds
the wheel alone, without the test extras, and a script calls every tool once through
``Agent.run()`` (tests/support/install_check.py): a runtime import that is not a declared
dependency fails there. Another holds ``[lab]`` and the reference MCP server
``mcp-server-time`` (which needs the current MCP SDK, as the package does): JupyterLab
lists the extension, ``agent-kernel demo`` runs the shipped quickstart, and the server's
tool answers a turn. PyPI is reached through uv, whose cache keeps each install to
seconds once warm.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from agent_kernel import __version__
from tests.support.lab_command import jupyter_folders, start_lab
from tests.support.paths import INSTALL_CHECK

ROOT = Path(__file__).resolve().parent.parent
CHECK = INSTALL_CHECK
UV = Path(sys.executable).with_name("uv")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Imported by no part of the package at run time: must not be in a plain install.
TEST_ONLY = {"pytest", "polars", "playwright", "hypothesis", "mypy", "distributed", "jupyterlab"}

pytestmark = [pytest.mark.install, pytest.mark.xdist_group("install")]


def clean_env(**extra: str) -> dict[str, str]:
    """This machine's environment without what points at the checkout, the test venv,
    the tests' Jupyter folders or a model: the installed package alone decides."""
    dropped = ("PYTHON", "VIRTUAL_ENV", "JUPYTER", "AGENT_KERNEL", "ANTHROPIC", "IPYTHON")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    return env | extra


def run(
    *args: object,
    timeout: float = 120,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stdout: bool = False,
) -> str:
    """What the command printed (``stdout``: only to stdout), once it succeeded."""
    done = subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        cwd=cwd,
        env=env or clean_env(),
    )
    output = ANSI.sub("", done.stdout + done.stderr)
    assert done.returncode == 0, f"{' '.join(map(str, args))} exited {done.returncode}:\n{output[-4000:]}"
    return done.stdout if stdout else output


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    assert (ROOT / "agent_kernel" / "labextension" / "static" / "style.js").exists(), (
        "The JupyterLab extension is not built: `make install` builds it."
    )
    out = tmp_path_factory.mktemp("dist")
    run(UV, "build", "--quiet", "-o", out, ROOT, timeout=300)
    return out


@pytest.fixture(scope="module")
def wheel(dist) -> Path:
    [built] = dist.glob("agent_kernel-*.whl")
    return built


def new_venv(path: Path, *requirements: str) -> Path:
    """A venv at ``path`` with ``requirements`` installed from PyPI; its bin folder.

    Its files are symlinks into uv's cache: the test's temporary folder may be on another
    file system (a tmpfs), where uv would copy several hundred megabytes instead.
    """
    run(UV, "venv", "--quiet", "--python", sys.executable, path)
    bin_dir = path / "bin"
    run(UV, "pip", "install", "--quiet", "--link-mode", "symlink", "--python", bin_dir / "python", *requirements,
        timeout=300)  # fmt: skip
    return bin_dir


def installed(bin_dir: Path) -> dict[str, str]:
    listed = json.loads(run(UV, "pip", "list", "--format", "json", "--python", bin_dir / "python", stdout=True))
    return {p["name"].lower(): p["version"] for p in listed}


def check_every_tool(bin_dir: Path, tmp_path: Path, *options: str) -> dict:
    report = tmp_path / "report.json"
    transcript = run(bin_dir / "python", CHECK, "--report", report, *options, cwd=tmp_path, timeout=180)
    result = json.loads(report.read_text())
    result["transcript"] = transcript
    return result


def test_the_wheel_and_sdist_hold_the_extension_its_install_json_and_the_quickstart(dist, wheel):
    [sdist] = dist.glob("agent_kernel-*.tar.gz")
    assert sdist.name == f"agent_kernel-{__version__}.tar.gz"
    names = set(zipfile.ZipFile(wheel).namelist())
    data = f"agent_kernel-{__version__}.data/data"
    assert f"{data}/share/jupyter/labextensions/agent-kernel/package.json" in names
    assert f"{data}/share/jupyter/labextensions/agent-kernel/install.json" in names
    assert f"{data}/etc/jupyter/jupyter_server_config.d/agent_kernel.json" in names
    shipped = zipfile.ZipFile(wheel).read("agent_kernel/notebooks/quickstart.ipynb")
    assert shipped == (ROOT / "notebooks" / "quickstart.ipynb").read_bytes()  # one notebook, not a copy
    install = json.loads(zipfile.ZipFile(wheel).read(f"{data}/share/jupyter/labextensions/agent-kernel/install.json"))
    assert install["packageManager"] == "python" and install["packageName"] == "agent-kernel"


def test_the_wheel_alone_runs_every_tool_with_db_sql_into(wheel, tmp_path):
    bin_dir = new_venv(tmp_path / "venv", str(wheel))
    packages = installed(bin_dir)
    assert packages["agent-kernel"] == __version__
    assert not TEST_ONLY & set(packages), sorted(TEST_ONLY & set(packages))

    result = check_every_tool(bin_dir, tmp_path)
    assert not result["failed"] and result["text"] == "Every tool was called.", result
    called = result["called"]
    # Every tool offered was called, but those the API runs (web_search, web_fetch, the
    # tool search) and report_result, which only a sub-session is offered (it ran there).
    assert set(result["offered"]) - set(called) == {"web_search", "web_fetch", "tool_search_tool_bm25", "report_result"}
    failed = {name: r["text"] for name, r in called.items() if r["is_error"]}
    assert not failed, failed
    assert '"into": {"variable": "totals", "shape": [2, 2]}' in called["db_sql"]["text"]
    assert "North" in result["totals"] and "5.5" in result["totals"]
    waited = called["wait_for_sessions"]["text"]
    assert '"status": "completed"' in waited and "2 regions" in waited  # report_result ran in the sub-session
    assert "North and South." in called["fetch_url"]["text"]
    assert called["double_it"]["text"] == "42"
    assert "Traceback" not in result["transcript"] and "ModuleNotFoundError" not in result["transcript"]

    # Without JupyterLab the demo's last line names the packages of the lab extra (installed metadata).
    opening = (
        "from pathlib import Path; from agent_kernel.demo import how_to_open; print(how_to_open(Path('out/q.ipynb')))"
    )
    said = run(bin_dir / "python", "-c", opening, cwd=tmp_path, stdout=True).strip()
    assert (
        said
        == "To open it in JupyterLab, install it (pip install 'jupyterlab>=4.4'), then run: jupyter lab out/q.ipynb"
    )
    # Without distributed the Dask executor is one line naming the dask extra's package, and exit status 2.
    dask = subprocess.run(
        [bin_dir / "agent-kernel", "--db", tmp_path / "jobs.duckdb", "scheduler", "--once", "--executor", "dask"],
        capture_output=True, text=True, check=False, timeout=60, cwd=tmp_path, env=clean_env(AGENT_KERNEL_HOME=str(tmp_path)),
    )  # fmt: skip
    assert (dask.returncode, dask.stdout, dask.stderr) == (
        2, "", "agent-kernel: The Dask executor needs distributed: pip install 'distributed>=2024.1'.\n"
    )  # fmt: skip


@pytest.fixture(scope="module")
def lab(wheel, tmp_path_factory) -> Path:
    """A venv with ``[lab]`` and the reference MCP server, which requires mcp >= 2.3."""
    bin_dir = new_venv(tmp_path_factory.mktemp("lab") / "venv", f"{wheel}[lab]", "mcp-server-time")
    run(UV, "pip", "check", "--python", bin_dir / "python")  # agent-kernel and mcp-server-time agree on mcp
    return bin_dir


def test_with_lab_jupyterlab_lists_the_extension_and_the_demo_runs_the_shipped_quickstart(lab, tmp_path):
    bin_dir = lab
    env = clean_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    listed = run(bin_dir / "jupyter", "labextension", "list", env=env)
    assert f"agent-kernel v{__version__} enabled OK (python, agent-kernel)" in listed, listed
    server = run(bin_dir / "jupyter", "server", "extension", "list", env=env)
    assert re.search(r"agent_kernel enabled\s+- Validating agent_kernel...\s+agent_kernel \S+ OK", server), server

    said = run(bin_dir / "agent-kernel", "demo", cwd=tmp_path, env=env, timeout=180)
    assert "offline scripted model" in said
    assert said.rstrip().endswith("Open it in JupyterLab: jupyter lab agent-kernel-demo/quickstart.ipynb"), said
    notebook = nbformat.read(tmp_path / "agent-kernel-demo" / "quickstart.ipynb", as_version=4)
    shown = json.dumps([c.get("outputs", []) for c in notebook.cells])
    assert "Here are the monthly revenue totals" in shown and "2025-12" in shown


def test_the_offline_lab_from_the_wheel_opens_the_shipped_tour_and_labels_itself(lab, tmp_path):
    """``agent-kernel lab --offline`` as a newcomer runs it after installing the wheel: the
    tour comes from the wheel, JupyterLab serves the extension, the server says the offline
    scripted model answers, and Ctrl-C stops it all."""
    work = tmp_path / "work"
    env = clean_env(
        PATH=f"{lab}{os.pathsep}{os.environ['PATH']}",
        **jupyter_folders(tmp_path / "jupyter", "wheel-offline-token"),
        AGENT_KERNEL_HOME=str(tmp_path / "agent-home"),
    )
    command = start_lab(lab / "agent-kernel", work, "--offline", env=env, log=tmp_path / "lab.log")
    try:
        tour = nbformat.read(work / "offline_tour.ipynb", as_version=4)  # shipped in the wheel
        assert any("%agent" in c.source for c in tour.cells)
        assert command.get_json("/agent-kernel/api/offline") == {"offline": True, "model": "scripted-offline"}
        assert '"agent-kernel"' in command.get("/lab"), "the page config lists the extension"
    finally:
        command.stop(timeout=60)
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", command.port)) != 0, "JupyterLab stopped listening"


def test_a_published_mcp_server_in_the_same_environment_answers_a_turn(lab, tmp_path):
    result = check_every_tool(lab, tmp_path, "--mcp-only", str(lab / "mcp-server-time"))
    assert {"time__get_current_time", "time__convert_time"} <= set(result["offered"])
    time = result["called"]["time__get_current_time"]
    assert not time["is_error"] and '"timezone": "UTC"' in time["text"], time
    assert time["text"].startswith('<untrusted_content source="mcp time__get_current_time">')
