"""The Agent panel's chat: its added latency to the first streamed text over an ``%agent`` cell.

A real JupyterLab server and Chromium (as the browser tests run them), one notebook and
its kernel, the scripted model answering every turn with streamed text. Alternately, a
turn is started from a cell (``%agent``, run by ``notebook:run-cell``) and from the
panel (the prompt typed, Enter dispatched); each time is measured in the page, from the
action to the first of the answer's text on screen (a MutationObserver), so both include
the request to the kernel, the turn's start, the model call and the rendering. The
baseline is the cell; the figure is the panel; the goal is on their ratio.

    python benchmarks/chat_latency.py [--runs 9] [--quick] [--json PATH]

JupyterLab finds the extension on ``JUPYTER_PATH`` as it does in the tests (the one
installed in this environment, or a checkout's build placed first on the path).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from results import Row, options, write

# Runs `start` (JavaScript source of a function) and resolves with the milliseconds until
# `marker` shows inside the first element matching `where`.
TIMED = """async ([start, where, marker]) => {
  const t0 = performance.now();
  return await new Promise((resolve, reject) => {
    const seen = () => [...document.querySelectorAll(where)].some(n => n.innerText.includes(marker));
    const observer = new MutationObserver(() => {
      if (seen()) { observer.disconnect(); resolve(performance.now() - t0); }
    });
    observer.observe(document.body, { childList: true, subtree: true, characterData: true });
    setTimeout(() => { observer.disconnect(); reject(new Error('no ' + marker + ' within 60 s')); }, 60000);
    (0, eval)(start)();
  });
}"""
FROM_CELL = """() => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  nb.model.sharedModel.insertCell(nb.model.cells.length, {cell_type: 'code', source: '%agent say MARKER'});
  nb.activeCellIndex = nb.model.cells.length - 1;
  window.jupyterapp.commands.execute('notebook:run-cell');
}"""
FROM_PANEL = """() => {
  const box = document.querySelector('#agent-kernel-panel .ak-chat-input');
  box.value = 'say MARKER';
  box.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
}"""
IDLE = """() => {
  const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  return k.status === 'idle' && !document.querySelector('.ak-chat[data-running]');
}"""


def measure(runs: int) -> tuple[list[float], list[float]]:
    from playwright.sync_api import sync_playwright

    from agent_kernel.testing import ScriptedModel, reply, text
    from tests.support.jupyterlab import CHROMIUM, CHROMIUM_ARGS, JupyterLab

    cell_ms: list[float] = []
    panel_ms: list[float] = []
    # Chromium's profile socket path must stay short: a deep TMPDIR (a test's) is too long.
    os.environ["TMPDIR"] = tempfile.mkdtemp(prefix="ak-chat-", dir="/tmp")
    with tempfile.TemporaryDirectory() as tmp, ScriptedModel() as model:
        base = Path(tmp)
        root = base / "notebooks"
        root.mkdir()
        env = dict(model.env(), AGENT_KERNEL_DB=str(base / "agent.duckdb"), AGENT_KERNEL_HOME=str(base / "home"))
        lab = JupyterLab(root, env, config={"ServerApp": {"jpserver_extensions": {"agent_kernel": True}}})
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1200, "height": 1000})
                page.goto(lab.notebook("latency", ["%load_ext agent_kernel"]))
                page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
                page.wait_for_function(
                    "() => window.jupyterapp.shell.currentWidget.sessionContext.session?.kernel?.status === 'idle'",
                    timeout=60_000,
                )
                page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
                page.locator(".jp-SideBar [data-id='agent-kernel-panel']").click()
                page.locator(".ak-chat-input").wait_for(timeout=30_000)
                page.wait_for_function(IDLE, timeout=60_000)
                for i in range(runs + 1):  # the first pair warms both paths up and is not counted
                    for path, start, where, into in (
                        ("cell", FROM_CELL, ".jp-Notebook .jp-Cell:last-child .jp-OutputArea", cell_ms),
                        ("panel", FROM_PANEL, ".ak-chat-turn:last-child .ak-chat-output", panel_ms),
                    ):
                        marker = f"Answer{path}{i}x"
                        model.add(reply(text(f"{marker} and then the rest of the answer, streamed in chunks.")))
                        ms = page.evaluate(TIMED, [start.replace("MARKER", marker), where, marker])
                        page.wait_for_function(IDLE, timeout=60_000)
                        if i:
                            into.append(ms)
                browser.close()
        finally:
            lab.stop()
    shutil.rmtree(os.environ["TMPDIR"], ignore_errors=True)
    return cell_ms, panel_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9, help="turns from each path (after one warm-up each)")
    args = options(parser, {"runs": 1})
    cell_ms, panel_ms = measure(args.runs)
    cell, panel = statistics.median(cell_ms), statistics.median(panel_ms)
    print(f"first streamed text, median of {args.runs} turns each")
    print(f"  %agent cell        {cell:8.1f} ms")
    print(f"  Agent panel chat   {panel:8.1f} ms   added {panel - cell:+.1f} ms ({panel / cell:.2f}x)")
    write(args, "chat_latency", [
        Row("panel chat: first streamed text", panel, "ms", baseline=cell, goal=1.25, goal_of="ratio"),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
