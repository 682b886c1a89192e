"""The API's list pages read from a real DuckDB file: only the page's sessions and jobs, in
order, the notebook filter with its sub-sessions, and each job's latest run as the
scheduler finds it."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from agent_kernel.scheduler.clock import ManualClock, to_db
from agent_kernel.scheduler.runs import FAILED, SKIPPED, SUCCEEDED, Runs
from agent_kernel.scheduler.service import JobFields, SchedulerService
from agent_kernel.server import views
from agent_kernel.store import Store
from agent_kernel.store.provenance import Provenance
from agent_kernel.store.sessions import Sessions
from tests.support.scheduling import UTC

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def test_sessions_come_a_page_at_a_time_newest_first_and_by_notebook_with_their_sub_sessions(
    store: Store, tmp_path: Path
) -> None:
    root = tmp_path / "lab"
    notebook = root / "work" / "analysis.ipynb"
    with store.connect() as con:
        sessions = Sessions(con)
        made = [sessions.create(f"s{i}", notebook=str(notebook if i % 2 else root / "other.ipynb")) for i in range(6)]
        child = sessions.create("s1/sub-1", notebook=None, parent_id=made[1].id)
        grandchild = sessions.create("s1/sub-1/sub-1", notebook=None, parent_id=child.id)
        for minutes, session in enumerate([*made, child, grandchild]):
            con.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?",
                [to_db(T0 + timedelta(minutes=minutes)), session.id],
            )

        def names(notebook: str | None = None, **page: int) -> list[str]:
            return [s["name"] for s in views.list_sessions(con, root, notebook, **page)]

        assert names(limit=3) == ["s1/sub-1/sub-1", "s1/sub-1", "s5"]
        assert names(limit=3, offset=3) == ["s4", "s3", "s2"]
        assert names(limit=3, offset=6) == ["s1", "s0"]
        assert names(limit=3, offset=8) == []
        own = ["s1/sub-1/sub-1", "s1/sub-1", "s5", "s3", "s1"]
        assert names("work/analysis.ipynb") == own
        assert names("work/../work/analysis.ipynb", limit=2, offset=1) == own[1:3]
        assert names("work/nothing.ipynb") == []


def test_a_notebook_under_a_symlinked_root_finds_its_sessions_by_either_path(store: Store, tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "work").mkdir(parents=True)
    linked = tmp_path / "linked"
    linked.symlink_to(real)
    with store.connect() as con:
        Sessions(con).create("as resolved", notebook=str(real / "work" / "a.ipynb"))
        Sessions(con).create("as given", notebook=str(linked / "work" / "a.ipynb"))
        found = {s["name"] for s in views.list_sessions(con, linked, "work/a.ipynb")}
    assert found == {"as resolved", "as given"}


def test_jobs_come_a_page_at_a_time_newest_first_each_with_the_latest_run_the_scheduler_sees(
    store: Store, tmp_path: Path
) -> None:
    clock = ManualClock(T0)
    service = SchedulerService(store, clock=clock, home=tmp_path / "home")
    made = []
    for i in range(4):
        fields = JobFields(name=f"job{i}", kind="task", task="Summarise.", timezone="UTC", cron="0 9 * * *")
        made.append(service.create(fields, by=Provenance.person(), created_by="test").job)
        clock.advance(minutes=1)
    with store.connect() as con:
        for i, job in enumerate(made):
            con.execute("UPDATE jobs SET created_at = ? WHERE id = ?", [to_db(T0 + timedelta(minutes=i)), job.id])
        runs = Runs(con)
        # job0: a later slot wins over a later insert; job1: the retry (attempt 2) of one slot;
        # job2: a skipped firing is not its latest run; job3: no run at all.
        latest0 = runs.insert(made[0].id, T0 + timedelta(days=2), cause="manual", status=SUCCEEDED)
        runs.insert(made[0].id, T0 + timedelta(days=1), cause="manual", status=FAILED)
        runs.insert(made[1].id, T0, cause="schedule", status=FAILED)
        latest1 = runs.insert(made[1].id, T0, cause="retry", attempt=2)
        latest2 = runs.insert(made[2].id, T0, cause="schedule", status=SUCCEEDED)
        runs.insert(made[2].id, T0 + timedelta(days=1), cause="schedule", status=SKIPPED)
        assert latest0 and latest1 and latest2

        first = views.list_jobs(con, tmp_path, limit=2)
        rest = views.list_jobs(con, tmp_path, limit=2, offset=2)
        assert views.list_jobs(con, tmp_path, offset=4) == []
    assert [j["name"] for j in first + rest] == ["job3", "job2", "job1", "job0"]
    last = {j["name"]: j["last_run_id"] for j in first + rest}
    assert last == {"job3": None, "job2": latest2.id, "job1": latest1.id, "job0": latest0.id}
    everyone = {state.job.name: state for state in service.jobs()}
    for shown in first + rest:  # the same JSON as from the scheduler service's own latest runs
        state = everyone[shown["name"]]
        assert shown == views.job_json(state.job, state.last, tmp_path)
