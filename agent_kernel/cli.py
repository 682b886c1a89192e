"""``agent-kernel``: the demo, the scheduler daemon and the jobs and runs it keeps.

::

    agent-kernel demo [--out DIR]
    agent-kernel lab [--offline] [--port N] [--no-browser] [DIR] [-- JUPYTER-OPTION ...]
    agent-kernel scheduler [--once] [--executor local|dask] [--address ADDR] ...
    agent-kernel jobs list [--all] [--json]
    agent-kernel jobs add NOTEBOOK | --task PROMPT  (--at TIME | --cron EXPR) [options]
                          [--allow-host HOST] [--allow-after-untrusted TOOL]
    agent-kernel jobs run ID [--queue]
    agent-kernel jobs enable ID [--allow-host HOST] [--allow-after-untrusted TOOL] [--no-grants]
    agent-kernel jobs disable|remove ID
    agent-kernel runs [--job ID] [--status S] [--limit N] [--json] [--cancel RUN]
    agent-kernel export SESSION OUT.ipynb [--schedule CRON] [--no-verify] [--yes] [options]
    agent-kernel cells list|clear NOTEBOOK [--cell ID]
    agent-kernel key set|status|forget
    agent-kernel store stats [--json] | prune [--older-than DAYS] [--dry-run] | vacuum

The database is ``AGENT_KERNEL_DB`` (or ``--db``); run directories live under
``AGENT_KERNEL_HOME``. Jobs are named by id, a unique id prefix, or their name.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import datetime

    from agent_kernel.authority import PersonEvent
    from agent_kernel.grants import StandingGrants
    from agent_kernel.scheduler.jobs import Job
    from agent_kernel.scheduler.runs import Run
    from agent_kernel.scheduler.service import SchedulerService
    from agent_kernel.store import Store


def main(argv: list[str] | None = None) -> int:
    from agent_kernel.scheduler import ScheduleError
    from agent_kernel.scheduler.lean_imports import refuse_unused_slow_imports

    refuse_unused_slow_imports()

    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        (getattr(args, "help_of", None) or parser).print_help()
        return 2
    try:
        return int(args.handler(args) or 0)
    except ScheduleError as exc:
        print(f"agent-kernel: {exc}", file=sys.stderr)
        return 2


# -- the demo -----------------------------------------------------------------------------------


def _demo(args: argparse.Namespace) -> int:
    from agent_kernel.demo import demo

    return demo(None, Path(args.out))


# -- the daemon ---------------------------------------------------------------------------------


def _scheduler(args: argparse.Namespace) -> int:
    from agent_kernel.scheduler.daemon import Scheduler, SchedulerSettings
    from agent_kernel.scheduler.executors import make_executor

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    store = _store(args)
    executor = make_executor(args.executor, address=args.address, n_workers=args.workers)
    if args.executor == "dask":
        logging.getLogger("agent_kernel.scheduler").info("Dask executor: scheduler at %s", executor.address)  # type: ignore[attr-defined]
    settings = SchedulerSettings(
        poll_s=args.poll, lease_s=args.lease, max_concurrent=args.max_concurrent, grace_s=args.grace
    )
    scheduler = Scheduler(store, executor=executor, settings=settings)
    try:
        if args.once:
            finished = scheduler.run_once()
            if scheduler.leader is not None and scheduler.leader.holder != scheduler.worker:
                print(f"Another scheduler ({scheduler.leader.holder}) is running; it handles what is due.")
                return 0
            from agent_kernel.scheduler.jobs import Jobs

            with store.connect() as con:
                jobs = Jobs(con).all_by_id({run.job_id for run in finished})
            print(
                f"{len(finished)} run(s) finished"
                + "".join(f"\n  {_run_line(r, jobs.get(r.job_id))}" for r in finished)
            )
            return 0
        stop, drain = threading.Event(), threading.Event()

        def on_signal(signum: int, frame: Any) -> None:
            (drain if stop.is_set() else stop).set()
            scheduler.wake()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        _keep_store_tidy(store, stop)
        logging.getLogger("agent_kernel.scheduler").info(
            "scheduler %s on %s (%s executor, up to %d at once); Ctrl-C stops it",
            scheduler.worker, store.path, executor.name, settings.max_concurrent,
        )  # fmt: skip
        scheduler.serve(stop, drain=drain)
        return 0
    finally:
        scheduler.close()


def _keep_store_tidy(store: Store, stop: threading.Event) -> None:
    """Prune the store once a day while the daemon runs (AgentKernel.retention_full_days)."""
    from agent_kernel.config import AgentKernel
    from agent_kernel.store.retention import tidy_daily

    days = AgentKernel().retention_full_days
    threading.Thread(target=tidy_daily, args=(store, days, stop), name="store-retention", daemon=True).start()


# -- jobs ---------------------------------------------------------------------------------------


def _jobs_list(args: argparse.Namespace) -> int:
    states = _service(args).jobs(include_disabled=args.all)
    if args.json:
        print(json.dumps([_job_json(state.job, state.last) for state in states], indent=2))
        return 0
    from agent_kernel.display.text_tables import Table

    rows = [_job_row(state.job, state.last) for state in states]
    print(repr(Table(["id", "name", "kind", "schedule", "next run", "last run", "status"], rows,
                     note="" if rows else "No jobs: `agent-kernel jobs add` creates one.")))  # fmt: skip
    granted = [f"{state.job.id} {state.job.name}: {_grants_line(state.job)}" for state in states if state.job.grants]
    if granted:
        print("Standing grants (what unattended runs may do after reading untrusted content):")
        print("\n".join(f"  {line}" for line in granted))
    return 0


def _jobs_add(args: argparse.Namespace) -> int:
    from agent_kernel.scheduler.clock import iso
    from agent_kernel.scheduler.jobs import Policy
    from agent_kernel.scheduler.service import JobFields
    from agent_kernel.store.provenance import Provenance

    if bool(args.notebook) == bool(args.task):
        print("agent-kernel: give a NOTEBOOK or --task PROMPT (one of them).", file=sys.stderr)
        return 2
    policy = Policy(
        catchup=args.catchup,
        max_catchup=args.max_catchup,
        overlap=args.overlap,
        timeout_s=args.timeout,
        cell_timeout_s=args.cell_timeout,
        max_retries=args.retries,
        retry_on=tuple(s.strip().upper() for s in args.retry_on.split(",") if s.strip()),
        retry_delay_s=args.retry_delay,
    )
    name = args.name or (Path(args.notebook).stem if args.notebook else " ".join(args.task.split())[:40])
    fields = JobFields(
        name=name,
        kind="notebook" if args.notebook else "task",
        timezone=args.timezone,
        notebook=args.notebook,
        task=args.task,
        parameters=dict(_parameter(p) for p in args.parameter),
        at=args.at,
        cron=args.cron,
        cwd=str(Path.cwd()),
        model=args.model,
        token_limit=args.token_limit,
        kernel=args.kernel,
        policy=policy,
    )
    options: dict[str, Any] = {"explain": True} if args.explain else {}
    if args.notify or args.notify_on:
        from agent_kernel.paths import agent_home
        from agent_kernel.scheduler import notify

        options["notify"] = notify.setting(agent_home(), args.notify, args.notify_on, None)
    if options:
        fields = replace(fields, options=options)
    grants = _grants(args)
    event = _person(f"jobs add {name}", args) if grants else None
    job = _service(args).create(fields, by=Provenance.person(), created_by="cli", person=event, grants=grants).job
    print(f"Added job {job.id} ({job.name}): {job.schedule.describe()}; next run {iso(job.next_run_at, job.timezone)}.")
    if job.grants:
        print(f"Its unattended runs: {_grants_line(job)}.")
    print("It fires while `agent-kernel scheduler` runs.")
    return 0


def _jobs_run(args: argparse.Namespace) -> int:
    from agent_kernel.scheduler.runs import SUCCEEDED

    service = _service(args)
    if args.queue:
        queued = service.run_now(args.job)
        print(f"Queued run {queued.run.id} of {_name(queued.job, queued.run)}; the scheduler starts it.")
        return 0
    job = service.get(args.job).job
    progress = _Progress(job.name)
    try:
        run = service.run_now(job.id, wait=True, on_progress=progress.update).run
    finally:
        progress.close()
    print(_run_line(run, job))
    if run.status != SUCCEEDED and run.run_dir:
        print(f"  logs: {run.run_dir}")
    return 0 if run.status == SUCCEEDED else 1


def _jobs_toggle(args: argparse.Namespace) -> int:
    from agent_kernel.scheduler import ScheduleError
    from agent_kernel.scheduler.clock import iso
    from agent_kernel.store.provenance import Provenance

    service = _service(args)
    if not args.enable:
        job = service.disable(args.job).job
        print(f"Job {job.id} ({job.name}) disabled.")
        return 0
    grants = _grants(args)
    if args.no_grants:
        if grants:
            raise ScheduleError("Give grants (--allow-host, --allow-after-untrusted) or --no-grants, not both.")
        from agent_kernel.grants import StandingGrants

        grants = StandingGrants()
    event = _person(f"jobs enable {args.job}", args)
    job = service.enable(args.job, by=Provenance.person(), person=event, grants=grants).job
    print(f"Job {job.id} ({job.name}) enabled; next run {iso(job.next_run_at, job.timezone)}.")
    if job.grants or grants is not None:
        print(f"Its unattended runs: {_grants_line(job)}.")
    return 0


def _jobs_edit(args: argparse.Namespace) -> int:
    from agent_kernel.scheduler import edits
    from agent_kernel.scheduler.clock import iso
    from agent_kernel.store.provenance import Provenance

    service = _service(args)
    before = service.get(args.job).job
    changes = edits.changes(before, vars(args), args.parameter, args.unset)
    job = service.update(before.id, changes, by=Provenance.person(), created_by="cli").job
    if job.version == before.version:
        print(f"Job {job.id} ({job.name}) is unchanged (version {job.version}).")
        return 0
    shown = f"next run {iso(job.next_run_at, job.timezone)}" if job.enabled else "disabled"
    print(f"Job {job.id} ({job.name}) is now version {job.version}: {job.schedule.describe()}; {shown}.")
    return 0


def _jobs_history(args: argparse.Namespace) -> int:
    job, versions = _service(args).versions(args.job)
    if args.json:
        print(json.dumps([v.as_json() for v in versions], indent=2, default=str))
        return 0
    from agent_kernel.display.text_tables import Table

    rows = [
        [str(v.version), _local(v.changed_at, job) if v.changed_at else "", v.changed_by,
         ", ".join(v.changed) if v.changed else "(created)"]
        for v in versions
    ]  # fmt: skip
    print(repr(Table(["version", "changed at", "by", "changed"], rows, note=f"{job.name} ({job.id})")))
    return 0


def _notify(args: argparse.Namespace) -> int:
    from agent_kernel.paths import agent_home
    from agent_kernel.scheduler import notify

    targets = notify.Targets(agent_home())
    if args.action == "add":
        target = targets.add(args.url, name=args.name, default=args.default)
        print(f"Added {target.name}: {target.shown}{' (default)' if target.default else ''}.")
    elif args.action == "remove":
        targets.remove(args.name)
        print(f"Removed {args.name}.")
    elif args.action == "test":
        target = targets.get(args.name)
        problem = notify.deliver([target], "agent-kernel: test", "A test notification from agent-kernel.", failed=False)
        print(problem or f"Sent a test notification to {target.name}.", file=sys.stderr if problem else sys.stdout)
        return 1 if problem else 0
    else:
        from agent_kernel.display.text_tables import Table

        rows = [[t.name, t.shown, "yes" if t.default else ""] for t in targets.all()]
        note = "" if rows else "No targets: `agent-kernel notify add URL --default` adds one."
        print(repr(Table(["name", "URL (credentials hidden)", "default"], rows, note=note)))
    return 0


def _jobs_remove(args: argparse.Namespace) -> int:
    job = _service(args).delete(args.job)
    print(f"Removed job {job.id} ({job.name}); its runs stay in `agent-kernel runs`.")
    return 0


# -- runs ---------------------------------------------------------------------------------------


def _runs(args: argparse.Namespace) -> int:
    service = _service(args)
    if args.action:
        return _runs_action(args, service)
    if args.cancel:
        cancelled, state = service.cancel(args.cancel, reason="cancelled from the command line")
        asked = "cancellation asked; its scheduler stops it." if state == "RUNNING" else f"{state}."
        print(f"Run {cancelled.run.id}: {asked}")
        return 0
    found = service.runs(job=args.job, limit=args.limit, statuses=args.status or ())
    if args.json:
        print(json.dumps([f.run.to_json() | {"job_name": _name(f.job, f.run)} for f in found], indent=2))
        return 0
    from agent_kernel.display.text_tables import Table

    rows = [
        [f.run.id, _name(f.job, f.run), _local(f.run.scheduled_for, f.job), str(f.run.attempt), f.run.status,
         _seconds(f.run), _cells(f.run), _detail(f.run)]
        for f in found
    ]  # fmt: skip
    print(repr(Table(["run", "job", "scheduled for", "try", "status", "time", "cells", "output / error"], rows,
                     note="" if rows else "No runs yet.")))  # fmt: skip
    return 0


def _runs_action(args: argparse.Namespace, service: SchedulerService) -> int:
    """``runs diff RUN [OTHER]`` and ``runs explain RUN``."""
    from agent_kernel.scheduler import ScheduleError

    action, *keys = args.action
    if action == "diff" and 1 <= len(keys) <= 2:
        comparison = service.compare_runs(keys[0], keys[1] if len(keys) == 2 else None)
        print(json.dumps(comparison.as_json(), indent=2) if args.json else comparison.text())
        return 0
    if action == "explain" and len(keys) == 1:
        from agent_kernel.config import AgentKernel

        found = service.explain_run(keys[0], model=args.model or AgentKernel().small_model)
        run = found.run
        cost = f", ${run.explain_cost:.4f}" if run.explain_cost is not None else ""
        print(f"{run.explanation}\n({run.explain_tokens:,} tokens{cost}; kept on run {run.id})")
        return 0
    raise ScheduleError("Use `agent-kernel runs diff RUN [OTHER]` or `agent-kernel runs explain RUN`.")


# -- export -------------------------------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    """A session's successful code as a notebook; verified headless; scheduled on request."""
    from agent_kernel.scheduler import export

    store = _store(args)
    cwd = Path(args.cwd).expanduser() if args.cwd else Path.cwd()
    exported = export.export_session(store, args.session, args.out, overwrite=args.force)
    print(exported.describe())
    if args.no_verify:
        print("Not verified (--no-verify).")
    elif not _consents(export.consent_question(exported), args.yes):
        print("Not verified: the session read untrusted content and you did not say yes (in a terminal, or --yes).")
        return 1
    else:
        verdict = export.verify(exported, cwd=cwd, timeout_s=args.timeout)
        print(verdict.describe())
        if not verdict.passed:
            if args.schedule:
                print("Not scheduled: the notebook did not pass its headless run.")
            return 1
    if args.schedule:
        from agent_kernel.scheduler.clock import iso

        job = export.schedule(store, exported, args.schedule, name=args.name, timezone=args.timezone, cwd=cwd)
        print(
            f"Scheduled job {job.id} ({job.name}): {job.schedule.describe()}; next run {iso(job.next_run_at, job.timezone)}."
        )
        print("It fires while a scheduler runs (`agent-kernel scheduler`, or Jupyter Server with agent-kernel).")
    return 0


