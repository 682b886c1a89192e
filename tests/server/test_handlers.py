"""The server extension's REST API in a real Jupyter server (JupyterLab's), over a real
DuckDB file: every route with good and bad input, authentication, XSRF, the scheduler
running inside the server, and the server sharing the file with two kernels."""

from __future__ import annotations

import http.cookiejar
import json
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest

from agent_kernel.model.usage import CallUsage
from agent_kernel.store import Store, provenance
from agent_kernel.store.sessions import Journal, Sessions
from agent_kernel.store.usage import UsageLog
from tests.support.jupyterlab import lab_server
from tests.support.kernel import Kernel
from tests.support.notebooks import write_notebook
from tests.support.server import API, SERVER_CONFIG, Client


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("server")
    with lab_server(base, config=SERVER_CONFIG) as lab:
        yield lab, Store(base / "agent.duckdb")


# -- authentication --------------------------------------------------------------------------


ROUTES = [
    ("GET", "sessions"), ("GET", "sessions/abc"), ("GET", "jobs"), ("POST", "jobs"), ("GET", "jobs/abc"),
    ("PATCH", "jobs/abc"), ("DELETE", "jobs/abc"), ("POST", "jobs/abc/run"), ("GET", "runs"),
    ("GET", "runs/abc"), ("POST", "runs/abc"), ("GET", "runs/abc/output"), ("GET", "stats"),
]  # fmt: skip


def test_every_route_refuses_a_request_without_the_servers_token_or_cookie(client):
    for method, route in ROUTES:
        body = {} if method in ("POST", "PATCH") else None
        status, reply = client.call(method, f"{API}/{route}", body, token=False)
        assert status == 403, (method, route, status, reply)
    status, _ = client.call("GET", f"{API}/jobs", headers={"Authorization": "token wrong"}, token=False)
    assert status == 403


def test_a_browser_session_writes_only_with_the_xsrf_token(client, server):
    lab, _ = server
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    browser.open(f"{lab.url}/lab?token={lab.token}", timeout=30).read()  # logs in: the login and _xsrf cookies
    cookies = {c.name: c.value for c in jar}
    assert "_xsrf" in cookies and any(name.startswith("username-") for name in cookies)
    status, reply = client.call("GET", f"{API}/jobs", token=False, opener=browser)
    assert status == 200 and reply["jobs"] == []
    status, reply = client.call("POST", f"{API}/jobs", {"notebook": "x.ipynb"}, token=False, opener=browser)
    assert status == 403 and "xsrf" in reply["message"].lower()
    status, reply = client.call(
        "POST", f"{API}/jobs", {"notebook": "x.ipynb"}, token=False, opener=browser,
        headers={"X-XSRFToken": cookies["_xsrf"]},
    )  # fmt: skip
    assert status == 400 and reply["message"] == "No notebook at 'x.ipynb': save it first."


# -- sessions ----------------------------------------------------------------------------------


def test_sessions_list_with_state_tokens_cost_and_parent_and_one_sessions_messages(client, server):
    lab, store = server
    write_notebook(lab.root / "work" / "analysis.ipynb", "print('ran')")
    with store.connect() as con:
        sessions = Sessions(con)
        main = sessions.create("analysis", notebook=str(lab.root / "work" / "analysis.ipynb"))
        child = sessions.create("analysis/sub-1", notebook=None, parent_id=main.id)
        other = sessions.create("elsewhere", notebook="/somewhere/else.ipynb")
        journal = Journal(main.id, turn=1)
        journal.message("user", [{"type": "text", "text": "How many rows?"}])
        journal.message("assistant", [{"type": "text", "text": "**42** rows."}])
        journal.usage(1234)
        journal.state("idle")
        journal.write(con)
        sessions.set_state(child.id, "completed")
        calls = UsageLog(child.id, turn=1)
        calls.call(CallUsage("claude-sonnet-5-5", input_tokens=1000, output_tokens=10, cost=0.0125), duration_ms=5)
        calls.call(CallUsage("claude-sonnet-5-5", input_tokens=1000, output_tokens=10, cost=0.0075), duration_ms=5)
        calls.write(con)

    status, reply = client.call("GET", f"{API}/sessions")
    assert status == 200
    by_name = {s["name"]: s for s in reply["sessions"]}
    assert {"analysis", "analysis/sub-1", "elsewhere"} <= set(by_name)
    assert by_name["analysis"]["tokens"] == 1234
    assert by_name["analysis"]["cost"] == pytest.approx(0.02)  # no call of its own: its sub-session's
    assert by_name["analysis/sub-1"]["cost"] == pytest.approx(0.02)  # the sum of its calls' costs
    assert by_name["analysis"]["notebook_path"] == "work/analysis.ipynb"
    assert by_name["analysis/sub-1"]["parent_id"] == main.id and by_name["analysis/sub-1"]["state"] == "completed"
    assert by_name["elsewhere"]["notebook_path"] is None  # outside the root

    status, reply = client.call("GET", f"{API}/sessions?notebook=work/analysis.ipynb")
    assert status == 200 and [s["name"] for s in reply["sessions"]] == ["analysis/sub-1", "analysis"]

    status, reply = client.call("GET", f"{API}/sessions/{main.id}")
    assert status == 200 and reply["name"] == "analysis" and reply["messages_total"] == 2
    assert [m["role"] for m in reply["messages"]] == ["user", "assistant"]
    assert reply["messages"][1]["content"] == [{"type": "text", "text": "**42** rows."}]

    status, reply = client.call("GET", f"{API}/sessions/{other.id}x")
    assert status == 404 and reply["message"] == f"No session '{other.id}x'."
    status, _ = client.call("GET", f"{API}/sessions/not.an.id")
    assert status == 404


