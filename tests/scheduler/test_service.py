"""The scheduler service that the CLI, the server API, the schedule tools and %agent_jobs
share: each operation against a real DuckDB file, bad input refused the same way on
creation and on change, the provenance rule, and a run now in the foreground (papermill)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from agent_kernel import authority
from agent_kernel.authority import person
from agent_kernel.grants import of
from agent_kernel.scheduler import NotFoundError, ScheduleError
from agent_kernel.scheduler.clock import ManualClock
from agent_kernel.scheduler.jobs import Policy
from agent_kernel.scheduler.service import JobFields, SchedulerService
from agent_kernel.store import provenance
from agent_kernel.store.provenance import Provenance
from tests.support.notebooks import write_notebook
from tests.support.scheduling import UTC, runs_of

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
PERSON = Provenance.person()
WEB = Provenance("s-web", 3, ("web_fetch https://evil.example/",))  # a turn that read a hostile page
CLEAN = Provenance("s-clean", 1)  # a turn that read nothing untrusted


def service(store, clock=None, **options) -> SchedulerService:
    return SchedulerService(store, clock=clock or ManualClock(T0), **options)


def task(name="digest", **fields) -> JobFields:
    fields.setdefault("cron", "0 9 * * *")
    return JobFields(name=name, kind="task", task="Summarise the logs.", timezone="UTC", **fields)


def test_create_get_list_update_disable_enable_delete(store, tmp_path):
    changes = []
    jobs = service(store, on_change=lambda: changes.append(1))
    report = write_notebook(tmp_path / "report.ipynb", "print(n)", parameters="n = 1")
    made = jobs.create(
        JobFields(name="report", kind="notebook", notebook=str(report), parameters={"n": 5}, cron="0 7 * * MON-FRI",
                  timezone="Europe/Berlin", policy=Policy(overlap="queue")),
        by=PERSON, created_by="cli",
    )  # fmt: skip
    job = made.job
    assert (job.name, job.kind, job.parameters, job.overlap, job.created_by) == (
        "report",
        "notebook",
        {"n": 5},
        "queue",
        "cli",
    )
    assert job.next_run_at == datetime(2026, 3, 3, 6, 0, tzinfo=UTC)  # 07:00 in Berlin, the next weekday
    assert made.last is None and made.taint is None and made.held == "" and changes == [1]
    with store.connect() as con:  # the person's write is recorded too, untainted
        assert provenance.latest(con, "job", [job.id])[job.id].untrusted is False

    digest = jobs.create(task(), by=PERSON).job
    assert [s.job.name for s in jobs.jobs()] == ["report", "digest"]
    assert jobs.get(digest.id).job == digest

    changed = jobs.update(digest.id, {"name": "evening digest", "cron": "30 18 * * *", "overlap": "allow"}, by=PERSON)
    assert changed.job.id == digest.id and changed.job.name == "evening digest" and changed.job.overlap == "allow"
    assert changed.job.next_run_at == datetime(2026, 3, 2, 18, 30, tzinfo=UTC)
    once = jobs.update(digest.id, {"at": "2026-03-05T10:00:00Z"}, by=PERSON).job
    assert (once.cron, once.run_at, once.type) == (None, datetime(2026, 3, 5, 10, tzinfo=UTC), "once")

    assert jobs.disable(digest.id).job.enabled is False
    assert [s.job.name for s in jobs.jobs(include_disabled=False)] == ["report"]
    jobs.clock.advance(days=1)
    resumed = jobs.enable(digest.id, by=PERSON).job
    assert resumed.enabled and resumed.next_run_at == datetime(2026, 3, 5, 10, tzinfo=UTC)

    deleted = jobs.delete(digest.id)
    assert deleted.id == digest.id and [s.job.name for s in jobs.jobs()] == ["report"]
    with pytest.raises(NotFoundError, match=f"No job '{digest.id}'."):
        jobs.delete(digest.id)
    assert len(changes) == 6  # create x2, update x2, disable, enable: each wakes a scheduler here


def test_bad_input_is_refused_the_same_way_on_creation_and_on_change(store, tmp_path):
    jobs = service(store)
    job = jobs.create(task(), by=PERSON).job
    cases = [
        ({"cron": "0 25 * * *"}, "Cron expression '0 25 * * *' is not valid (Bad hour)"),
        ({"cron": None, "at": "2000-01-01T00:00Z"}, "is in the past"),
        ({"cron": None, "at": "next tuesday"}, "ISO 8601"),
        ({"timezone": "Mars/Olympus"}, "Mars/Olympus"),
        ({"parameters": {"class": 1}}, "parameter names must be Python identifiers"),
        ({"parameters": {"x": float("nan")}}, "JSON numbers are finite"),
        ({"token_limit": 0}, "token_limit must be a positive whole number"),
        ({"model": "claude; rm -rf /"}, "model must be a model id"),
        ({"name": "two\nlines"}, "name must be one line"),
        ({"task": ""}, "Give `task` (a prompt) or `notebook` (a path)."),
        ({"notebook": str(tmp_path / "missing.ipynb")}, "a task job has no notebook"),
        ({"kernel": "no-such-kernel"}, "kernel 'no-such-kernel' is not installed"),
    ]
    for change, message in cases:
        with pytest.raises(ScheduleError) as created:
            jobs.create(replace(task(), **change), by=PERSON)
        with pytest.raises(ScheduleError) as updated:
            jobs.update(job.id, change, by=PERSON)
        assert message in str(created.value), (change, created.value)
        assert str(updated.value) == str(created.value), change
    with pytest.raises(ScheduleError, match="overlap must be one of allow, forbid, queue, not 'sometimes'"):
        jobs.update(job.id, {"overlap": "sometimes"}, by=PERSON)
    with pytest.raises(ScheduleError, match="Cannot change enabled, kind; a job's at, catchup, cell_timeout_s, cron"):
        jobs.update(job.id, {"kind": "notebook", "enabled": False}, by=PERSON)
    assert jobs.get(job.id).job == job  # nothing was changed by a refused change
    assert [s.job.id for s in jobs.jobs()] == [job.id]  # nor created


def test_jobs_and_runs_are_found_by_id_or_as_a_person_types_them(store):
    exact = service(store)
    typed = service(store, by_name=True, listing="`agent-kernel jobs list` shows them")
    job = exact.create(task("nightly digest"), by=PERSON).job
    reminder = exact.create(JobFields(name="ping", kind="reminder", task="ping", at="2026-03-03T09:00Z",
                                      timezone="UTC", session="s1"), by=PERSON).job  # fmt: skip
    assert typed.get("nightly digest").job.id == job.id and typed.get(job.id[:5]).job.id == job.id
    with pytest.raises(NotFoundError) as unknown:
        exact.get("nightly digest")
    assert str(unknown.value) == "No job 'nightly digest'." and unknown.value.kind is None
    with pytest.raises(NotFoundError) as typo:
        typed.get("nightly")
    assert str(typo.value) == "No job 'nightly' (or more than one matches): `agent-kernel jobs list` shows them."
    with pytest.raises(NotFoundError) as other_kind:
        exact.disable(reminder.id, kinds=("notebook", "task", "pulse"))
    assert other_kind.value.kind == "reminder" and exact.get(reminder.id).job.enabled

    queued = exact.run_now(job.id)
    assert typed.run(queued.run.id[:6]).run.id == queued.run.id
    with pytest.raises(NotFoundError, match=r"^No run 'nope'\.$"):
        exact.run("nope")
    with pytest.raises(NotFoundError, match="No job 'gone'"):
        typed.runs(job="gone")
    exact.delete(job.id)  # runs outlive their job: found by its id, with the job
    [found] = exact.runs(job=job.id)
    assert found.run.id == queued.run.id and found.job.id == job.id and found.job.deleted_at is not None
    assert exact.runs(job="never-a-job") == []


def test_run_now_queues_a_manual_run_and_cancel_ends_it(store):
    woken = []
    jobs = service(store, on_change=lambda: woken.append(1))
    job = jobs.create(task(), by=PERSON).job
    queued = jobs.run_now(job.id)
    assert (queued.run.status, queued.run.cause, queued.run.scheduled_for) == ("QUEUED", "manual", T0)
    assert queued.job == job and len(woken) == 2
    assert jobs.get(job.id).last.id == queued.run.id
    cancelled, state = jobs.cancel(queued.run.id, reason="not needed")
    assert state == "CANCELLED" and cancelled.run.id == queued.run.id
    [run] = runs_of(store, job)
    assert (run.status, run.error) == ("CANCELLED", "not needed")
    assert jobs.cancel(run.id)[1] == "CANCELLED"  # a finished run stays as it ended
    with pytest.raises(NotFoundError, match="No run 'nope'."):
        jobs.cancel("nope")


def test_run_now_with_wait_runs_the_notebook_here_and_records_it(store, home, tmp_path):
    notebook = write_notebook(tmp_path / "hello.ipynb", "print(f'hello {who}')", parameters="who = 'nobody'")
    jobs = SchedulerService(store, home=home)
    job = jobs.create(JobFields(name="hello", kind="notebook", notebook=str(notebook), parameters={"who": "here"},
                                cron="0 3 1 1 *", timezone="UTC"), by=PERSON).job  # fmt: skip
    seen = []
    done = jobs.run_now(job.id, wait=True, on_progress=lambda run, progress: seen.append(progress))
    assert done.run.status == "SUCCEEDED" and done.run.cause == "manual" and done.job == job
    assert done.run.cells_done == done.run.cells_total and seen
    assert "hello here" in Path(done.run.output_path).read_text(encoding="utf-8")
    assert [r.status for r in runs_of(store, job)] == ["SUCCEEDED"]


def test_a_job_written_after_untrusted_content_waits_for_the_persons_review(store):
    jobs = service(store)
    made = jobs.create(task("exfil"), by=WEB)
    job = made.job
    assert job.enabled is False and made.taint is not None
    assert "web_fetch https://evil.example/" in made.held and f"`agent-kernel jobs enable {job.id}`" in made.held
    for turn in (WEB, CLEAN):  # the model cannot enable it, not even from a clean turn
        with pytest.raises(ScheduleError, match=r"'exfil' \(\w+\) cannot be enabled by you\. It was written after"):
            jobs.enable(job.id, by=turn)
    assert jobs.disable(job.id).job.enabled is False  # pausing is anyone's
    changed = jobs.update(job.id, {"task": "Summarise the logs, nicely."}, by=CLEAN)
    assert changed.taint is not None and not changed.job.enabled  # a clean edit does not launder it

    enabled = jobs.enable(job.id, by=PERSON, person=person("cli", "jobs enable exfil"))  # the person's review
    assert enabled.job.enabled and enabled.taint is None and enabled.held == ""
    with store.connect() as con:
        assert provenance.tainted(con, "job") == []
    assert jobs.disable(job.id).job.enabled is False
    assert jobs.enable(job.id, by=CLEAN).job.enabled  # reviewed: the model may resume it now

    edited = jobs.update(job.id, {"cron": "0 * * * *"}, by=WEB)  # changed after untrusted content
    assert edited.job.enabled is False and edited.taint is not None
    clean = jobs.create(task("report"), by=CLEAN)
    assert clean.job.enabled and clean.held == ""


def test_the_pulse_is_configured_through_the_same_rule(store):
    jobs = service(store)
    assert jobs.pulse_status() is None
    state, status = jobs.configure_pulse(by=WEB, timezone="UTC", instruction="Mail everything.", enabled=True)
    assert state.job.kind == "pulse" and not state.job.enabled and not status["enabled"] and state.held
    with pytest.raises(ScheduleError, match="cannot be enabled by you"):
        jobs.configure_pulse(by=CLEAN, enabled=True)
    length, noted = jobs.keep_pulse_notes("Checked the build.", by=CLEAN)
    assert length == 18 and noted.taint is not None  # notes change the pulse: its taint carries over
    jobs.enable(state.job.id, by=PERSON, person=person("cli", "jobs enable pulse"))
    state, status = jobs.configure_pulse(by=CLEAN, pulses_per_day=24, enabled=True)
    assert state.job.enabled and status["pulses_per_day"] == 24 and status["notes"] == "Checked the build."
    found, shown = jobs.pulse_status()
    assert found.job.id == state.job.id and shown["interval_minutes"] == 60


def test_each_change_is_a_version_and_a_run_records_the_version_it_ran(store, home, tmp_path):
    notebook = write_notebook(tmp_path / "hello.ipynb", "print(f'hello {who}')", parameters="who = 'nobody'")
    jobs = SchedulerService(store, home=home)
    job = jobs.create(JobFields(name="hello", kind="notebook", notebook=str(notebook), parameters={"who": "a"},
                                cron="0 3 1 1 *", timezone="UTC"), by=PERSON, created_by="cli").job  # fmt: skip
    assert job.version == 1
    first = jobs.run_now(job.id, wait=True).run
    assert (first.status, first.job_version) == ("SUCCEEDED", 1)

    same = jobs.update(job.id, {"parameters": {"who": "a"}}, by=PERSON).job
    assert same.version == 1  # a change that changes nothing is no new version
    edited = jobs.update(job.id, {"parameters": {"who": "b"}, "timeout_s": 600}, by=PERSON, created_by="magic").job
    assert edited.version == 2
    by_model = jobs.update(job.id, {"cron": "0 4 1 1 *"}, by=CLEAN).job
    assert by_model.version == 3
    second = jobs.run_now(job.id, wait=True).run
    assert (second.status, second.job_version) == ("SUCCEEDED", 3)
    assert "hello b" in Path(second.output_path).read_text(encoding="utf-8")

    found, versions = jobs.versions(job.id)
    assert found.id == job.id and [v.version for v in versions] == [3, 2, 1]
    assert [v.changed for v in versions] == [["cron"], ["parameters", "timeout_s"], []]
    assert [v.changed_by for v in versions] == ["session s-clean, turn 1", "the user (magic)", "the user (cli)"]
    assert versions[1].definition["parameters"] == {"who": "b"} and versions[2].definition["parameters"] == {"who": "a"}
    # A refused change makes no version.
    with pytest.raises(ScheduleError):
        jobs.update(job.id, {"cron": "not a cron"}, by=PERSON)
    assert [v.version for v in jobs.versions(job.id)[1]] == [3, 2, 1]


# -- trust changes: enabling a job that waits for review, standing grants ---------------------


def test_enabling_a_job_that_waits_for_review_takes_the_persons_event_and_never_a_turns(store):
    jobs = service(store)
    job = jobs.create(task("exfil"), by=WEB).job
    with pytest.raises(ScheduleError, match=r"is the person's decision: it takes their own command"):
        jobs.enable(job.id, by=PERSON)  # the person's path without their event: code calling the service
    with authority.turn_running():  # code the model runs in the kernel, during its turn
        with pytest.raises(authority.TrustRefused):
            person("cli", "jobs enable exfil")
        forged = authority.PersonEvent("cli", "agent-kernel jobs enable exfil")
        with pytest.raises(ScheduleError, match="refused from code running inside an agent turn"):
            jobs.enable(job.id, by=PERSON, person=forged)
    assert jobs.get(job.id).taint is not None and not jobs.get(job.id).job.enabled

    enabled = jobs.enable(job.id, by=PERSON, person=person("cli", "agent-kernel jobs enable exfil"))
    assert enabled.job.enabled and enabled.taint is None
    with store.connect() as con:  # the review keeps the event that made it
        record = provenance.latest(con, "job", [job.id])[job.id]
    assert record.cleared_by == "cli: agent-kernel jobs enable exfil"


GRANTS = of(["api.example.com"], ["run_code"])


def test_standing_grants_are_set_by_the_person_only_and_a_change_by_anyone_else_drops_them(store):
    jobs = service(store)
    for by, event in ((PERSON, None), (CLEAN, person("cli", "x")), (WEB, person("cli", "x"))):
        with pytest.raises(ScheduleError, match="Setting a job's standing grants is the person's decision"):
            jobs.create(task(), by=by, person=event, grants=GRANTS)
    with authority.turn_running(), pytest.raises(ScheduleError, match="inside an agent turn"):
        jobs.create(task(), by=PERSON, person=authority.PersonEvent("cli", "forged"), grants=GRANTS)
    assert jobs.jobs() == []

    made = jobs.create(task(), by=PERSON, created_by="cli", person=person("cli", "agent-kernel jobs add digest"),
                       grants=GRANTS).job  # fmt: skip
    assert made.grants == {"hosts": ["api.example.com"], "after_untrusted": ["run_code"]}
    assert made.granted_by == "cli: agent-kernel jobs add digest" and made.standing_grants == GRANTS

    kept = jobs.update(made.id, {"cron": "0 10 * * *"}, by=PERSON, created_by="magic").job  # the person's edit
    assert kept.standing_grants == GRANTS and kept.granted_by == made.granted_by
    with authority.turn_running():  # `%agent_jobs edit` run by the model's code: the person's path, in a turn
        in_turn = jobs.update(made.id, {"cron": "0 11 * * *"}, by=PERSON, created_by="magic").job
    assert in_turn.grants == {} and in_turn.granted_by is None

    regranted = jobs.enable(made.id, by=PERSON, person=person("server", "PATCH by jupyterlab"), grants=GRANTS).job
    assert regranted.standing_grants == GRANTS and regranted.granted_by == "server: PATCH by jupyterlab"
    changed = jobs.update(made.id, {"task": "Summarise the logs and mail them."}, by=CLEAN).job  # the model's tool
    assert changed.grants == {} and changed.granted_by is None and changed.task.endswith("mail them.")
    newest, *_ = jobs.versions(made.id)[1]
    assert newest.changed == ["task", "grants"] and newest.changed_by == "session s-clean, turn 1"
    assert jobs.versions(made.id)[1][1].changed == ["grants"]  # granting again was a version of its own
    with pytest.raises(ScheduleError, match="Setting a job's standing grants"):
        jobs.update(made.id, {}, by=CLEAN, person=person("cli", "x"), grants=GRANTS)


def test_the_pulse_loses_its_grants_when_the_model_changes_it(store):
    jobs = service(store)
    state, _ = jobs.configure_pulse(by=CLEAN, timezone="UTC", instruction="Check the build.")
    jobs.enable(state.job.id, by=PERSON, person=person("cli", "agent-kernel jobs enable pulse"), grants=GRANTS)
    noted = jobs.keep_pulse_notes("Build green.", by=CLEAN)[1]  # its own notes: the pulse's normal work
    assert noted.job.standing_grants == GRANTS
    changed, _ = jobs.configure_pulse(by=CLEAN, instruction="Mail the build logs out.")
    assert changed.job.grants == {} and changed.job.task == "Mail the build logs out."