def _consents(question: str, yes: bool) -> bool:
    """Whether the person agrees to run code a tainted session wrote: no question (a clean
    session), ``--yes``, or "y" typed on this terminal; never without a terminal."""
    if not question or yes:
        return True
    if not sys.stdin.isatty():
        print(question.rsplit(".", 1)[0] + ".", file=sys.stderr)
        return False
    try:
        return input(question).strip().lower() in ("y", "yes")
    except EOFError:
        return False


# -- cells ----------------------------------------------------------------------------------------

CLEAR_WORD = "clear"
SHOWN_LINES = 20  # of each marked cell's source, for the person to review


def _cell_marks(args: argparse.Namespace) -> int:
    """List, or clear after the person's review, the untrusted marks of a notebook's cells."""
    from agent_kernel.scheduler import ScheduleError, cell_marks

    path = Path(args.notebook).expanduser().absolute()
    notebook = cell_marks.read_notebook(path)
    marked = cell_marks.marked_in(notebook)
    if not marked:
        print(f"No cell of {path} carries the untrusted mark.")
        return 0
    if args.action == "list":
        for found in marked:
            print(found.describe())
        return 0
    chosen = [m for m in marked if not args.cell or m.id in args.cell]
    unknown = sorted(set(args.cell or ()) - {m.id for m in marked})
    if unknown:
        raise ScheduleError(f"No marked cell {unknown[0]!r} in {path}; `agent-kernel cells list {path}` lists them.")
    event = _cell_person(f"agent-kernel cells clear {path}")
    if not _reviewed(notebook, chosen):
        print("Not cleared.")
        return 1
    cleared = cell_marks.clear_file(path, event, ids=[m.id for m in chosen])
    print(
        f"Cleared the mark of {len(cleared)} cell{'s' if len(cleared) != 1 else ''} in {path}; each records who cleared it."
    )
    return 0


