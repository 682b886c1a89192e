"""``GET /agent-kernel/api/offline`` in a real Jupyter server started as ``agent-kernel lab
--offline`` starts it: the offline scripted model behind ``ANTHROPIC_BASE_URL``, its id in
``AGENT_KERNEL_OFFLINE``; the server's completion answered by it."""

from __future__ import annotations

import json
import time

import pytest

from agent_kernel.server.offline import is_loopback, offline_status
from agent_kernel.testing import ScriptedModel
from agent_kernel.testing.demo import OFFLINE_MODEL, demo_responder
from tests.support.jupyterlab import lab_server
from tests.support.notebooks import write_notebook

ROUTE = "/agent-kernel/api/offline"
CONFIG = {"ServerApp": {"jpserver_extensions": {"agent_kernel": True}}, "AgentKernelServer": {"scheduler_poll_s": 0.5}}
API = "/agent-kernel/api"


@pytest.fixture(scope="module")
def model():
    with ScriptedModel(responder=demo_responder) as scripted:
        yield scripted


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model: ScriptedModel):
    base = tmp_path_factory.mktemp("offline")
    with lab_server(base, {**model.env(), "AGENT_KERNEL_OFFLINE": OFFLINE_MODEL}, config=CONFIG) as lab:
        yield lab, None


def _finished(client, run_id: str) -> dict:
    deadline = time.monotonic() + 180
    while True:
        status, run = client.call("GET", f"{API}/runs/{run_id}")
        assert status == 200
        if run["status"] not in ("QUEUED", "RUNNING"):
            return run
        assert time.monotonic() < deadline, run
        time.sleep(0.5)


def test_the_server_says_the_offline_scripted_model_answers(client):
    assert client.call("GET", ROUTE) == (200, {"offline": True, "model": OFFLINE_MODEL})


def test_the_route_needs_the_servers_token(client):
    assert client.call("GET", ROUTE, token=False)[0] == 403


def test_inline_completion_is_answered_offline(client, model):
    status, reply = client.call("POST", "/agent-kernel/api/completion", {"before": "import pan", "after": ""})
    lines = [json.loads(line) for line in reply.splitlines()] if isinstance(reply, str) else [reply]
    assert status == 200 and "".join(line.get("text", "") for line in lines) == "das as pd"
    assert lines[-1].get("done") is True


@pytest.mark.parametrize(
    ("environ", "offline"),
    [
        ({"AGENT_KERNEL_OFFLINE": OFFLINE_MODEL, "ANTHROPIC_BASE_URL": "http://127.0.0.1:4321"}, True),
        ({"AGENT_KERNEL_OFFLINE": OFFLINE_MODEL, "ANTHROPIC_BASE_URL": "http://localhost:4321"}, True),
        ({"AGENT_KERNEL_OFFLINE": OFFLINE_MODEL, "ANTHROPIC_BASE_URL": "http://[::1]:4321"}, True),
        ({"AGENT_KERNEL_OFFLINE": OFFLINE_MODEL, "ANTHROPIC_BASE_URL": "https://api.anthropic.com"}, False),
        ({"AGENT_KERNEL_OFFLINE": OFFLINE_MODEL, "ANTHROPIC_BASE_URL": "http://10.0.0.5:4321"}, False),
        ({"AGENT_KERNEL_OFFLINE": OFFLINE_MODEL}, False),
        ({"AGENT_KERNEL_OFFLINE": "<b>x</b>", "ANTHROPIC_BASE_URL": "http://127.0.0.1:4321"}, False),
        ({"ANTHROPIC_BASE_URL": "http://127.0.0.1:4321"}, False),
    ],
)
def test_offline_only_with_the_marker_and_a_loopback_model(environ, offline):
    status = offline_status(environ)
    assert status["offline"] is offline
    assert status["model"] == (OFFLINE_MODEL if offline else None)


def test_is_loopback_reads_the_urls_host():
    assert is_loopback("http://127.0.0.2:80")
    assert not is_loopback("ftp://127.0.0.1/")
    assert not is_loopback("http://127.0.0.1.example.com/")
    assert not is_loopback("not a url")


def test_explain_on_a_failed_scheduled_run_is_answered_offline(client, server):
    lab, _ = server
    write_notebook(lab.root / "boom.ipynb", "totals = {'North': 1}", "totals['revenue']")
    status, job = client.call("POST", f"{API}/jobs", {"notebook": "boom.ipynb", "cron": "0 3 1 1 *"})
    assert status == 201, job
    status, queued = client.call("POST", f"{API}/jobs/{job['id']}/run")
    assert status == 202
    assert _finished(client, queued["id"])["status"] == "FAILED"
    status, run = client.call("POST", f"{API}/runs/{queued['id']}", {"action": "explain"})
    assert status == 200, run
    assert "KeyError" in run["explanation"] and "offline scripted demo model" in run["explanation"]
