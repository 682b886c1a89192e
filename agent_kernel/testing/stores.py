"""Stores that look like months of daily use, for measuring what a full store costs.

A person who uses the agent every day keeps every conversation, tool call, run and memory
in one DuckDB file that only grows. :func:`fill` writes such a history into a store file
whose tables the store's own migrations made: sessions of several turns, each turn a
prompt, tool calls with their results (code, printed tables, tracebacks) and an answer;
the audit rows of those tool calls and code runs, the model calls with their usage,
session summaries, compactions and notepads, memories and daily summaries with their
provenance, scheduled jobs with their versions and a year of runs with outputs, kept
tools, libraries, skills and UI components, state, and an ``ai_*`` table the model made
(in the store file, as a store from before the model's own file kept it: the store moves
it over at its first open). The proportions follow :class:`Proportions`; the size follows
a target in MB.

Every table is filled by ``INSERT ... SELECT`` over ``range()`` in chunks of sessions, so
1.5 GB takes minutes. The text is drawn from a pool of generated paragraphs (a Zipf-like
vocabulary of real words, then rarer made-up ones), so it compresses like text and
``search_sessions`` finds words in it.

:func:`cached` keeps built files under a cache folder (``AGENT_KERNEL_STORE_CACHE``, by
default ``~/.cache/agent-kernel/stores``), so repeated benchmark runs reuse them; copy a
cached file before writing to it.

This package reads none of the store's code (the scripted model stands outside the
agent): the caller passes the store's migration function, e.g.
``agent_kernel.store.schema.migrate``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

__all__ = ["BUILDER_VERSION", "Built", "Proportions", "cache_folder", "cached", "fill"]

# Bumped whenever what fill() writes changes, so cached files are rebuilt.
BUILDER_VERSION = 1

Migrate = Callable[[duckdb.DuckDBPyConnection], None]

_VOCABULARY = (
    "data frame table column row value sales revenue forecast month year quarter customer order "
    "product price cost total average median mean sum count group region store country city date "
    "time series plot chart figure axis label title legend bar line scatter histogram bins error "
    "import pandas numpy duckdb query select where join filter index file csv parquet path load read "
    "write save model train test split score accuracy feature target regression cluster outlier "
    "missing null clean type string number float integer list dict key name report summary result "
    "check run code cell notebook kernel function class method return print output warning "
    "traceback exception retry network request response api token limit budget memory session "
    "schedule job daily weekly email notify status done failed passed version change update delete "
    "insert create drop view schema database store cache weather temperature rain station sensor "
    "reading energy usage meter invoice payment account balance transfer growth rate trend season "
    "holiday weekend morning evening team project task deadline meeting note draft review approve"
)
_WORDS = _VOCABULARY.split()
_RARE = 4000  # made-up words after the common ones: the long tail of names and identifiers


@dataclass(frozen=True)
class Proportions:
    """How a year of daily use is made up, per session and per turn (averages)."""

    turns_per_session: int = 8
    tool_calls_per_turn: int = 3  # each turn has 0 .. 2 * this - 1 tool calls (mean about this)
    result_paragraphs: int = 4  # a tool result holds 1 .. this paragraphs of output
    jobs: int = 12  # scheduled jobs (plus one per 60 sessions)
    runs_per_session: float = 1.5  # a year of daily and hourly runs, in step with sessions
    memories_per_session: float = 0.02  # what the user asked to remember (the prompt shows what fits)
    summary_share: float = 0.9  # sessions with a recall summary
    compaction_share: float = 0.12  # sessions long enough to have been compacted
    notepad_share: float = 0.25
    ai_rows_per_session: int = 20  # rows of the model's own ai_* tables


# Measured on files built with the default proportions: a store's tables take about 13 MB
# of blocks before they hold much, and each session adds 35 to 40 KB.
_FIXED_MB = 13.0
_SESSIONS_PER_MB = 28.7
_CHUNK = 1500  # sessions per INSERT ... SELECT round
_POOL = 20_000  # paragraphs of generated text the messages draw from
_DAY_SECONDS = 86_400


@dataclass(frozen=True)
class Built:
    """What :func:`fill` wrote: the file, its size and row counts, and how long it took."""

    path: Path
    megabytes: float
    sessions: int
    messages: int
    seconds: float


def sessions_for(megabytes: float) -> int:
    """How many sessions make a file of about ``megabytes`` MB."""
    if megabytes <= 0:
        return 0
    return max(20, round((megabytes - _FIXED_MB) * _SESSIONS_PER_MB))


def fill(
    path: str | Path,
    megabytes: float,
    migrate: Migrate,
    *,
    proportions: Proportions | None = None,
    days: int = 365,
) -> Built:
    """Write about ``megabytes`` MB of history into the store file at ``path`` (made and
    migrated with ``migrate`` when it is new), spread over the last ``days`` days.

    0 MB leaves a migrated, empty store: the fresh store every figure is compared with.
    """
    shape = proportions or Proportions()
    started = time.perf_counter()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    total = sessions_for(megabytes)
    con = duckdb.connect(str(path))
    try:
        migrate(con)
        if total:
            _pool(con)
            for first in range(0, total, _CHUNK):
                _sessions(con, first, min(_CHUNK, total - first), total, shape, days)
            _kept(con, total, shape, days)
            con.execute("DROP TABLE pool")
        con.execute("CHECKPOINT")
        messages = _one(con, "SELECT count(*) FROM messages")
    finally:
        con.close()
    return Built(path, path.stat().st_size / 1e6, total, messages, time.perf_counter() - started)


def cache_folder() -> Path:
    """Where :func:`cached` keeps built files."""
    configured = os.environ.get("AGENT_KERNEL_STORE_CACHE")
    if configured:
        return Path(configured).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "agent-kernel" / "stores"


def cached(megabytes: float, migrate: Migrate, *, folder: Path | None = None) -> Path:
    """A built store of about ``megabytes`` MB, built once and kept in ``folder``
    (:func:`cache_folder` by default). Copy it before opening it for writing."""
    folder = folder or cache_folder()
    target = folder / f"store-v{BUILDER_VERSION}-{megabytes:g}mb.duckdb"
    if not target.exists():
        partial = target.with_name(target.name + f".{os.getpid()}.partial")
        partial.unlink(missing_ok=True)
        fill(partial, megabytes, migrate)
        partial.replace(target)
    return target


def copy_of(source: Path, destination: Path) -> Path:
    """A copy of the store file ``source`` at ``destination`` (its log too, if any)."""
    shutil.copyfile(source, destination)
    log = Path(str(source) + ".wal")
    if log.exists():
        shutil.copyfile(log, Path(str(destination) + ".wal"))
    return destination


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    row = con.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def _pool(con: duckdb.DuckDBPyConnection) -> None:
    """``pool(id, text)``: paragraphs of 8 to 120 words, a common word about two times in three."""
    words = "[" + ", ".join(f"'{w}'" for w in _WORDS) + "]"
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE pool AS
        SELECT p AS id, array_to_string(list_transform(range((8 + hash(p, 'n') % 113)::BIGINT), lambda w:
            CASE WHEN hash(p, w, 'c') % 3 < 2
                 THEN {words}[floor(pow({len(_WORDS)}, (hash(p, w) % 10000) / 10000.0))::INT]
                 ELSE 'x' || to_hex(floor(pow({_RARE}, (hash(p, w, 'r') % 10000) / 10000.0))::INT)
            END), ' ') AS text
        FROM range({_POOL}) t(p)
    """)


