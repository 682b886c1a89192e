"""The agent's own tools and libraries, every version kept.

Each kind has a head table (name, current version; a tool also whether it is enabled)
and a versions table holding every definition ever saved. An update writes a new version
from the current one; a roll back writes a new version from an old one, so history only
grows. Deleting removes the head row; the versions stay, and a later create of the same
name goes on numbering after them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from agent_kernel.authority import PersonEvent
from agent_kernel.store.rows import aggregate_row
from agent_kernel.store.schema import UTC_NOW

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class ToolVersion:
    """One stored version of an agent-defined tool."""

    name: str
    version: int
    description: str
    parameter_schema: dict[str, Any]
    code: str
    isolated: bool
    writes: bool | None  # None: not declared, treated as writing
    enabled: bool = True

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LibraryVersion:
    """One stored version of a library (``import agent_libs.NAME``)."""

    name: str
    version: int
    description: str
    code: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_TOOL_FIELDS = "v.name, v.version, v.description, v.parameter_schema, v.code, v.isolated, v.writes"


class AgentTools:
    """``agent_tools`` and ``agent_tool_versions`` through one open connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def exists(self, name: str) -> bool:
        return self.con.execute("SELECT 1 FROM agent_tools WHERE name = ?", [name]).fetchone() is not None

    def get(self, name: str, version: int | None = None) -> ToolVersion | None:
        """The current version of ``name`` (or its ``version``); None when there is none."""
        head = self.con.execute("SELECT version, enabled FROM agent_tools WHERE name = ?", [name]).fetchone()
        if head is None:
            return None
        row = self.con.execute(
            f"SELECT {_TOOL_FIELDS} FROM agent_tool_versions v WHERE v.name = ? AND v.version = ?",
            [name, version if version is not None else head[0]],
        ).fetchone()
        return _tool(row, head[1]) if row else None

    def enabled(self) -> list[ToolVersion]:
        """The current version of every enabled tool, by name."""
        rows = self.con.execute(
            f"SELECT {_TOOL_FIELDS}, t.enabled FROM agent_tools t "
            "JOIN agent_tool_versions v ON v.name = t.name AND v.version = t.version "
            "WHERE t.enabled ORDER BY t.name"
        ).fetchall()
        return [_tool(row[:-1], row[-1]) for row in rows]

    def list(self, include_disabled: bool = False) -> list[ToolVersion]:
        rows = self.con.execute(
            f"SELECT {_TOOL_FIELDS}, t.enabled FROM agent_tools t "
            "JOIN agent_tool_versions v ON v.name = t.name AND v.version = t.version "
            + ("" if include_disabled else "WHERE t.enabled ")
            + "ORDER BY t.name"
        ).fetchall()
        return [_tool(row[:-1], row[-1]) for row in rows]

    def save(self, definition: ToolVersion, session_id: str | None = None) -> int:
        """Store ``definition`` as the next version of its tool (which becomes current)."""
        version = _next_version(self.con, "agent_tool_versions", definition.name)
        self.con.execute(
            "INSERT INTO agent_tool_versions (name, version, description, parameter_schema, code, isolated, "
            "writes, session_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                definition.name, version, definition.description, json.dumps(definition.parameter_schema),
                definition.code, definition.isolated, definition.writes, session_id,
            ],
        )  # fmt: skip
        self.con.execute(
            f"INSERT INTO agent_tools (name, version, enabled, updated_at) VALUES (?, ?, ?, {UTC_NOW}) "
            "ON CONFLICT (name) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at",
            [definition.name, version, definition.enabled],
        )
        return version

    def set_enabled(self, name: str, enabled: bool) -> bool:
        """Whether ``name`` exists (and is now ``enabled``)."""
        row = self.con.execute(
            f"UPDATE agent_tools SET enabled = ?, updated_at = {UTC_NOW} WHERE name = ? RETURNING name",
            [enabled, name],
        ).fetchone()
        return row is not None

    def delete(self, name: str) -> bool:
        row = self.con.execute("DELETE FROM agent_tools WHERE name = ? RETURNING name", [name]).fetchone()
        return row is not None

    def trust_read_only(self, name: str, version: int, *, by: PersonEvent) -> None:
        """The person trusted ``version`` of ``name`` as read-only: ``by`` is their event
        (the approval card's click, :func:`agent_kernel.authority.card_click`), kept as
        ``granted_by``."""
        if not isinstance(by, PersonEvent):
            raise TypeError("trust_read_only takes by=, the person's event (agent_kernel.authority)")
        self.con.execute(
            "INSERT INTO agent_tool_grants (name, version, granted_by) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            [name, version, by.label()],
        )

    def trusted_read_only(self) -> set[tuple[str, int]]:
        """Every (name, version) the person trusted as read-only."""
        return {
            (name, version)
            for name, version in self.con.execute("SELECT name, version FROM agent_tool_grants").fetchall()
        }


class Libraries:
    """``agent_libraries`` and ``agent_library_versions`` through one open connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def get(self, name: str, version: int | None = None) -> LibraryVersion | None:
        head = self.con.execute("SELECT version FROM agent_libraries WHERE name = ?", [name]).fetchone()
        if head is None:
            return None
        row = self.con.execute(
            "SELECT name, version, description, code FROM agent_library_versions WHERE name = ? AND version = ?",
            [name, version if version is not None else head[0]],
        ).fetchone()
        return LibraryVersion(*row) if row else None

    def list(self) -> list[LibraryVersion]:
        rows = self.con.execute(
            "SELECT v.name, v.version, v.description, v.code FROM agent_libraries l "
            "JOIN agent_library_versions v ON v.name = l.name AND v.version = l.version ORDER BY l.name"
        ).fetchall()
        return [LibraryVersion(*row) for row in rows]

    def versions(self) -> dict[str, int]:
        """The current version of every library, by name."""
        return dict(self.con.execute("SELECT name, version FROM agent_libraries").fetchall())

    def save(self, name: str, description: str, code: str, session_id: str | None = None) -> int:
        version = _next_version(self.con, "agent_library_versions", name)
        self.con.execute(
            "INSERT INTO agent_library_versions (name, version, description, code, session_id) VALUES (?, ?, ?, ?, ?)",
            [name, version, description, code, session_id],
        )
        self.con.execute(
            f"INSERT INTO agent_libraries (name, version, updated_at) VALUES (?, ?, {UTC_NOW}) "
            "ON CONFLICT (name) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at",
            [name, version],
        )
        return version

    def delete(self, name: str) -> bool:
        row = self.con.execute("DELETE FROM agent_libraries WHERE name = ? RETURNING name", [name]).fetchone()
        return row is not None


def _next_version(con: duckdb.DuckDBPyConnection, table: str, name: str) -> int:
    row = aggregate_row(con.execute(f"SELECT coalesce(max(version), 0) FROM {table} WHERE name = ?", [name]))
    return int(row[0]) + 1


def _tool(row: Any, enabled: bool) -> ToolVersion:
    name, version, description, schema, code, isolated, writes = row
    return ToolVersion(
        name, version, description, json.loads(schema) if isinstance(schema, str) else schema, code,
        bool(isolated), writes, bool(enabled),
    )  # fmt: skip