def _cell_person(detail: str) -> Any:
    """The person's event for clearing marks (refused inside an agent turn)."""
    from agent_kernel.authority import TrustRefused, person
    from agent_kernel.scheduler import ScheduleError

    try:
        return person("cli", detail)
    except TrustRefused as exc:
        raise ScheduleError(str(exc)) from None


def _reviewed(notebook: Any, marked: list[Any]) -> bool:
    """Show the marked cells on the terminal and ask the person to type the clear word;
    without a terminal nobody can answer, and the marks stay."""
    from agent_kernel.scheduler import ScheduleError

    if not sys.stdin.isatty():
        raise ScheduleError(
            "agent-kernel cells clear asks you on a terminal: run it yourself in one, after reviewing the cells "
            "(or use Clear on the cell's badge in JupyterLab)."
        )
    for found in marked:
        source = notebook.cells[found.number - 1].source
        lines = source.splitlines()
        more = f"\n    [... {len(lines) - SHOWN_LINES} more lines]" if len(lines) > SHOWN_LINES else ""
        print(f"--- {found.describe()}\n" + "\n".join("    " + line for line in lines[:SHOWN_LINES]) + more)
    try:
        answer = input(f"Type {CLEAR_WORD!r} to clear the mark of these {len(marked)} cells: ")
    except EOFError:
        return False
    return answer.strip() == CLEAR_WORD