def more(lab, route: str) -> str | None:
    """The ``X-More`` header of a GET: whether a list's page is followed by more."""
    request = urllib.request.Request(f"{lab.url}{API}/{route}", headers={"Authorization": f"token {lab.token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.headers.get("X-More")


def test_the_session_and_job_lists_come_a_page_at_a_time_and_refuse_a_bad_page(client, server):
    lab, store = server
    with store.connect() as con:
        sessions = Sessions(con)
        for i in range(3):
            sessions.create(f"paged-{i}", notebook=str(lab.root / "paged.ipynb"))
            con.execute(
                "UPDATE sessions SET updated_at = updated_at + INTERVAL (?) SECOND WHERE name = ?", [i, f"paged-{i}"]
            )

    def names(query: str) -> list[str]:
        status, reply = client.call("GET", f"{API}/sessions?notebook=paged.ipynb&{query}")
        assert status == 200, reply
        return [s["name"] for s in reply["sessions"]]

    assert names("limit=2") == ["paged-2", "paged-1"] and names("limit=2&offset=2") == ["paged-0"]
    assert names("") == ["paged-2", "paged-1", "paged-0"]  # a page of 100 unless asked
    assert more(lab, "sessions?notebook=paged.ipynb&limit=2") == "true"
    assert more(lab, "sessions?notebook=paged.ipynb&limit=2&offset=1") == "false"

    write_notebook(lab.root / "paged-job.ipynb", "print('ran')")
    made = []
    for name in ("older", "newer"):
        status, job = client.call(
            "POST", f"{API}/jobs", {"name": f"paged-{name}", "notebook": "paged-job.ipynb", "cron": "0 9 * * *"}
        )
        assert status == 201, job
        made.append(job["id"])
    status, reply = client.call("GET", f"{API}/jobs?limit=2")
    assert status == 200 and [j["id"] for j in reply["jobs"]] == made[::-1]  # newest first
    assert reply["scheduler"]["running"] is True
    status, reply = client.call("GET", f"{API}/jobs?limit=1&offset=1")
    assert status == 200 and [j["id"] for j in reply["jobs"]] == made[:1]
    assert more(lab, "jobs?offset=1000000") == "false"

    for query, message in (
        ("limit=0", "`limit` must be between 1 and 1000."),
        ("limit=1001", "`limit` must be between 1 and 1000."),
        ("limit=ten", "`limit` must be a whole number, not 'ten'."),
        ("offset=-1", "`offset` must be between 0 and"),
        ("offset=", "`offset` must be a whole number, not ''."),
    ):
        for route in ("sessions", "jobs"):
            status, reply = client.call("GET", f"{API}/{route}?{query}")
            assert status == 400 and reply["message"].startswith(message), (route, query, status, reply)


# -- jobs ----------------------------------------------------------------------------------------


def test_a_job_is_created_listed_paused_resumed_and_deleted(client, server):
    lab, store = server
    write_notebook(lab.root / "reports" / "daily.ipynb", "print(region)", parameters="region = 'north'")
    status, job = client.call("POST", f"{API}/jobs", {
        "notebook": "reports/daily.ipynb", "cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin",
        "parameters": {"region": "south", "limit": 5}, "overlap": "queue",
    })  # fmt: skip
    assert status == 201, job
    assert job["name"] == "daily" and job["kind"] == "notebook" and job["enabled"] is True
    assert job["notebook"] == str((lab.root / "reports" / "daily.ipynb").resolve())
    assert job["notebook_path"] == "reports/daily.ipynb" and job["overlap"] == "queue"
    assert job["parameters"] == {"region": "south", "limit": 5} and job["timezone"] == "Europe/Berlin"
    assert job["schedule"] == "At 09:00 on Monday through Friday (Europe/Berlin)"
    assert job["next_run"] is not None and job["scheduler"]["running"] is True
    assert job["scheduler"]["in_server"] is True

    status, listed = client.call("GET", f"{API}/jobs")
    assert status == 200 and job["id"] in [j["id"] for j in listed["jobs"]]
    assert listed["scheduler"]["running"] is True and "message" not in listed["scheduler"]
    status, one = client.call("GET", f"{API}/jobs/{job['id']}")
    assert status == 200 and one["name"] == "daily" and one["last_status"] is None

    status, edited = client.call("PATCH", f"{API}/jobs/{job['id']}", {
        "cron": "30 6 * * *", "parameters": {"region": "east"}, "timeout_s": 900, "max_retries": 2,
    })  # fmt: skip
    assert status == 200, edited
    assert (
        edited["version"] == 2
        and edited["schedule"] == "At 06:30 every day (Europe/Berlin)"
        and edited["timeout_s"] == 900
    )
    assert edited["parameters"] == {"region": "east"} and edited["enabled"] is True
    status, history = client.call("GET", f"{API}/jobs/{job['id']}/versions")
    assert status == 200 and [v["version"] for v in history["versions"]] == [2, 1]
    assert history["versions"][0]["changed"] == ["parameters", "cron", "timeout_s", "max_retries"]
    assert history["versions"][0]["changed_by"].startswith("the user (jupyterlab")

    status, paused = client.call("PATCH", f"{API}/jobs/{job['id']}", {"enabled": False})
    assert status == 200 and paused["enabled"] is False and paused["version"] == 2
    with store.connect() as con:  # as if a turn that had read a web page had changed it
        provenance.record(con, "job", job["id"], provenance.Provenance("s1", 1, ("web_fetch https://evil.example/",)))
    status, resumed = client.call("PATCH", f"{API}/jobs/{job['id']}", {"enabled": True})
    assert status == 200 and resumed["enabled"] is True and resumed["next_run"] is not None
    with store.connect() as con:  # the person enabled it: reviewed, no longer tainted
        assert provenance.tainted(con, "job") == []

    status, reply = client.call("DELETE", f"{API}/jobs/{job['id']}")
    assert status == 200 and reply == {"deleted": True, "id": job["id"]}
    status, reply = client.call("DELETE", f"{API}/jobs/{job['id']}")
    assert status == 404 and reply["message"] == f"No job '{job['id']}'."
    status, _ = client.call("GET", f"{API}/jobs/{job['id']}")
    assert status == 404
    with store.connect() as con:
        row = con.execute("SELECT deleted_at IS NOT NULL FROM jobs WHERE id = ?", [job["id"]]).fetchone()
    assert row == (True,)


def test_bad_job_requests_get_400_with_a_message_that_says_what_to_change(client, server):
    lab, _ = server
    write_notebook(lab.root / "ok.ipynb", "print('ran')")
    write_notebook(lab.root / "nokernel.ipynb", "print('ran')", kernelspec=False)
    (lab.root / "notes.txt").write_text("not a notebook")
    (lab.root.parent / "outside.ipynb").write_text("{}")
    soon = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    cases = [
        (b"{not json", "The request body is not JSON"),
        (b"[1, 2]", "The request body must be a JSON object."),
        ({}, "Give `notebook`: the notebook's path relative to the Jupyter root."),
        ({"notebook": "../outside.ipynb", "cron": "0 9 * * *"}, "'../outside.ipynb' is outside the Jupyter root"),
        ({"notebook": "notes.txt", "cron": "0 9 * * *"}, "'notes.txt' is not a notebook (.ipynb)."),
        ({"notebook": "missing.ipynb", "cron": "0 9 * * *"}, "No notebook at 'missing.ipynb': save it first."),
        ({"notebook": "nokernel.ipynb", "cron": "0 9 * * *"}, "nokernel.ipynb has no kernel: open it, choose a kernel"),
        ({"notebook": "ok.ipynb"}, "Give exactly one of `at`"),
        ({"notebook": "ok.ipynb", "cron": "0 9 * * *", "at": soon}, "Give exactly one of `at`"),
        ({"notebook": "ok.ipynb", "cron": "every day"}, "Cron expression 'every day' has 2 fields; use 5"),
        ({"notebook": "ok.ipynb", "cron": "0 9 * * *", "timezone": "Mars/Olympus"}, "Mars/Olympus"),
        ({"notebook": "ok.ipynb", "at": "2001-01-01T09:00"}, "is in the past"),
        (
            {"notebook": "ok.ipynb", "cron": "0 9 * * *", "overlap": "sometimes"},
            "overlap must be one of allow, forbid, queue",
        ),
        ({"notebook": "ok.ipynb", "cron": "0 9 * * *", "parameters": [1]}, "`parameters` must be an object"),
        ({"notebook": "ok.ipynb", "cron": "0 9 * * *", "parameters": {"a b": 1}}, "'a b' is not one"),
        ({"notebook": "ok.ipynb", "cron": "0 9 * * *", "colour": "red"}, "Unknown field(s): colour"),
        ({"notebook": "ok.ipynb", "cron": 9}, "`cron` must be a string."),
    ]
    for body, message in cases:
        raw = body if isinstance(body, bytes) else None
        status, reply = client.call("POST", f"{API}/jobs", None if raw else body, raw=raw)
        assert status == 400, (body, status, reply)
        assert message in reply["message"], (body, reply)
    status, made = client.call("POST", f"{API}/jobs", {"notebook": "/ok.ipynb", "at": soon, "name": "once"})
    assert status == 201 and made["type"] == "once" and made["name"] == "once"

    patches = [
        ({"enabled": "yes"}, "`enabled` must be true or false."),
        ({}, 'Send the fields to change, e.g. {"cron": "0 9 * * *"} or {"enabled": false}.'),
        ({"colour": "red"}, "Unknown field(s): colour"),
        ({"cron": 9}, "`cron` must be a non-empty string."),
        ({"cron": "every day"}, "Cron expression 'every day' has 2 fields; use 5"),  # the creation's check
        ({"timezone": "Mars/Olympus"}, "Mars/Olympus"),
        ({"overlap": "sometimes"}, "overlap must be one of allow, forbid, queue"),
        ({"parameters": {"a b": 1}}, "'a b' is not one"),
        ({"timeout_s": "long"}, "`timeout_s` must be a number."),
        ({"max_retries": 1.5}, "`max_retries` must be a whole number."),
        ({"notebook": "../outside.ipynb"}, "'../outside.ipynb' is outside the Jupyter root"),
        ({"name": "x" * 5000}, "`name`"),
        ({"explain": "yes"}, "`explain` must be true or false."),
        ({"notify": ["ops"]}, "`notify` must be"),
        ({"notify": {"targets": ["nobody"]}}, "No notification target 'nobody'"),
        ({"notify": {"targets": [], "on": "sometimes"}}, "notify on must be one of failure, success, always"),
    ]
    for body, message in patches:
        status, reply = client.call("PATCH", f"{API}/jobs/{made['id']}", body)
        assert status == 400 and message in reply["message"], (body, reply)
    status, versions = client.call("GET", f"{API}/jobs/{made['id']}/versions")
    assert status == 200 and [v["version"] for v in versions["versions"]] == [1]  # nothing refused was kept
    status, _ = client.call("PATCH", f"{API}/jobs/nosuchjob", {"enabled": True})
    assert status == 404
    runs_with = [
        ({"now": True}, "Unknown field(s): now; this route takes only `parameters`."),
        ({"parameters": [1]}, "`parameters` must be an object of name: value pairs."),
        ({"parameters": {"a b": 1}}, "'a b' is not one"),
        ({"parameters": {"class": 1}}, "class"),  # the scheduler's check: a keyword is no name
        ({"parameters": {"big": "x" * 300_000}}, "bytes as JSON; at most"),
    ]
    for body, message in runs_with:
        status, reply = client.call("POST", f"{API}/jobs/{made['id']}/run", body)
        assert status == 400 and message in reply["message"], (body, reply)
    status, listed = client.call("GET", f"{API}/runs?job={made['id']}")
    assert listed["runs"] == []  # nothing refused was queued
    status, reply = client.call("POST", f"{API}/jobs/nosuchjob/run")
    assert status == 404 and reply["message"] == "No job 'nosuchjob'."
    client.call("DELETE", f"{API}/jobs/{made['id']}")


def test_malformed_bodies_and_paths_get_400_with_a_message_never_500(client, server):
    lab, store = server
    write_notebook(lab.root / "fine.ipynb", "print('ran')")
    good = b'{"notebook": "fine.ipynb", "cron": "0 9 * * *", '
    deep = b"[" * 100_000 + b"]" * 100_000
    bodies = [
        (deep, "nests too deeply"),
        (good + b'"parameters": {"a": ' + deep + b"}}", "nests too deeply"),
        (good + b'"parameters": {"a": ' + b"[" * 40 + b"]" * 40 + b"}}", "nests too deeply"),
        (b'{"notebook": "\xff\xfe.ipynb"}'.decode("unicode_escape").encode("latin-1"), "not UTF-8"),
        ('{"notebook": "fine.ipynb"}'.encode("utf-16"), "not UTF-8"),
        (json.dumps({"notebook": "fine\u0000.ipynb", "cron": "0 9 * * *"}).encode(), "NUL or another control character"),
        (json.dumps({"notebook": "sub/\u0000/../fine.ipynb"}).encode(), "NUL or another control character"),
        (json.dumps({"notebook": "x" * 5000 + ".ipynb"}).encode(), "at most 4,096 are accepted"),
        (json.dumps({"notebook": "x" * 300 + ".ipynb"}).encode(), "File name too long"),
        (b'{"notebook": "fine\\ud800.ipynb", "cron": "0 9 * * *"}', "unpaired surrogate"),
        (good + b'"name": "\\udfff"}', "unpaired surrogate"),
        (good + b'"at": "2030-01-01T09:00\\u0000"}', "`at` holds a NUL"),
        (good + b'"parameters": {"a": NaN}}', "NaN is not a JSON number"),
        (good + b'"parameters": {"a": 1e999}}', "send a finite number"),
        (good + b'"parameters": {"a": 1' + b"0" * 5000 + b"}}", "The request body is not JSON"),
        (good + b'"name": ["a"]}', "`name` must be a string."),
        (good + b'"parameters": "a=1"}', "`parameters` must be an object"),
        (json.dumps({"notebook": "fine.ipynb", "cron": "0 9 * * *", "name": "x" * 2_000_000}).encode(),
         "at most 1,000,000 are accepted"),
        (b"null", "must be a JSON object"),
        (b'"fine.ipynb"', "must be a JSON object"),
        (b"3", "must be a JSON object"),
    ]  # fmt: skip
    for raw, message in bodies:
        status, reply = client.call("POST", f"{API}/jobs", raw=raw)
        assert status == 400, (raw[:80], status, reply)
        assert isinstance(reply, dict) and message in reply["message"], (raw[:80], reply)
    for method, route in (("PATCH", "jobs/abc"), ("POST", "jobs/abc/run"), ("POST", "runs/abc")):
        for raw, message in ((deep, "nests too deeply"), (b"[1]", "must be a JSON object"), (b"\xff", "not UTF-8")):
            status, reply = client.call(method, f"{API}/{route}", raw=raw)
            assert status == 400 and message in reply["message"], (method, route, raw[:20], status, reply)
    queries = [
        ("sessions?notebook=work%00/analysis.ipynb", "`notebook` holds a NUL"),
        ("sessions?notebook=%0a", "`notebook` holds a NUL or another control character"),
        ("sessions?notebook=" + "a" * 5000, "at most 4,096 are accepted"),
        ("sessions?notebook=%ff", "Invalid unicode in notebook"),
        ("runs?job=abc%00", "`job` holds a NUL"),
    ]
    for query, message in queries:
        status, reply = client.call("GET", f"{API}/{query}")
        assert status == 400 and message in reply["message"], (query, status, reply)
    for route in ("jobs/a%00b", "sessions/a%00b", "runs/a%00b", "jobs/a%00b/run", "runs/a%00b/output"):
        status, _ = client.call("GET", f"{API}/{route}")
        assert status == 404, (route, status)  # an id with a NUL names nothing
    with store.connect() as con:
        assert con.execute("SELECT count(*) FROM jobs WHERE notebook LIKE '%fine%'").fetchone() == (0,)


# Every value of a kind a field should not hold, and numbers out of every range.
ODD_VALUES = [10**30, -1, 0, 1.5, 1e308, True, None, "1", "", "x" * 2000, "\u0000", [1], {"a": 1}]


def test_every_field_of_a_job_request_has_type_size_and_range_limits_never_500(client, server):
    lab, store = server
    write_notebook(lab.root / "limits.ipynb", "print('ran')")
    status, made = client.call("POST", f"{API}/jobs", {"notebook": "limits.ipynb", "cron": "0 9 * * *"})
    assert status == 201
    # The report that found it: a whole number past every column's range answered 500.
    for field in ("max_retries", "max_catchup", "token_limit", "timeout_s", "cell_timeout_s", "retry_delay_s"):
        for value in (10**30, -1, 1e308, True, "5"):
            status, reply = client.call("PATCH", f"{API}/jobs/{made['id']}", {field: value})
            assert status == 400 and f"`{field}` must be a" in reply["message"], (field, value, status, reply)
    status, reply = client.call("PATCH", f"{API}/jobs/{made['id']}", {"max_retries": 10**30})
    assert reply["message"] == "`max_retries` must be a whole number from 0 to 100, not a number of 31 digits."
    status, reply = client.call("PATCH", f"{API}/jobs/{made['id']}", {"timeout_s": 0})
    assert status == 400 and "more than 0 and at most 604,800" in reply["message"]
    for field, value in (("max_retries", 1.0), ("token_limit", 0), ("max_catchup", 1001), ("cell_timeout_s", 604_801)):
        status, reply = client.call("PATCH", f"{API}/jobs/{made['id']}", {field: value})
        assert status == 400 and f"`{field}`" in reply["message"], (field, value, reply)
    status, edited = client.call("PATCH", f"{API}/jobs/{made['id']}", {
        "max_retries": 100, "max_catchup": 1000, "timeout_s": 604_800, "cell_timeout_s": 0.5, "retry_delay_s": 0,
        "token_limit": 100_000_000,
    })  # fmt: skip
    assert status == 200 and edited["timeout_s"] == 604_800, edited  # the limits themselves are accepted
    # Every field, every odd value: 200 or 400 with a message, never a 500 or a traceback.
    from agent_kernel.server.job_request import EDIT_FIELDS, FIELDS

    answers = []
    for field in sorted(EDIT_FIELDS | {"enabled"}):
        for value in ODD_VALUES:
            status, reply = client.call("PATCH", f"{API}/jobs/{made['id']}", {field: value})
            answers.append(status)
            assert status in (200, 400) and isinstance(reply, dict), (field, value, status, reply)
            assert status == 200 or (reply["message"] and "Traceback" not in reply["message"]), (field, value, reply)
            if status == 200:  # put back what a value changed (a pause, another schedule)
                client.call("PATCH", f"{API}/jobs/{made['id']}", {"enabled": True, "cron": "0 9 * * *"})
    for field in sorted(FIELDS - {"notebook"}):
        for value in ODD_VALUES:
            body = {"notebook": "limits.ipynb", "cron": "0 9 * * *", field: value}
            status, reply = client.call("POST", f"{API}/jobs", body)
            answers.append(status)
            assert status in (201, 400) and isinstance(reply, dict), (field, value, status, reply)
            if status == 201:
                client.call("DELETE", f"{API}/jobs/{reply['id']}")
    assert answers.count(400) > len(answers) // 2
    client.call("DELETE", f"{API}/jobs/{made['id']}")


def test_grants_through_the_api_are_the_persons_with_the_request_as_their_event(client, server):
    lab, store = server
    write_notebook(lab.root / "granted.ipynb", "print('ran')")
    body = {"notebook": "granted.ipynb", "cron": "0 9 * * *",
            "grants": {"hosts": ["API.example.com."], "after_untrusted": ["run_code", "fetch_url"]}}  # fmt: skip
    status, made = client.call("POST", f"{API}/jobs", body)
    assert status == 201, made
    assert made["grants"] == {"hosts": ["api.example.com"], "after_untrusted": ["fetch_url", "run_code"]}
    assert made["granted_by"].startswith("server: POST /agent-kernel/api/jobs by jupyterlab")
    status, listed = client.call("GET", f"{API}/jobs")
    assert [j["grants"] for j in listed["jobs"] if j["id"] == made["id"]] == [made["grants"]]

    status, changed = client.call(
        "PATCH", f"{API}/jobs/{made['id']}", {"grants": {"after_untrusted": ["write_notepad"]}}
    )
    assert status == 200 and changed["grants"] == {"hosts": [], "after_untrusted": ["write_notepad"]}
    assert changed["granted_by"].startswith(f"server: PATCH /agent-kernel/api/jobs/{made['id']} by jupyterlab")
    status, edited = client.call("PATCH", f"{API}/jobs/{made['id']}", {"cron": "0 10 * * *"})
    assert status == 200 and edited["grants"] == changed["grants"]  # the person's edit keeps them
    status, dropped = client.call("PATCH", f"{API}/jobs/{made['id']}", {"grants": None})
    assert status == 200 and dropped["grants"] is None and dropped["granted_by"] is None
    status, history = client.call("GET", f"{API}/jobs/{made['id']}/versions")
    assert [v["changed"] for v in history["versions"]][:3] == [["grants"], ["cron"], ["grants"]]

    bad = [
        ({"hosts": "api.example.com"}, "grants' hosts is a list of at most 100 names"),
        ({"hosts": ["https://api.example.com/x"]}, "host names such as api.example.com (no scheme, port or path)"),
        ({"hosts": ["api.example.com:443"]}, "no scheme, port or path"),
        ({"after_untrusted": ["run code"]}, "without spaces"),
        ({"after_untrusted": ["x" * 300]}, "1 to 253 characters"),
        ({"after_untrusted": ["a"] * 101}, "at most 100 names"),
        ({"anything": ["run_code"]}, "grants take hosts and after_untrusted, not anything"),
        (["run_code"], "grants are an object"),
    ]
    for grants, message in bad:
        for method, route, extra in (("POST", "jobs", {"notebook": "granted.ipynb", "cron": "0 9 * * *"}),
                                     ("PATCH", f"jobs/{made['id']}", {})):  # fmt: skip
            status, reply = client.call(method, f"{API}/{route}", {**extra, "grants": grants})
            assert status == 400 and reply["message"].startswith("`grants`: ") and message in reply["message"], (
                grants,
                reply,
            )

    # Enabling a job that waits for review: the request is the person's event, kept with the review.
    status, _ = client.call("PATCH", f"{API}/jobs/{made['id']}", {"enabled": False})
    with store.connect() as con:  # as if a turn that had read a web page had changed it
        provenance.record(con, "job", made["id"], provenance.Provenance("s1", 1, ("web_fetch https://evil.example/",)))
    status, resumed = client.call(
        "PATCH", f"{API}/jobs/{made['id']}", {"enabled": True, "grants": {"hosts": ["a.example"]}}
    )
    assert status == 200 and resumed["enabled"] and resumed["grants"] == {"hosts": ["a.example"], "after_untrusted": []}
    with store.connect() as con:
        record = provenance.latest(con, "job", [made["id"]])[made["id"]]
    assert not record.tainted and record.cleared_by.startswith(f"server: PATCH /agent-kernel/api/jobs/{made['id']} by ")
    assert record.cleared_by.endswith(": enabled, grants")
    client.call("DELETE", f"{API}/jobs/{made['id']}")


# -- runs: the server's scheduler runs a job at once -----------------------------------------------


def test_run_now_is_run_by_the_servers_scheduler_and_its_output_opens_in_the_root(client, server):
    lab, _ = server
    write_notebook(lab.root / "hello.ipynb", "print(f'hello {who}')", parameters="who = 'nobody'")
    status, job = client.call("POST", f"{API}/jobs", {"notebook": "hello.ipynb", "cron": "0 3 1 1 *",
                                                      "parameters": {"who": "server"}})  # fmt: skip
    assert status == 201
    status, queued = client.call("POST", f"{API}/jobs/{job['id']}/run")
    assert status == 202 and queued["status"] == "QUEUED" and queued["cause"] == "manual"
    assert queued["scheduler"]["running"] is True

    deadline = time.monotonic() + 120
    while True:
        status, run = client.call("GET", f"{API}/runs/{queued['id']}")
        assert status == 200
        if run["status"] not in ("QUEUED", "RUNNING") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert run["status"] == "SUCCEEDED", run
    assert run["job_name"] == "hello" and run["seconds"] > 0 and run["error"] is None

    status, listed = client.call("GET", f"{API}/runs?job={job['id']}&limit=5")
    assert status == 200 and [r["id"] for r in listed["runs"]] == [run["id"]]
    status, one = client.call("GET", f"{API}/jobs/{job['id']}")
    assert one["last_status"] == "SUCCEEDED" and one["last_run_id"] == run["id"]

    # Read where the run left it: a static page, nothing copied into the root.
    status, page = client.call("GET", f"{API}/runs/{run['id']}/output")
    assert status == 200 and (page["id"], page["job_name"], page["status"]) == (run["id"], "hello", "SUCCEEDED")
    assert "hello server" in page["html"] and "Content-Security-Policy" in page["html"]
    assert "default-src 'none'" in page["html"] and not (lab.root / "agent-kernel-runs").exists()
    status, reply = client.call("GET", f"{API}/runs/nosuchrun/output")
    assert status == 404 and reply["message"] == "No run 'nosuchrun'."
    # The first run has nothing to compare with; a second run with another parameter has.
    status, reply = client.call("GET", f"{API}/runs/{run['id']}/diff")
    assert status == 400 and "first run" in reply["message"]
    client.call("PATCH", f"{API}/jobs/{job['id']}", {"parameters": {"who": "again"}})
    status, again = client.call("POST", f"{API}/jobs/{job['id']}/run")
    while True:
        status, second = client.call("GET", f"{API}/runs/{again['id']}")
        if second["status"] not in ("QUEUED", "RUNNING") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert second["status"] == "SUCCEEDED" and second["job_version"] == 2 and run["job_version"] == 1
    status, diff = client.call("GET", f"{API}/runs/{second['id']}/diff")
    assert (
        status == 200
        and diff["before"] == run["id"]
        and diff["parameters"]["who"] == {"before": "server", "after": "again"}
    )
    assert "-hello server" in diff["changes"][0]["diff"] and "+hello again" in diff["changes"][0]["diff"]
    status, reply = client.call("POST", f"{API}/runs/{second['id']}", {"action": "explain"})
    assert status == 400 and "did not fail (SUCCEEDED)" in reply["message"]
    # A run now with another value: this run uses it, the job keeps its own (and its version).
    status, other = client.call("POST", f"{API}/jobs/{job['id']}/run", {"parameters": {"who": "visitor"}})
    assert status == 202 and other["parameters"] == {"who": "visitor"} and other["cause"] == "manual"
    while True:
        status, third = client.call("GET", f"{API}/runs/{other['id']}")
        if third["status"] not in ("QUEUED", "RUNNING") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert third["status"] == "SUCCEEDED" and third["parameters"] == {"who": "visitor"}, third
    status, page = client.call("GET", f"{API}/runs/{third['id']}/output")
    assert "hello visitor" in page["html"]
    status, one = client.call("GET", f"{API}/jobs/{job['id']}")
    assert one["parameters"] == {"who": "again"} and one["version"] == 2 and third["job_version"] == 2
    assert second["parameters"] is None
    # A copy to edit goes into the root.
    status, opened = client.call("POST", f"{API}/runs/{run['id']}", {"action": "open"})
    assert status == 200 and opened["path"] == f"agent-kernel-runs/hello-{run['id']}.ipynb"
    output = nbformat.read(lab.root / opened["path"], as_version=4)
    assert "hello server" in json.dumps(output.cells[-1].outputs)

    for query, message in (("limit=abc", "`limit` must be a whole number, not 'abc'."),
                           ("limit=0", "`limit` must be between 1 and 500.")):  # fmt: skip
        status, reply = client.call("GET", f"{API}/runs?{query}")
        assert status == 400 and reply["message"] == message
    for body in ({"action": "explode"}, {}, {"action": "open", "x": 1}):
        status, reply = client.call("POST", f"{API}/runs/{run['id']}", body)
        assert (
            status == 400
            and reply["message"] == 'Send {"action": "open"}, {"action": "cancel"} or {"action": "explain"}.'
        )
    status, reply = client.call("GET", f"{API}/runs/nosuchrun")
    assert status == 404 and reply["message"] == "No run 'nosuchrun'."
    status, cancelled = client.call("POST", f"{API}/runs/{run['id']}", {"action": "cancel"})
    assert status == 200 and cancelled["status"] == "SUCCEEDED"  # a finished run stays as it ended
    client.call("DELETE", f"{API}/jobs/{job['id']}")


# -- stats ----------------------------------------------------------------------------------------


def test_stats_count_code_runs_failures_by_category_and_days(client, server):
    _, store = server
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    before = client.call("GET", f"{API}/stats?days=3")[1]
    with store.connect() as con:
        rows = [("ok", True, None), ("bad", False, "import"), ("bad2", False, "import"), ("bad3", False, "timeout")]
        for i, (code, success, category) in enumerate(rows):
            con.execute(
                "INSERT INTO code_executions (id, session_id, turn, code, success, error_category, created_at) "
                "VALUES (?, 's', 1, ?, ?, ?, ?)",
                [f"stats-{i}", code, success, category, now],
            )
        con.execute(
            "INSERT INTO code_executions (id, session_id, turn, code, success, created_at) VALUES ('old', 's', 1, 'x', false, ?)",
            [now - timedelta(days=10)],
        )
        calls = UsageLog("s", turn=1)
        calls.call(CallUsage("claude-sonnet-5-5", input_tokens=10, output_tokens=1, cost=0.5), duration_ms=5)
        calls.write(con)
        [[spent_today]] = con.execute(
            "SELECT sum(cost_usd) FROM model_calls WHERE CAST(created_at AS DATE) = CAST(? AS DATE)", [now]
        ).fetchall()  # this call's, and any an earlier test of this module recorded
    status, stats = client.call("GET", f"{API}/stats?days=3")
    assert status == 200
    assert stats["code_runs"] - before["code_runs"] == 4 and stats["failed"] - before["failed"] == 3
    assert stats["failures_by_category"]["import"] == before["failures_by_category"].get("import", 0) + 2
    assert stats["per_day"][-1]["day"] == now.date().isoformat()
    assert stats["per_day"][-1]["cost"] == pytest.approx(spent_today) and spent_today >= 0.5
    for query, message in (("days=week", "`days` must be a whole number, not 'week'."),
                           ("days=0", "`days` must be between 1 and 3650.")):  # fmt: skip
        status, reply = client.call("GET", f"{API}/stats?{query}")
        assert status == 400 and reply["message"] == message


def test_stats_carry_the_stores_size_and_growth_and_the_server_prunes_it_daily(client, server):
    _, store = server
    status, stats = client.call("GET", f"{API}/stats?days=1")
    assert status == 200
    size = stats["store"]
    assert size["bytes"] >= store.path.stat().st_size > 0 and size["per_day"] >= 0
    assert " on disk, growing about " in size["text"]
    assert Path(f"{store.path}.retention.json").exists()  # the server's daily prune ran at its start
    status, reply = client.call("GET", f"{API}/stats?days=-3")
    assert status == 400 and reply["message"] == "`days` must be between 1 and 3650."


# -- one DuckDB file: the server and two kernels at once ---------------------------------------------


KERNEL_WRITES = """
from agent_kernel.store import Store
from agent_kernel.store.state import State
store = Store({db!r})
for n in range({count}):
    with store.connect() as con:
        State(con).set("{name}/" + str(n), n)
"""


def test_the_server_and_two_kernels_share_one_duckdb_file_and_lose_nothing(client, server):
    lab, store = server
    write_notebook(lab.root / "shared.ipynb", "print('ran')")
    count = 60
    kernels = [Kernel({}, cwd=str(lab.root)) for _ in range(2)]
    try:
        ids = [
            k.client.execute(KERNEL_WRITES.format(db=str(store.path), count=count, name=f"kernel{i}"))
            for i, k in enumerate(kernels)
        ]
        created = []
        for n in range(15):  # meanwhile, the API writes and reads
            status, job = client.call("POST", f"{API}/jobs", {"notebook": "shared.ipynb", "cron": "0 4 * * *",
                                                              "name": f"shared-{n}"})  # fmt: skip
            assert status == 201, job
            created.append(job["id"])
            assert client.call("GET", f"{API}/sessions")[0] == 200
        for kernel, msg_id in zip(kernels, ids):
            while True:
                reply = kernel.client.get_shell_msg(timeout=120)
                if reply["parent_header"].get("msg_id") == msg_id:
                    break
            assert reply["content"]["status"] == "ok", reply["content"]
    finally:
        for kernel in kernels:
            kernel.shutdown()
    with store.connect() as con:
        for i in range(2):
            [(n,)] = con.execute("SELECT count(*) FROM agent_state WHERE key LIKE ?", [f"kernel{i}/%"]).fetchall()
            assert n == count
        [(jobs,)] = con.execute(
            f"SELECT count(*) FROM jobs WHERE id IN ({', '.join('?' * len(created))})", created
        ).fetchall()
    assert jobs == len(created)
    for job_id in created:
        client.call("DELETE", f"{API}/jobs/{job_id}")


# -- the scheduler off --------------------------------------------------------------------------------


def test_with_the_scheduler_off_the_api_says_that_no_scheduler_runs(tmp_path):
    config = {**SERVER_CONFIG, "AgentKernelServer": {"scheduler": False}}
    with lab_server(tmp_path, config=config) as lab:
        status, reply = Client(lab).call("GET", f"{API}/jobs")
    assert status == 200 and reply["scheduler"]["running"] is False and reply["scheduler"]["in_server"] is False
    assert reply["scheduler"]["message"].startswith("No scheduler is running: jobs fire only while one runs;")
    assert "`agent-kernel scheduler`" in reply["scheduler"]["message"]
