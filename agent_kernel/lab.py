"""``agent-kernel lab [--offline] [--port N] [--no-browser] [DIR]``: JupyterLab with the extension.

Plain ``agent-kernel lab`` starts JupyterLab on 127.0.0.1 in ``DIR``. With ``--offline`` it
first starts the offline scripted model (:func:`agent_kernel.testing.demo.demo_responder`,
an Anthropic-compatible server on 127.0.0.1) and gives JupyterLab the environment that
points everything at it: the kernels' ``%agent`` turns and chat, the server's inline
completion and its explanations of failed runs; the model they ask for is the scripted
model's id (``AGENT_KERNEL_MODEL``, the server's ``completion_model``), so each names it. ``AGENT_KERNEL_OFFLINE`` names the model, so
the server's ``/agent-kernel/api/offline`` tells the page (its status bar says so). The
guided notebook ``offline_tour.ipynb`` is copied into ``DIR`` when absent and opened.

JupyterLab runs as a child in a session of its own, so Ctrl-C reaches this process only:
it stops JupyterLab (which shuts its kernels down), then the scripted model; so do SIGTERM
and a closed terminal (SIGHUP), and on Linux JupyterLab gets SIGTERM if this process is
killed. When JupyterLab ends by itself (File, Shut Down), the scripted model ends with it. Nothing binds
beyond the loopback interface: the server's address is fixed, and Jupyter options given
after ``--`` may not change it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "LabError",
    "LabSettings",
    "add_parser",
    "copy_tour",
    "jupyter_command",
    "lab",
    "lab_environment",
    "tour_notebook",
]

TOUR = "offline_tour.ipynb"
LOOPBACK = "127.0.0.1"
# Options that would move the server off the loopback interface.
_ADDRESS_OPTIONS = ("--ip", "--ServerApp.ip", "--NotebookApp.ip", "--ServerApp.sock", "--sock")
# What an offline JupyterLab never fetches: news, update checks, the extension manager's index.
OFFLINE_LAB_OPTIONS = (
    "--LabApp.news_url=None",
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    "--LabApp.extension_manager=readonly",
)
STOP_SECONDS = 30.0


class LabError(Exception):
    """A setting ``agent-kernel lab`` refuses, with the sentence that says why."""


@dataclass(frozen=True)
class LabSettings:
    directory: Path
    offline: bool = False
    port: int | None = None
    open_browser: bool = True
    jupyter_options: tuple[str, ...] = field(default=())


def tour_notebook() -> Path:
    """The guided notebook: in the installed package, else in the source checkout."""
    package = Path(__file__).resolve().parent
    for candidate in (package / "notebooks" / TOUR, package.parent / "notebooks" / TOUR):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{TOUR} is not in this installation of agent-kernel ({package}).")


def jupyter_command(settings: LabSettings, *, open_tour: bool = True) -> list[str]:
    """The command line that starts JupyterLab for ``settings`` (or :class:`LabError`);
    offline, it opens the tour unless ``open_tour`` is false."""
    for option in settings.jupyter_options:
        if option.split("=", 1)[0] in _ADDRESS_OPTIONS:
            raise LabError(f"`agent-kernel lab` serves on {LOOPBACK} only; leave out {option.split('=', 1)[0]}.")
    if settings.port is not None and not 1 <= settings.port <= 65535:
        raise LabError(f"--port is from 1 to 65535, not {settings.port}.")
    command = [sys.executable, "-m", "jupyterlab", f"--ServerApp.ip={LOOPBACK}"]
    if settings.port is not None:
        command += [f"--ServerApp.port={settings.port}", "--ServerApp.port_retries=0"]
    if not settings.open_browser:
        command.append("--no-browser")
    command.append(f"--ServerApp.root_dir={settings.directory}")
    if settings.offline:
        from agent_kernel.testing.demo import OFFLINE_MODEL

        command += [*OFFLINE_LAB_OPTIONS, f"--AgentKernelServer.completion_model={OFFLINE_MODEL}"]
        if open_tour:
            command.append(f"--LabApp.default_url=/lab/tree/{TOUR}")
    return command + list(settings.jupyter_options)


def copy_tour(directory: Path) -> bool:
    """Copy the tour into ``directory`` unless a file of its name is there; whether it is there now."""
    target = directory / TOUR
    if target.exists():
        return True
    try:
        shutil.copyfile(tour_notebook(), target)
    except FileNotFoundError as exc:
        print(f"agent-kernel: {exc} JupyterLab starts without it.", file=sys.stderr, flush=True)
        return False
    return True


def lab_environment(base: dict[str, str], model_env: dict[str, str] | None, model_id: str) -> dict[str, str]:
    """JupyterLab's environment: ``base``, pointed at the scripted model when ``model_env`` is given."""
    env = dict(base)
    if model_env is not None:
        env.update(model_env)
        env["AGENT_KERNEL_OFFLINE"] = model_id
        env["AGENT_KERNEL_MODEL"] = model_id  # the chat's model choice and the turns name it
    else:
        env.pop("AGENT_KERNEL_OFFLINE", None)
    return env


