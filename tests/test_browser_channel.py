"""The notebook channel in a real JupyterLab 4 with Chromium: the extension attaches when
the kernel loads agent_kernel, says which notebook it is and reads the live cells.

Run it with the extension built from this checkout first on ``JUPYTER_PATH``.
"""

from __future__ import annotations

import pytest

from .test_browser import cell, run_notebook, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

WAIT_ATTACHED = """from agent_kernel.kernel import channel as c
import asyncio
for _ in range(200):
    if c.attached():
        break
    await asyncio.sleep(0.05)
print("attached to", c.attached().notebook)"""
READ = """cells = await c.read_cells()
print([(x["cell_type"], x["source"][:12]) for x in cells])"""


def test_the_extension_attaches_and_the_kernel_reads_the_notebook(lab_page, jupyterlab):
    page = lab_page
    run_notebook(page, jupyterlab, "channel", ["%load_ext agent_kernel", WAIT_ATTACHED, READ])
    wait_idle(page)
    assert "attached to channel.ipynb" in cell(page, 1).locator(".jp-OutputArea").inner_text()
    shown = cell(page, 2).locator(".jp-OutputArea").inner_text()
    assert "('code', '%load_ext ag')" in shown and "('code', 'cells = awai')" in shown