# -- helpers ------------------------------------------------------------------------------------


class _Progress:
    """A progress bar of the run's cells while it executes in the foreground."""

    def __init__(self, name: str) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=0, desc=name, unit="cell", file=sys.stderr, dynamic_ncols=True, leave=True)

    def update(self, run: Run, progress: dict[str, Any]) -> None:
        total, done = progress.get("cells_total") or 0, progress.get("cells_done") or 0
        if total and self.bar.total != total:
            self.bar.total = total
        if done != self.bar.n:
            self.bar.n = done
        state = progress.get("state", "starting")
        cell = progress.get("cell")
        self.bar.set_postfix_str(f"cell {cell}: {progress.get('source', '')}" if cell else state, refresh=True)

    def close(self) -> None:
        self.bar.close()


def _store(args: argparse.Namespace) -> Store:
    from agent_kernel.paths import default_db_path
    from agent_kernel.store import Store

    return Store(Path(args.db).expanduser() if args.db else default_db_path())


def _service(args: argparse.Namespace) -> SchedulerService:
    """The jobs of ``--db``, named as a person types them: id, id prefix or name."""
    from agent_kernel.scheduler.service import SchedulerService

    return SchedulerService(_store(args), by_name=True, listing="`agent-kernel jobs list` shows them")


def _grants(args: argparse.Namespace) -> StandingGrants | None:
    """The standing grants ``--allow-host`` and ``--allow-after-untrusted`` set (None: neither given)."""
    from agent_kernel.grants import of
    from agent_kernel.scheduler import ScheduleError

    if not (args.allow_host or args.allow_after_untrusted):
        return None
    try:
        return of(args.allow_host, args.allow_after_untrusted)
    except ValueError as exc:
        raise ScheduleError(f"{exc}.") from None


