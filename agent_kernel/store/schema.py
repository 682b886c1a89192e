"""The project's tables, created by numbered migrations.

A migration runs once per file; ``schema_migrations`` records which ran. Append new
migrations at the end, never edit one that has shipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

# Timestamps are stored as UTC wall-clock TIMESTAMPs: TIMESTAMPTZ values need pytz to reach Python.
UTC_NOW = "(now() AT TIME ZONE 'UTC')"

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE IF NOT EXISTS sessions (
            id          VARCHAR PRIMARY KEY,
            name        VARCHAR NOT NULL UNIQUE,
            notebook    VARCHAR,
            state       VARCHAR NOT NULL DEFAULT 'idle',
            model       VARCHAR,
            token_limit BIGINT,
            tokens_used BIGINT NOT NULL DEFAULT 0,
            parent_id   VARCHAR,
            last_error  VARCHAR,
            created_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
            updated_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')
        );
        CREATE TABLE IF NOT EXISTS messages (
            session_id  VARCHAR NOT NULL,
            seq         INTEGER NOT NULL,
            turn        INTEGER NOT NULL,
            role        VARCHAR NOT NULL,
            content     JSON NOT NULL,
            created_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
            PRIMARY KEY (session_id, seq)
        );
        """,
    ),
]

# Tables the model may read but never write (issue: guarded SQL). Later migrations add theirs.
PROTECTED_TABLES: set[str] = {"sessions", "messages", "schema_migrations"}


def migrate(con: duckdb.DuckDBPyConnection) -> None:
    """Run the migrations this file has not seen yet."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " id INTEGER PRIMARY KEY, applied_at TIMESTAMP DEFAULT (now() AT TIME ZONE 'UTC'))"
    )
    done = {row[0] for row in con.execute("SELECT id FROM schema_migrations").fetchall()}
    for number, sql in MIGRATIONS:
        if number in done:
            continue
        con.execute("BEGIN")
        try:
            con.execute(sql)
            con.execute("INSERT INTO schema_migrations (id) VALUES (?)", [number])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
