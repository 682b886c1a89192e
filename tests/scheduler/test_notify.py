"""Notifications of scheduled runs through apprise: a local webhook receives them, a
service that is down leaves the run as it ended, and no credential is kept anywhere but
the targets file."""

from __future__ import annotations

import json
import os
import stat
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from agent_kernel.cli import main
from agent_kernel.scheduler import ScheduleError, notify
from agent_kernel.scheduler.clock import ManualClock
from agent_kernel.scheduler.service import JobFields, SchedulerService
from agent_kernel.store.provenance import Provenance
from tests.support.notebooks import write_notebook
from tests.support.scheduling import UTC, runs_of, scheduler
from tests.support.websites import Receiver

PASSWORD = "s3cr3t-hook-pass-9Zq"


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_failing_job_notifies_a_webhook_and_no_credential_is_kept_elsewhere(
    capsys, store, home, receiver, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    write_notebook(
        tmp_path / "daily.ipynb", "rows = 0\nassert rows > 0, f'no rows for {region}'", parameters="region = 'north'"
    )
    url = f"json://ops:{PASSWORD}@127.0.0.1:{receiver.port}/hook"
    code, out, _ = cli(capsys, "notify", "add", url, "--name", "ops-hook")
    assert code == 0 and "Added ops-hook: json://ops:****@127.0.0.1" in out and PASSWORD not in out
    assert stat.S_IMODE(os.stat(home / "notify.json").st_mode) == 0o600
    now = datetime.now(UTC).replace(microsecond=0)
    code, out, err = cli(capsys, "jobs", "add", "daily.ipynb", "--at", (now + timedelta(minutes=1)).isoformat(),
                         "--notify", "ops-hook", "-p", "region=south")  # fmt: skip
    assert code == 0, err
    listed = cli(capsys, "notify", "list")[1]
    assert "ops-hook" in listed and PASSWORD not in listed

    [run] = scheduler(store, home, ManualClock(now + timedelta(minutes=1, seconds=1))).run_once()
    assert run.status == "FAILED"
    [posted] = receiver.received
    assert posted["path"] == "/hook" and posted["auth"]  # the credential went to the service only
    assert posted["body"]["title"].endswith(": FAILED") and posted["body"]["type"] == "failure"
    assert "AssertionError: no rows for south" in posted["body"]["message"]
    [recorded] = runs_of(store)
    assert (recorded.notified, recorded.notify_error) == ("ops-hook", None)
    # The credential is in the targets file only: not in the store, the run's files, the job.
    with store.connect() as con:
        tables = [t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        for table in tables:
            dumped = json.dumps(con.execute(f'SELECT * FROM "{table}"').fetchall(), default=str)
            assert PASSWORD not in dumped, table
    for path in Path(recorded.run_dir).rglob("*"):
        if path.is_file():
            assert PASSWORD not in path.read_text(encoding="utf-8", errors="replace"), path
    [job] = json.loads(cli(capsys, "jobs", "list", "--all", "--json")[1])
    assert PASSWORD not in json.dumps(job)


def test_a_service_that_is_down_leaves_the_run_as_it_ended_and_records_why(store, home, tmp_path):
    notebook = write_notebook(tmp_path / "ok.ipynb", "print('fine')")
    targets = notify.Targets(home)
    down = targets.add(f"json://ops:{PASSWORD}@127.0.0.1:9/hook", name="down", default=True)  # nothing listens on 9
    now = datetime.now(UTC).replace(microsecond=0)
    from agent_kernel.scheduler.jobs import Jobs, new_job

    with store.connect() as con:
        job = Jobs(con).add(new_job(name="ok", kind="notebook", notebook=str(notebook), timezone="UTC",
                                    at=now + timedelta(minutes=1), now=now, options={"notify": {"on": "always"}}))  # fmt: skip
    [run] = scheduler(store, home, ManualClock(now + timedelta(minutes=1, seconds=1))).run_once()
    assert run.status == "SUCCEEDED"
    [recorded] = runs_of(store, job)
    assert recorded.status == "SUCCEEDED" and recorded.notified == down.name
    assert recorded.notify_error.startswith("Not delivered to down") and PASSWORD not in recorded.notify_error


def test_targets_and_job_settings_are_checked(store, home, tmp_path):
    targets = notify.Targets(home)
    for url, message in [
        ("", "1 to 2000 characters"),
        ("nosuchservice://x", "is not a notification URL apprise knows"),
        ("json://" + "x" * 3000, "1 to 2000 characters"),
    ]:
        with pytest.raises(ScheduleError, match=message):
            targets.add(url)
    with pytest.raises(ScheduleError, match="A target's name is letters"):
        targets.add("ntfy://topic", name="bad name")
    with pytest.raises(ScheduleError, match="No notification target 'nope'"):
        notify.setting(home, ["nope"], None, None)
    made = (
        SchedulerService(store)
        .create(JobFields(name="t", task="x", cron="0 9 * * *", timezone="UTC"), by=Provenance.person())
        .job
    )
    for bad, message in [
        ({"targets": "ops"}, "notify targets are at most 50 target names"),
        ({"targets": ["ops"], "on": "sometimes"}, "notify on must be one of failure, success, always"),
        ({"colour": 1}, "notify must be"),
    ]:
        with pytest.raises(ScheduleError, match=message):
            SchedulerService(store).update(made.id, {"notify": bad}, by=Provenance.person())


def test_the_agent_notifies_the_default_targets_within_limits(shell_agent, scripted_model, home, receiver):
    from agent_kernel.testing import call, reply, say, tool_use
    from tests.support.calls import decoded

    shell_agent.agent.config.tool_groups = ["code", "schedule"]
    scripted_model.add(call("notify", message="The backfill finished."), say("Told you."))
    shell_agent.ok("tell me when it is done")
    refused = decoded(scripted_model.requests[-1]["messages"][-1]["content"][0])
    assert refused["is_error"] and "no default notification target" in refused["text"]

    notify.Targets(home).add(f"json://ops:{PASSWORD}@127.0.0.1:{receiver.port}/agent", name="me", default=True)
    uses = [tool_use("notify", {"message": f"step {n} done", "title": "Backfill"}) for n in range(4)]
    scripted_model.add(reply(*uses), say("Told you."))
    shell_agent.ok("tell me at each step")
    results = [decoded(b) for b in scripted_model.requests[-1]["messages"][-1]["content"]]
    assert results[:3] == [{"sent": True, "to": ["me"]}] * 3
    assert results[3]["is_error"] and "At most 3 notifications per turn" in results[3]["text"]
    assert [r["body"]["message"] for r in receiver.received] == ["step 0 done", "step 1 done", "step 2 done"]
    assert PASSWORD not in json.dumps(scripted_model.requests)


def test_a_reminder_is_always_heard_and_says_what_it_was_about():
    from agent_kernel.scheduler.jobs import new_job
    from agent_kernel.scheduler.runs import Run

    now = datetime.now(UTC)
    reminder = new_job(name="reminder: totals", kind="reminder", timezone="UTC", at=now + timedelta(hours=1), now=now,
                       task="(A reminder you set earlier in this session.) Check the totals.", session="sales")  # fmt: skip
    run = Run("r1", reminder.id, now, 1, "schedule", "SUCCEEDED", now, now)
    assert notify.wanted(reminder, run)
    title, body = notify.message_of(reminder, run)
    assert title == "Reminder" and body.startswith("Reminder: Check the totals.") and "session sales" in body


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("ghp_" + "Xa81Lq2Nw7Vc3Zt6Hy5Km0Bd4Rf9Gs1Jp2Ue", "That value"),  # a token pasted in place of a URL
        ("sk-live-Zq81hunter22://x", "That value"),  # not a scheme apprise knows: the part before :// may be anything
        ("token=s3cr3t-hook-pass-9Zq", "That value"),
        (f"mailto://ops:{PASSWORD}@example.com trailing", "mailto://…"),  # a scheme apprise knows, and no more
    ],
)
def test_notify_add_shows_no_part_of_a_value_that_is_not_a_url_but_a_known_scheme(home, value, shown):
    """The console script, so whatever anything in it writes (apprise's log too) is read."""
    from tests.support.scheduling import agent_kernel_cli

    out, err = agent_kernel_cli("notify", "add", value).communicate(timeout=60)
    assert f"{shown} is not a notification URL apprise knows" in err, err
    secret_parts = [value, value.split("://")[0], PASSWORD, "hunter22", value[4:20]]
    assert [part for part in secret_parts if part in out + err and part != "mailto"] == []
    assert not (home / "notify.json").exists()
