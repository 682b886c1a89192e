"""``agent-kernel demo`` (and ``python -m agent_kernel.demo [NOTEBOOK]``): run a notebook
headless, by default the quickstart shipped inside the package, as ``make demo`` does.

With a key (``ANTHROPIC_API_KEY``, or one stored by ``agent-kernel key set``) the notebook
talks to Claude. Without one, an offline scripted model (:mod:`agent_kernel.testing.demo`)
answers on 127.0.0.1, and the output says so. The executed notebook is written under ``--out``, and the last lines say how to
open it in JupyterLab (or how to install JupyterLab first).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
from contextlib import ExitStack
from pathlib import Path

from agent_kernel.extras import install_command

QUICKSTART = "quickstart.ipynb"
LAB_REQUIREMENTS = ["jupyterlab>=4.4"]  # the `lab` extra's, when the installed metadata cannot say


def quickstart_notebook() -> Path:
    """The quickstart: inside the installed package (the wheel ships it in
    ``agent_kernel/notebooks``), else in the source checkout's ``notebooks/`` (an editable
    install), which is the one file both come from."""
    package = Path(__file__).resolve().parent
    for candidate in (package / "notebooks" / QUICKSTART, package.parent / "notebooks" / QUICKSTART):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{QUICKSTART} is not in this installation of agent-kernel ({package}).")


def run_demo(notebook: Path, output: Path, *, workdir: Path | None = None, scripted: bool | None = None) -> Path:
    """Execute ``notebook`` with papermill into ``output``; return the output path."""
    import papermill

    from agent_kernel.scheduler.kernels import kernel_manager_config

    if scripted is None:
        scripted = not has_key()
    output.parent.mkdir(parents=True, exist_ok=True)
    workdir = workdir or output.parent
    workdir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        saved = dict(os.environ)
        stack.callback(_restore_environ, saved)
        if scripted:
            from agent_kernel.testing import ScriptedModel
            from agent_kernel.testing.demo import demo_responder

            model = stack.enter_context(ScriptedModel(responder=demo_responder))
            os.environ.update(model.env())
        papermill.execute_notebook(
            str(notebook),
            str(output),
            cwd=str(workdir),
            kernel_name="python3",
            progress_bar=False,
            config=kernel_manager_config(),
            # The kernel's own log on this terminal says only what is fatal: jupyter_client
            # interrupts a kernel as it shuts it down, which ipykernel logs as an error.
            extra_arguments=["--IPKernelApp.log_level=CRITICAL"],
        )
    return output


def has_key() -> bool:
    """Whether a key is set or stored (``agent-kernel key set``): the stored one is then in
    this process's environment, so the notebook's kernel inherits it."""
    from agent_kernel.model.keys import UnusableKey, find_key

    try:
        return bool(find_key())
    except UnusableKey:
        return False


def _restore_environ(saved: dict[str, str]) -> None:
    os.environ.clear()
    os.environ.update(saved)


def how_to_open(output: Path) -> str:
    """The command that opens ``output`` in this environment's JupyterLab, or what to install."""
    shown = _shown_path(output)
    if importlib.util.find_spec("jupyterlab") is None:
        return f"To open it in JupyterLab, install it ({lab_install_command()}), then run: jupyter lab {shown}"
    return f"Open it in JupyterLab: {_jupyter_command()} lab {shown}"


def lab_install_command() -> str:
    """The command that installs the ``lab`` extra's packages into this environment
    (named, not the extra: see :mod:`agent_kernel.extras`)."""
    return install_command("lab", LAB_REQUIREMENTS)


def _jupyter_command() -> str:
    """``jupyter`` when that name finds this environment's, else its full path (a venv not
    activated, as ``make demo`` runs it)."""
    ours = Path(sys.executable).parent / "jupyter"
    found = shutil.which("jupyter")
    if found and ours.exists() and Path(found).resolve() == ours.resolve():
        return "jupyter"
    return _shown_path(ours) if ours.exists() else "jupyter"


def _shown_path(path: Path) -> str:
    """``path`` relative to the working directory when it is below it, else absolute."""
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def demo(notebook: Path | None, out: Path) -> int:
    """Run ``notebook`` (the quickstart when None) into ``out`` and say how it went and how to open it."""
    notebook = notebook or quickstart_notebook()
    scripted = not has_key()
    who = "the offline scripted model (no API key set or stored)" if scripted else "Claude"
    print(f"Running {notebook.name} headless with papermill, talking to {who}...", flush=True)
    output = run_demo(notebook, out / notebook.name, scripted=scripted)
    print(f"Executed notebook: {output.resolve()}")
    if scripted:
        print("The answers in it came from the scripted model, not Claude: agent-kernel key set for the real thing.")
    print(how_to_open(output))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent_kernel.demo", description="Run a notebook headless.")
    parser.add_argument("notebook", type=Path, nargs="?", help="default: the quickstart shipped with the package")
    parser.add_argument("--out", type=Path, default=Path("out"), help="where the executed notebook goes (default out/)")
    args = parser.parse_args(argv)
    return demo(args.notebook, args.out)


if __name__ == "__main__":
    sys.exit(main())
