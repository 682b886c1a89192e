"""run_code(isolated=True): the sandbox where bubblewrap works, the stripped process elsewhere.

Both sides run for real: the sandbox through the `bwrap` that `make install` installs, the
fallback in a kernel started with AGENT_KERNEL_ISOLATION=process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_kernel.testing import call, say
from agent_kernel.tools.isolation import PROCESS, SANDBOX, Isolation, probe
from tests.support.kernel import Kernel

SECRET = "sk-isolation-test-4f1c"

# Run inside the isolated process: everything it can find out about the kernel and the database.
SNOOP = """
import glob, json, os
found = {"env": SECRET_NAME in os.environ, "environ": [], "opened": []}
for path in [f"/proc/{KERNEL_PID}/environ", *glob.glob("/proc/[0-9]*/environ")]:
    try:
        with open(path, "rb") as f:
            seen = f.read()
        if SECRET.encode() in seen:
            found["environ"].append(path)
    except OSError:
        pass
for path in TARGETS:
    try:
        with open(path, "rb") as f:
            f.read(16)
        found["opened"].append(path)
    except OSError:
        pass
found["kernel_mem"] = os.path.exists(f"/proc/{KERNEL_PID}/mem") and os.access(f"/proc/{KERNEL_PID}/mem", os.R_OK)
print(json.dumps(found))
"""


def snoop_code(kernel_pid: int, targets: list[str]) -> str:
    header = (
        f"SECRET_NAME = 'AGENT_KERNEL_TEST_SECRET'\nSECRET = {SECRET!r}\n"
        f"KERNEL_PID = {kernel_pid}\nTARGETS = {targets!r}\n"
    )
    return header + SNOOP


def start_kernel(tmp_path: Path, **env: str) -> Kernel:
    kernel = Kernel({"AGENT_KERNEL_TEST_SECRET": SECRET, **env}, cwd=str(tmp_path))
    kernel.ok("%load_ext agent_kernel")
    return kernel


@pytest.fixture
def database_files(agent_db: Path) -> list[str]:
    """The agent's DuckDB file and a copy of it next to it."""
    from agent_kernel.store import Store

    with Store(agent_db).connect():
        pass
    copy = agent_db.with_name("copy-of-agent.duckdb")
    shutil.copyfile(agent_db, copy)
    return [str(agent_db), str(copy)]


def isolated_turn(kernel: Kernel, scripted_model, code: str) -> tuple[dict, str]:
    """One turn whose only call is an isolated run_code; its result and run_code's description."""
    scripted_model.add(call("run_code", code=code, isolated=True), say("done"))
    assert kernel.execute("%agent snoop").status == "ok"
    request = scripted_model.requests[-1]
    result = json.loads(request["messages"][-1]["content"][0]["content"])
    [run_code] = [tool for tool in request["tools"] if tool["name"] == "run_code"]
    return result, run_code["description"]


@pytest.fixture
def sandboxed_kernel(scripted_model, agent_db: Path, tmp_path: Path) -> Iterator[Kernel]:
    kernel = start_kernel(tmp_path)
    try:
        yield kernel
    finally:
        kernel.shutdown()


@pytest.fixture
def process_kernel(scripted_model, agent_db: Path, tmp_path: Path) -> Iterator[Kernel]:
    kernel = start_kernel(tmp_path, AGENT_KERNEL_ISOLATION="process")
    try:
        yield kernel
    finally:
        kernel.shutdown()


def test_this_machine_has_the_sandbox_and_the_setting_turns_it_off():
    assert shutil.which("bwrap"), "bubblewrap is missing: `make install` installs it"
    found = probe()
    assert found.mode == SANDBOX, found.reason
    forced = probe("process")
    assert forced.mode == PROCESS and "not a sandbox" in forced.describe()
    assert "bubblewrap sandbox" in found.describe() and "no network" in found.describe()


def test_sandboxed_code_cannot_read_the_kernels_environment_or_the_database(
    sandboxed_kernel, scripted_model, database_files
):
    kernel_pid = sandboxed_kernel.value("__import__('os').getpid()")
    # The kernel itself can read both: the test would prove nothing otherwise.
    assert SECRET.encode() in Path(f"/proc/{kernel_pid}/environ").read_bytes()
    code = snoop_code(kernel_pid, database_files)
    result, description = isolated_turn(sandboxed_kernel, scripted_model, code)
    assert result["success"] is True, result
    found = json.loads(result["stdout"])
    assert found == {"env": False, "environ": [], "opened": [], "kernel_mem": False}
    assert "bubblewrap sandbox" in description and "not a sandbox" not in description


def test_without_the_sandbox_the_environment_is_stripped_and_the_description_says_so(
    process_kernel, scripted_model, database_files
):
    kernel_pid = process_kernel.value("__import__('os').getpid()")
    result, description = isolated_turn(process_kernel, scripted_model, snoop_code(kernel_pid, database_files))
    assert result["success"] is True, result
    found = json.loads(result["stdout"])
    assert found["env"] is False  # the stripped environment
    # What the description warns about: a process of the same user reads the kernel's /proc.
    assert f"/proc/{kernel_pid}/environ" in found["environ"] and found["opened"] == database_files
    assert "a separate process, not a sandbox" in description
    assert "OS sandbox" not in description


def test_the_data_directory_is_hidden_even_inside_a_bound_python_path(tmp_path, monkeypatch):
    """A DuckDB file (and its copies) inside a directory the sandbox binds stays out of reach."""
    found = probe()
    assert found.mode == SANDBOX, found.reason
    packages = tmp_path / "packages"
    (packages / "data").mkdir(parents=True)
    (packages / "visible.py").write_text("VALUE = 7\n")
    database = packages / "data" / "agent.duckdb"
    database.write_bytes(b"DUCK")
    (packages / "data" / "copy.duckdb").write_bytes(b"DUCK")
    monkeypatch.setenv("AGENT_KERNEL_DB", str(database))
    monkeypatch.setenv("AGENT_KERNEL_HOME", str(tmp_path / "home"))
    sandbox = Isolation(SANDBOX, bwrap=found.bwrap, python_paths=(*found.python_paths, str(packages)))
    workdir = tmp_path / "work"
    workdir.mkdir()
    check = (
        f"import os, sys; sys.path.append({str(packages)!r}); import visible; "
        f"print(visible.VALUE, sorted(os.listdir({str(packages / 'data')!r})))"
    )
    done = subprocess.run(
        sandbox.command([sys.executable, "-I", "-c", check], str(workdir)),
        capture_output=True, text=True, timeout=30, env=sandbox.environment(str(workdir)),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["7", "[]"]  # the package imports; the data directory is empty
    assert sorted(os.listdir(packages / "data")) == ["agent.duckdb", "copy.duckdb"]
