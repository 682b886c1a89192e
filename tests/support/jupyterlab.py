"""A real JupyterLab server on 127.0.0.1 and Debian's Chromium driven by Playwright.

The server runs from this venv (so its kernels have agent_kernel installed) with every
Jupyter and JupyterLab directory in a temporary folder, and with nothing that reaches
the network (no news, no update check, no extension manager). Chromium is the system's
(``/usr/bin/chromium``, installed by ``make install``); Playwright never downloads one.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nbformat import NotebookNode

from tests.support.notebooks import write_notebook

CHROMIUM = os.environ.get("AGENT_KERNEL_CHROMIUM", "/usr/bin/chromium")
# Flags for this machine's closed network (see the environment notes): no background
# connections, no component updates, a fresh profile.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
]


# Starts JupyterLab so that it gets SIGTERM if the test process dies (killed by a time
# limit, say): Linux's parent-death signal survives exec. Elsewhere it just starts it.
# The first argument is a folder to append to the server's import path, or "": packages
# there (jupyter-collaboration's) only fill in what this venv lacks, and the kernels the
# server starts never see them.
_LAUNCH = """
import os, runpy, signal, sys
try:
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
except OSError:
    pass
extra, app = sys.argv[1:3]
if not extra:
    os.execv(sys.executable, [sys.executable, "-m", *sys.argv[2:]])
sys.path.append(extra)
sys.argv = [app, *sys.argv[3:]]
runpy.run_module(app, run_name="__main__", alter_sys=True)
"""

# jupyter-collaboration (real-time collaboration) lives beside the venv, not in it: installed
# in the venv it would turn every test server's notebooks into shared documents. `make
# install` puts it here (`uv pip install --target`); only the collaboration tests' server
# appends it to its import path and its front-end extensions to JUPYTER_PATH.
COLLABORATION = Path(sys.prefix) / "collaboration"


LAB_OPTIONS = [
    "--LabApp.news_url=None",
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    "--LabApp.extension_manager=readonly",
    "--LabApp.expose_app_in_browser=True",
]


def free_port() -> int:
    """A free port below the kernel's ephemeral range (32768 and up on Linux): kernels
    started meanwhile bind ports from that range, and one could take a port picked there
    before the server binds it."""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(20_000, 32_000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port between 20000 and 32000")


class JupyterLab:
    """A JupyterLab server process with its own directories, for one test session."""

    def __init__(
        self,
        root: Path,
        env: dict[str, str],
        config: dict[str, Any] | None = None,
        app: str = "jupyterlab",
        extra_site: Path | None = None,
    ) -> None:
        """``config``: the server's jupyter_server_config.json (in its own config directory);
        ``app``: the front end's module (``notebook`` for Notebook 7); ``extra_site``: a
        ``pip install --target`` folder whose packages and front-end extensions the server adds."""
        self.root = root
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        home = root.parent / "jupyter-home"
        settings = home / "lab-settings"
        (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True, exist_ok=True)
        (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False})
        )
        if config:
            (home / "config").mkdir(parents=True, exist_ok=True)
            (home / "config" / "jupyter_server_config.json").write_text(json.dumps(config))
        full_env = dict(
            os.environ,
            AGENT_KERNEL_WARM_UP="1",  # its kernels are live ones, warmed up as users' are
            **env,
            JUPYTER_CONFIG_DIR=str(home / "config"),
            JUPYTER_DATA_DIR=str(home / "data"),
            JUPYTER_RUNTIME_DIR=str(home / "runtime"),
            JUPYTERLAB_SETTINGS_DIR=str(settings),
            JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
            IPYTHONDIR=str(home / "ipython"),
        )
        if extra_site is not None:
            full_env["JUPYTER_PATH"] = os.pathsep.join(
                filter(None, [os.environ.get("JUPYTER_PATH"), str(_front_end_extensions(extra_site, home))])
            )
        self.log = (root.parent / "jupyterlab.log").open("w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _LAUNCH,
                str(extra_site or ""),
                app,
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}",
                "--ServerApp.port_retries=0",
                "--ServerApp.allow_root=True",
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={root}",
                *(LAB_OPTIONS if app == "jupyterlab" else []),
            ],
            cwd=root,
            env=full_env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited: see {self.log.name}")
            try:
                self.api("GET", "/api/status")
                return
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.25)
        raise RuntimeError(f"JupyterLab did not start within {timeout} s: see {self.log.name}")

    def api(self, method: str, path: str) -> Any:
        request = urllib.request.Request(
            self.url + path, method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def kernels(self, timeout: float = 10) -> list[dict[str, Any]]:
        """The server's kernels. Jupyter Server answers 500 for the list while a kernel it is
        starting has no ``last_activity`` yet (its ``kernel_model`` reads it): asked again."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                kernels: list[dict[str, Any]] = self.api("GET", "/api/kernels")
                return kernels
            except urllib.error.HTTPError as exc:
                if exc.code != 500 or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def notebook(self, name: str, cells: Sequence[str | NotebookNode]) -> str:
        """Write a notebook of these cells (as :func:`tests.support.notebooks.notebook` takes
        them) into the server's root; its URL in JupyterLab."""
        write_notebook(self.root / f"{name}.ipynb", *cells)
        # A workspace of its own, so tabs from earlier tests are not restored beside it.
        return f"{self.url}/lab/workspaces/{name}/tree/{name}.ipynb?reset&token={self.token}"

    def shutdown_kernels(self) -> None:
        for kernel in self.kernels():
            self.api("DELETE", f"/api/kernels/{kernel['id']}")

    def stop(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()  # reaped, whichever way it ended
        self.log.close()


@contextmanager
def lab_server(
    base: Path,
    env: Mapping[str, str] | None = None,
    *,
    config: dict[str, Any] | None = None,
    extra_site: Path | None = None,
) -> Iterator[JupyterLab]:
    """A JupyterLab server over ``base``/notebooks whose kernels keep the agent's database in
    ``base``/agent.duckdb and its home in ``base``/agent-home (``env`` adds to or replaces
    those variables); stopped when the block ends. Every test module's server starts here."""
    root = base / "notebooks"
    root.mkdir()
    full_env = {
        "AGENT_KERNEL_DB": str(base / "agent.duckdb"),
        "AGENT_KERNEL_HOME": str(base / "agent-home"),
        **(env or {}),
    }
    lab = JupyterLab(root, full_env, config=config, extra_site=extra_site)
    try:
        yield lab
    finally:
        lab.stop()


def _front_end_extensions(extra_site: Path, home: Path) -> Path:
    """A Jupyter data folder with only the ``@jupyter`` front-end extensions of
    ``extra_site`` (its share/jupyter also holds copies of JupyterLab's own files and a
    python3 kernel spec, which must not shadow this venv's)."""
    data = home / "extra-data"
    (data / "labextensions").mkdir(parents=True, exist_ok=True)
    link = data / "labextensions" / "@jupyter"
    if not link.exists():
        link.symlink_to(extra_site / "share" / "jupyter" / "labextensions" / "@jupyter")
    return data


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or ``None``."""
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        return f"Chromium not found at {CHROMIUM}: run `make install` (it installs Debian's chromium)."
    return None
