"""The agent's UI components, every version kept.

A component is HTML, CSS and JavaScript the model wrote, with a declared state (its keys
and initial values), the messages it may send to the session and the tools it may call.
As with agent-defined tools, ``agent_ui_components`` holds each name's current version and
``agent_ui_component_versions`` every version ever saved: an update writes a new version,
deleting removes the head row and keeps the versions.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from agent_kernel.store.rows import aggregate_row
from agent_kernel.store.schema import UTC_NOW

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class ComponentVersion:
    """One stored version of a component."""

    name: str
    version: int
    description: str
    html: str
    css: str = ""
    js: str = ""
    state: dict[str, Any] = field(default_factory=dict)
    messages: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        found = asdict(self)
        found["messages"], found["tools"] = list(self.messages), list(self.tools)
        return found


_FIELDS = "v.name, v.version, v.description, v.html, v.css, v.js, v.state, v.messages, v.tools"


class Components:
    """``agent_ui_components`` and ``agent_ui_component_versions`` through one connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def exists(self, name: str) -> bool:
        return self.con.execute("SELECT 1 FROM agent_ui_components WHERE name = ?", [name]).fetchone() is not None

    def get(self, name: str, version: int | None = None) -> ComponentVersion | None:
        """The current version of ``name`` (or its ``version``, also of a deleted one)."""
        if version is None:
            head = self.con.execute("SELECT version FROM agent_ui_components WHERE name = ?", [name]).fetchone()
            if head is None:
                return None
            version = head[0]
        row = self.con.execute(
            f"SELECT {_FIELDS} FROM agent_ui_component_versions v WHERE v.name = ? AND v.version = ?", [name, version]
        ).fetchone()
        return _component(row) if row else None

    def list(self) -> list[ComponentVersion]:
        """The current version of every component, by name."""
        rows = self.con.execute(
            f"SELECT {_FIELDS} FROM agent_ui_components c "
            "JOIN agent_ui_component_versions v ON v.name = c.name AND v.version = c.version ORDER BY c.name"
        ).fetchall()
        return [_component(row) for row in rows]

    def save(self, definition: ComponentVersion, session_id: str | None = None) -> int:
        """Store ``definition`` as the next version of its component (which becomes current)."""
        row = aggregate_row(self.con.execute(
            "SELECT coalesce(max(version), 0) FROM agent_ui_component_versions WHERE name = ?", [definition.name]
        ))  # fmt: skip
        version = int(row[0]) + 1
        self.con.execute(
            "INSERT INTO agent_ui_component_versions (name, version, description, html, css, js, state, messages, "
            "tools, session_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                definition.name, version, definition.description, definition.html, definition.css, definition.js,
                json.dumps(definition.state), list(definition.messages), list(definition.tools), session_id,
            ],
        )  # fmt: skip
        self.con.execute(
            f"INSERT INTO agent_ui_components (name, version, updated_at) VALUES (?, ?, {UTC_NOW}) "
            "ON CONFLICT (name) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at",
            [definition.name, version],
        )
        return version

    def delete(self, name: str) -> bool:
        row = self.con.execute("DELETE FROM agent_ui_components WHERE name = ? RETURNING name", [name]).fetchone()
        return row is not None


def _component(row: Any) -> ComponentVersion:
    name, version, description, html, css, js, state, messages, tools = row
    return ComponentVersion(
        name, version, description, html, css, js, json.loads(state) if isinstance(state, str) else state,
        tuple(messages), tuple(tools),
    )  # fmt: skip
