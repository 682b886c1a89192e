"""Nothing the model writes makes the page fetch by itself, and the person sees and clears
what was kept after untrusted content: a real JupyterLab with Chromium.

The "remote" host is a counting HTTP server on 127.0.0.1 (its own port): a request to it
is the browser fetching what the model pointed at, which would carry whatever the model
put in the URL (a key in the query string) to a host of its choosing.
"""

from __future__ import annotations

import base64

import nbformat
import pytest

from agent_kernel.store import Store, provenance
from agent_kernel.store.provenance import Provenance
from agent_kernel.store.sessions import Sessions
from agent_kernel.testing import reply, say, tool_use
from tests.support.browser import cell, refresh_until, run_notebook, wait_idle
from tests.support.dashboard import open_dashboard
from tests.support.notebooks import write_notebook
from tests.support.websites import Server

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-2")]

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


class ImageHost(Server):
    """Answers every path with a one-pixel PNG and records the paths it was asked for."""

    def route(self, path: str, args: dict, headers: object) -> tuple[int, str, bytes, dict]:
        return 200, "image/png", PNG, {}


@pytest.fixture
def image_host():
    host = ImageHost("127.0.0.1")
    try:
        yield host
    finally:
        host.close()


def answer_with_remote_images(host: ImageHost) -> str:
    return (
        f"Here is the plot: ![the plot]({host.url('/plot.png?key=SECRET')})\n\n"
        f'And the reference-style one: ![logo][l] <img src="{host.url("/raw.png")}">\n\n'
        f"[l]: {host.url('/logo.png')}"
    )


def opened_the_plot(host: ImageHost) -> bool:
    """The host was asked for the clicked image (and, by the new tab, its favicon) only."""
    return host.hits[:1] == ["/plot.png?key=SECRET"] and set(host.hits[1:]) <= {"/favicon.ico"}