def _person(what: str, args: argparse.Namespace) -> PersonEvent:
    """This command as the person's event: a trust change (grants, enabling a job that waits
    for review) keeps its label. Refused when called inside an agent turn."""
    from agent_kernel.authority import TrustRefused, person
    from agent_kernel.scheduler import ScheduleError

    flags = [f"--allow-host {h}" for h in args.allow_host or ()]
    flags += [f"--allow-after-untrusted {t}" for t in args.allow_after_untrusted or ()]
    try:
        return person("cli", " ".join([f"agent-kernel {what}", *flags]))
    except TrustRefused as exc:
        raise ScheduleError(str(exc)) from None


def _grants_line(job: Job) -> str:
    try:
        return job.standing_grants.describe()
    except ValueError as exc:
        return f"malformed ({exc}): its runs are refused"


def _parameter(text: str) -> tuple[str, Any]:
    from agent_kernel.scheduler.edits import parameter

    return parameter(text)


def _job_json(job: Job, last: Run | None) -> dict[str, Any]:
    from agent_kernel.scheduler.clock import iso

    return {
        "id": job.id, "name": job.name, "kind": job.kind, "type": job.type, "cron": job.cron,
        "at": iso(job.run_at), "timezone": job.timezone, "notebook": job.notebook, "task": job.task,
        "parameters": job.parameters, "enabled": job.enabled, "next_run": iso(job.next_run_at),
        "last_run": iso(last.started_at or last.scheduled_for) if last else None,
        "last_status": last.status if last else None,
        "last_output": last.output_path if last else None,
        "version": job.version, "notify": job.options.get("notify"), "explain": bool(job.options.get("explain")),
        "grants": job.grants or None, "granted_by": job.granted_by,
    }  # fmt: skip


