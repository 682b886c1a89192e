"""The API's view of tainted kept items: list them, and clear them once reviewed.

``GET /agent-kernel/api/tainted`` lists every kept item (tool, library, skill, memory,
notepad, prompt, table comment, job, component) whose latest write came from a turn
that had read untrusted content, newest first, with the session and turn that wrote it
and the sources it had read. ``POST /agent-kernel/api/tainted/clear`` with
``{"kind": ..., "name": ...}`` (one item), ``{"kind": ...}`` (every item of a kind) or
``{"all": true}`` clears the taint: the person has reviewed the items. Only the person
reaches these routes (the server's token or login, XSRF-checked writes); the model has
no path to them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from agent_kernel.authority import person
from agent_kernel.server.handlers import _Handler
from agent_kernel.server.job_request import BadRequest
from agent_kernel.store import provenance
from agent_kernel.store.provenance import KINDS

if TYPE_CHECKING:
    import duckdb

    from agent_kernel.server.shapes import TaintedItemJson, TaintedJson

NAME_CHARS = 200
MAX_LISTED = 500


def tainted_json(con: duckdb.DuckDBPyConnection) -> TaintedJson:
    """The tainted kept items (at most ``MAX_LISTED``), each with its session's name."""
    records = provenance.tainted(con)
    ids = sorted({r.session_id for r in records if r.session_id})
    names: dict[str, str] = {}
    if ids:
        rows = con.execute("SELECT id, name FROM sessions WHERE id IN (SELECT unnest(?))", [ids]).fetchall()
        names = dict(rows)
    items: list[TaintedItemJson] = [
        {**r.as_dict(), "session": names.get(r.session_id) if r.session_id else None} for r in records[:MAX_LISTED]
    ]
    return {"items": items, "total": len(records), "kinds": list(provenance.KINDS)}


def clear_request(body: dict[str, Any]) -> tuple[str | None, str | None]:
    """``(kind, name)`` to clear from a request body (None for all); BadRequest otherwise."""
    how = 'Send {"kind": KIND, "name": NAME} (one item), {"kind": KIND} (every item of a kind) or {"all": true}.'
    if body.get("all") is True and set(body) == {"all"}:
        return None, None
    if "kind" not in body or set(body) - {"kind", "name"}:
        raise BadRequest(how)
    kind, name = body["kind"], body.get("name")
    if not isinstance(kind, str) or kind not in KINDS:
        raise BadRequest(f"`kind` must be one of {', '.join(KINDS)}.")
    if name is not None and (not isinstance(name, str) or not name or len(name) > NAME_CHARS):
        raise BadRequest(f"`name` must be a non-empty string of at most {NAME_CHARS} characters.")
    return kind, name


class TaintedHandler(_Handler):
    @web.authenticated
    @authorized(action="read")
    async def get(self) -> None:
        self.reply(await self.store_call(tainted_json))


class TaintedClearHandler(_Handler):
    @web.authenticated
    @authorized(action="write")
    async def post(self) -> None:
        kind, name = clear_request(self.body())
        by = person("server", f"POST {self.request.path} kind={kind} name={name} user={_user_name(self.current_user)}")
        cleared = await self.store_call(lambda con: provenance.clear(con, kind, name, by=by))
        self.reply({"cleared": cleared, "kind": kind, "name": name})


def _user_name(user: object) -> str:
    """Who is logged in to the server, as the event's detail names them."""
    return str(getattr(user, "username", None) or user or "anonymous")[:NAME_CHARS]


def handlers(base: str = "/agent-kernel/api") -> list[tuple[str, type]]:
    return [
        (f"{base}/tainted", TaintedHandler),
        (f"{base}/tainted/clear", TaintedClearHandler),
    ]