def test_a_saved_answer_with_remote_images_fetches_nothing_until_clicked(lab_page, jupyterlab, lab_model, image_host):
    page = lab_page
    block = {"type": "image", "url": image_host.url("/block.png"), "alt": "block image"}
    markdown = {"type": "markdown", "content": f"![in a block]({image_host.url('/md-block.png')})"}
    lab_model.add(
        reply(tool_use("render_blocks", {"blocks": [markdown, block]})),
        say(answer_with_remote_images(image_host)),
    )
    run_notebook(page, jupyterlab, "egress", ["%load_ext agent_kernel", "%agent show the plot"])
    agent_cell = cell(page, 1)
    agent_cell.get_by_text("Here is the plot").wait_for(timeout=60_000)
    wait_idle(page)
    page.wait_for_timeout(1000)
    assert image_host.hits == []  # live: nothing fetched
    assert agent_cell.locator("a.agent-kernel-image-link").count() == 4
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
    jupyterlab.shutdown_kernels()

    # Saved, rewritten outside JupyterLab (so not trusted) and opened again.
    path = jupyterlab.root / "egress.ipynb"
    saved = nbformat.read(path, as_version=4)
    bundles = [o.get("data", {}) for o in saved.cells[1].outputs]
    assert not any("text/markdown" in b for b in bundles)
    assert all("<img" not in b.get("text/html", "") for b in bundles)
    nbformat.write(saved, path)
    page.goto(f"{jupyterlab.url}/lab/workspaces/egress2/tree/egress.ipynb?reset&token={jupyterlab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    reopened = cell(page, 1)
    link = reopened.locator(".ak-turn-text a.agent-kernel-image-link").filter(has_text="the plot")
    link.wait_for(timeout=30_000)
    assert link.inner_text() == "🖼 image: the plot (127.0.0.1:%d/plot.png)" % image_host.port
    assert reopened.locator("a.agent-kernel-image-link").count() == 4
    assert f'<img src="{image_host.url("/raw.png")}">' in reopened.inner_text()  # raw HTML is text
    assert reopened.locator("img").count() == 0
    page.wait_for_timeout(2000)
    assert image_host.hits == []

    # The person clicks: the image opens in a new tab, and only then is it fetched.
    with page.context.expect_page() as opened:
        link.click()
    opened.value.wait_for_load_state()
    assert opened_the_plot(image_host)
    assert page.url.startswith(jupyterlab.url)  # the notebook stayed where it was


def test_the_turn_renderer_turns_remote_images_into_links_in_a_hand_written_notebook(lab_page, jupyterlab, image_host):
    """A downloaded notebook need not come from this kernel: the extension's renderer turns
    a remote image in a turn part's HTML into a link too, before it joins the page."""
    page = lab_page
    url = image_host.url
    html = (
        f'<p>Plot: <img src="{url("/turn.png")}" alt="the plot"></p>'
        f'<p><img srcset="{url("/srcset.png")} 2x" src="data:image/png;base64,AAAA"></p>'
        f'<video poster="{url("/poster.png")}" src="{url("/v.mp4")}"></video>'
        f'<p style="background:url({url("/bg.png")})">styled</p>'
    )
    part = {"version": 1, "part": "text", "text": "Plot", "html": html}
    output = nbformat.v4.new_output("display_data", data={"application/vnd.agent-kernel.turn+json": part})
    write_notebook(
        jupyterlab.root / "handmade.ipynb", nbformat.v4.new_code_cell("%agent show the plot", outputs=[output])
    )
    page.goto(f"{jupyterlab.url}/lab/workspaces/handmade/tree/handmade.ipynb?reset&token={jupyterlab.token}")
    link = cell(page, 0).locator(".ak-turn-text a.agent-kernel-image-link").filter(has_text="the plot")
    link.wait_for(timeout=60_000)
    page.wait_for_timeout(2000)
    assert image_host.hits == []
    assert link.inner_text() == "🖼 image: the plot (127.0.0.1:%d/turn.png)" % image_host.port
    shown = cell(page, 0).locator(".ak-turn-text")
    assert shown.locator("img, video").count() == 0 and "styled" in shown.inner_text()
    with page.context.expect_page() as opened:
        link.click()
    opened.value.wait_for_load_state()
    assert image_host.hits[:1] == ["/turn.png"]


def test_a_papermill_runs_html_export_fetches_nothing_either(chromium, scripted_model, agent_db, image_host, tmp_path):
    """The ``text/html`` of a notebook papermill ran (what nbconvert, GitHub and front ends
    without the extension show), exported with nbconvert and opened in Chromium."""
    import papermill
    from nbconvert import HTMLExporter

    scripted_model.add(
        reply(tool_use("render_blocks", {"blocks": [{"type": "image", "url": image_host.url("/block.png")}]})),
        say(answer_with_remote_images(image_host)),
    )
    source, output = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    write_notebook(source, "%load_ext agent_kernel", "%agent show the plot")
    papermill.execute_notebook(str(source), str(output), kernel_name="python3", progress_bar=False, cwd=str(tmp_path))
    exported, _ = HTMLExporter().from_notebook_node(nbformat.read(output, as_version=4))
    (tmp_path / "out.html").write_text(exported)
    context = chromium.new_context()
    try:
        page = context.new_page()
        page.goto((tmp_path / "out.html").as_uri())
        page.get_by_text("Here is the plot").wait_for(timeout=30_000)
        page.wait_for_timeout(1500)
        assert image_host.hits == []
        assert page.locator("img").count() == 0 and "agent-kernel-image-link" in exported
        with context.expect_page() as opened:
            page.locator("a.agent-kernel-image-link").filter(has_text="the plot").click(modifiers=["Control"])
        opened.value.wait_for_load_state()
        assert opened_the_plot(image_host)
    finally:
        context.close()


def test_the_panel_lists_what_was_kept_after_untrusted_content_and_clears_it(lab_page, jupyterlab):
    page = lab_page
    store = Store(jupyterlab.root.parent / "agent.duckdb")
    hostile = '<img src=x onerror="window.__pwned=1">'
    with store.connect() as con:
        session = Sessions(con).create("egress-panel", notebook=None)
        after_page = Provenance(session.id, 3, ("https://hostile.example/page",))
        provenance.record(con, "tool", "collect_env", after_page, version=1)
        provenance.record(con, "memory", hostile, after_page)
    page.goto(f"{jupyterlab.url}/lab/workspaces/egress-panel?reset&token={jupyterlab.token}")
    panel = open_dashboard(page)
    tool = panel.locator(".ak-tainted[data-kind='tool'][data-name='collect_env']")
    refresh_until(page, panel, tool)
    assert panel.locator(".ak-tainted-items h3").inner_text() == "Kept after untrusted content"
    text = tool.inner_text()
    assert "tool" in text and "collect_env" in text and "egress-panel, turn 3" in text
    assert "after https://hostile.example/page" in text
    memory = panel.locator(".ak-tainted[data-kind='memory']")
    assert hostile in memory.inner_text()  # the name is text, never markup
    assert page.evaluate("() => window.__pwned || 0") == 0

    tool.get_by_role("button", name="Clear").click()
    tool.wait_for(state="detached", timeout=30_000)
    with store.connect() as con:
        assert not provenance.latest(con, "tool", ["collect_env"])["collect_env"].tainted
        assert provenance.latest(con, "memory", [hostile])[hostile].tainted
    memory.get_by_role("button", name="Clear").click()
    panel.get_by_text("Nothing: everything kept was written before any untrusted content.").wait_for(timeout=30_000)
