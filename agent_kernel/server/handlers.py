"""The REST API under ``/agent-kernel/api/``.

Every handler is a Jupyter Server ``APIHandler``: ``@web.authenticated`` refuses a
request without the server's token or login cookie (403), ``@authorized`` asks the
server's authorizer about the ``agent-kernel`` resource, and the handler base checks the
XSRF token of cookie-authenticated writes. Database work runs in a thread (the store's
short connection waits for the file lock), so a busy file never blocks the server.
Jobs and runs are read and changed through the scheduler service (the same one the CLI,
the tools and ``%agent_jobs`` use), as the person: enabling a job here is their review,
and a request that enables a job or sets its standing grants is the person's event
(``server: PATCH /agent-kernel/api/jobs/ID by USER``) that the change keeps.
Input the API refuses gets 400 with a message; a missing id gets 404.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from agent_kernel import authority
from agent_kernel.errors import MissingKeyError, StoreError
from agent_kernel.model import keys
from agent_kernel.model.client import api_key
from agent_kernel.scheduler import NotFoundError, ScheduleError, leader
from agent_kernel.scheduler.notify import FAILED_STATUSES
from agent_kernel.scheduler.service import SchedulerService
from agent_kernel.server import views
from agent_kernel.server.job_request import (
    MAX_PATH_CHARS,
    BadRequest,
    check_text,
    job_changes,
    job_fields,
    job_grants,
    parse_body,
    run_action,
    run_parameters,
)
from agent_kernel.server.outputs import output_page
from agent_kernel.store.provenance import Provenance

if TYPE_CHECKING:
    import duckdb

    from agent_kernel.server.shapes import KeyStatusJson, Reply, SchedulerStatusJson
    from agent_kernel.server.state import ServerState

T = TypeVar("T")

AUTH_RESOURCE = "agent-kernel"
MAX_RUNS = 500
MAX_OFFSET = 10**9
MORE_HEADER = "X-More"  # "true" when a list's page is followed by more items


class _Handler(APIHandler):
    auth_resource = AUTH_RESOURCE

    @property
    def agent(self) -> ServerState:
        """The extension's state (:class:`~agent_kernel.server.state.ServerState`)."""
        state: ServerState = self.settings["agent_kernel_state"]
        return state

    @property
    def root(self) -> Path:
        return Path(self.agent.root_dir)

    @property
    def jobs(self) -> SchedulerService:
        """The scheduler service of the server's store (it wakes the server's scheduler)."""
        return self.agent.jobs

    async def store_call(self, work: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """``work(con)`` under one short store connection, in a worker thread."""

        def run() -> T:
            with self.agent.store.connect() as con:
                return work(con)

        return await self.in_thread(run)

    async def in_thread(self, work: Callable[[], T]) -> T:
        """``work()`` in a worker thread: the store's connection waits for the file lock."""
        return await asyncio.get_running_loop().run_in_executor(None, work)

    def reply(self, data: Reply, status: int = 200) -> None:
        """Answer with ``data``, one of the API's declared shapes (:data:`~.shapes.Reply`)."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(views.dumps(data))

    def refuse(self, status: int, message: str) -> None:
        self.reply({"message": message}, status)

    def body(self) -> dict[str, Any]:
        return parse_body(self.request.body)

    @property
    def user(self) -> str:
        """Who sent the request, as the job's ``created_by`` names them."""
        name = getattr(self.current_user, "username", None)
        return f"jupyterlab:{name}" if name else "jupyterlab"

    def person(self, what: str) -> authority.PersonEvent:
        """This request as the person's event (a trust change keeps its label)."""
        return authority.person("server", f"{self.request.method} {self.request.path} by {self.user}: {what}")

    def text_argument(self, name: str, limit: int = MAX_PATH_CHARS) -> str | None:
        """A query argument as text: at most ``limit`` characters, no NUL or control characters.

        Read as sent (``get_argument`` would quietly delete control characters, so a path
        with a NUL would silently become another path)."""
        sent = self.request.query_arguments.get(name)
        if not sent:
            return None
        return check_text(self.decode_argument(sent[-1], name=name), f"`{name}`", limit)

    def int_argument(self, name: str, default: int, low: int, high: int) -> int:
        text = self.get_argument(name, None)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise BadRequest(f"`{name}` must be a whole number, not {text!r}.") from None
        if not low <= value <= high:
            raise BadRequest(f"`{name}` must be between {low} and {high}.")
        return value

    def page_arguments(self) -> tuple[int, int]:
        """The ``limit`` and ``offset`` of a list's page (a 400 for anything else)."""
        limit = self.int_argument("limit", views.PAGE, 1, views.MAX_PAGE)
        return limit, self.int_argument("offset", 0, 0, MAX_OFFSET)

    def log_exception(
        self, typ: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        if isinstance(value, (BadRequest, ScheduleError, authority.TrustRefused)):
            return
        super().log_exception(typ, value, tb)

    async def scheduler_status(self) -> SchedulerStatusJson:
        lease = await self.in_thread(self.jobs.scheduler)
        status: SchedulerStatusJson = {"running": lease is not None, "in_server": self.agent.scheduler_in_server}
        if lease is None:
            status["message"] = f"No scheduler is running: jobs fire only while one runs; {leader.HOW_TO_START}."
        else:
            status["holder"] = lease.holder
        return status

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, NotFoundError):
            self.refuse(404, str(exc))
            return
        if isinstance(exc, (BadRequest, ScheduleError, authority.TrustRefused)):
            self.refuse(400, str(exc))
            return

        if isinstance(exc, StoreError):
            self.refuse(503, str(exc))
            return
        super().write_error(status_code, **kwargs)


class SessionsHandler(_Handler):
    @web.authenticated
    @authorized(action="read")
    async def get(self) -> None:
        """A page of sessions, most recently used first: ``limit`` (default 100, at most
        1,000) from ``offset``; the ``X-More`` header says whether more follow."""
        notebook = self.text_argument("notebook")
        limit, offset = self.page_arguments()
        sessions = await self.store_call(
            lambda con: views.list_sessions(con, self.root, notebook, limit=limit + 1, offset=offset)
        )
        self.set_header(MORE_HEADER, "true" if len(sessions) > limit else "false")
        self.reply({"sessions": sessions[:limit]})


class SessionHandler(_Handler):
    @web.authenticated
    @authorized(action="read")
    async def get(self, session_id: str) -> None:
        found = await self.store_call(lambda con: views.session_detail(con, self.root, session_id))
        if found is None:
            self.refuse(404, f"No session {session_id!r}.")
            return
        self.reply(found)


class JobsHandler(_Handler):
    @web.authenticated
    @authorized(action="read")
    async def get(self) -> None:
        """A page of the jobs, newest first: ``limit`` (default 100, at most 1,000) from
        ``offset``; the ``X-More`` header says whether more follow."""
        limit, offset = self.page_arguments()
        jobs = await self.store_call(lambda con: views.list_jobs(con, self.root, limit=limit + 1, offset=offset))
        self.set_header(MORE_HEADER, "true" if len(jobs) > limit else "false")
        self.reply({"jobs": jobs[:limit], "scheduler": await self.scheduler_status()})

    @web.authenticated
    @authorized(action="write")
    async def post(self) -> None:
        body = self.body()
        fields = job_fields(body, self.root)
        grants = job_grants(body)
        event = self.person("create with grants") if grants else None
        state = await self.in_thread(
            lambda: self.jobs.create(fields, by=Provenance.person(), created_by=self.user, person=event, grants=grants)
        )
        self.reply({**views.job_json(state.job, None, self.root), "scheduler": await self.scheduler_status()}, 201)


class JobHandler(_Handler):
    @web.authenticated
    @authorized(action="read")
    async def get(self, job_id: str) -> None:
        state = await self.in_thread(lambda: self.jobs.get(job_id))
        self.reply(views.job_json(state.job, state.last, self.root))

    @web.authenticated
    @authorized(action="write")
    async def patch(self, job_id: str) -> None:
        """Change any of the job's fields (each change a new version), its standing
        ``grants``, and/or ``{"enabled": true | false}`` to resume or pause it."""
        body = self.body()
        if not body:
            raise BadRequest('Send the fields to change, e.g. {"cron": "0 9 * * *"} or {"enabled": false}.')
        changes = job_changes(body, self.root)
        grants = job_grants(body)
        asked = ", ".join(sorted(set(body) & {"enabled", "grants"}))
        event = self.person(asked) if asked else None
        state = None
        if changes or grants is not None:
            state = await self.in_thread(
                lambda: self.jobs.update(
                    job_id, changes, by=Provenance.person(), created_by=self.user, person=event, grants=grants
                )
            )
        if body.get("enabled") is True:
            state = await self.in_thread(lambda: self.jobs.enable(job_id, by=Provenance.person(), person=event))
        elif body.get("enabled") is False:
            state = await self.in_thread(lambda: self.jobs.disable(job_id))
        assert state is not None
        self.reply(views.job_json(state.job, state.last, self.root))

    @web.authenticated
    @authorized(action="write")
    async def delete(self, job_id: str) -> None:
        await self.in_thread(lambda: self.jobs.delete(job_id))
        self.reply({"deleted": True, "id": job_id})


class JobVersionsHandler(_Handler):
    @web.authenticated
    @authorized(action="read")
    async def get(self, job_id: str) -> None:
        """The job's versions, newest first: what each change changed, who made it, when."""
        job, versions = await self.in_thread(lambda: self.jobs.versions(job_id))
        self.reply({"id": job.id, "version": job.version, "versions": [v.as_json() for v in versions]})


class JobRunHandler(_Handler):
    @web.authenticated
    @authorized(action="execute")
    async def post(self, job_id: str) -> None:
        """Queue a run now; the scheduler starts it within a moment. ``{"parameters":
        {name: value}}``: values this run uses over the job's (the job keeps its own)."""
        parameters = run_parameters(self.body())
        queued = await self.in_thread(lambda: self.jobs.run_now(job_id, parameters=parameters))
        status = await self.scheduler_status()
        self.reply({**views.run_json(queued.run, queued.job, self.root), "scheduler": status}, 202)


class RunsHandler(_Handler):
    @web.authenticated
    @authorized(action="read")
    async def get(self) -> None:
        job_id = self.text_argument("job", 64)
        limit = self.int_argument("limit", 50, 1, MAX_RUNS)
        runs = await self.in_thread(lambda: self.jobs.runs(job=job_id, limit=limit))
        self.reply({"runs": [views.run_json(found.run, found.job, self.root) for found in runs]})


class RunHandler(_Handler):
    @web.authenticated
    @authorized(action="read")
    async def get(self, run_id: str) -> None:
        found = await self.in_thread(lambda: self.jobs.run(run_id))
        self.reply(views.run_detail(found.run, found.job, self.root))

    @web.authenticated
    @authorized(action="write")
    async def post(self, run_id: str) -> None:
        """``{"action": "open"}``: the output notebook's path inside the root (copied into
        ``agent-kernel-runs/`` when it lies elsewhere), for JupyterLab to open.
        ``{"action": "cancel"}``: cancel a queued run, or ask its scheduler to stop it.
        ``{"action": "explain"}``: why a failed run failed (one small-model call, kept on the run)."""
        action = run_action(self.body())["action"]
        found = await self.in_thread(lambda: self.jobs.run(run_id))
        if action == "explain":
            try:
                if found.run.status in FAILED_STATUSES:  # (a run that did not fail is refused as such)
                    await self.in_thread(api_key)  # the stored key, put in this process's environment
            except MissingKeyError as exc:
                self.refuse(400, f"Explain needs the model. {no_key(exc)}")
                return
            model = self.agent.small_model
            explained = await self.in_thread(lambda: self.jobs.explain_run(found.run.id, model=model))
            self.reply(views.run_detail(explained.run, explained.job, self.root))
            return
        if action == "cancel":
            _, state = await self.in_thread(lambda: self.jobs.cancel(found.run.id, reason="cancelled in JupyterLab"))
            self.reply({"id": found.run.id, "status": state})
            return
        self.reply({"id": found.run.id, "path": self.agent.output_in_root(found.run, found.job)})


class RunDiffHandler(_Handler):
    @web.authenticated
    @authorized(action="read")
    async def get(self, run_id: str) -> None:
        """What changed between the run and ``?other=RUN`` (default: its job's last
        successful run before it)."""
        other = self.text_argument("other", 64)
        comparison = await self.in_thread(lambda: self.jobs.compare_runs(run_id, other))
        self.reply({**comparison.as_json(), "text": comparison.text()})


class RunOutputHandler(_Handler):
    @web.authenticated
    @authorized(action="read")
    async def get(self, run_id: str) -> None:
        """The run's output notebook as a static HTML page (``html``), read where the run
        left it: nothing is copied and no kernel starts (see :mod:`.outputs`)."""
        found = await self.in_thread(lambda: self.jobs.run(run_id))
        page = await self.in_thread(lambda: output_page(found.run))
        name = found.job.name if found.job else found.run.job_id
        self.reply({"id": found.run.id, "job_name": name, "status": found.run.status, "html": page})


class StatsHandler(_Handler):
    @web.authenticated
    @authorized(action="read")
    async def get(self) -> None:
        days = self.int_argument("days", 7, 1, 3650)
        now = self.agent.now()
        self.reply(await self.store_call(lambda con: views.stats_json(con, days, now)))


class KeyHandler(_Handler):
    """The server's Anthropic API key, stored outside every notebook (the panel's key field).

    ``GET`` says where the key comes from; ``PUT {"key": ...}`` stores it (the person's
    act, refused inside an agent turn); ``DELETE`` forgets it. No reply holds the key."""

    @web.authenticated
    @authorized(action="read")
    async def get(self) -> None:
        self.reply(await self.in_thread(key_status_json))

    @web.authenticated
    @authorized(action="write")
    async def put(self) -> None:
        body = self.body()
        if set(body) != {"key"} or not isinstance(body["key"], str):
            raise BadRequest('A key is sent as {"key": "sk-ant-..."}, a string and nothing else.')
        self.person("store the Anthropic API key")
        try:
            await self.in_thread(lambda: keys.store_key(body["key"]))
        except keys.UnusableKey as exc:
            raise BadRequest(str(exc)) from None
        self.reply(await self.in_thread(key_status_json))

    @web.authenticated
    @authorized(action="write")
    async def delete(self) -> None:
        self.person("forget the Anthropic API key")
        await self.in_thread(keys.forget_key)
        self.reply(await self.in_thread(key_status_json))


def key_status_json() -> KeyStatusJson:
    """Where the key comes from, for the panel (never the key)."""
    status = keys.key_status()
    return {"has_key": status.has_key, "source": status.source, "where": status.where, "message": status.line()}


def no_key(exc: Exception) -> str:
    """Why the server has no key, and the ways to store one (none of them a cell)."""
    if "No usable" in str(exc):  # a stored key that may not be read says why
        return str(exc)
    return (
        "The Jupyter server has no Anthropic API key. Store one with the key field in the Agent panel's "
        "settings, %agent_key in a notebook (not echoed) or `agent-kernel key set` in a terminal, or set "
        "ANTHROPIC_API_KEY before starting Jupyter."
    )


ID = r"([A-Za-z0-9_-]{1,64})"


def handlers(base: str = "/agent-kernel/api") -> list[tuple[str, type]]:
    return [
        (f"{base}/sessions", SessionsHandler),
        (f"{base}/sessions/{ID}", SessionHandler),
        (f"{base}/jobs", JobsHandler),
        (f"{base}/jobs/{ID}", JobHandler),
        (f"{base}/jobs/{ID}/run", JobRunHandler),
        (f"{base}/jobs/{ID}/versions", JobVersionsHandler),
        (f"{base}/runs", RunsHandler),
        (f"{base}/runs/{ID}", RunHandler),
        (f"{base}/runs/{ID}/output", RunOutputHandler),
        (f"{base}/runs/{ID}/diff", RunDiffHandler),
        (f"{base}/stats", StatsHandler),
        (f"{base}/key", KeyHandler),
    ]
