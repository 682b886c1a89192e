"""The agent in the real ``jupyter console`` and terminal IPython, in a terminal (tmux), as
a person uses them.

jupyter console prints each output once, as it arrives, and ignores display updates; a
terminal IPython has no front end at all. Either way the answer must come whole, as it
streams, with no fragments of a first display and no transcript repeated at the end; a
chart prints as text, with the path of its image.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_kernel.testing import reply, say, text, tool_use

ROOT = Path(__file__).resolve().parent.parent
INTRO = "Let me compute the sum first."
ANSWER = "The **sum of** 19 and 23 is 42, which is the answer to everything you asked about today."


class Terminal:
    """A tmux session running one program; ``screen()`` is all it printed, wrapped lines joined."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path) -> None:
        self.name = f"ak-console-{uuid.uuid4().hex[:8]}"
        exports = [f"{key}={value}" for key, value in env.items()]
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", self.name, "-x", "220", "-y", "60", "-c", str(cwd),
             "env", *exports, *command],
            check=True,
        )  # fmt: skip
        subprocess.run(["tmux", "set-option", "-t", self.name, "history-limit", "5000"], check=True)

    def type(self, line: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, "-l", line], check=True)
        subprocess.run(["tmux", "send-keys", "-t", self.name, "Enter"], check=True)

    def screen(self) -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-J", "-S", "-5000", "-t", self.name],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip

    def wait_for(self, ready: Callable[[str], bool], timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shown = self.screen()
            if ready(shown):
                return shown
            time.sleep(0.1)
        raise AssertionError(f"the terminal did not get there in {timeout} s:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], check=False, capture_output=True)


def start(program: list[str], scripted_model, agent_db: Path, tmp_path: Path) -> Terminal:
    """``program`` (from this venv's bin) in a fresh terminal, talking to the scripted model."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed: `make install` installs Debian's tmux.")
    venv_bin = Path(sys.executable).parent
    env = {
        **scripted_model.env(),
        "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
        "AGENT_KERNEL_DB": str(agent_db),
        "AGENT_KERNEL_HOME": str(tmp_path / "home"),
        "AGENT_KERNEL_WARM_UP": "1",  # as users have it
        "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "TERM": "xterm-256color",
    }
    terminal = Terminal([str(venv_bin / program[0]), *program[1:]], env, tmp_path)
    try:
        terminal.wait_for(lambda shown: "In [1]:" in shown)
    except BaseException:
        terminal.close()
        raise
    return terminal


@pytest.fixture(params=["jupyter console", "terminal IPython"])
def console(request, scripted_model, agent_db: Path, tmp_path: Path) -> Iterator[Terminal]:
    program = {
        "jupyter console": [
            "jupyter",
            "console",
            "--kernel",
            "python3",
            "--ZMQTerminalInteractiveShell.simple_prompt=True",
        ],
        "terminal IPython": ["ipython", "--simple-prompt", "--no-banner"],
    }[request.param]
    terminal = start(program, scripted_model, agent_db, tmp_path)
    try:
        yield terminal
    finally:
        terminal.close()


def test_a_console_prints_the_answer_once_as_it_streams(console, scripted_model):
    scripted_model.add(
        reply(text(INTRO), tool_use("run_code", {"code": "print(19 + 23)"}), chunk_size=4, chunk_delay=0.02),
        say(ANSWER, chunk_size=4, chunk_delay=0.05),
    )
    console.type("%load_ext agent_kernel")
    console.wait_for(lambda shown: "In [2]:" in shown)
    console.type("%agent add 19 and 23")
    # Part of the answer is on the screen while the rest is still coming.
    partway = console.wait_for(lambda shown: "The **sum of** 19" in shown, timeout=60)
    assert "answer to everything" not in partway
    shown = console.wait_for(lambda shown: "In [3]:" in shown, timeout=90)
    turn = shown.split("%agent add 19 and 23", 1)[1].split("In [3]:", 1)[0]
    lines = [line.rstrip() for line in turn.splitlines() if line.strip()]
    # Each part once, whole: no half-streamed fragment, no transcript again at the end.
    assert turn.count(INTRO) == 1 and turn.count(ANSWER) == 1, turn
    assert turn.count("Let me comp") == 1 and turn.count("The **sum of") == 1, turn
    assert "[run_code] print(19 + 23)" in lines and "42" in lines, turn
    assert sum(line.startswith("[run_code]") for line in lines) == 2, turn  # it ran, then it ended
    footer = [line for line in lines if line.startswith("scripted-model")]
    assert len(footer) == 1 and lines[-1] == footer[0], turn  # the footer, once, last
    for noise in ("StopButton", "waiting for the model", "object at 0x", "Traceback"):
        assert noise not in turn, turn


def test_a_chart_in_a_terminal_prints_as_text_with_its_image_saved(console, scripted_model, tmp_path):
    rows = [{"month": m, "orders": n} for m, n in [(1, 40), (2, 75), (3, 0), (4, 120)]]
    chart = {"type": "chart", "chartType": "bar", "title": "Orders by month", "data": rows, "x": "month"}
    scripted_model.add(reply(tool_use("render_blocks", {"blocks": [chart]})), say("Charted."))
    console.type("%load_ext agent_kernel")
    console.wait_for(lambda shown: "In [2]:" in shown)
    console.type("%agent chart the orders")
    shown = console.wait_for(lambda shown: "In [3]:" in shown, timeout=120)
    turn = shown.split("%agent chart the orders", 1)[1].split("In [3]:", 1)[0]
    lines = [line.rstrip() for line in turn.splitlines() if line.strip()]
    assert "Orders by month (bar chart: 4 x values)" in lines and "x: month · y: orders" in lines, turn
    bars = [line for line in lines if line[:3] in ("1  ", "2  ", "3  ", "4  ")]
    assert bars == ["1  " + "█" * 11 + " 40", "2  " + "█" * 20 + " 75", "3   0", "4  " + "█" * 32 + " 120"], turn
    [image] = [line.removeprefix("Image: ") for line in lines if line.startswith("Image: ")]
    assert Path(image).parent.parent == tmp_path / "home" / "charts", image
    assert Path(image).read_bytes().startswith(b"\x89PNG")
    assert "Charted." in lines and "(1 points)" not in turn, turn
