"""A notebook renamed or moved through Jupyter Server's contents API takes its sessions along."""

from __future__ import annotations

import time

import pytest

from agent_kernel.store import Store
from agent_kernel.store.sessions import Sessions
from tests.support.jupyterlab import lab_server
from tests.support.notebooks import write_notebook
from tests.support.server import API, SERVER_CONFIG, Client


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("moves")
    with lab_server(base, config=SERVER_CONFIG) as lab:
        yield lab, Store(base / "agent.duckdb")


def listed(client: Client, notebook: str, timeout: float = 30) -> list[str]:
    """The names of the sessions the panel lists for ``notebook``, once there are any."""
    deadline = time.monotonic() + timeout
    while True:
        status, reply = client.call("GET", f"{API}/sessions?notebook={notebook}")
        assert status == 200, reply
        names = [s["name"] for s in reply["sessions"]]
        if names or time.monotonic() > deadline:
            return names
        time.sleep(0.2)


def test_a_rename_and_a_folder_move_refile_sessions_and_a_new_untitled_is_another_notebook(client, server):
    lab, store = server
    write_notebook(lab.root / "Untitled.ipynb", "print(1)")
    (lab.root / "work").mkdir()
    with store.connect() as con:
        Sessions(con).create("Untitled", notebook=str(lab.root / "Untitled.ipynb"))
    status, reply = client.call("PATCH", "/api/contents/Untitled.ipynb", {"path": "work/analysis.ipynb"})
    assert status == 200, reply
    assert listed(client, "work/analysis.ipynb") == ["Untitled"]
    assert listed(client, "Untitled.ipynb", timeout=0) == []
    status, reply = client.call("PATCH", "/api/contents/work", {"path": "done"})
    assert status == 200, reply
    assert listed(client, "done/analysis.ipynb") == ["Untitled"]
    with store.connect() as con:  # a kernel still started with the first name finds it
        sessions = Sessions(con)
        assert sessions.moved_to(str(lab.root / "Untitled.ipynb")) == str(lab.root / "done" / "analysis.ipynb")
    status, reply = client.call("POST", "/api/contents", {"type": "notebook"})
    assert status == 201 and reply["path"] == "Untitled.ipynb", reply
    deadline = time.monotonic() + 30
    while True:
        with store.connect() as con:
            if Sessions(con).moved_to(str(lab.root / "Untitled.ipynb")) is None:
                break
        assert time.monotonic() < deadline, "the new Untitled.ipynb still resolves to the moved notebook"
        time.sleep(0.2)
    assert listed(client, "done/analysis.ipynb") == ["Untitled"]
