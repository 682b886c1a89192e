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
    # -- state, memory, the stored system prompt, the audit trail ---------------------------
    (
        10,
        """
        CREATE TABLE IF NOT EXISTS agent_state (
            key         VARCHAR PRIMARY KEY,
            value       JSON NOT NULL,
            updated_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')
        );
        CREATE TABLE IF NOT EXISTS memories (
            id                VARCHAR PRIMARY KEY,
            store             VARCHAR NOT NULL,
            type              VARCHAR NOT NULL,
            content           VARCHAR NOT NULL,
            tags              VARCHAR[] NOT NULL DEFAULT [],
            pursuing_priority INTEGER,
            period_key        VARCHAR,
            chat_id           VARCHAR,
            session_id        VARCHAR,
            created_at        TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
            updated_at        TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')
        );
        CREATE TABLE IF NOT EXISTS system_prompt_versions (
            version     INTEGER PRIMARY KEY,
            prompt      VARCHAR NOT NULL,
            operation   VARCHAR NOT NULL,
            author      VARCHAR NOT NULL,
            session_id  VARCHAR,
            created_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')
        );
        CREATE TABLE IF NOT EXISTS tool_calls (
            session_id   VARCHAR NOT NULL,
            turn         INTEGER NOT NULL,
            tool_use_id  VARCHAR,
            tool         VARCHAR NOT NULL,
            input        JSON,
            result_chars INTEGER NOT NULL,
            is_error     BOOLEAN NOT NULL,
            duration_ms  DOUBLE,
            created_at   TIMESTAMP NOT NULL
        );
        CREATE TABLE IF NOT EXISTS code_executions (
            id              VARCHAR NOT NULL,
            session_id      VARCHAR NOT NULL,
            turn            INTEGER NOT NULL,
            code            VARCHAR NOT NULL,
            stdout          VARCHAR,
            stderr          VARCHAR,
            success         BOOLEAN NOT NULL,
            duration_ms     DOUBLE,
            error_type      VARCHAR,
            error_message   VARCHAR,
            traceback       VARCHAR,
            error_category  VARCHAR,
            trigger_prompt  VARCHAR,
            isolated        BOOLEAN NOT NULL DEFAULT false,
            created_at      TIMESTAMP NOT NULL
        );
        COMMENT ON TABLE sessions IS 'Project table (read-only): the agent''s conversations.';
        COMMENT ON TABLE messages IS 'Project table (read-only): every message of every session, content as JSON.';
        COMMENT ON TABLE schema_migrations IS 'Project table (read-only): migrations applied to this file.';
        COMMENT ON TABLE agent_state IS 'Project table (read-only here; use get_state/set_state): JSON values by key.';
        COMMENT ON TABLE memories IS 'Project table (read-only here; use the memory tool): user memories and summaries.';
        COMMENT ON TABLE system_prompt_versions IS 'Project table (read-only here; use edit_system_prompt): every version of your stored instructions.';
        COMMENT ON TABLE tool_calls IS 'Project table (read-only): every tool call (session, turn, tool, input, result size, error, duration).';
        COMMENT ON TABLE code_executions IS 'Project table (read-only): every run_code execution with its outputs and error category.';
        """,
    ),
    # -- the scheduler (jobs, their runs, the leader lease) ---------------------------------
    (
        30,
        """
        CREATE TABLE IF NOT EXISTS jobs (
            id             VARCHAR PRIMARY KEY,
            name           VARCHAR NOT NULL,
            kind           VARCHAR NOT NULL,
            notebook       VARCHAR,
            task           VARCHAR,
            parameters     JSON,
            session        VARCHAR,
            origin_notebook VARCHAR,
            cwd            VARCHAR,
            kernel         VARCHAR,
            cron           VARCHAR,
            run_at         TIMESTAMP,
            timezone       VARCHAR NOT NULL,
            model          VARCHAR,
            token_limit    BIGINT,
            enabled        BOOLEAN NOT NULL DEFAULT true,
            next_run_at    TIMESTAMP,
            catchup        VARCHAR NOT NULL DEFAULT 'latest',
            max_catchup    INTEGER NOT NULL DEFAULT 10,
            overlap        VARCHAR NOT NULL DEFAULT 'forbid',
            timeout_s      DOUBLE NOT NULL DEFAULT 3600,
            cell_timeout_s DOUBLE,
            max_retries    INTEGER NOT NULL DEFAULT 1,
            retry_on       VARCHAR NOT NULL DEFAULT 'LOST',
            retry_delay_s  DOUBLE NOT NULL DEFAULT 30,
            options        JSON,
            created_by     VARCHAR,
            created_at     TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
            updated_at     TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
            deleted_at     TIMESTAMP
        );
        CREATE TABLE IF NOT EXISTS runs (
            id               VARCHAR PRIMARY KEY,
            job_id           VARCHAR NOT NULL,
            scheduled_for    TIMESTAMP NOT NULL,
            attempt          INTEGER NOT NULL DEFAULT 1,
            cause            VARCHAR NOT NULL,
            status           VARCHAR NOT NULL,
            not_before       TIMESTAMP NOT NULL,
            created_at       TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
            started_at       TIMESTAMP,
            finished_at      TIMESTAMP,
            heartbeat_at     TIMESTAMP,
            worker           VARCHAR,
            executor         VARCHAR,
            executor_detail  VARCHAR,
            run_dir          VARCHAR,
            output_path      VARCHAR,
            error            VARCHAR,
            error_cell       INTEGER,
            exit_code        INTEGER,
            cells_done       INTEGER,
            cells_total      INTEGER,
            cancel_requested BOOLEAN NOT NULL DEFAULT false,
            UNIQUE (job_id, scheduled_for, attempt)
        );
        CREATE TABLE IF NOT EXISTS scheduler_leases (
            name        VARCHAR PRIMARY KEY,
            holder      VARCHAR NOT NULL,
            acquired_at TIMESTAMP NOT NULL,
            expires_at  TIMESTAMP NOT NULL
        );
        COMMENT ON TABLE jobs IS 'Project table (read-only here; use the schedule tools): scheduled notebooks, tasks and reminders.';
        COMMENT ON TABLE runs IS 'Project table (read-only): every firing of a job with its status, times, output notebook and error.';
        COMMENT ON TABLE scheduler_leases IS 'Project table (read-only): which scheduler daemon leads.';
        """,
    ),
    # -- usage and cost: every model call, a session's cost limit -----------------------------
    (
        40,
        """
        CREATE TABLE IF NOT EXISTS model_calls (
            session_id          VARCHAR NOT NULL,
            turn                INTEGER NOT NULL,
            call                INTEGER NOT NULL,
            model               VARCHAR NOT NULL,
            input_tokens        BIGINT NOT NULL,
            output_tokens       BIGINT NOT NULL,
            cache_read_tokens   BIGINT NOT NULL,
            cache_write_tokens  BIGINT NOT NULL,
            request_chars       BIGINT,
            duration_ms         DOUBLE,
            cost_usd            DOUBLE,
            stop_reason         VARCHAR,
            created_at          TIMESTAMP NOT NULL
        );
        ALTER TABLE sessions ADD COLUMN IF NOT EXISTS cost_limit DOUBLE;
        COMMENT ON TABLE model_calls IS 'Project table (read-only): every model call (session, turn, model, input/output/cache tokens, duration, cost in USD; cost is NULL when the model has no price).';
        """,
    ),
    # -- the context budget: summaries that stand in for a session's oldest messages -------
    (
        50,
        """
        CREATE TABLE IF NOT EXISTS context_summaries (
            session_id   VARCHAR NOT NULL,
            covers       INTEGER NOT NULL,
            trimmed      INTEGER NOT NULL,
            summary      VARCHAR,
            fingerprint  VARCHAR NOT NULL,
            model        VARCHAR,
            tokens_before BIGINT,
            tokens_after BIGINT,
            duration_ms  DOUBLE,
            created_at   TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
            PRIMARY KEY (session_id, covers, trimmed)
        );
        COMMENT ON TABLE context_summaries IS 'Project table (read-only): compactions of long sessions. The request sends summary in place of the session''s first `covers` messages (in order), and trims tool results before message `trimmed`; table messages keeps them all.';
        """,
    ),
    # -- what the agent builds and keeps: its own tools and libraries ------------------------
    (
        60,
        """
        CREATE TABLE IF NOT EXISTS agent_tools (
            name        VARCHAR PRIMARY KEY,
            version     INTEGER NOT NULL,
            enabled     BOOLEAN NOT NULL DEFAULT true,
            updated_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')
        );
        CREATE TABLE IF NOT EXISTS agent_tool_versions (
            name             VARCHAR NOT NULL,
            version          INTEGER NOT NULL,
            description      VARCHAR NOT NULL,
            parameter_schema JSON NOT NULL,
            code             VARCHAR NOT NULL,
            isolated         BOOLEAN NOT NULL DEFAULT false,
            writes           BOOLEAN,
            session_id       VARCHAR,
            created_at       TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
            PRIMARY KEY (name, version)
        );
        CREATE TABLE IF NOT EXISTS agent_libraries (
            name        VARCHAR PRIMARY KEY,
            version     INTEGER NOT NULL,
            updated_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')
        );
        CREATE TABLE IF NOT EXISTS agent_library_versions (
            name        VARCHAR NOT NULL,
            version     INTEGER NOT NULL,
            description VARCHAR NOT NULL,
            code        VARCHAR NOT NULL,
            session_id  VARCHAR,
            created_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
            PRIMARY KEY (name, version)
        );
        COMMENT ON TABLE agent_tools IS 'Project table (read-only): the tools you defined (create_tool), with their current version and whether they are offered.';
        COMMENT ON TABLE agent_tool_versions IS 'Project table (read-only): every version of the tools you defined; writes NULL means unknown (treated as writing).';
        COMMENT ON TABLE agent_libraries IS 'Project table (read-only): your Python libraries (import agent_libs.NAME), with their current version.';
        COMMENT ON TABLE agent_library_versions IS 'Project table (read-only): every version of your libraries.';
        """,
    ),
    # -- skills (named Markdown documents) and each session's notepad -----------------------
    (
        70,
        """
        CREATE TABLE IF NOT EXISTS skills (
            name         VARCHAR PRIMARY KEY,
            description  VARCHAR NOT NULL,
            content      VARCHAR NOT NULL,
            tags         VARCHAR[] NOT NULL,
            enabled      BOOLEAN NOT NULL DEFAULT true,
            version      INTEGER NOT NULL,
            updated_at   TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')
        );
        CREATE TABLE IF NOT EXISTS skill_states (
            name     VARCHAR PRIMARY KEY,
            enabled  BOOLEAN NOT NULL
        );
        CREATE TABLE IF NOT EXISTS notepads (
            session_id  VARCHAR PRIMARY KEY,
            content     VARCHAR NOT NULL,
            updated_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')
        );
        COMMENT ON TABLE skills IS 'Project table (read-only here; use the skill tools): your skills, named Markdown documents.';
        COMMENT ON TABLE skill_states IS 'Project table (read-only): skills from the skills folder switched on or off.';
        COMMENT ON TABLE notepads IS 'Project table (read-only here; use the notepad tools): each session''s notepad.';
        """,
    ),
    # -- sub-sessions: the task a child was given and the result it reported ---------------
    (
        80,
        """
        ALTER TABLE sessions ADD COLUMN IF NOT EXISTS task VARCHAR;
        ALTER TABLE sessions ADD COLUMN IF NOT EXISTS result VARCHAR;
        """,
    ),
    # -- recall of past sessions: each session's short summary ----------------------------
    (
        90,
        """
        CREATE TABLE IF NOT EXISTS session_summaries (
            session_id  VARCHAR PRIMARY KEY,
            summary     VARCHAR NOT NULL,
            covers      INTEGER NOT NULL,
            model       VARCHAR,
            created_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
            updated_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')
        );
        COMMENT ON TABLE session_summaries IS 'Project table (read-only; search_sessions and session_timeline read it): a short summary of each session, made when it went idle or was closed; it covers the messages with seq < covers (model NULL: the model call failed and it lists the prompts).';
        """,
    ),
    # -- provenance: which turn wrote what the agent keeps, and whether it had read untrusted
    # content by then (see store/provenance.py) -------------------------------------------
    (
        100,
        """
        ALTER TABLE sessions ADD COLUMN IF NOT EXISTS untrusted_sources JSON;
        CREATE TABLE IF NOT EXISTS provenance (
            kind        VARCHAR NOT NULL,
            name        VARCHAR NOT NULL,
            version     INTEGER,
            session_id  VARCHAR,
            turn        INTEGER,
            untrusted   BOOLEAN NOT NULL,
            sources     JSON,
            cleared_at  TIMESTAMP,
            created_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')
        );
        COMMENT ON TABLE provenance IS 'Project table (read-only): which session and turn wrote each kept item (tool, library, skill, memory, notepad, prompt, table comment, job) and whether it had read untrusted content by then.';
        """,
    ),
    # -- agent-defined tool versions the person trusted as read-only in the approval card ----
    (
        110,
        """
        CREATE TABLE IF NOT EXISTS agent_tool_grants (
            name        VARCHAR NOT NULL,
            version     INTEGER NOT NULL,
            granted_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
            PRIMARY KEY (name, version)
        );
        COMMENT ON TABLE agent_tool_grants IS 'Project table (read-only): agent-defined tool versions the user trusted as read-only in the approval card (offered in read-only turns and run without asking; a new version needs a new grant).';
        """,
    ),
    # -- compactions drop old images before they trim old text ------------------------------
    (
        120,
        """
        ALTER TABLE context_summaries ADD COLUMN IF NOT EXISTS unimaged INTEGER DEFAULT 0;
        COMMENT ON TABLE context_summaries IS 'Project table (read-only): compactions of long sessions. The request sends summary in place of the session''s first `covers` messages (in order), sends images before message `unimaged` as one-line placeholders and trims tool results before message `trimmed`; table messages keeps them all.';
        """,
    ),
    # -- a job's versions: what each edit changed, and which version each run ran ----------
    (
        130,
        """
        ALTER TABLE jobs ADD COLUMN IF NOT EXISTS version INTEGER DEFAULT 1;
        ALTER TABLE runs ADD COLUMN IF NOT EXISTS job_version INTEGER;
        CREATE TABLE IF NOT EXISTS job_versions (
            job_id      VARCHAR NOT NULL,
            version     INTEGER NOT NULL,
            definition  JSON NOT NULL,
            changed     JSON NOT NULL,
            changed_by  VARCHAR NOT NULL,
            changed_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
            PRIMARY KEY (job_id, version)
        );
        INSERT INTO job_versions (job_id, version, definition, changed, changed_by, changed_at)
            SELECT id, 1, to_json({'name': name, 'notebook': notebook, 'task': task, 'parameters': parameters,
                                   'cron': cron, 'run_at': run_at, 'timezone': timezone}),
                   '[]', coalesce(created_by, 'unknown'), created_at
            FROM jobs ON CONFLICT DO NOTHING;
        COMMENT ON TABLE job_versions IS 'Project table (read-only): each version of a scheduled job (its definition after the change, the fields changed, who changed it); runs.job_version names the version a run ran with.';
        """,
    ),
    # -- notifications of runs (to whom, what failed) and why a run failed -----------------
    (
        140,
        """
        ALTER TABLE runs ADD COLUMN IF NOT EXISTS notified VARCHAR;
        ALTER TABLE runs ADD COLUMN IF NOT EXISTS notify_error VARCHAR;
        ALTER TABLE runs ADD COLUMN IF NOT EXISTS notified_at TIMESTAMP;
        ALTER TABLE runs ADD COLUMN IF NOT EXISTS explanation VARCHAR;
        ALTER TABLE runs ADD COLUMN IF NOT EXISTS explain_tokens INTEGER;
        ALTER TABLE runs ADD COLUMN IF NOT EXISTS explain_cost DOUBLE;
        """,
    ),
    # -- the order of a turn's code runs, so a turn's successful code rebuilds as cells -------
    (
        150,
        """
        ALTER TABLE code_executions ADD COLUMN IF NOT EXISTS seq INTEGER;
        COMMENT ON COLUMN code_executions.seq IS 'The run''s place among its turn''s runs (1, 2, ...); NULL for runs stored before it was kept (they are ordered by created_at).';
        """,
    ),
    # -- a run started with other parameters than its job's ("run now with ...") ------------
    (
        160,
        """
        ALTER TABLE runs ADD COLUMN IF NOT EXISTS parameters JSON;
        COMMENT ON COLUMN runs.parameters IS 'Values this run used over its job''s parameters, by name (a run now with other values); NULL: the job''s own.';
        """,
    ),
    # -- inline completion's model calls: no session, source 'completion' -----------------
    (
        170,
        """
        ALTER TABLE model_calls ADD COLUMN IF NOT EXISTS source VARCHAR DEFAULT 'turn';
        ALTER TABLE model_calls ALTER COLUMN session_id DROP NOT NULL;
        ALTER TABLE model_calls ALTER COLUMN turn DROP NOT NULL;
        COMMENT ON TABLE model_calls IS 'Project table (read-only): every model call (session, turn, model, input/output/cache tokens, duration, cost in USD; cost is NULL when the model has no price). source: turn (a %agent turn and its side calls) or completion (an inline completion in JupyterLab: no session or turn).';
        """,
    ),
    # -- components the agent builds: HTML/CSS/JS shown in a sandboxed frame ------------------
    (
        180,
        """
        CREATE TABLE IF NOT EXISTS agent_ui_components (
            name        VARCHAR PRIMARY KEY,
            version     INTEGER NOT NULL,
            updated_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')
        );
        CREATE TABLE IF NOT EXISTS agent_ui_component_versions (
            name        VARCHAR NOT NULL,
            version     INTEGER NOT NULL,
            description VARCHAR NOT NULL,
            html        VARCHAR NOT NULL,
            css         VARCHAR NOT NULL,
            js          VARCHAR NOT NULL,
            state       JSON NOT NULL,
            messages    VARCHAR[] NOT NULL,
            tools       VARCHAR[] NOT NULL,
            session_id  VARCHAR,
            created_at  TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
            PRIMARY KEY (name, version)
        );
        COMMENT ON TABLE agent_ui_components IS 'Project table (read-only): the UI components you built (create_ui_component), with their current version.';
        COMMENT ON TABLE agent_ui_component_versions IS 'Project table (read-only): every version of your UI components: html, css, js, the declared state (its keys and initial values), the messages it may send and the tools it may call.';
        """,
    ),
    # -- trust changes name the person's event that made them (see authority.py) ------------
    (
        190,
        """
        ALTER TABLE provenance ADD COLUMN IF NOT EXISTS cleared_by VARCHAR;
        ALTER TABLE agent_tool_grants ADD COLUMN IF NOT EXISTS granted_by VARCHAR;
        COMMENT ON COLUMN provenance.cleared_by IS 'The person''s event that cleared the taint (card, magic, panel, cli, server, dialog: what made it); NULL while tainted.';
        COMMENT ON COLUMN agent_tool_grants.granted_by IS 'The person''s event that trusted the version as read-only (the approval card''s click).';
        """,
    ),
    # -- a job's standing grants: what its unattended runs may do after untrusted content ---
    (
        200,
        """
        ALTER TABLE jobs ADD COLUMN IF NOT EXISTS grants JSON;
        ALTER TABLE jobs ADD COLUMN IF NOT EXISTS granted_by VARCHAR;
        COMMENT ON COLUMN jobs.grants IS 'Standing grants the person set: {hosts, after_untrusted}, the hosts its runs may reach and the writing tools they may run after untrusted content; NULL: none.';
        COMMENT ON COLUMN jobs.granted_by IS 'The person''s event that set the grants (cli, server: what made it).';
        """,
    ),
    # -- a notebook renamed or moved: its sessions follow it, and an old path still resolves ----
    (
        210,
        """
        CREATE TABLE IF NOT EXISTS notebook_moves (
            old_path    VARCHAR NOT NULL,
            new_path    VARCHAR NOT NULL,
            moved_by    VARCHAR NOT NULL,
            moved_at    TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')
        );
        COMMENT ON TABLE notebook_moves IS 'Project table (read-only): notebooks renamed or moved (absolute paths), so sessions filed under the old path follow the notebook; moved_by says what saw it (server, kernel).';
        """,
    ),
    # -- a notebook's id (metadata.agent_kernel.document): sessions follow a file moved on disk ----
    (
        215,
        """
        CREATE TABLE IF NOT EXISTS notebook_documents (
            document    VARCHAR PRIMARY KEY,
            path        VARCHAR NOT NULL,
            seen_at     TIMESTAMP NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')
        );
        COMMENT ON TABLE notebook_documents IS 'Project table (read-only): where each notebook with an id (metadata.agent_kernel.document) was last seen (absolute path), so its sessions follow it when it is moved outside Jupyter.';
        """,
    ),
]