def lab(settings: LabSettings) -> int:
    """Run JupyterLab (and, offline, the scripted model) until Ctrl-C or until JupyterLab ends."""
    if importlib.util.find_spec("jupyterlab") is None:
        from agent_kernel.demo import lab_install_command

        print(f"agent-kernel: JupyterLab is not installed here; install it ({lab_install_command()}).", file=sys.stderr)
        return 1
    command = jupyter_command(settings)
    settings.directory.mkdir(parents=True, exist_ok=True)
    if settings.offline and not copy_tour(settings.directory):
        command = jupyter_command(settings, open_tour=False)
    stop = threading.Event()
    stopping = [signal.SIGINT, signal.SIGTERM, *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])]
    handlers = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in stopping}
    model: Any = None
    try:
        if settings.offline:
            from agent_kernel.testing import ScriptedModel
            from agent_kernel.testing.demo import OFFLINE_MODEL, demo_responder

            model = ScriptedModel(responder=demo_responder, host=LOOPBACK).start()
            env = lab_environment(dict(os.environ), model.env(), OFFLINE_MODEL)
            print(
                f"agent-kernel: the offline scripted model ({OFFLINE_MODEL}, not Claude) answers at {model.url}; "
                f"JupyterLab starts in {settings.directory}. Ctrl-C stops both.",
                flush=True,
            )
        else:
            env = lab_environment(dict(os.environ), None, "")
        process = subprocess.Popen(
            command, cwd=settings.directory, env=env, start_new_session=True, preexec_fn=_die_with_parent
        )
        while process.poll() is None and not stop.wait(0.2):
            pass
        code = _stop(process)
        if model is not None:
            print("agent-kernel: JupyterLab stopped; the offline scripted model stopped with it.", flush=True)
        return 0 if stop.is_set() else code
    finally:
        if model is not None:
            model.stop()
        for sig, previous in handlers.items():
            signal.signal(sig, previous)


def _die_with_parent() -> None:
    """In JupyterLab's process before it starts (Linux): SIGTERM when this process dies, also
    killed, so no JupyterLab outlives the scripted model it was pointed at."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def _stop(process: subprocess.Popen[bytes]) -> int:
    """Stop JupyterLab as its own SIGTERM handler does (kernels shut down), then for sure."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return process.returncode or 0


def add_parser(commands: Any) -> None:
    """``agent-kernel lab`` on the CLI's subcommands (``commands``: argparse's subparsers)."""
    parser = commands.add_parser(
        "lab",
        help="start JupyterLab with the extension on 127.0.0.1; --offline: with the offline scripted model "
        "answering everywhere (no key, no network) and a guided notebook",
    )
    parser.add_argument(
        "--offline", action="store_true", help=f"the offline scripted model answers instead of Claude; opens {TOUR}"
    )
    parser.add_argument("--port", type=int, help="JupyterLab's port (default: 8888 or the next free one)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser; JupyterLab prints its URL")
    parser.add_argument("directory", nargs="?", default=".", metavar="DIR", help="where JupyterLab starts (default .)")
    parser.add_argument(
        "jupyter_options",
        nargs="*",
        metavar="-- OPTION",
        help="Jupyter options after --, e.g. -- --ServerApp.allow_root=True",
    )
    parser.set_defaults(handler=_run)


def _run(args: Any) -> int:
    directory, options = args.directory, list(args.jupyter_options)
    if directory.startswith("-"):  # `lab -- OPTION ...`: no DIR, the options start here
        directory, options = ".", [directory, *options]
    settings = LabSettings(
        directory=Path(directory).expanduser().resolve(),
        offline=args.offline,
        port=args.port,
        open_browser=not args.no_browser,
        jupyter_options=tuple(options),
    )
    try:
        return lab(settings)
    except LabError as exc:
        print(f"agent-kernel: {exc}", file=sys.stderr)
        return 2
