"""``agent-kernel lab [--offline]``: its command line, the server it starts on 127.0.0.1 only
(run as a person runs it, the installed console script in a subprocess), Ctrl-C stopping
JupyterLab and the scripted model, and the guided notebook it opens."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path

import nbformat
import psutil
import pytest
from nbclient import NotebookClient

from agent_kernel.cli import main
from agent_kernel.lab import TOUR, LabError, LabSettings, copy_tour, jupyter_command, lab_environment, tour_notebook
from agent_kernel.testing import ScriptedModel
from agent_kernel.testing.demo import OFFLINE_MODEL, demo_responder
from tests.support.lab_command import LabCommand, jupyter_folders, start_lab
from tests.support.notebooks import outputs_text

AGENT_KERNEL = Path(sys.executable).parent / "agent-kernel"


def test_the_command_line_serves_on_loopback_and_opens_the_tour_offline(tmp_path):
    command = jupyter_command(LabSettings(tmp_path, offline=True, port=9123, open_browser=False))
    assert command[:3] == [sys.executable, "-m", "jupyterlab"]
    assert "--ServerApp.ip=127.0.0.1" in command and "--no-browser" in command
    assert "--ServerApp.port=9123" in command and "--ServerApp.port_retries=0" in command
    assert f"--LabApp.default_url=/lab/tree/{TOUR}" in command and "--LabApp.news_url=None" in command
    assert f"--AgentKernelServer.completion_model={OFFLINE_MODEL}" in command
    plain = jupyter_command(LabSettings(tmp_path))
    assert "--no-browser" not in plain and not any(o.startswith("--ServerApp.port") for o in plain)
    assert not any("default_url" in o or "news_url" in o for o in plain)


def test_the_tour_is_copied_once_and_a_persons_copy_is_kept(tmp_path):
    assert copy_tour(tmp_path) and (tmp_path / TOUR).read_bytes() == tour_notebook().read_bytes()
    (tmp_path / TOUR).write_text("my edits")
    assert copy_tour(tmp_path) and (tmp_path / TOUR).read_text() == "my edits"
    command = jupyter_command(LabSettings(tmp_path, offline=True), open_tour=False)
    assert "--LabApp.news_url=None" in command and not any("default_url" in o for o in command)


@pytest.mark.parametrize("option", ["--ip=0.0.0.0", "--ServerApp.ip=0.0.0.0", "--ServerApp.sock=/tmp/x.sock"])
def test_options_that_leave_loopback_are_refused(tmp_path, option, capsys):
    with pytest.raises(LabError, match="127.0.0.1 only"):
        jupyter_command(LabSettings(tmp_path, jupyter_options=(option,)))
    assert main(["lab", "--offline", str(tmp_path), "--", option]) == 2
    assert "serves on 127.0.0.1 only" in capsys.readouterr().err
    assert not (tmp_path / TOUR).exists()


def test_a_port_out_of_range_is_refused(tmp_path, capsys):
    assert main(["lab", "--port", "70000", str(tmp_path)]) == 2
    assert "--port is from 1 to 65535, not 70000." in capsys.readouterr().err


def test_the_environment_points_at_the_scripted_model_only_offline():
    base = {"ANTHROPIC_API_KEY": "sk-real", "AGENT_KERNEL_OFFLINE": "stale", "PATH": "/bin"}
    model = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:5", "ANTHROPIC_API_KEY": "scripted-test-key"}
    offline = lab_environment(base, model, OFFLINE_MODEL)
    assert offline["ANTHROPIC_API_KEY"] == "scripted-test-key" and offline["AGENT_KERNEL_OFFLINE"] == OFFLINE_MODEL
    assert offline["AGENT_KERNEL_MODEL"] == OFFLINE_MODEL
    plain = lab_environment(base, None, "")
    assert plain == {"ANTHROPIC_API_KEY": "sk-real", "PATH": "/bin"}


def _start(tmp_path: Path, *args: str) -> LabCommand:
    """``agent-kernel lab ARGS`` serving ``tmp_path / "work"``, with an offline switch left
    in the environment by someone else (the command sets it, or clears it, itself)."""
    env = dict(
        os.environ,
        **jupyter_folders(tmp_path / "jupyter", "lab-test-token"),
        AGENT_KERNEL_DB=str(tmp_path / "agent.duckdb"),
        AGENT_KERNEL_HOME=str(tmp_path / "agent-home"),
        AGENT_KERNEL_OFFLINE="set-by-someone-else",
    )
    return start_lab(AGENT_KERNEL, tmp_path / "work", *args, env=env, log=tmp_path / "lab.log")


def _listening(pid: int) -> list[tuple[str, int]]:
    """The addresses the process and its children listen on."""
    tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return [
        (c.laddr.ip, c.laddr.port)
        for p in tree
        for c in p.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]


def _refused(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_offline_lab_listens_on_loopback_only_and_ctrl_c_stops_lab_and_model(tmp_path):
    lab = _start(tmp_path, "--offline")
    try:
        assert lab.get_json("/agent-kernel/api/offline") == {"offline": True, "model": OFFLINE_MODEL}
        assert (tmp_path / "work" / TOUR).read_text() == tour_notebook().read_text()
        listening = _listening(lab.process.pid)
        assert (("127.0.0.1", lab.port)) in listening and len(listening) >= 2  # JupyterLab and the scripted model
        assert all(ip == "127.0.0.1" for ip, _ in listening), listening
        children = psutil.Process(lab.process.pid).children(recursive=True)
    finally:
        code = lab.stop()  # Ctrl-C: the terminal signals this process only
    assert code == 0
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert all(_refused(p) for _, p in listening)
    log = (tmp_path / "lab.log").read_text()
    assert f"offline scripted model ({OFFLINE_MODEL}, not Claude) answers at http://127.0.0.1:" in log
    assert "JupyterLab stopped; the offline scripted model stopped with it." in log


def test_plain_lab_is_not_offline_and_keeps_the_directorys_notebooks(tmp_path):
    (tmp_path / "work").mkdir()
    lab = _start(tmp_path)
    try:
        assert lab.get_json("/agent-kernel/api/offline") == {"offline": False, "model": None}
        assert not (tmp_path / "work" / TOUR).exists()
    finally:
        code = lab.stop(signal.SIGTERM)
    assert code == 0


def test_the_tour_runs_headless_on_the_offline_model(agent_db, tmp_path, monkeypatch):
    """Run all, as nbclient runs it: the cell tagged raises-exception fails, as the tour says it does."""
    notebook = nbformat.read(tour_notebook(), as_version=4)
    with ScriptedModel(responder=demo_responder) as model:
        for name, value in lab_environment({}, model.env(), OFFLINE_MODEL).items():
            monkeypatch.setenv(name, value)
        NotebookClient(notebook, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    cells = [c for c in notebook.cells if c.cell_type == "code"]
    agent = next(c for c in cells if c.source.startswith("%agent load"))
    shown = outputs_text(agent)
    assert "Here are the monthly revenue totals" in shown and "2025-12" in shown
    assert f"{OFFLINE_MODEL} (offline scripted model, not Claude)" in shown
    assert "North" in outputs_text(next(c for c in cells if c.source.startswith("sales.groupby")))
    chart = next(c for c in cells if c.source.startswith("%agent now chart"))
    assert any("application/vnd.vegalite.v5+json" in o.get("data", {}) for o in chart.outputs), chart.outputs
    assert "The chart above shows the monthly revenue totals" in outputs_text(chart)
    broken = next(c for c in cells if "len(price)" in c.source)
    assert [o.get("ename") for o in broken.outputs if o.output_type == "error"] == ["NameError"]


def test_jupyterlab_does_not_outlive_the_command(tmp_path):
    """Killed (nothing to clean up with), the command takes JupyterLab with it."""
    command = _start(tmp_path, "--offline")
    process, port = command.process, command.port
    lab = psutil.Process(process.pid).children()
    assert [p.cmdline()[1:3] for p in lab] == [["-m", "jupyterlab"]]
    process.kill()
    process.wait(timeout=30)
    gone, alive = psutil.wait_procs(lab, timeout=60)
    assert not alive and _refused(port)


def test_a_closed_terminal_stops_it_as_ctrl_c_does(tmp_path):
    lab = _start(tmp_path)
    assert lab.stop(signal.SIGHUP) == 0 and _refused(lab.port)