# Tables the model may read but never write. Later migrations add theirs.
# (The SQL guard lets the model write only tables named ai_*, so these are read-only to it.)
PROTECTED_TABLES: set[str] = {
    "sessions",
    "messages",
    "schema_migrations",
    # where notebooks moved, and where each notebook with an id was last seen
    "notebook_moves",
    "notebook_documents",
    # state, memory, the stored system prompt, the audit trail
    "agent_state",
    "memories",
    "system_prompt_versions",
    "tool_calls",
    "code_executions",
    # the scheduler
    "jobs",
    "runs",
    "scheduler_leases",
    # the context budget
    "context_summaries",
    # usage and cost
    "model_calls",
    # agent-defined tools and libraries
    "agent_tools",
    "agent_tool_versions",
    "agent_libraries",
    "agent_library_versions",
    # skills and the session notepad
    "skills",
    "skill_states",
    "notepads",
    # recall of past sessions
    "session_summaries",
    # who wrote what is kept, and the tool versions the person trusted as read-only
    "provenance",
    "agent_tool_grants",
    # the versions of scheduled jobs
    "job_versions",
    # the agent's UI components
    "agent_ui_components",
    "agent_ui_component_versions",
}

# The prefix of the tables the model may create and write (db_sql).
WRITABLE_PREFIX = "ai_"


def quote_name(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


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