def _sessions(
    con: duckdb.DuckDBPyConnection, first: int, count: int, total: int, shape: Proportions, days: int
) -> None:
    """Sessions ``first`` .. ``first + count - 1`` of ``total``, with everything each one wrote."""
    span = days * _DAY_SECONDS
    turns, tools = shape.turns_per_session, shape.tool_calls_per_turn
    # One row per session: its id, name, notebook and when it started (evenly over the days).
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE s AS
        SELECT i, 'bench-' || lpad(i::VARCHAR, 9, '0') AS id,
               (now() AT TIME ZONE 'UTC') - to_seconds({span}) + to_seconds(({span} * i) // {max(total, 1)}) AS ts,
               (1 + hash(i, 't') % {2 * turns - 1})::BIGINT AS turns
        FROM range({first}, {first + count}) r(i)
    """)
    # One row per turn, with how many tool calls it made.
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE t AS
        SELECT s.i, s.id, n AS turn, s.ts + to_seconds(n * 240) AS ts, (hash(s.i, n, 'k') % {2 * tools})::BIGINT AS k
        FROM s, range(1, s.turns + 1) r(n)
    """)
    # One row per message: j = 0 the prompt; odd j < 2k a tool_use, even 0 < j <= 2k its
    # result; j = 2k + 1 the answer.
    con.execute("""
        CREATE OR REPLACE TEMP TABLE m AS
        SELECT t.i, t.id, t.turn, j, t.k, t.ts + to_seconds(j * 5) AS ts,
               'toolu_' || left(md5(t.id || t.turn || (j + 1) // 2), 24) AS use_id,
               CASE hash(t.i, t.turn, (j + 1) // 2) % 10
                    WHEN 0 THEN 'db_sql' WHEN 1 THEN 'inspect_namespace' WHEN 2 THEN 'memory'
                    WHEN 3 THEN 'web_fetch' ELSE 'run_code' END AS tool,
               (hash(t.i, t.turn, j) >> 1)::BIGINT AS h
        FROM t, range(0, 2 * t.k + 2) r(j)
    """)
    para = f"(SELECT text FROM pool WHERE id = (m.h + {{n}}) % {_POOL})"
    prompt = para.format(n=1)
    code = f"'import pandas as pd' || chr(10) || replace({para.format(n=2)}, ' ', '_') || ' = load(\"' || left(md5(m.h::VARCHAR), 12) || '.csv\")' || chr(10) || 'print(' || {para.format(n=3)} || ')'"
    result = " || chr(10) || ".join(
        f"CASE WHEN m.h % {shape.result_paragraphs} >= {n} THEN {para.format(n=10 + n)} ELSE '' END"
        for n in range(shape.result_paragraphs)
    )
    content = f"""
        CASE WHEN j = 0 THEN to_json([{{'type': 'text', 'text': {prompt}}}])::VARCHAR
             WHEN j = 2 * k + 1 THEN to_json([{{'type': 'text', 'text': {para.format(n=4)} || ' ' || {para.format(n=5)}}}])::VARCHAR
             WHEN j % 2 = 1 THEN '[' || to_json({{'type': 'text', 'text': {para.format(n=6)}}})::VARCHAR || ', '
                 || to_json({{'type': 'tool_use', 'id': use_id, 'name': tool, 'input': {{'code': {code}}}}})::VARCHAR || ']'
             ELSE to_json([{{'type': 'tool_result', 'tool_use_id': use_id,
                 'content': to_json({{'success': h % 11 <> 0, 'stdout': {result}}})::VARCHAR}}])::VARCHAR
        END
    """
    con.execute(f"""
        INSERT INTO messages (session_id, seq, turn, role, content, created_at)
        SELECT id, (row_number() OVER (PARTITION BY id ORDER BY turn, j) - 1)::INT, turn,
               CASE WHEN j % 2 = 0 THEN 'user' ELSE 'assistant' END, ({content})::JSON, ts
        FROM m
    """)
    con.execute("""
        INSERT INTO sessions (id, name, notebook, state, model, tokens_used, created_at, updated_at, task, untrusted_sources)
        SELECT s.id, 'session-' || s.i, '/home/user/notebooks/' || (hash(s.i, 'nb') % 40) || '.ipynb', 'idle',
               'claude-sonnet-4-5', 4000 * s.turns, s.ts, s.ts + to_seconds(s.turns * 240 + 60),
               NULL, CASE WHEN s.i % 17 = 0 THEN '["https://example.com/page"]' END
        FROM s
    """)
    con.execute("""
        INSERT INTO tool_calls (session_id, turn, tool_use_id, tool, input, result_chars, is_error, duration_ms, created_at)
        SELECT id, turn, use_id, tool, to_json({'code': left(md5(h::VARCHAR) || md5(i::VARCHAR), 40)}),
               200 + h % 4000, h % 11 = 0, 5 + (h % 900)::DOUBLE, ts
        FROM m WHERE j % 2 = 1 AND j < 2 * k + 1
    """)
    con.execute(f"""
        INSERT INTO code_executions (id, session_id, turn, code, stdout, stderr, success, duration_ms, error_type,
                                     error_message, traceback, error_category, trigger_prompt, isolated, created_at, seq)
        SELECT left(md5(use_id), 16), id, turn, {code}, {para.format(n=10)}, '', h % 11 <> 0, 5 + (h % 900)::DOUBLE,
               CASE WHEN h % 11 = 0 THEN 'KeyError' END, CASE WHEN h % 11 = 0 THEN 'column not found' END,
               CASE WHEN h % 11 = 0 THEN 'Traceback (most recent call last):' || chr(10) || '  ' || {para.format(n=7)} END,
               CASE WHEN h % 11 = 0 THEN 'runtime' END, left({prompt}, 200), false, ts, ((j + 1) // 2)::INT
        FROM m WHERE j % 2 = 1 AND j < 2 * k + 1 AND tool = 'run_code'
    """)
    con.execute("""
        INSERT INTO model_calls (session_id, turn, call, model, input_tokens, output_tokens, cache_read_tokens,
                                 cache_write_tokens, request_chars, duration_ms, cost_usd, stop_reason, created_at, source)
        SELECT id, turn, ((j + 1) // 2)::INT, 'claude-sonnet-4-5', 1500 + h % 3000, 80 + h % 700, 9000 + h % 20000,
               h % 2000, 40000 + h % 60000, 800 + (h % 4000)::DOUBLE, 0.01 + (h % 100) / 1000.0,
               CASE WHEN j = 2 * k + 1 THEN 'end_turn' ELSE 'tool_use' END, ts, 'turn'
        FROM m WHERE j % 2 = 1
    """)
    con.execute(f"""
        INSERT INTO session_summaries (session_id, summary, covers, model, created_at, updated_at)
        SELECT s.id, {para.format(n=20).replace("m.h", "hash(s.i)")}, (SELECT count(*) FROM m WHERE m.id = s.id),
               'claude-haiku-4-5', s.ts + to_seconds(7200), s.ts + to_seconds(7200)
        FROM s WHERE hash(s.i, 'sum') % 100 < {round(shape.summary_share * 100)}
    """)
    con.execute(f"""
        INSERT INTO context_summaries (session_id, covers, trimmed, summary, fingerprint, model, tokens_before,
                                       tokens_after, duration_ms, created_at, unimaged)
        SELECT s.id, 12, 20, {para.format(n=21).replace("m.h", "hash(s.i)")}, md5(s.id), 'claude-haiku-4-5',
               150000, 30000, 4000, s.ts + to_seconds(3600), 12
        FROM s WHERE hash(s.i, 'cmp') % 100 < {round(shape.compaction_share * 100)}
    """)
    con.execute(f"""
        INSERT INTO notepads (session_id, content, updated_at)
        SELECT s.id, {para.format(n=22).replace("m.h", "hash(s.i)")}, s.ts
        FROM s WHERE hash(s.i, 'pad') % 100 < {round(shape.notepad_share * 100)}
    """)
    per = shape.memories_per_session
    con.execute(f"""
        INSERT INTO memories (id, store, type, content, tags, pursuing_priority, period_key, session_id, created_at, updated_at)
        SELECT 'mem-' || s.i, 'user_memory', CASE s.i % 3 WHEN 0 THEN 'preference' WHEN 1 THEN 'fact' ELSE 'project' END,
               left({para.format(n=23).replace("m.h", "hash(s.i)")}, 400), ['data', 'notebook'], NULL, NULL, s.id, s.ts, s.ts
        FROM s WHERE hash(s.i, 'mem') % 1000 < {round(per * 1000)}
    """)
    con.execute("""
        INSERT INTO provenance (kind, name, version, session_id, turn, untrusted, sources, created_at)
        SELECT 'memory', id, NULL, session_id, 1, false, NULL, created_at FROM memories WHERE id LIKE 'mem-%'
        AND session_id IN (SELECT id FROM s)
    """)
    rows = shape.ai_rows_per_session
    if rows:
        con.execute(
            "CREATE TABLE IF NOT EXISTS ai_daily_sales (day DATE, region VARCHAR, product VARCHAR, units INTEGER, revenue DOUBLE)"
        )
        con.execute(f"""
            INSERT INTO ai_daily_sales
            SELECT (DATE '2020-01-01' + to_days((x // 40)::INT))::DATE, 'region-' || (x % 12), 'product-' || (hash(x) % 300),
                   (hash(x, 'u') % 50)::INT, (hash(x, 'r') % 100000) / 100.0
            FROM range({first * rows}, {(first + count) * rows}) r(x)
        """)
    con.execute("DROP TABLE m; DROP TABLE t; DROP TABLE s")
    con.execute("CHECKPOINT")


