"""``agent-kernel demo``'s hints: what to install for JupyterLab is a command that works
(agent-kernel itself is not on the package index, so its extra cannot be named there)."""

from __future__ import annotations

from pathlib import Path

import tomllib

from agent_kernel.demo import lab_install_command

ROOT = Path(__file__).resolve().parent.parent


def test_the_lab_hint_installs_the_lab_extras_packages_not_agent_kernel_from_the_index():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    command = lab_install_command()
    assert command == "pip install " + " ".join(f"'{r}'" for r in extras["lab"])
    assert "agent-kernel" not in command
