"""Sessions follow a notebook renamed or moved in JupyterLab, even while no kernel runs.

Jupyter Server's contents manager emits an event for every rename, copy, save and delete
(schema :data:`CONTENTS_EVENTS`, through ``jupyter_events``). A rename of a notebook or of a
folder re-files the sessions filed under the old path (the kernel files them under the
absolute path Jupyter Server gives it, ``JPY_SESSION_NAME``) and records the move, so a
kernel still started with the old name resolves to the new one. A new file made at a path a
notebook moved away from (a fresh ``Untitled.ipynb``) is another notebook: the recorded move
from there is forgotten. A copy is left alone: it starts a session of its own.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

from agent_kernel.store.sessions import Sessions

if TYPE_CHECKING:
    from agent_kernel.server.state import ServerState

__all__ = ["CONTENTS_EVENTS", "listen", "on_contents_event"]

CONTENTS_EVENTS = "https://events.jupyter.org/jupyter_server/contents_service/v1"
_MADE = ("create", "save", "upload", "copy")  # a file (possibly new) now at "path"


def absolute(root_dir: str, api_path: str) -> str:
    """The file at ``api_path`` (the contents API's, ``/``-separated) as the kernel names it."""
    return os.path.join(os.path.expanduser(root_dir), *[part for part in api_path.split("/") if part])


def listen(event_logger: Any, state: ServerState, root_dir: str) -> None:
    """Re-file sessions on every rename the server's contents manager reports."""

    async def listener(logger: Any, schema_id: str, data: dict[str, Any]) -> None:  # jupyter_events passes keywords
        await on_contents_event(state, root_dir, data)

    event_logger.add_listener(schema_id=CONTENTS_EVENTS, listener=listener)


async def on_contents_event(state: ServerState, root_dir: str, data: dict[str, Any]) -> None:
    """Act on one contents event (see the module); a failure is logged, never raised."""
    action, path, source = data.get("action"), data.get("path"), data.get("source_path")
    if not isinstance(path, str) or action not in ("rename", *_MADE):
        return
    new = absolute(root_dir, path)

    def work() -> None:
        with state.store.connect() as con:
            sessions = Sessions(con)
            if action == "rename" and isinstance(source, str):
                moved = sessions.move_notebook(absolute(root_dir, source), new, by="server")
                if moved:
                    state.log.info("agent-kernel: %d session(s) follow %s to %s", moved, source, path)
            elif path.endswith(".ipynb") and sessions.moved_to(new) is not None:
                sessions.forget_moves_from(new)

    try:
        await asyncio.get_running_loop().run_in_executor(None, work)
    except Exception as exc:  # noqa: BLE001 - the rename itself succeeded; say why sessions did not follow
        state.log.warning("agent-kernel: sessions could not follow %s to %s: %s", source, path, exc)
