"""The installed package enables both halves: `make install` (pip) puts the built JupyterLab
extension in share/jupyter/labextensions and enables the server extension."""

from __future__ import annotations

import os
import re
import subprocess
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def jupyter(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    # `jupyter X` runs the `jupyter-X` found first on PATH: this environment's.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", *args], capture_output=True, text=True, timeout=120, env=env
    )
    return ANSI.sub("", done.stdout + done.stderr)


def test_jupyter_lists_the_lab_extension_and_the_server_extension_enabled():
    from agent_kernel import __version__

    labextensions = jupyter("labextension", "list")
    assert f"agent-kernel v{__version__} enabled OK" in labextensions, (
        "The JupyterLab extension is not installed in this environment: run `make install` "
        f"(pip install -e .), which builds and installs it.\n{labextensions}"
    )
    server = jupyter("server", "extension", "list")
    assert re.search(r"agent_kernel enabled\s+- Validating agent_kernel...\s+agent_kernel \S+ OK", server), server
