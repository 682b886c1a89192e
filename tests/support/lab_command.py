"""``agent-kernel lab`` started as a person starts it, for tests: an installed console script
in a subprocess, every folder Jupyter writes to inside the test's own, the server asked until
it answers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.jupyterlab import free_port

# Jupyter refuses to run as root unless told; options after `--` go to JupyterLab.
ROOT_OPTIONS = ("--ServerApp.allow_root=True",) if os.geteuid() == 0 else ()


def jupyter_folders(home: Path, token: str) -> dict[str, str]:
    """The server's token and every folder Jupyter, JupyterLab and IPython read or write,
    under ``home``: the person's own settings, workspaces and kernels stay out of the test.
    JupyterLab's settings are in ``home / "settings"``."""
    return {
        "JUPYTER_TOKEN": token,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        "IPYTHONDIR": str(home / "ipython"),
    }


@dataclass
class LabCommand:
    """A running ``agent-kernel lab`` and the JupyterLab it serves."""

    process: subprocess.Popen[bytes]
    port: int
    token: str
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> str:
        """The body of an authenticated GET of ``path`` on the server."""
        request = urllib.request.Request(self.url + path, headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body: bytes = response.read()
        return body.decode()

    def get_json(self, path: str) -> Any:
        return json.loads(self.get(path))

    def stop(self, how: signal.Signals = signal.SIGINT, timeout: float = 90) -> int:
        """Send ``how`` (Ctrl-C by default) to the command alone, as a terminal does; its exit
        status. A command still running after ``timeout`` seconds is killed, and that fails."""
        self.process.send_signal(how)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise


def start_lab(
    command: Path,
    work: Path,
    *options: str,
    env: Mapping[str, str],
    log: Path,
    jupyter_options: Sequence[str] = ROOT_OPTIONS,
    timeout: float = 120,
) -> LabCommand:
    """Run ``COMMAND lab OPTIONS --no-browser --port PORT WORK -- JUPYTER_OPTIONS`` (``command``:
    an ``agent-kernel`` console script) with ``env`` (its ``JUPYTER_TOKEN`` authenticates),
    its output into ``log``; return once ``/api/status`` answers. A command that exits first,
    or a server that does not answer within ``timeout`` seconds, fails with the log."""
    port = free_port()
    argv = [str(command), "lab", *options, "--no-browser", "--port", str(port), str(work)]
    if jupyter_options:
        argv += ["--", *jupyter_options]
    with log.open("w") as out:
        process = subprocess.Popen(argv, env=dict(env), stdout=out, stderr=subprocess.STDOUT)
    lab = LabCommand(process, port, env["JUPYTER_TOKEN"], log)
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, f"agent-kernel lab exited {process.returncode}:\n{log.read_text()}"
        try:
            lab.get("/api/status")
            return lab
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                process.kill()
                process.wait()
                raise AssertionError(f"JupyterLab did not start within {timeout:g} s:\n{log.read_text()}") from None
            time.sleep(0.25)
