"""execute_run: one notebook in its own process; logs, progress and how it ended."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import psutil

from agent_kernel.scheduler.execute import execute_run
from agent_kernel.scheduler.rundir import RunDir
from agent_kernel.scheduler.spec import RunSpec
from tests.support.notebooks import write_notebook
from tests.support.scheduling import wait_for


def spec_for(tmp_path, notebook, **fields) -> RunSpec:
    run_dir = tmp_path / "run"
    return RunSpec(run_id="r1", job_id="j1", job_name="test", attempt=1, run_dir=str(run_dir),
                   input_path=str(notebook), output_path=str(run_dir / "output.ipynb"), cwd=str(tmp_path),
                   **fields)  # fmt: skip


def test_logs_and_progress_of_a_run(tmp_path):
    notebook = write_notebook(
        tmp_path / "nb.ipynb",
        "import sys\nprint('to out')\nprint('to err', file=sys.stderr)",
        "import os\nprint(os.environ['AGENT_KERNEL_RUN_ID'], os.getcwd())",
    )
    spec = spec_for(tmp_path, notebook, env={"AGENT_KERNEL_RUN_ID": "r1"})
    result = execute_run(spec.to_dict())
    assert result["status"] == "SUCCEEDED" and result["exit_code"] == 0 and result["error"] is None
    run_dir = RunDir(spec.run_dir)
    assert run_dir.stdout.read_text() == f"to out\nr1 {tmp_path}\n" and run_dir.stderr.read_text() == "to err\n"
    progress = json.loads(run_dir.progress.read_text())
    assert (progress["cells_done"], progress["cells_total"], progress["cell"]) == (2, 2, 2)
    assert progress["source"] == "import os"
    assert json.loads(run_dir.result.read_text())["status"] == "SUCCEEDED"


def test_a_cell_timeout_is_timed_out_not_completed(tmp_path):
    notebook = write_notebook(tmp_path / "nb.ipynb", "x = 1", "import time\ntime.sleep(30)", "y = 2")
    result = execute_run(spec_for(tmp_path, notebook, cell_timeout_s=1).to_dict())
    assert result["status"] == "TIMED_OUT" and result["error_cell"] == 2
    assert result["error"].startswith("A cell ran longer than cell_timeout_s (1 s)")
    assert (result["cells_done"], result["cells_total"]) == (1, 3)


def test_a_run_stops_itself_when_its_owner_stops_heartbeating(tmp_path):
    notebook = write_notebook(tmp_path / "nb.ipynb", "import time\ntime.sleep(60)")
    spec = spec_for(tmp_path, notebook, lease_s=1.5)
    started = time.monotonic()
    result = execute_run(spec.to_dict())  # nobody touches the heartbeat file
    assert result["status"] == "LOST" and "stopped heartbeating" in result["error"]
    assert time.monotonic() - started < 15


def test_a_runner_killed_from_outside_is_failed_with_the_signal(tmp_path):
    notebook = write_notebook(tmp_path / "nb.ipynb", "import time\ntime.sleep(60)")
    spec = spec_for(tmp_path, notebook)
    found: dict[str, int] = {}

    def kill_the_runner() -> None:
        def runner():
            for process in psutil.Process(os.getpid()).children():
                if "agent_kernel.scheduler.runner" in " ".join(process.cmdline()):
                    return process
            return None

        process = wait_for(runner, what="the runner")
        wait_for(lambda: process.children(), what="its kernel")
        found["pid"] = process.pid
        os.kill(process.pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_the_runner)
    killer.start()
    result = execute_run(spec.to_dict())
    killer.join()
    assert result["status"] == "FAILED" and result["error"].startswith("The runner process was killed by signal 9.")