def _job_row(job: Job, last: Run | None) -> list[str]:
    return [
        job.id,
        job.name,
        job.kind,
        job.schedule.describe(),
        _local(job.next_run_at, job) if job.enabled else "(disabled)",
        _local(last.started_at or last.scheduled_for, job) if last else "",
        last.status if last else "",
    ]


def _run_line(run: Run, job: Job | None = None) -> str:
    name = job.name if job else run.job_id
    took = f" in {run.seconds:.1f} s" if run.seconds is not None else ""
    return f"{run.status} {name} (run {run.id}){took}: {_detail(run)}"


def _detail(run: Run) -> str:
    if run.error:
        cell = f"cell {run.error_cell}: " if run.error_cell is not None else ""
        return cell + run.error.splitlines()[0][:120]
    return run.output_path or ""


def _name(job: Job | None, run: Run) -> str:
    return job.name if job else run.job_id


def _local(instant: datetime | None, job: Job | None) -> str:
    if instant is None:
        return ""
    from agent_kernel.scheduler.cron import zone

    tz = zone(job.timezone) if job else None
    return instant.astimezone(tz).strftime("%Y-%m-%d %H:%M %Z") if tz else instant.strftime("%Y-%m-%d %H:%M UTC")


def _seconds(run: Run) -> str:
    return f"{run.seconds:.1f} s" if run.seconds is not None else ""


def _cells(run: Run) -> str:
    return f"{run.cells_done or 0}/{run.cells_total}" if run.cells_total else ""


