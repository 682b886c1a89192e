"""A run's output notebook as a static page: what it shows, and what it refuses with a message."""

from __future__ import annotations

from types import SimpleNamespace

import nbformat
import pytest

from agent_kernel.server.job_request import BadRequest
from agent_kernel.server.outputs import PAGE_POLICY, output_page
from tests.support.notebooks import write_notebook


def run_with(path, status="SUCCEEDED"):
    return SimpleNamespace(id="r1", status=status, output_path=str(path) if path else None)


def test_the_page_shows_the_outputs_and_allows_no_script(tmp_path):
    write_notebook(
        tmp_path / "output.ipynb",
        nbformat.v4.new_markdown_cell("# Daily report"),
        nbformat.v4.new_code_cell("print('hi')", outputs=[
            nbformat.v4.new_output("stream", name="stdout", text="hello from the run\n"),
            nbformat.v4.new_output("display_data", data={"text/html": "<b onclick='x()'>bold</b>"}),
        ]),
        kernelspec=False,
    )  # fmt: skip
    page = output_page(run_with(tmp_path / "output.ipynb"))
    assert "hello from the run" in page and "Daily report" in page
    head = page[: page.index("</head>")]
    assert f'<meta http-equiv="Content-Security-Policy" content="{PAGE_POLICY}">' in head
    assert "script-src" not in PAGE_POLICY and "default-src 'none'" in PAGE_POLICY


def test_a_run_without_a_readable_output_is_refused_with_what_to_do(tmp_path):
    with pytest.raises(BadRequest, match=r"^Run 'r1' left no output notebook \(QUEUED\)\.$"):
        output_page(run_with(None, "QUEUED"))
    with pytest.raises(BadRequest, match="left no output notebook"):
        output_page(run_with(tmp_path / "gone.ipynb", "FAILED"))
    (tmp_path / "broken.ipynb").write_text("{not json", encoding="utf-8")
    with pytest.raises(BadRequest, match=r"^The output notebook broken.ipynb cannot be read: "):
        output_page(run_with(tmp_path / "broken.ipynb"))
