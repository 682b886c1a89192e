"""Which notebook file a turn's cells may go into once the notebook was renamed."""

from __future__ import annotations

from agent_kernel.testing import say
from tests.support.frontend import NotebookChannel
from tests.support.kernel import Kernel
from tests.support.notebooks import write_notebook


def test_the_renamed_open_notebook_is_never_written_behind_its_front_end(scripted_model, agent_db, tmp_path):
    (tmp_path / "work").mkdir()
    renamed = write_notebook(tmp_path / "work" / "analysis.ipynb", "%agent compute y")
    kernel = Kernel({"JPY_SESSION_NAME": str(tmp_path / "Untitled.ipynb")}, cwd=str(tmp_path))  # its first name
    try:
        kernel.ok("%load_ext agent_kernel")
        front = NotebookChannel(kernel)
        front.cells = []
        front.open({"type": "hello", "protocol": 1, "notebook": "work/analysis.ipynb", "root": str(tmp_path)})
        scripted_model.add(say("Done."))
        kernel.ok("%agent compute y", on_message=front.hook)
        refused = kernel.execute("%agent_cells --to work/analysis.ipynb", on_message=front.hook)
        assert refused.status == "error" and "is open in the notebook front end" in refused.stderr, refused.stderr
    finally:
        kernel.shutdown()
    assert renamed.read_text().count("Done.") == 0
