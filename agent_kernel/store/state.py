"""The agent's key-value state: JSON values by key, durable across kernels and sessions."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agent_kernel.store.schema import UTC_NOW

if TYPE_CHECKING:
    import duckdb


class State:
    """``agent_state`` read and written through one open connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def get(self, key: str) -> Any:
        """The value stored under ``key``, or ``None``."""
        row = self.con.execute("SELECT value FROM agent_state WHERE key = ?", [key]).fetchone()
        return json.loads(row[0]) if row else None

    def set(self, key: str, value: Any) -> None:
        self.con.execute(
            "INSERT INTO agent_state (key, value, updated_at) "
            f"VALUES (?, ?, {UTC_NOW}) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            [key, json.dumps(value, ensure_ascii=False)],
        )

    def delete(self, key: str) -> bool:
        """Remove ``key``; whether it existed."""
        row = self.con.execute("DELETE FROM agent_state WHERE key = ? RETURNING key", [key]).fetchone()
        return row is not None

    def keys(self, prefix: str | None = None) -> list[str]:
        if prefix:
            rows = self.con.execute(
                "SELECT key FROM agent_state WHERE starts_with(key, ?) ORDER BY key", [prefix]
            ).fetchall()
        else:
            rows = self.con.execute("SELECT key FROM agent_state ORDER BY key").fetchall()
        return [row[0] for row in rows]
