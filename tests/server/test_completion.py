"""Inline completion served by the server extension in a real Jupyter server, the model
answered by the scripted model over HTTP (``ANTHROPIC_BASE_URL``), usage in a real DuckDB
file: streaming, bad input, no key (and the key stored through the API), redaction,
cancellation and the usage row."""

from __future__ import annotations

import http.client
import http.cookiejar
import json
import time
import urllib.request
from typing import Any

import pytest

from agent_kernel.server.completion import SYSTEM_PROMPT, Completion, FenceFilter, nearest_cells
from agent_kernel.store import Store
from agent_kernel.store.usage import daily
from agent_kernel.testing import ScriptedModel, say
from tests.support.jupyterlab import lab_server
from tests.support.server import Client

ROUTE = "/agent-kernel/api/completion"
CONFIG = {"ServerApp": {"jpserver_extensions": {"agent_kernel": True}}, "AgentKernelServer": {"scheduler": False}}
SECRET = "hunter2-service-token-value"


@pytest.fixture(scope="module")
def model():
    with ScriptedModel() as scripted:
        yield scripted


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model: ScriptedModel):
    base = tmp_path_factory.mktemp("completion")
    with lab_server(base, {**model.env(), "BILLING_SERVICE_TOKEN": SECRET}, config=CONFIG) as lab:
        yield lab, Store(base / "agent.duckdb")


def complete(client: Client, body: Any) -> tuple[int, list[dict[str, Any]] | Any]:
    """POST a completion; its status and its lines (or the refusal's JSON)."""
    status, reply = client.call("POST", ROUTE, body)
    if status == 200 and isinstance(reply, str):
        return status, [json.loads(line) for line in reply.splitlines()]
    if status == 200 and isinstance(reply, dict):
        return status, [reply]
    return status, reply


def text_of(lines: list[dict[str, Any]]) -> str:
    return "".join(line.get("text", "") for line in lines)


def completion_calls(store: Store) -> list[tuple[Any, ...]]:
    with store.connect() as con:
        return con.execute(
            "SELECT session_id, turn, model, input_tokens, output_tokens, cost_usd, stop_reason, source "
            "FROM model_calls WHERE source = 'completion' ORDER BY created_at"
        ).fetchall()


def test_status_says_completion_is_on_with_the_small_model(client):
    status, reply = client.call("GET", ROUTE)
    assert status == 200
    assert reply == {"enabled": True, "model": "claude-haiku-4-5", "reason": None}


def test_a_completion_streams_the_text_to_insert_from_a_cache_stable_request(client, model):
    model.add(say("sum(values) / len(values)\n", chunk_size=4))
    body = {
        "before": "mean = ",
        "after": "\nprint(mean)",
        "cells_above": ["values = [1, 2, 3]", ""],
        "language": "python",
    }
    status, lines = complete(client, body)
    assert status == 200
    assert text_of(lines) == "sum(values) / len(values)\n"
    assert sum(1 for line in lines if "text" in line) > 1  # streamed in pieces
    assert lines[-1] == {"done": True, "model": "claude-haiku-4-5", "stop_reason": "end_turn"}
    sent = model.requests[-1]
    assert sent["model"] == "claude-haiku-4-5" and sent["stream"] is True
    assert sent["system"] == [{"type": "text", "text": SYSTEM_PROMPT}]
    above, current = sent["messages"][0]["content"]
    assert above["text"] == "<cells_above>\n<cell>\nvalues = [1, 2, 3]\n</cell>\n</cells_above>"
    assert above["cache_control"] == {"type": "ephemeral"}
    assert current["text"] == '<current_cell language="python">\nmean = <CURSOR>\nprint(mean)\n</current_cell>'


def test_a_fence_around_the_answer_is_dropped(client, model):
    model.add(say("```python\nimport pandas as pd\n```", chunk_size=2))
    status, lines = complete(client, {"before": "import "})
    assert status == 200 and text_of(lines) == "import pandas as pd\n"


def test_secrets_are_redacted_before_the_request_reaches_the_model(client, model):
    model.add(say("x"))
    aws = "AKIAIOSFODNN7EXAMPLE"
    status, lines = complete(client, {"before": f"token = '{SECRET}'\nkey = '{aws}'\n", "cells_above": [SECRET]})
    assert status == 200 and text_of(lines) == "x"
    sent = json.dumps(model.requests[-1])
    assert SECRET not in sent and aws not in sent
    assert "[secret BILLING_SERVICE_TOKEN]" in sent and "[secret " in sent.split("key = ")[1]


BAD = [
    ({}, "Give `before`"),
    ({"before": 3}, "`before` must be a string"),
    ({"before": "x" * 50_001}, "at most 50,000"),
    ({"before": "a\x00b"}, "NUL"),
    ({"before": "", "after": ["x"]}, "`after` must be a string"),
    ({"before": "", "cells_above": "x = 1"}, "must be a list"),
    ({"before": "", "cells_above": [1]}, "`cells_above[0]` must be a string"),
    ({"before": "", "cells_above": ["x"] * 201}, "at most the 200 nearest"),
    ({"before": "", "cells_above": ["x" * 50_000] * 9}, "at most 400,000"),
    ({"before": "", "language": "py</current_cell>"}, "language's name"),
    ({"before": "", "prompt": "hi"}, "Unknown field(s) prompt"),
]


