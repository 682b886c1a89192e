"""The scheduler: fires due slots, starts runs, watches them, records how they end.

One pass (:meth:`Scheduler.tick`), under one short database connection:

1. **lead** — take or renew the leader lease; a scheduler that does not lead does nothing;
2. **reconcile** — a RUNNING run whose owner stopped heartbeating (or is a dead
   process on this host) becomes LOST, and is retried if its job's policy says so;
3. **fire** — every enabled job whose ``next_run_at`` has passed gets a run row per due
   slot (``UNIQUE(job_id, scheduled_for, attempt)``: a slot fires once); slots missed
   while no scheduler ran follow the job's catch-up policy (skip / latest / all, at most
   ``max_catchup``); a slot due while the job has a live run follows its overlap policy
   (allow / forbid -> SKIPPED / queue); ``next_run_at`` moves past now;
4. **dispatch** — QUEUED runs whose time has come are claimed (QUEUED -> RUNNING) up to
   the concurrency cap, one at a time per job unless its overlap is ``allow``.

The connection is closed before any run starts; the executor runs notebooks outside
any database access. :meth:`heartbeat` renews the lease and the runs' heartbeats and
passes on cancellations; :meth:`collect` records finished runs and queues retries
(exponential back-off).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kernel.config import AgentKernel
from agent_kernel.errors import StoreError
from agent_kernel.paths import agent_home
from agent_kernel.scheduler import ScheduleError, leader, notify, pulse
from agent_kernel.scheduler.checks import InvalidJob, check_job
from agent_kernel.scheduler.clock import Clock, SystemClock, iso
from agent_kernel.scheduler.executors import Executor, LocalExecutor
from agent_kernel.scheduler.explain import explain_failed_run
from agent_kernel.scheduler.jobs import Job, Jobs
from agent_kernel.scheduler.records import RunResult
from agent_kernel.scheduler.rundir import RunDir
from agent_kernel.scheduler.runs import CANCELLED, FAILED, LOST, QUEUED, RUNNING, SKIPPED, Outcome, Run, Runs
from agent_kernel.scheduler.spec import build_spec

if TYPE_CHECKING:
    import duckdb

    from agent_kernel.scheduler.notify import Target
    from agent_kernel.store import Store

log = logging.getLogger("agent_kernel.scheduler")

# A claimed run ready to start: the run, its job, and the pulse's prompt (pulse jobs only).
Start = tuple[Run, Job, str | None]


@dataclass
class SchedulerSettings:
    poll_s: float = 5.0  # longest sleep between passes (new jobs are seen within it)
    lease_s: float = 60.0  # leader lease and run heartbeats expire after this
    max_concurrent: int = 2  # runs at once, across all jobs
    grace_s: float = 60.0  # a slot this late still fires on time; later ones are "missed"

    @property
    def heartbeat_s(self) -> float:
        return min(self.lease_s / 4, 5.0)


class Scheduler:
    """Fires and runs jobs from one store. See the module docstring for a pass."""

    def __init__(
        self,
        store: Store,
        *,
        home: str | Path | None = None,
        clock: Clock | None = None,
        executor: Executor | None = None,
        settings: SchedulerSettings | None = None,
    ) -> None:
        self.store = store
        self.home = Path(home) if home is not None else agent_home()
        self.clock = clock or SystemClock()
        self.executor = executor or LocalExecutor()
        self.settings = settings or SchedulerSettings()
        self.worker = leader.new_worker_id()
        self.is_leader = False
        self.leader: leader.Lease | None = None
        self._inflight: dict[str, RunDir] = {}
        self._finished: queue.SimpleQueue[tuple[str, RunResult]] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._last_heartbeat = 0.0
        self._next_due: datetime | None = None
        self._waiting = False  # runs are due but wait for the cap, their job or a retry
        self._deliveries: list[threading.Thread] = []  # notifications being sent

    # -- the pass ------------------------------------------------------------------------

    def tick(self, *, fire: bool = True) -> list[Run]:
        """One pass: lead, reconcile, fire (unless ``fire`` is false), dispatch.

        Returns the runs started. A scheduler that is not the leader does nothing.
        """
        now = self.clock.now()
        with self.store.connect() as con:
            self.is_leader, self.leader = leader.acquire(con, self.worker, now, self.settings.lease_s)
            if not self.is_leader:
                return []
            self._reconcile(con, now)
            if fire:
                self._fire(con, now)
            starts = self._claim(con, now)
            self._next_due = Runs(con).next_due_at()
        return self._start(starts)

    def run_once(self) -> list[Run]:
        """Process what is due now, wait for every run that starts, return them as recorded.

        Retries that fall due while it waits (a zero back-off) run too; slots that come
        due meanwhile are left for the next pass.
        """
        finished: list[Run] = []
        self.tick()
        while self._inflight:
            self._wake.wait(timeout=self.settings.heartbeat_s)
            self._wake.clear()
            self.heartbeat()
            finished += self.collect(release_when_idle=True)
            if self._waiting:
                self.tick(fire=False)
        if self.is_leader:  # hand over at once to a daemon that may be waiting
            with self.store.connect() as con:
                leader.release(con, self.worker)
            self.is_leader = False
        self.wait_for_notifications()
        return finished

    def serve(self, stop: threading.Event, *, drain: threading.Event | None = None) -> None:
        """Run until ``stop`` is set; then wait for in-flight runs (cancel them when
        ``drain`` is set too) and give up the lease."""
        announced: str | bool | None = None  # the leader announced, True once this one leads
        while not stop.is_set():
            try:
                self.tick()
            except StoreError as exc:  # another program holds the file: try again later
                log.warning("%s", exc)
                stop.wait(self.settings.poll_s)
                continue
            if not self.is_leader and self.leader is not None and announced != self.leader.holder:
                announced = self.leader.holder
                log.info("standing by: scheduler %s leads until %s", announced, iso(self.leader.expires_at))
            elif self.is_leader and announced is not True:
                announced = True
                log.info("leading as %s", self.worker)
            self.heartbeat()
            self.collect()
            self._wake.wait(timeout=self._sleep_for())
            self._wake.clear()
        if self._inflight:
            log.info("stopping: waiting for %d running run(s); stop again to cancel them", len(self._inflight))
        while self._inflight:
            if drain is not None and drain.is_set():
                for run_dir in self._inflight.values():
                    run_dir.request_cancel("the scheduler was stopped")
            self._wake.wait(timeout=min(self.settings.heartbeat_s, 0.5))
            self._wake.clear()
            self.heartbeat()
            self.collect()
        with self.store.connect() as con:
            leader.release(con, self.worker)

    def wake(self) -> None:
        """Cut the current sleep short (a new job, a stop request)."""
        self._wake.set()

    # -- a run in the foreground (the service's run_now with wait) --------------------------

    def claim_here(self, con: duckdb.DuckDBPyConnection, run: Run, job: Job) -> Start:
        """Claim ``run`` (just queued in ``con``) for this process, leader or not.

        Called in the connection that queued it, so no other scheduler claims it first.
        """
        now = self.clock.now()
        run_dir = RunDir.for_run(self.home, job.id, run.id)
        claimed = Runs(con).claim(
            run.id, worker=self.worker, executor=self.executor.name,
            run_dir=str(run_dir.path), output_path=str(run_dir.output), now=now,
        )  # fmt: skip
        assert claimed is not None
        return claimed, job, self._pulse_prompt(con, job, now)

    def run_in_foreground(
        self, start: Start, *, on_progress: Callable[[Run, dict[str, Any]], None] | None = None
    ) -> Run:
        """Start a run claimed with :meth:`claim_here`, wait for it, return it as recorded.

        Ctrl-C asks the run to stop and still waits for its end to be recorded.
        """
        run, job, _prompt = start
        run_dir = RunDir.for_run(self.home, job.id, run.id)
        self._start([start])
        try:
            while run.id in self._inflight:
                self._wake.wait(timeout=0.2)
                self._wake.clear()
                if on_progress is not None:
                    on_progress(run, run_dir.read_json(run_dir.progress) or {})
                self.heartbeat()
                self.collect()
        except KeyboardInterrupt:
            run_dir.request_cancel("interrupted from the terminal")
            while run.id in self._inflight:
                self._wake.wait(timeout=0.2)
                self.collect()
        with self.store.connect() as con:
            finished = Runs(con).get(run.id)
        assert finished is not None
        return finished

    # -- heartbeats and results ------------------------------------------------------------

    def heartbeat(self, *, force: bool = False) -> None:
        """Renew the lease and the in-flight runs' heartbeats; pass on cancellations."""
        if not self._inflight or (not force and time.monotonic() - self._last_heartbeat < self.settings.heartbeat_s):
            return  # (with nothing running, each pass renews the lease)
        self._last_heartbeat = time.monotonic()
        progress: dict[str, tuple[int | None, int | None]] = {}
        for run_id, run_dir in list(self._inflight.items()):
            run_dir.touch_heartbeat()
            seen = run_dir.progress_report()
            if seen:
                progress[run_id] = (seen.get("cells_done"), seen.get("cells_total"))
        now = self.clock.now()
        with self.store.connect() as con:
            if self.is_leader:
                self.is_leader, self.leader = leader.acquire(con, self.worker, now, self.settings.lease_s)
            cancelled = Runs(con).heartbeat(self.worker, now, progress)
        for run_id in cancelled:
            if run_id in self._inflight:
                self._inflight[run_id].request_cancel("cancelled by a user")

    def collect(self, *, release_when_idle: bool = False) -> list[Run]:
        """Record the runs that ended since the last call; queue their retries.

        With ``release_when_idle`` (``run_once``), the leader lease is given up in the same
        connection when nothing is left to run.
        """
        ended: list[tuple[str, RunResult]] = []
        while True:
            try:
                ended.append(self._finished.get_nowait())
            except queue.Empty:
                break
        if not ended:
            return []
        now = self.clock.now()
        recorded: list[Run] = []
        with self.store.connect() as con:
            runs = Runs(con)
            for run_id, result in ended:
                self._inflight.pop(run_id, None)
                run = runs.finish(run_id, Outcome.from_result(result), now)
                if run is None:
                    continue
                recorded.append(run)
                self._waiting |= self._retry(con, run, now)
            if release_when_idle and self.is_leader and not self._inflight and not self._waiting:
                leader.release(con, self.worker)
                self.is_leader = False
            jobs = Jobs(con).all_by_id({run.job_id for run in recorded})
        self._notify([(jobs[run.job_id], run) for run in recorded if run.job_id in jobs])
        for run in recorded:
            where = f" -> {run.output_path}" if run.output_path else ""
            log.info("run %s of job %s: %s%s%s", run.id, run.job_id, run.status,
                     f" ({run.error.splitlines()[0]})" if run.error else "", where)  # fmt: skip
        return recorded

    # -- the steps of a pass ---------------------------------------------------------------

    def _reconcile(self, con: duckdb.DuckDBPyConnection, now: datetime) -> None:
        runs = Runs(con)
        horizon = now - timedelta(seconds=self.settings.lease_s)
        for run in runs.running_of_others(self.worker):
            expired = run.heartbeat_at is None or run.heartbeat_at < horizon
            if not (expired or leader.worker_is_dead(run.worker)):
                continue
            last = iso(run.heartbeat_at) or "never"
            lost = runs.finish(
                run.id,
                Outcome(LOST, error=f"Its scheduler ({run.worker}) stopped (last heartbeat {last}); "
                        "what the run did after that is unknown."),
                now,
            )  # fmt: skip
            if lost is not None:
                log.info("run %s of job %s: LOST (its scheduler %s stopped)", run.id, run.job_id, run.worker)
                self._retry(con, lost, now)

    def _fire(self, con: duckdb.DuckDBPyConnection, now: datetime) -> None:
        jobs = Jobs(con)
        for job in jobs.due(now):
            try:
                self._fire_job(con, job, now)
            except Exception as exc:  # noqa: BLE001 - a malformed row must not stop the other jobs
                self._refuse_to_fire(con, job, now, exc)

    def _fire_job(self, con: duckdb.DuckDBPyConnection, job: Job, now: datetime) -> None:
        jobs, runs = Jobs(con), Runs(con)
        assert job.next_run_at is not None
        policy = job.policy
        schedule = job.schedule
        slots, total = schedule.slots(job.next_run_at, now, keep=policy.max_catchup + 1)
        late = [s for s in slots if (now - s).total_seconds() > self.settings.grace_s]
        on_time = [s for s in slots if s not in late]
        if policy.catchup == "all":
            catch_up = late[-policy.max_catchup :]
        elif policy.catchup == "latest" and not on_time:
            catch_up = late[-1:]
        else:
            catch_up = []
        missed = [s for s in late if s not in catch_up]
        busy = bool(runs.active(job.id))
        con.execute("BEGIN")
        try:
            for index, slot in enumerate(missed):
                earlier = total - len(slots) if index == 0 else 0
                note = f" (and {earlier} earlier missed slots)" if earlier else ""
                runs.insert(job.id, slot, cause="catchup", status=SKIPPED,
                            error=f"Missed: no scheduler was running at {iso(slot, job.timezone)}{note}.")  # fmt: skip
            for slot in sorted(catch_up + on_time):
                cause = "catchup" if slot in catch_up else "schedule"
                if busy and policy.overlap == "forbid":
                    runs.insert(job.id, slot, cause=cause, status=SKIPPED,
                                error="Skipped: the job's previous run was still going (overlap: forbid).")  # fmt: skip
                    continue
                fired = runs.insert(job.id, slot, cause=cause, status=QUEUED)
                if fired is not None:
                    log.info("fired job %s (%s) for %s: run %s", job.id, job.name, iso(slot, job.timezone), fired.id)
            jobs.set_next_run(job.id, schedule.next_after(now) if job.cron else None)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def _refuse_to_fire(self, con: duckdb.DuckDBPyConnection, job: Job, now: datetime, exc: Exception) -> None:
        """A job whose schedule or policy cannot be read: one FAILED run says why; it stops firing."""
        runs = Runs(con)
        reason = str(exc).rstrip(".") if isinstance(exc, ScheduleError) else f"{type(exc).__name__}: {exc}"
        slot = job.next_run_at or now
        run = runs.insert(job.id, slot, cause="schedule", status=QUEUED)
        if run is not None:
            message = f"Not run: the job's stored definition is invalid: {reason}. Fix or remove the job."
            runs.finish(run.id, Outcome(FAILED, error=message), now)
        Jobs(con).set_next_run(job.id, None)
        log.warning("job %s (%s) not fired: %s", job.id, job.name, reason)

    def _claim(self, con: duckdb.DuckDBPyConnection, now: datetime) -> list[Start]:
        runs = Runs(con)
        capacity = self.settings.max_concurrent - runs.running_count()
        active = runs.active()
        waiting = [r for r in active if r.status == QUEUED and r.not_before <= now]
        self._waiting = bool(waiting)
        if capacity <= 0 or not waiting:
            return []
        busy_jobs = {r.job_id for r in active if r.status == RUNNING}
        jobs = Jobs(con).all_by_id({r.job_id for r in waiting})
        starts: list[Start] = []
        for run in waiting:
            job = jobs.get(run.job_id)
            if job is None or job.deleted_at is not None:
                runs.finish(run.id, Outcome(CANCELLED, error="The job was removed."), now)
                continue
            if job.overlap != "allow" and job.id in busy_jobs:
                continue
            run_dir = RunDir.for_run(self.home, job.id, run.id)
            claimed = runs.claim(
                run.id, worker=self.worker, executor=self.executor.name,
                run_dir=str(run_dir.path), output_path=str(run_dir.output), now=now,
            )  # fmt: skip
            if claimed is None:
                continue
            busy_jobs.add(job.id)
            starts.append((claimed, job, self._pulse_prompt(con, job, now)))
            if len(starts) >= capacity:
                break
        self._waiting = len(starts) < len(waiting)
        return starts

    def _start(self, starts: list[Start]) -> list[Run]:
        started = []
        for run, job, prompt in starts:
            run_dir = RunDir.for_run(self.home, job.id, run.id)
            self._inflight[run.id] = run_dir
            self._last_heartbeat = time.monotonic()  # claiming it was its first heartbeat
            try:
                check_job(job, home=self.home)
            except InvalidJob as exc:
                log.warning("run %s of job %s (%s) refused: %s", run.id, job.id, job.name, exc)
                self._done(
                    run.id, {"status": FAILED, "error": f"Not run: the job's stored definition is invalid: {exc}"}
                )
                continue
            try:
                spec = build_spec(job, run, run_dir, lease_s=self.settings.lease_s, prompt=prompt)
            except Exception as exc:  # noqa: BLE001 - e.g. the notebook was deleted
                self._done(
                    run.id, {"status": FAILED, "error": f"Could not prepare the run: {type(exc).__name__}: {exc}"}
                )
                continue
            log.info("started run %s of job %s (%s) on %s", run.id, job.id, job.name, self.executor.name)
            self.executor.submit(spec, self._done)
            started.append(run)
        return started

    def _done(self, run_id: str, result: RunResult) -> None:
        self._finished.put((run_id, result))
        self._wake.set()

    def _retry(self, con: duckdb.DuckDBPyConnection, run: Run, now: datetime) -> bool:
        """Queue the next attempt if the job's policy wants one; True if it is due now."""
        job = Jobs(con).get(run.job_id)
        if job is None:
            return False
        policy = job.policy
        if run.status not in policy.retry_on or run.attempt > policy.max_retries:
            return False
        delay = policy.retry_delay(run.attempt)
        retry = Runs(con).insert(
            job.id, run.scheduled_for, cause="retry", attempt=run.attempt + 1,
            not_before=now + timedelta(seconds=delay), parameters=run.parameters,
        )  # fmt: skip
        if retry is None:
            return False
        log.info("run %s %s: retry %d of %d as run %s in %g s", run.id, run.status, run.attempt,
                 policy.max_retries, retry.id, delay)  # fmt: skip
        return delay == 0

    def _pulse_prompt(self, con: duckdb.DuckDBPyConnection, job: Job, now: datetime) -> str | None:
        if job.kind != "pulse":
            return None

        return pulse.prompt(con, job, now)

    def _sleep_for(self) -> float:
        longest = self.settings.poll_s
        if self._inflight:
            longest = min(longest, self.settings.heartbeat_s)
        if self.is_leader and self._next_due is not None:
            until = (self._next_due - self.clock.now()).total_seconds()
            longest = min(longest, max(until, 0.05))
        return max(longest, 0.05)

    def close(self) -> None:
        self.wait_for_notifications()
        self.executor.close()

    # -- notifications -----------------------------------------------------------------------

    def _notify(self, ended: list[tuple[Job, Run]]) -> None:
        """For each ended run, explain a failure when its job asks to, and send the
        notifications its job asks for: in a thread per run (a slow model or service never
        holds up the scheduler); the outcome is recorded on the run."""
        for job, run in ended:
            explaining = bool(job.options.get("explain")) and run.status in notify.FAILED_STATUSES
            targets: list[Target] = []
            if notify.wanted(job, run):
                try:
                    targets = notify.Targets(self.home).for_job(job)
                except Exception as exc:  # noqa: BLE001 - an unreadable file must not stop the scheduler
                    log.warning("run %s: notifications not sent: %s", run.id, exc)
            if not (explaining or targets):
                continue
            thread = threading.Thread(
                target=self._after_run, args=(job, run, targets, explaining),
                name=f"agent-kernel-after-{run.id}", daemon=True,
            )  # fmt: skip
            thread.start()
            self._deliveries.append(thread)
        self._deliveries = [t for t in self._deliveries if t.is_alive()]

    def _after_run(self, job: Job, run: Run, targets: list[Target], explaining: bool) -> None:
        explanation = self._explain(run) if explaining else None
        if not targets:
            return
        title, body = notify.message_of(job, run, explanation)
        problem = notify.deliver(targets, title, body, failed=run.status in notify.FAILED_STATUSES)
        names = ", ".join(t.name for t in targets)
        if problem:
            log.warning("run %s: %s", run.id, problem)
        else:
            log.info("run %s: notified %s", run.id, names)
        try:
            with self.store.connect() as con:
                Runs(con).notified(run.id, names, problem, self.clock.now())
        except Exception as exc:  # noqa: BLE001 - the store busy: the log keeps it
            log.warning("run %s: could not record the notification: %s", run.id, exc)

    def _explain(self, run: Run) -> str | None:
        """Why the run failed (kept on the run), or None when it could not be found out."""
        try:
            return explain_failed_run(self.store, run.id, model=AgentKernel().small_model).text
        except Exception as exc:  # noqa: BLE001 - an explanation is a courtesy: never fails anything
            log.warning("run %s: no explanation: %s", run.id, exc)
            return None

    def wait_for_notifications(self, timeout: float = 60.0) -> None:
        """Let the notifications being sent finish (up to ``timeout`` seconds in all)."""
        ends = time.monotonic() + timeout
        for thread in self._deliveries:
            thread.join(max(ends - time.monotonic(), 0))
        self._deliveries = [t for t in self._deliveries if t.is_alive()]
