"""``python -m agent_kernel.demo NOTEBOOK``: run a notebook headless, as ``make demo`` does.

With ``ANTHROPIC_API_KEY`` set the notebook talks to Claude. Without it, an offline
scripted model (:mod:`agent_kernel.testing.demo`) answers on 127.0.0.1, and the output
says so. The executed notebook is written under ``out/`` and its path printed.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import ExitStack
from pathlib import Path


def run_demo(notebook: Path, output: Path, *, workdir: Path | None = None, scripted: bool | None = None) -> Path:
    """Execute ``notebook`` with papermill into ``output``; return the output path."""
    import papermill

    from agent_kernel.scheduler.kernels import kernel_manager_config

    if scripted is None:
        scripted = not os.environ.get("ANTHROPIC_API_KEY")
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
        )
    return output


def _restore_environ(saved: dict[str, str]) -> None:
    os.environ.clear()
    os.environ.update(saved)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent_kernel.demo", description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--out", type=Path, default=Path("out"))
    args = parser.parse_args(argv)
    scripted = not os.environ.get("ANTHROPIC_API_KEY")
    who = "the offline scripted model (no ANTHROPIC_API_KEY set)" if scripted else "Claude"
    print(f"Running {args.notebook} headless with papermill, talking to {who}...", flush=True)
    output = run_demo(args.notebook, args.out / args.notebook.name, scripted=scripted)
    print(f"Executed notebook: {output.resolve()}")
    if scripted:
        print("The answers in it came from the scripted model, not Claude: set ANTHROPIC_API_KEY for the real thing.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