@pytest.mark.parametrize(("body", "message"), BAD)
def test_bad_input_is_refused_with_400_and_a_message(client, model, body, message):
    asked = len(model.requests)
    status, reply = client.call("POST", ROUTE, body)
    assert status == 400, reply
    assert message in reply["message"]
    assert len(model.requests) == asked


def test_a_body_that_is_not_a_json_object_is_refused_with_400(client):
    for raw in (b"{not json", b"[1, 2]", "\udcff".encode("utf-8", "surrogatepass"), b"{" * 100 + b"}" * 100):
        status, reply = client.call("POST", ROUTE, raw=raw)
        assert status == 400 and reply["message"], raw


def test_the_route_needs_the_servers_token_and_the_xsrf_token(client, server):
    lab, _ = server
    assert client.call("GET", ROUTE, token=False)[0] == 403
    assert client.call("POST", ROUTE, {"before": "x"}, token=False)[0] == 403
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    browser.open(f"{lab.url}/lab?token={lab.token}", timeout=30).read()
    status, reply = client.call("POST", ROUTE, {"before": "x"}, token=False, opener=browser)
    assert status == 403 and "xsrf" in reply["message"].lower()


def test_a_model_error_is_a_line_saying_so_not_a_500(client, model):
    from agent_kernel.testing import fail

    model.add(fail(400, "invalid_request_error", "model: not found"))
    status, lines = complete(client, {"before": "x = "})
    assert status == 200 and "model: not found" in lines[-1]["error"]


