"""When a cell, a notebook run and a scheduled run fail: the papermill CLI and the scheduler.

A turn whose tools failed but that then ended normally never fails its cell; a turn that
did not end normally fails it with one line and no agent-kernel frames.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import nbformat

from agent_kernel.scheduler.clock import ManualClock
from agent_kernel.testing import call, fail, reply, say, tool_use
from tests.support.notebooks import write_notebook
from tests.support.scheduling import UTC, add_job, scheduler

PAPERMILL = str(Path(sys.executable).with_name("papermill"))
BANNER = "An Exception was encountered"
RAISES = "def load():\n    return {}['region']\nload()"


def papermill(tmp_path: Path, *sources: str) -> tuple[subprocess.CompletedProcess[str], nbformat.NotebookNode]:
    source = write_notebook(tmp_path / "in.ipynb", "%load_ext agent_kernel", *sources)
    output = tmp_path / "out.ipynb"
    done = subprocess.run(
        [PAPERMILL, str(source), str(output), "-k", "python3", "--cwd", str(tmp_path)],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    return done, nbformat.read(output, as_version=4)


def errors(nb: nbformat.NotebookNode) -> list[tuple[int, dict]]:
    return [(i, o) for i, c in enumerate(nb.cells) for o in c.get("outputs", []) if o.output_type == "error"]


def shown(cell: nbformat.NotebookNode) -> str:
    return "\n".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in cell.get("outputs", []))


def test_a_turn_that_recovered_from_an_error_leaves_a_successful_notebook(scripted_model, agent_db, tmp_path):
    scripted_model.add(call("run_code", code=RAISES), call("run_code", code="region = 'north'"), say("Fixed: north."))
    done, nb = papermill(tmp_path, "%agent load the region", "print(region.upper())")
    assert done.returncode == 0, done.stderr
    assert errors(nb) == []
    assert not any(BANNER in c.source for c in nb.cells)
    agent = nb.cells[1]
    stderr = "".join(o.text for o in agent.outputs if o.output_type == "stream" and o.name == "stderr")
    assert "KeyError" in stderr and "load()" in stderr  # the traceback stays readable in the cell
    assert "agent_kernel" not in stderr
    assert "Fixed: north." in shown(agent)
    assert shown(nb.cells[2]).strip() == "NORTH"


def test_a_model_error_fails_the_notebook_at_that_cell_with_one_line(scripted_model, agent_db, tmp_path):
    scripted_model.add(fail(400, "invalid_request_error", "max_tokens: must be at most 64000"))
    done, nb = papermill(tmp_path, "%agent hello", "print('never')")
    assert done.returncode != 0
    line = "Model request failed (400 invalid_request_error): max_tokens: must be at most 64000."
    assert line in done.stderr
    [(index, error)] = errors(nb)
    assert nb.cells[index].source == "%agent hello"
    assert error.ename == "TurnFailedError" and error.evalue.startswith(line) and "\n" not in error.evalue
    assert len(error.traceback) == 1 and "agent_kernel" not in error.traceback[0]
    assert nb.cells[-1].source == "print('never')" and nb.cells[-1].execution_count is None  # stopped there


def test_an_interrupt_fails_the_cell_with_interrupted_and_no_agent_kernel_frames(scripted_model, agent_db, tmp_path):
    # The code the agent runs interrupts its own kernel: the same SIGINT a Ctrl-C sends.
    interrupt = (
        "import os, signal, time\nprint('started', flush=True)\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)"
    )
    scripted_model.add(call("run_code", code=interrupt))
    done, nb = papermill(tmp_path, "%agent go")
    assert done.returncode != 0 and "■ Interrupted." in done.stderr
    [(index, error)] = errors(nb)
    # The turn's footer counts the call that was stopped; the line saying so comes last.
    assert error.evalue == "■ Interrupted." and len(error.traceback) == 2
    assert "· 1 tool call ·" in error.traceback[0] and error.traceback[-1].endswith("■ Interrupted.\x1b[0m")
    cell = nb.cells[index]
    stderr = "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stderr")
    # One line where the code was, not a traceback naming a cell that is not on the screen.
    assert "run_code was stopped at line 4: time.sleep(5)" in stderr or "line 3: os.kill" in stderr
    assert "KeyboardInterrupt" not in stderr and "Cell In[" not in stderr
    assert "interrupts.py" not in stderr and "agent_kernel" not in stderr
    assert "agent_kernel" not in json.dumps(error)


def test_the_token_limit_with_nobody_to_continue_fails_the_cell(scripted_model, agent_db, tmp_path):
    scripted_model.add(
        reply(tool_use("run_code", {"code": "step = 1"}), usage={"input_tokens": 600, "output_tokens": 100})
    )
    done, nb = papermill(tmp_path, "%agent --token-limit 500 work")
    assert done.returncode != 0
    [(_, error)] = errors(nb)
    assert error.evalue.startswith("Session ") and "reached its token limit (700 of 500 tokens)" in error.evalue
    # Shown once: as the cell's error, not also as a notice above it.
    assert sum("reached its token limit" in shown(c) for c in nb.cells) == 0


# -- the scheduler ---------------------------------------------------------------------------

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def run_job(store, home, tmp_path, name):
    notebook = write_notebook(tmp_path / f"{name}.ipynb", "%load_ext agent_kernel", "%agent do the report")
    clock = ManualClock(T0)
    add_job(store, name=name, notebook=str(notebook), at=T0 + timedelta(seconds=5), now=clock.now())
    clock.advance(seconds=10)
    [run] = scheduler(store, home, clock).run_once()
    return run


def agent_kernel_runs(*args: str) -> str:
    script = Path(sys.executable).with_name("agent-kernel")
    return subprocess.run([str(script), "runs", *args], capture_output=True, text=True, timeout=60, check=True).stdout


def test_a_job_whose_agent_recovered_from_a_tool_error_succeeds(scripted_model, store, home, tmp_path):
    scripted_model.add(call("run_code", code=RAISES), say("Report done despite the KeyError."))
    run = run_job(store, home, tmp_path, "recovers")
    assert run.status == "SUCCEEDED" and run.error is None and run.attempt == 1
    assert "SUCCEEDED" in agent_kernel_runs("--job", "recovers")


def test_a_job_whose_model_call_failed_is_failed_with_the_one_line(scripted_model, store, home, tmp_path, kernel):
    scripted_model.add(fail(403, "permission_error", "Your key cannot use this model"))
    run = run_job(store, home, tmp_path, "refused")
    line = (
        "Model request failed (403 permission_error): Your key cannot use this model. "
        "The key is not allowed to do this; check its workspace and model access."
    )
    assert run.status == "FAILED" and run.error.startswith(line)
    assert "\n" not in run.error and "Exception encountered" not in run.error
    [row] = json.loads(agent_kernel_runs("--job", "refused", "--json"))
    assert row["status"] == "FAILED" and row["error"] == run.error
    assert "Model request failed (403 permission_error)" in agent_kernel_runs("--job", "refused")
    jobs = kernel.ok("%agent_jobs --all").final_texts()[-1]
    assert "FAILED (Model request failed (403 permission_error)" in jobs