def _add_grant_options(parser: argparse.ArgumentParser) -> None:
    """The standing grants of a job's unattended runs (see agent_kernel.grants)."""
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                        help="its runs may reach HOST unasked, also after reading untrusted content; repeatable")  # fmt: skip
    parser.add_argument("--allow-after-untrusted", action="append", default=[], metavar="TOOL",
                        help="its runs may run writing tool TOOL (run_code, ...) after reading untrusted "
                             "content, with nobody to approve; repeatable")  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    from agent_kernel.scheduler import edits

    parser = argparse.ArgumentParser(
        prog="agent-kernel", description="Run the quickstart; schedule notebooks and agent tasks."
    )
    parser.add_argument("--db", help="the DuckDB file (default: $AGENT_KERNEL_DB or the user data dir)")
    commands = parser.add_subparsers(metavar="COMMAND")

    demo = commands.add_parser(
        "demo", help="run the quickstart notebook headless (offline scripted model without ANTHROPIC_API_KEY)"
    )
    demo.add_argument(
        "--out", default="agent-kernel-demo", help="where the executed notebook goes (default agent-kernel-demo/)"
    )
    demo.set_defaults(handler=_demo)
    from agent_kernel import lab

    lab.add_parser(commands)

    daemon = commands.add_parser("scheduler", help="run the scheduler daemon")
    daemon.add_argument("--once", action="store_true", help="process what is due, wait for those runs, exit")
    daemon.add_argument("--executor", choices=["local", "dask"], default="local")
    daemon.add_argument("--address", help="Dask scheduler address (tcp://host:8786); default: a LocalCluster")
    daemon.add_argument("--workers", type=int, default=2, help="LocalCluster workers (--executor dask)")
    daemon.add_argument("--max-concurrent", type=int, default=2, help="runs at once (default 2)")
    daemon.add_argument("--poll", type=float, default=5.0, help="seconds between checks for new jobs")
    daemon.add_argument("--lease", type=float, default=60.0, help="heartbeat lease in seconds")
    daemon.add_argument("--grace", type=float, default=60.0, help="seconds late a slot may still fire on time")
    daemon.set_defaults(handler=_scheduler)

    jobs_parser = commands.add_parser("jobs", help="list, add, edit, run, enable, disable, remove jobs; their history")
    jobs_parser.set_defaults(help_of=jobs_parser)
    jobs = jobs_parser.add_subparsers(metavar="ACTION")
    listing = jobs.add_parser("list", help="the jobs, with next run and last status")
    listing.add_argument("--all", action="store_true", help="include disabled jobs")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=_jobs_list)

    add = jobs.add_parser("add", help="schedule a notebook or an agent task")
    add.add_argument("notebook", nargs="?", help="the notebook to run with papermill")
    add.add_argument("--task", help="an agent prompt instead of a notebook")
    add.add_argument("--name")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", help="one run at this ISO 8601 time")
    when.add_argument("--cron", help="recurring: a 5-field cron expression")
    add.add_argument("--timezone", help="IANA timezone of the cron expression (default: the machine's)")
    add.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                     help="papermill parameter (VALUE is JSON, else a string); repeatable")  # fmt: skip
    add.add_argument("--model")
    add.add_argument("--token-limit", type=int)
    add.add_argument("--kernel", help="kernel name (default: the notebook's)")
    add.add_argument("--timeout", type=float, default=3600.0, help="seconds for the whole run (default 3600)")
    add.add_argument("--cell-timeout", type=float, help="seconds for one cell")
    add.add_argument("--retries", type=int, default=1, help="retries of a run that ends as --retry-on (default 1)")
    add.add_argument("--retry-on", default="LOST", help="statuses to retry: LOST, FAILED, TIMED_OUT (default LOST)")
    add.add_argument("--retry-delay", type=float, default=30.0, help="seconds before the first retry, doubling")
    add.add_argument("--catchup", choices=["skip", "latest", "all"], default="latest",
                     help="slots missed while no scheduler ran (default latest)")  # fmt: skip
    add.add_argument("--max-catchup", type=int, default=10)
    add.add_argument("--overlap", choices=["allow", "forbid", "queue"], default="forbid",
                     help="a slot due while the previous run is going (default forbid: skip it)")  # fmt: skip
    edits.add_notify_options(add)
    _add_grant_options(add)
    add.set_defaults(handler=_jobs_add)

    run = jobs.add_parser("run", help="run a job now, in the foreground with progress")
    run.add_argument("job")
    run.add_argument("--queue", action="store_true", help="queue it for the scheduler instead")
    run.set_defaults(handler=_jobs_run)
    enable = jobs.add_parser("enable", help="enable a job (your review of one that waits for it); set its grants")
    enable.add_argument("job")
    _add_grant_options(enable)
    enable.add_argument("--no-grants", action="store_true", help="drop its standing grants")
    enable.set_defaults(handler=_jobs_toggle, enable=True)
    disable = jobs.add_parser("disable", help="disable a job")
    disable.add_argument("job")
    disable.set_defaults(handler=_jobs_toggle, enable=False, allow_host=[], allow_after_untrusted=[], no_grants=False)
    edit = jobs.add_parser("edit", help="change a job (each change is a new version)")
    edits.add_options(edit)
    edit.set_defaults(handler=_jobs_edit)
    history = jobs.add_parser("history", help="a job's versions: what each change changed, and who")
    history.add_argument("job")
    history.add_argument("--json", action="store_true")
    history.set_defaults(handler=_jobs_history)
    remove = jobs.add_parser("remove", help="delete a job (its runs stay)")
    remove.add_argument("job")
    remove.set_defaults(handler=_jobs_remove)

    notify_parser = commands.add_parser("notify", help="where notifications of runs go (apprise URLs)")
    notify_parser.set_defaults(help_of=notify_parser)
    notify_actions = notify_parser.add_subparsers(metavar="ACTION")
    notify_add = notify_actions.add_parser("add", help="keep a target: an apprise URL (credentials stay in this file)")
    notify_add.add_argument(
        "url", help="e.g. slack://TokenA/TokenB/TokenC/#ops, mailto://user:pass@example.com, ntfy://topic"
    )
    notify_add.add_argument("--name", help="what jobs call it (default: made up)")
    notify_add.add_argument("--default", action="store_true", help="notify for jobs that name no target of their own")
    notify_add.set_defaults(handler=_notify, action="add")
    notify_list = notify_actions.add_parser("list", help="the targets, credentials hidden")
    notify_list.set_defaults(handler=_notify, action="list")
    notify_remove = notify_actions.add_parser("remove", help="forget a target")
    notify_remove.add_argument("name")
    notify_remove.set_defaults(handler=_notify, action="remove")
    notify_test = notify_actions.add_parser("test", help="send a test notification to a target")
    notify_test.add_argument("name")
    notify_test.set_defaults(handler=_notify, action="test")

    runs = commands.add_parser("runs", help="recent runs, newest first; diff RUN [OTHER]; explain RUN")
    runs.add_argument("action", nargs="*", metavar="diff RUN [OTHER] | explain RUN",
                      help="what changed between two runs of a job (OTHER: its last successful run before RUN), "
                      "or why RUN failed (one call to the small model, kept on the run)")  # fmt: skip
    runs.add_argument("--model", help="the model that explains (default: AgentKernel.small_model)")
    runs.add_argument("--job", help="only this job's runs")
    runs.add_argument("--status", action="append", choices=["QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT",
                                                            "CANCELLED", "LOST", "SKIPPED"])  # fmt: skip
    runs.add_argument("--limit", type=int, default=20)
    runs.add_argument("--json", action="store_true")
    runs.add_argument("--cancel", metavar="RUN", help="cancel a queued or running run")
    runs.set_defaults(handler=_runs)

    out = commands.add_parser(
        "export",
        help="a session's successful code as a notebook that re-runs without the model (papermill, schedulable)",
    )
    out.add_argument("session", help="the session's name or id")
    out.add_argument("out", help="the notebook to write (.ipynb)")
    out.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    out.add_argument("--cwd", help="the directory the notebook runs in (default: this one)")
    out.add_argument("--no-verify", action="store_true", help="skip the headless papermill run")
    out.add_argument("--timeout", type=float, default=600.0, help="seconds for the verifying run (default 600)")
    out.add_argument("--schedule", metavar="CRON", help="then create a job running it on this 5-field cron expression")
    out.add_argument("--timezone", help="IANA timezone of --schedule (default: the machine's)")
    out.add_argument("--name", help="the job's name (default: OUT's name)")
    out.add_argument(
        "--yes", action="store_true",
        help="verify a session that read untrusted content without asking (by default it asks on the terminal, "
        "and without one it is not verified)",
    )  # fmt: skip
    out.set_defaults(handler=_export)

    marks = commands.add_parser(
        "cells", help="cells an agent turn wrote after untrusted content: list them, clear their mark once reviewed"
    )
    marks.set_defaults(help_of=marks)
    mark_actions = marks.add_subparsers(metavar="ACTION")
    listing_marks = mark_actions.add_parser("list", help="the notebook's marked cells and what their session had read")
    listing_marks.add_argument("notebook", help="the notebook (.ipynb)")
    listing_marks.set_defaults(handler=_cell_marks, action="list")
    clearing = mark_actions.add_parser(
        "clear", help="show the marked cells and, once you type 'clear' on the terminal, clear their mark "
        "(the scheduler runs the notebook again); refused inside an agent turn and without a terminal",
    )  # fmt: skip
    clearing.add_argument("notebook", help="the notebook (.ipynb)")
    clearing.add_argument("--cell", action="append", metavar="ID", help="only this cell (repeatable)")
    clearing.set_defaults(handler=_cell_marks, action="clear")
    from agent_kernel import cli_key, cli_store

    cli_key.add_parser(commands)
    cli_store.add_parser(commands)
    return parser


if __name__ == "__main__":
    sys.exit(main())