def test_each_completion_is_stored_with_source_completion_and_shown_in_stats(client, server, model):
    _, store = server
    model.add(say("42", usage={"input_tokens": 300, "output_tokens": 2}))
    assert text_of(complete(client, {"before": "answer = "})[1]) == "42"
    deadline = time.monotonic() + 20
    while not (ours := [c for c in completion_calls(store) if c[3] == 300]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(ours) == 1
    session_id, turn, model_name, given, output, cost, stop, source = ours[0]
    calls = completion_calls(store)
    assert (session_id, turn, model_name, given, output, stop, source) == (
        None, None, "claude-haiku-4-5", 300, 2, "end_turn", "completion",
    )  # fmt: skip
    assert cost is not None and cost > 0
    status, stats = client.call("GET", "/agent-kernel/api/stats?days=1")
    assert status == 200
    assert stats["model_calls"]["completion"]["calls"] == len(calls)
    assert stats["model_calls"]["completion"]["cost"] == pytest.approx(sum(c[5] or 0 for c in calls))
    assert stats["model_calls"]["turn"]["calls"] == 0
    with store.connect() as con:
        days = daily(con, 1)
    assert [(d.source, d.model) for d in days] == [("completion", "claude-haiku-4-5")]


def test_closing_the_request_cancels_the_model_stream_and_counts_what_it_used(server, model):
    lab, store = server
    # Another test's completion may still be on its way into the store: count cancelled ones.
    before = [c for c in completion_calls(store) if c[6] == "cancelled"]
    model.add(say("y = 1\n" * 200, chunk_size=6, chunk_delay=0.05))
    connection = http.client.HTTPConnection("127.0.0.1", lab.port, timeout=30)
    body = json.dumps({"before": "y = "})
    headers = {"Authorization": f"token {lab.token}", "Content-Type": "application/json"}
    connection.request("POST", ROUTE, body=body, headers=headers)
    response = connection.getresponse()
    assert response.status == 200
    first = json.loads(response.readline())
    assert first["text"].startswith("y = 1")
    started = time.monotonic()
    connection.close()  # what the editor does on the next keystroke
    deadline = time.monotonic() + 20
    while len(cancelled := [c for c in completion_calls(store) if c[6] == "cancelled"]) <= len(before):
        assert time.monotonic() < deadline, "the cancelled completion was not stored"
        time.sleep(0.05)
    assert len(cancelled) == len(before) + 1 and cancelled[-1][3] > 0
    assert time.monotonic() - started < 5  # the stream would have run 10 s more


KEY = "sk-ant-api03-" + "p" * 30 + "-stored-from-the-panel"


@pytest.fixture(scope="module")
def keyless_model():
    with ScriptedModel() as scripted:
        yield scripted


@pytest.fixture(scope="module")
def keyless(tmp_path_factory: pytest.TempPathFactory, keyless_model: ScriptedModel):
    """A server with no key in its environment (the key is stored through its API)."""
    base = tmp_path_factory.mktemp("keyless")
    env = {
        "ANTHROPIC_API_KEY": "",
        "ANTHROPIC_AUTH_TOKEN": "",
        "ANTHROPIC_BASE_URL": keyless_model.env()["ANTHROPIC_BASE_URL"],
    }
    with lab_server(base, env, config=CONFIG) as lab:
        yield lab, Store(base / "agent.duckdb"), base / "agent-home"


def sent_key(headers: dict[str, str]) -> str | None:
    """The key a request carried (``x-api-key``, or ``Authorization: Bearer`` as SDK 2 sends it)."""
    lower = {name.lower(): value for name, value in headers.items()}
    return lower.get("x-api-key") or lower.get("authorization", "").removeprefix("Bearer ") or None


def failed_run(store: Store) -> str:
    """A job's run that failed (what Explain is offered for)."""
    from datetime import datetime, timezone

    from agent_kernel.scheduler.runs import Outcome, Runs
    from tests.support.scheduling import add_job

    now = datetime.now(timezone.utc)
    job = add_job(store, name="etl", task="Load the data.", cron="0 0 1 1 *", now=now)
    with store.connect() as con:
        runs = Runs(con)
        run = runs.insert(job.id, now, cause="manual")
        assert run is not None
        runs.finish(run.id, Outcome("FAILED", error="KeyError: 'region'"), now)
    return run.id


def test_without_a_key_completion_and_explain_say_how_to_store_one_then_the_stored_key_is_used(keyless, keyless_model):
    lab, store, home = keyless
    client = Client(lab)
    status, reply = client.call("GET", ROUTE)
    assert status == 200 and reply["enabled"] is False
    for way in ("Agent panel", "%agent_key", "agent-kernel key set", "ANTHROPIC_API_KEY"):
        assert way in reply["reason"]
    status, refused = complete(client, {"before": "x = "})
    assert status == 400 and refused["message"] == reply["reason"]
    status, reply = client.call("POST", ROUTE, {"before": 1})
    assert status == 400  # input is checked all the same
    run_id = failed_run(store)
    status, refused = client.call("POST", f"/agent-kernel/api/runs/{run_id}", {"action": "explain"})
    assert status == 400 and refused["message"].startswith("Explain needs the model. The Jupyter server has no")
    assert keyless_model.requests == []

    for method in ("GET", "PUT", "DELETE"):
        status, _ = client.call(method, "/agent-kernel/api/key", {"key": KEY} if method == "PUT" else None, token=False)
        assert status == 403
    status, reply = client.call("GET", "/agent-kernel/api/key")
    assert status == 200 and reply == {"has_key": False, "source": "none", "where": "", "message": reply["message"]}
    for body, why in (
        ({"key": 1}, 'A key is sent as {"key": "sk-ant-..."}'),
        ({"key": KEY, "also": 1}, 'A key is sent as {"key": "sk-ant-..."}'),
        ({"key": "two words"}, "spaces"),
        ({"key": " "}, "No key was given"),
    ):
        status, refused = client.call("PUT", "/agent-kernel/api/key", body)
        assert status == 400 and why in refused["message"], (body, refused)
    status, reply = client.call("PUT", "/agent-kernel/api/key", {"key": KEY})
    path = home / "anthropic-api-key"
    assert status == 200 and reply["has_key"] is True and reply["source"] == "file" and reply["where"] == str(path)
    assert KEY not in json.dumps(reply) and path.stat().st_mode & 0o777 == 0o600

    status, reply = client.call("GET", ROUTE)
    assert reply["enabled"] is True
    keyless_model.add(say("42"))
    status, lines = complete(client, {"before": "x = "})
    assert status == 200 and text_of(lines) == "42"
    keyless_model.add(say("The region column is missing from the input."))
    status, explained = client.call("POST", f"/agent-kernel/api/runs/{run_id}", {"action": "explain"})
    assert status == 200 and "region column" in explained["explanation"], explained
    assert len(keyless_model.headers) == 2 and all(sent_key(h) == KEY for h in keyless_model.headers)

    status, reply = client.call("DELETE", "/agent-kernel/api/key")
    assert status == 200 and reply["has_key"] is False and not path.exists()
    status, refused = complete(client, {"before": "x = "})
    assert status == 400 and "agent-kernel key set" in refused["message"]


def test_the_setting_turns_completion_off(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-123456")
    assert Completion(enabled=True, model="m", max_tokens=10).off_reason() is None
    off = Completion(enabled=False, model="m", max_tokens=10).off_reason()
    assert off is not None and "AgentKernelServer.completion = False" in off


def test_the_nearest_cells_above_are_kept_within_the_budget():
    cells = ("a" * 500, "", "b" * 300, "c" * 100)
    assert nearest_cells(cells, 1_000) == [cells[0], cells[2], cells[3]]
    assert nearest_cells(cells, 700) == ["…\n" + "a" * 300, "b" * 300, "c" * 100]
    assert nearest_cells(cells, 450) == ["b" * 300, "c" * 100]


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        (["```py", "thon\nx = 1\n``", "`"], "x = 1\n"),
        (["x = 1\n", "y = 2"], "x = 1\ny = 2"),
        (["`", "a`"], "`a`"),
        (["  ", "x"], "  x"),
        (["x = '``", "`'"], "x = '```'"),
    ],
)
def test_the_fence_filter_drops_only_a_surrounding_fence(pieces, expected):
    fences = FenceFilter()
    assert "".join(fences.feed(p) for p in pieces) + fences.end() == expected