def _kept(con: duckdb.DuckDBPyConnection, total: int, shape: Proportions, days: int) -> None:
    """What outlives sessions: jobs and their runs, daily summaries, state, kept tools,
    libraries, skills, components, prompt versions and where notebooks were seen."""
    span = days * _DAY_SECONDS
    jobs = shape.jobs + total // 60
    runs = round(total * shape.runs_per_session)
    para = f"(SELECT text FROM pool WHERE id = hash({{key}}) % {_POOL})"
    con.execute(f"""
        INSERT INTO jobs (id, name, kind, notebook, task, parameters, session, cwd, cron, timezone, model, enabled,
                          next_run_at, created_by, created_at, updated_at, version)
        SELECT 'job-' || lpad(x::VARCHAR, 6, '0'), 'job ' || x, CASE WHEN x % 3 = 0 THEN 'task' ELSE 'notebook' END,
               '/home/user/notebooks/' || (x % 40) || '.ipynb', left({para.format(key="x, 'task'")}, 300),
               '{{"day": "today"}}', NULL, '/home/user', CASE WHEN x % 4 = 0 THEN '0 * * * *' ELSE '0 7 * * *' END,
               'UTC', NULL, x % 7 <> 0, (now() AT TIME ZONE 'UTC') + to_seconds(3600 + x * 60), 'cli',
               (now() AT TIME ZONE 'UTC') - to_seconds({span}), (now() AT TIME ZONE 'UTC') - to_seconds({span // 2}),
               1 + x % 3
        FROM range({jobs}) r(x)
    """)
    con.execute("""
        INSERT INTO job_versions (job_id, version, definition, changed, changed_by, changed_at)
        SELECT id, v, to_json({'name': name, 'notebook': notebook, 'cron': cron, 'timezone': timezone}),
               CASE WHEN v = 1 THEN '[]' ELSE '["cron"]' END, 'cli', created_at + to_seconds(v * 86400)
        FROM jobs, range(1, version + 1) r(v)
    """)
    con.execute(f"""
        INSERT INTO runs (id, job_id, scheduled_for, attempt, cause, status, not_before, created_at, started_at,
                          finished_at, heartbeat_at, worker, executor, run_dir, output_path, error, exit_code,
                          cells_done, cells_total, job_version, explanation)
        SELECT 'run-' || lpad(x::VARCHAR, 9, '0'), 'job-' || lpad((x % {jobs})::VARCHAR, 6, '0'), ts, 1,
               'schedule', CASE WHEN x % 13 = 0 THEN 'FAILED' ELSE 'SUCCEEDED' END, ts, ts, ts + to_seconds(2),
               ts + to_seconds(40 + x % 200), ts + to_seconds(30), 'worker-1', 'local',
               '/home/user/.agent-kernel/runs/' || x, '/home/user/.agent-kernel/runs/' || x || '/output.ipynb',
               CASE WHEN x % 13 = 0 THEN left({para.format(key="x, 'err'")}, 500) END,
               CASE WHEN x % 13 = 0 THEN 1 ELSE 0 END, 12, 12, 1,
               CASE WHEN x % 13 = 0 THEN {para.format(key="x, 'why'")} END
        FROM (SELECT x, (now() AT TIME ZONE 'UTC') - to_seconds({span}) + to_seconds(({span} * x) // {max(runs, 1)}) AS ts
              FROM range({runs}) r(x))
    """)
    con.execute(f"""
        INSERT INTO memories (id, store, type, content, tags, period_key, created_at, updated_at)
        SELECT 'day-' || d, 'summaries', 'daily', {para.format(key="d, 'day'")}, ['daily'],
               strftime((now() AT TIME ZONE 'UTC') - to_days(d::INT), '%Y-%m-%d'),
               (now() AT TIME ZONE 'UTC') - to_days(d::INT), (now() AT TIME ZONE 'UTC') - to_days(d::INT)
        FROM range(1, {days + 1}) r(d)
    """)
    con.execute(f"""
        INSERT INTO agent_state (key, value) SELECT 'key-' || x, to_json({{'n': x, 'text': left({para.format(key="x, 'st'")}, 200)}})
        FROM range(100) r(x) ON CONFLICT DO NOTHING
    """)
    con.execute(f"""
        INSERT INTO system_prompt_versions (version, prompt, operation, author, created_at)
        SELECT v, {para.format(key="v, 'prompt'")}, 'append', 'agent', (now() AT TIME ZONE 'UTC') - to_days((40 - v)::INT)
        FROM range(1, 21) r(v) ON CONFLICT DO NOTHING
    """)
    con.execute(f"""
        INSERT INTO agent_tool_versions (name, version, description, parameter_schema, code, writes)
        SELECT 'tool_' || x, v, left({para.format(key="x, 'tool'")}, 200), '{{"type": "object", "properties": {{}}}}',
               'def run():' || chr(10) || '    return ' || to_json({para.format(key="x, v, 'code'")}), false
        FROM range(10) r(x), range(1, 4) w(v);
        INSERT INTO agent_tools (name, version) SELECT 'tool_' || x, 3 FROM range(10) r(x);
        INSERT INTO agent_library_versions (name, version, description, code)
        SELECT 'lib_' || x, v, 'helpers', 'def f():' || chr(10) || '    return ' || to_json({para.format(key="x, v, 'lib'")})
        FROM range(5) r(x), range(1, 4) w(v);
        INSERT INTO agent_libraries (name, version) SELECT 'lib_' || x, 3 FROM range(5) r(x);
        INSERT INTO skills (name, description, content, tags, version)
        SELECT 'skill-' || x, 'how to', {para.format(key="x, 'skill'")}, ['howto'], 1 FROM range(8) r(x);
        INSERT INTO agent_ui_component_versions (name, version, description, html, css, js, state, messages, tools)
        SELECT 'ui_' || x, 1, 'a view', '<div>' || {para.format(key="x, 'ui'")} || '</div>', 'div {{}}', '', '{{}}', [], []
        FROM range(4) r(x);
        INSERT INTO agent_ui_components (name, version) SELECT 'ui_' || x, 1 FROM range(4) r(x);
        INSERT INTO provenance (kind, name, version, session_id, turn, untrusted, created_at)
        SELECT 'tool', name, version, NULL, NULL, false, created_at FROM agent_tool_versions
        UNION ALL SELECT 'skill', name, version, NULL, NULL, false, updated_at FROM skills
        UNION ALL SELECT 'prompt', 'system_prompt', version, NULL, NULL, false, created_at FROM system_prompt_versions;
        INSERT INTO notebook_documents (document, path)
        SELECT 'doc-' || x, '/home/user/notebooks/' || x || '.ipynb' FROM range(40) r(x);
        INSERT INTO notebook_moves (old_path, new_path, moved_by)
        SELECT '/home/user/old/' || x || '.ipynb', '/home/user/notebooks/' || x || '.ipynb', 'server' FROM range(10) r(x);
    """)
