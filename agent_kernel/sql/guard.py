"""What SQL the model may run on the agent's DuckDB file: DuckDB's own parser and binder decide.

1. **Statement kinds** come from DuckDB's parser (``extract_statements``). ATTACH, COPY,
   EXPORT, INSTALL/LOAD, SET/RESET/USE, PRAGMA, VACUUM/ANALYZE, transactions and prepared
   statements are refused before a connection is opened. EXPLAIN is taken only as
   ``EXPLAIN <statement>`` or ``EXPLAIN (FORMAT f) <statement>`` (any other option list, and
   so ANALYZE in every spelling, is refused), and the statement it explains is checked by
   every rule here, as if it ran. ``query()`` / ``query_table()`` (SQL given as text, which
   the binder inlines before the plan can show it) are refused by name.
2. **Targets** come from DuckDB's binder: just before a statement runs (inside the call's
   transaction, so earlier statements of the same call are visible) its logical plan is
   serialized with ``json_serialize_plan``. Every operator that writes names the object
   it writes, and the model may write only objects named ``ai_*``; data-modifying CTEs
   (``WITH d AS (DELETE ...) SELECT``) are operators of the plan like any other, and so are
   ``nextval()`` / ``setval()``, which write the sequence they name. Table functions come
   from an allow-list (no ``read_csv``, ``checkpoint``, ``query``, ...); triggers (which
   would run later, in other connections, unchecked) and any operator the guard does not
   know are refused.
3. **Reads** (:func:`writes`): a call is a read only when the parser can show it: SELECTs
   that call built-in functions without side effects, plain EXPLAINs of such reads, and
   CALLs of allow-listed table functions. Everything else counts as a write, for approval
   and for the connection it gets (a read runs on a read-only connection, see
   :mod:`agent_kernel.sql.sandbox`).

No regular expressions over SQL: where text is looked at, it is DuckDB's tokenizer's
tokens. Where and how the checked statements run is :mod:`agent_kernel.sql.sandbox`.

What the parser says of a text depends on nothing but the text (its database holds only
DuckDB's own functions), so it is kept for the texts seen last: one call asks about its
SQL several times (its statements, whether it writes, whether it reads only frames), and
a model often runs the same query again. The plan is never kept: it depends on the file.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import version
from typing import Any

import duckdb

from agent_kernel.errors import ToolInputError
from agent_kernel.store.schema import PROTECTED_TABLES, WRITABLE_PREFIX

__all__ = [
    "Statement",
    "check_plan",
    "explained",
    "identifiers",
    "parse",
    "prepare",
    "reads_only_frames",
    "writes",
]

_KEPT_TEXTS = 64  # SQL texts whose parse is kept (each at most db_sql's SQL_CHARS)


# -- statement kinds ------------------------------------------------------------------------

NO_FILES = (
    "db_sql has no file or network access. Load files in Python with run_code (for example "
    "pandas.read_csv) and query the DataFrame by its name; to save a result to a file, fetch "
    'it with into="name" and write it from Python.'
)
_REFUSED_KINDS = {
    "ATTACH": "ATTACH and DETACH are not allowed: db_sql works on the agent's own database only.",
    "DETACH": "ATTACH and DETACH are not allowed: db_sql works on the agent's own database only.",
    "COPY": "COPY is not allowed. " + NO_FILES,
    "COPY_DATABASE": "COPY FROM DATABASE is not allowed: db_sql works on the agent's own database only.",
    "EXPORT": "EXPORT DATABASE is not allowed. " + NO_FILES,
    "LOAD": "INSTALL and LOAD are not allowed: no extensions can be added to the agent's database.",
    "SET": "SET, RESET and USE are not allowed: the connection's settings are fixed. Put values "
    "in the query (or in params) instead of variables.",
    "VARIABLE_SET": "SET VARIABLE is not allowed: put values in the query or in params.",
    "PRAGMA": "PRAGMA (and IMPORT DATABASE) is not allowed. For table details use db_schema, or "
    "SELECT * FROM pragma_table_info('table_name').",
    "VACUUM": "VACUUM and ANALYZE are not allowed: the agent's database is maintained for you.",
    "ANALYZE": "VACUUM and ANALYZE are not allowed: the agent's database is maintained for you.",
    "TRANSACTION": "BEGIN, COMMIT and ROLLBACK are not needed: each db_sql call is one "
    "transaction, committed when all its statements succeed and rolled back otherwise.",
    "PREPARE": "PREPARE and EXECUTE are not allowed: pass values with params (for ? placeholders).",
    "EXECUTE": "PREPARE and EXECUTE are not allowed: pass values with params (for ? placeholders).",
    "DEALLOCATE": "PREPARE and EXECUTE are not allowed: pass values with params (for ? placeholders).",
    "MULTI": "A PIVOT statement needs its values listed to run here: write "
    "PIVOT t ON col IN ('a', 'b') USING sum(x), or use GROUP BY.",
}
_ALLOWED_KINDS = {"SELECT", "EXPLAIN", "CALL", "INSERT", "UPDATE", "DELETE", "MERGE_INTO", "CREATE", "DROP", "ALTER"}
_READ_KINDS = {"SELECT", "EXPLAIN", "CALL"}

# -- plan operators -------------------------------------------------------------------------

_READ_OPERATORS = {
    f"LOGICAL_{name}"
    for name in [
        "PROJECTION",
        "FILTER",
        "AGGREGATE_AND_GROUP_BY",
        "WINDOW",
        "UNNEST",
        "LIMIT",
        "ORDER_BY",
        "TOP_N",
        "DISTINCT",
        "SAMPLE",
        "PIVOT",
        "GET",
        "CHUNK_GET",
        "DELIM_GET",
        "EXPRESSION_GET",
        "DUMMY_SCAN",
        "EMPTY_RESULT",
        "CTE_REF",
        "JOIN",
        "DELIM_JOIN",
        "COMPARISON_JOIN",
        "ANY_JOIN",
        "CROSS_PRODUCT",
        "POSITIONAL_JOIN",
        "ASOF_JOIN",
        "DEPENDENT_JOIN",
        "UNION",
        "EXCEPT",
        "INTERSECT",
        "RECURSIVE_CTE",
        "MATERIALIZED_CTE",
    ]
}
_WRITE_OPERATORS = {
    f"LOGICAL_{name}"
    for name in [
        "INSERT",
        "DELETE",
        "UPDATE",
        "MERGE_INTO",
        "ALTER",
        "DROP",
        "CREATE_TABLE",
        "CREATE_INDEX",
        "CREATE_SEQUENCE",
        "CREATE_VIEW",
        "CREATE_SCHEMA",
        "CREATE_MACRO",
        "CREATE_TYPE",
    ]
}
# A nextval()/setval() call in a plan: a write of the sequence it names.
SEQUENCE_STEP = "SEQUENCE_STEP"
_WRITE_OPERATORS.add(SEQUENCE_STEP)
# Operators that can make the file bigger (checked against the size cap).
_GROWING_OPERATORS = {
    "LOGICAL_INSERT",
    "LOGICAL_UPDATE",
    "LOGICAL_MERGE_INTO",
    "LOGICAL_CREATE_TABLE",
    "LOGICAL_CREATE_INDEX",
}

_TABLE_FUNCTIONS = {
    "seq_scan",
    "range",
    "generate_series",
    "unnest",
    "repeat",
    "repeat_row",
    "json_each",
    "json_tree",
    "summary",
    "histogram",
    "histogram_values",
    "pg_timezone_names",
    "icu_calendar_names",
    "test_all_types",
}
_TABLE_FUNCTION_PREFIXES = ("duckdb_", "pragma_")
_FILE_FUNCTION_PREFIXES = ("read_", "parquet_", "glob", "sniff_csv")
# Run SQL given as text; the binder inlines it, so the plan cannot show they were called.
_TEXT_SQL_FUNCTIONS = {"query", "query_table"}
# Scalar functions that change a sequence: writes of the sequence they name.
_SEQUENCE_FUNCTIONS = {"nextval", "setval"}
# Scalar functions with other side effects.
_REFUSED_SCALAR_FUNCTIONS = {"write_log"}

ANALYZE_REFUSED = (
    "EXPLAIN ANALYZE runs the statement, so it is not allowed (in any spelling or option "
    "list); use EXPLAIN (the plan only), or run the query itself."
)
EXPLAIN_FORMS = "EXPLAIN is allowed as EXPLAIN <statement> or EXPLAIN (FORMAT json) <statement>, with no other options."
TRIGGERS_REFUSED = (
    "CREATE TRIGGER is not allowed in db_sql: a trigger runs later, on other connections' "
    "writes, where nothing checks it. Run the statements yourself when they are needed."
)


@dataclass(frozen=True)
class Statement:
    """One statement of a ``db_sql`` call, as DuckDB's parser split it."""

    sql: str
    kind: str  # DuckDB's StatementType name, or "UNKNOWN"

    @property
    def reads(self) -> bool:
        return self.kind in _READ_KINDS


# -- parsing (no connection to the agent's file) --------------------------------------------

_parser: duckdb.DuckDBPyConnection | None = None
_parser_lock = threading.Lock()


def _parser_cursor() -> duckdb.DuckDBPyConnection:
    """A cursor on a private in-memory database used only to parse SQL."""
    global _parser
    with _parser_lock:
        if _parser is None:
            _parser = duckdb.connect(":memory:", config={"enable_external_access": False})
        return _parser.cursor()


def parse(sql: str) -> list[Statement]:
    """Split ``sql`` into statements; refuse the kinds db_sql never runs."""
    return list(_checked_statements(sql))


@lru_cache(maxsize=_KEPT_TEXTS)
def _checked_statements(sql: str) -> tuple[Statement, ...]:
    """:func:`parse`'s statements, kept per text (a refusal is raised again each time)."""
    if not sql.strip():
        raise ToolInputError("sql is empty: give one or more SQL statements.")
    statements = _split(sql)
    if not statements:
        raise ToolInputError("sql holds no statement (only comments?).")
    for statement in statements:
        _refuse_kind(statement)
        _refuse_text_sql(statement.sql)
    return statements


def _split(sql: str) -> tuple[Statement, ...]:
    """DuckDB's parser: the statements of ``sql`` with their kinds (nothing refused yet)."""
    cursor = _parser_cursor()
    try:
        found = cursor.extract_statements(sql)
    except duckdb.Error as exc:
        raise ToolInputError(str(exc)) from None
    finally:
        cursor.close()
    return tuple(Statement(s.query.strip().rstrip(";").strip(), _kind(s)) for s in found)


def prepare() -> None:
    """Make the parser's database and read DuckDB's function catalogue now, off the path
    of the first call (together ~50 ms), and parse a query once."""
    for function_type in ("", "table"):
        _builtin_functions(function_type)
    writes("SELECT count(*) AS n FROM range(3) WHERE range > 1")


def _kind(statement: Any) -> str:
    try:
        return str(statement.type.name)
    except ValueError:  # a statement type newer than the Python enum (e.g. UPDATE EXTENSIONS)
        return "UNKNOWN"


def _refuse_kind(statement: Statement) -> None:
    kind = statement.kind
    if kind in _REFUSED_KINDS:
        raise ToolInputError(_REFUSED_KINDS[kind])
    if kind not in _ALLOWED_KINDS:
        raise ToolInputError(
            f"This statement ({kind.replace('_', ' ')}) is not allowed in db_sql. Allowed: "
            "SELECT (also WITH, FROM, DESCRIBE, SUMMARIZE), EXPLAIN, and CREATE / INSERT / "
            "UPDATE / DELETE / MERGE / ALTER / DROP / COMMENT ON for objects named ai_*."
        )
    if kind == "EXPLAIN":
        explained(statement)


def explained(statement: Statement) -> Statement:
    """The statement an EXPLAIN plans, refused like any other statement.

    Only ``EXPLAIN <statement>`` and ``EXPLAIN (FORMAT f) <statement>`` are taken: an
    allow-list of forms, so no spelling of ANALYZE (quoted, lower case, ANALYSE, between
    comments, among other options) can make DuckDB run what it explains.
    """
    spans = _spans(statement.sql)
    words = [_name(statement.sql[start:end]) for start, end, _ in spans]
    if len(words) < 2 or words[0].upper() != "EXPLAIN":
        raise ToolInputError(EXPLAIN_FORMS)
    rest = 1
    if words[1] == "(":
        close = words.index(")") if ")" in words else len(words)
        options = [w.upper() for w in words[2:close]]
        if "ANALYZE" in options or "ANALYSE" in options:
            raise ToolInputError(ANALYZE_REFUSED)
        if len(options) != 2 or options[0] != "FORMAT" or close + 1 >= len(words):
            raise ToolInputError(EXPLAIN_FORMS)
        rest = close + 1
    elif words[1].upper() in ("ANALYZE", "ANALYSE"):
        raise ToolInputError(ANALYZE_REFUSED)
    inner = _split(statement.sql[spans[rest][0] :])
    if len(inner) != 1 or inner[0].kind == "EXPLAIN":
        raise ToolInputError(EXPLAIN_FORMS)
    _refuse_kind(inner[0])
    return inner[0]


def _name(text: str) -> str:
    """A token's text as a name: a quoted identifier unquoted."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1].replace(text[0] * 2, text[0])
    return text


def _refuse_text_sql(sql: str) -> None:
    """Refuse ``query(...)`` / ``query_table(...)`` anywhere (also in a macro or view body)."""
    tokens = _tokens(sql)
    for (text, kind), (following, _) in zip(tokens, tokens[1:]):
        if following == "(" and kind in ("identifier", "keyword") and _name(text).lower() in _TEXT_SQL_FUNCTIONS:
            raise ToolInputError(
                f"{_name(text).lower()}() is not available in db_sql: write the query itself "
                "(SELECT ... FROM table_name)."
            )


def _spans(sql: str) -> list[tuple[int, int, str]]:
    """DuckDB's tokenizer: (start, end, kind) of each token, comments dropped."""
    found = duckdb.tokenize(sql)
    spans = []
    for i, (start, kind) in enumerate(found):
        end = found[i + 1][0] if i + 1 < len(found) else len(sql)
        if kind.name != "comment":
            spans.append((start, end, kind.name))
    return spans


def _tokens(sql: str) -> list[tuple[str, str]]:
    """DuckDB's tokenizer: (text, kind) pairs, comments dropped."""
    return [(sql[start:end].strip(), kind) for start, end, kind in _spans(sql)]


def _without_parameters(sql: str) -> str:
    """``sql`` with each ``?`` / ``$n`` placeholder replaced by NULL.

    Only for binding the plan: a placeholder stands for a value, never for a name, so the
    plan's operators and targets are those of the statement that runs with the values.
    (DuckDB 2.0 cannot serialize some plans that still hold placeholders.)
    """
    parts, at, skip = [], 0, False
    for start, end, kind in _spans(sql):
        text = sql[start:end].strip()
        if skip:
            skip, at = False, start + len(text)
            continue
        if kind == "operator" and text in ("?", "$"):
            parts.append(sql[at:start] + "NULL")
            at = start + len(text)
            skip = text == "$"
    return "".join(parts) + sql[at:]


def commented_table(sql: str) -> str | None:
    """The table (or view) a ``COMMENT ON TABLE / VIEW / COLUMN`` statement documents, by
    its unqualified name; None for any other statement."""
    words = [(_name(text), kind) for text, kind in _tokens(sql)]
    heads = [text.upper() for text, _ in words[:3]]
    if len(words) < 4 or heads[:2] != ["COMMENT", "ON"]:
        return None
    parts = []
    for text, kind in words[3:]:
        if kind == "operator" and text == ".":
            continue
        if kind not in ("identifier", "keyword"):
            break
        if text.upper() == "IS" and kind == "keyword":
            break
        parts.append(text)
    if heads[2] == "COLUMN":
        return parts[-2] if len(parts) >= 2 else None
    return parts[-1] if parts and heads[2] in ("TABLE", "VIEW") else None


@lru_cache(maxsize=_KEPT_TEXTS)
def identifiers(sql: str) -> frozenset[str]:
    """Every name-like token of ``sql`` (unquoted), for finding the DataFrames it reads."""
    names = set()
    for text, kind in _tokens(sql):
        if kind in ("identifier", "keyword"):
            names.add(text[1:-1].replace('""', '"') if text.startswith('"') else text)
    return frozenset(names)


@lru_cache(maxsize=_KEPT_TEXTS)
def writes(sql: str) -> bool:
    """Whether ``sql`` may change the database, from the parser alone (for approvals).

    True unless every statement is provably a read (see :func:`_reads`): anything the
    parser cannot classify counts as a write. SQL that :func:`parse` refuses counts as
    not writing: ``db_sql`` refuses it with the same parser before anything runs, and the
    model then gets that refusal rather than an approval question.
    """
    try:
        statements = parse(sql)
    except ToolInputError:
        return False
    return not all(_reads(s) for s in statements)


def _reads(statement: Statement) -> bool:
    """Whether the parser shows ``statement`` only reads (anything unsure: False)."""
    if statement.kind == "EXPLAIN":
        return _reads(explained(statement))
    if statement.kind == "CALL":  # CALL f(...): an allow-listed table function
        tokens = _tokens(statement.sql)
        return len(tokens) >= 3 and tokens[2][0] == "(" and _reading_table_function(_name(tokens[1][0]))
    if statement.kind != "SELECT":
        return False
    tree = _syntax_tree(statement.sql)
    if tree.get("error"):
        return False
    builtins = _builtin_functions()
    for node in _dicts(tree):
        node_type = str(node.get("type", ""))
        if node_type.endswith("_QUERY_NODE"):  # a data-modifying CTE
            return False
        if node_type == "TABLE_FUNCTION":
            function = node.get("function") or {}
            if function.get("schema") or not _reading_table_function(str(function.get("function_name", ""))):
                return False
        elif node.get("class") == "FUNCTION":
            name = str(node.get("function_name", "")).lower()
            if node.get("schema") or name in _SEQUENCE_FUNCTIONS or name not in builtins:
                return False  # a sequence step, or a macro the parser cannot see into
    return True


def _syntax_tree(sql: str) -> dict[str, Any]:
    """DuckDB's parse of ``sql`` as JSON (``error`` set where it is no SELECT it can show)."""
    cursor = _parser_cursor()
    try:
        tree: dict[str, Any] = json.loads(scalar(cursor, "SELECT json_serialize_sql(?)", [sql]))
        return tree
    finally:
        cursor.close()


def _reading_table_function(name: str) -> bool:
    name = name.lower()
    return name in _TABLE_FUNCTIONS or name.startswith(_TABLE_FUNCTION_PREFIXES)


_builtins: dict[str, frozenset[str]] = {}


def _builtin_functions(function_type: str = "") -> frozenset[str]:
    """The names of DuckDB's own functions (the parser's database holds no others), or of
    those of one ``function_type`` ("table", "scalar", ...)."""
    if function_type not in _builtins:
        cursor = _parser_cursor()
        try:
            rows = cursor.execute(
                "SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE ? = '' OR function_type = ?",
                [function_type, function_type],
            ).fetchall()
        finally:
            cursor.close()
        _builtins[function_type] = frozenset(row[0] for row in rows)
    return _builtins[function_type]


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


# -- checking a statement against its plan ---------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What a checked statement's plan does: its operators and the objects it writes."""

    operators: frozenset[str]
    targets: tuple[str, ...]

    @property
    def writes(self) -> bool:
        return bool(self.operators & _WRITE_OPERATORS)

    @property
    def grows(self) -> bool:
        return bool(self.operators & _GROWING_OPERATORS)


def check_plan(
    con: duckdb.DuckDBPyConnection, statement: Statement, frames: Iterable[str], *, parameters: bool
) -> Plan:
    """Bind ``statement`` and refuse it unless it reads, or writes only ``ai_*`` objects."""
    if statement.kind == "EXPLAIN":  # checked as the statement it plans; runs nothing itself
        check_plan(con, explained(statement), frames, parameters=parameters)
        return Plan(frozenset(), ())
    sql = _without_parameters(statement.sql) if parameters else statement.sql
    plan = json.loads(scalar(con, "SELECT json_serialize_plan(?)", [sql]))
    if plan.get("error"):
        kind = str(plan.get("error_type", "")).replace("_", " ").title()
        message = f"{kind} Error: {plan.get('error_message', 'the statement could not be bound')}"
        if kind == "Permission":
            raise ToolInputError(f"{NO_FILES} ({message})")
        _refuse_parsed_table_functions(statement)
        if kind in ("Internal", "Not Implemented", "Serialization") or "support serialization" in message:
            raise ToolInputError(
                f"db_sql could not check this statement, so it did not run it ({message}). Write "
                "it another way: e.g. INSERT/UPDATE/DELETE instead of MERGE, or a CTE or a table "
                "instead of a subquery."
            )
        raise ToolInputError(message)
    operators: set[str] = set()
    targets: list[str] = []
    for node in _dicts(plan.get("plans", [])):
        node_type = str(node.get("type", ""))
        if node_type.endswith("_QUERY_NODE"):
            raise ToolInputError("INSERT, UPDATE or DELETE cannot be part of a view or macro.")
        if node.get("expression_class") == "BOUND_FUNCTION":
            sequence = _sequence_written(node)
            if sequence:
                operators.add(SEQUENCE_STEP)
                targets.append(sequence)
            continue
        if not node_type.startswith("LOGICAL_") or "children" not in node:
            continue
        operators.add(node_type)
        if node_type == "LOGICAL_GET":
            _check_table_function(node)
        elif node_type in _WRITE_OPERATORS:
            targets.extend(_targets(node))
        elif node_type not in _READ_OPERATORS:
            what = node_type.removeprefix("LOGICAL_").replace("_", " ")
            if node_type == "LOGICAL_COPY_TO_FILE":
                raise ToolInputError("COPY is not allowed. " + NO_FILES)
            if node_type == "LOGICAL_CREATE_TRIGGER":
                raise ToolInputError(TRIGGERS_REFUSED)
            raise ToolInputError(f"{what} is not allowed in db_sql.")
    frame_names = {name.lower() for name in frames}
    for target in targets:
        if not target.lower().startswith(WRITABLE_PREFIX):
            raise ToolInputError(_not_writable(target, frame_names))
    return Plan(frozenset(operators), tuple(targets))


def _sequence_written(node: Mapping[str, Any]) -> str | None:
    """The sequence a bound ``nextval`` / ``setval`` call changes; other side effects refused."""
    name = str(((node.get("qname") or {}).get("path") or [""])[-1]).lower()
    if name in _REFUSED_SCALAR_FUNCTIONS:
        raise ToolInputError(f"{name}() is not available in db_sql.")
    if name not in _SEQUENCE_FUNCTIONS:
        return None
    info = (node.get("function_data") or {}).get("sequence_create_info") or {}
    path = [p for p in (info.get("qualified_name") or {}).get("path", []) if p]
    if not path:
        raise ToolInputError(
            f"{name}() needs the sequence's name as a constant ('ai_seq'), so db_sql can tell what it changes."
        )
    return str(path[-1])


def _check_table_function(node: Mapping[str, Any]) -> None:
    path = (node.get("qname") or {}).get("path") or [""]
    _check_table_function_name(str(path[-1]))


def _check_table_function_name(name: str) -> None:
    name = name.lower()
    if _reading_table_function(name):
        return
    if name.startswith(_FILE_FUNCTION_PREFIXES):
        raise ToolInputError(f"{name}() is not available. " + NO_FILES)
    raise ToolInputError(
        f"The table function {name}() is not available in db_sql. Query tables, kernel "
        "DataFrames, range()/generate_series(), unnest(), or duckdb_* / pragma_* metadata."
    )


def _refuse_parsed_table_functions(statement: Statement) -> None:
    """Refuse DuckDB's own table functions named in ``statement`` that db_sql does not offer.

    For a statement whose plan could not be serialized (some table functions' plans
    cannot be): the parser still names the function. Names that are not DuckDB's own
    table functions (a table macro, say) are left to the caller's refusal.
    """
    tree = _syntax_tree(statement.sql)
    for node in _dicts(tree):
        if node.get("type") == "TABLE_FUNCTION":
            name = str((node.get("function") or {}).get("function_name", "")).lower()
            if name in _builtin_functions("table"):
                _check_table_function_name(name)


def _targets(node: Mapping[str, Any]) -> list[str]:
    info = node.get("table_info") or node.get("info") or {}
    names = []
    path = [p for p in (info.get("qualified_name") or {}).get("path", []) if p]
    if path:
        names.append(str(path[-1]))
    for key in ("table", "view_name", "new_table_name", "new_view_name"):
        value = info.get(key)
        if isinstance(value, str) and value:
            names.append(value)
    if not names:
        raise ToolInputError("db_sql could not tell what this statement changes, so it was not run.")
    return names


def _not_writable(name: str, frames: set[str]) -> str:
    if name.lower() in frames:
        return (
            f"{name} is a DataFrame in the kernel: db_sql reads it but cannot change it. Change it "
            f"in Python with run_code, or copy it into a table: CREATE TABLE ai_{name} AS "
            f"SELECT * FROM {name}."
        )
    if name.lower() in PROTECTED_TABLES:
        return (
            f"{name} is one of agent-kernel's own tables: you can read it but not change it. "
            "Keep your data in tables named ai_* (state: set_state; memories: the memory tool)."
        )
    return (
        f"db_sql may create or change only objects named ai_*, not {name!r}: name it "
        f"ai_{name.lower().removeprefix('ai')} instead."
    )


# -- queries of kernel frames only ----------------------------------------------------------


def reads_only_frames(statements: Sequence[Statement], frames: Mapping[str, Any], file_names: set[str] | None) -> bool:
    """Whether every statement is a plain read of kernel frames (parser only, no connection).

    Such a query needs nothing from the agent's file. Anything else, and anything unsure
    (the file's tables not seen yet, a qualified name, a metadata function), goes to the file.
    """
    if not frames or file_names is None or any(s.kind != "SELECT" for s in statements):
        return False
    lowered = {name.lower() for name in frames}
    named = False
    for statement in statements:
        tables = _tables_read(statement.sql)
        if tables is None or not tables <= lowered or tables & file_names:
            return False
        named = named or bool(tables)
    return named


@lru_cache(maxsize=_KEPT_TEXTS)
def _tables_read(sql: str) -> frozenset[str] | None:
    """The tables (by lower-case name, CTEs left out) a SELECT reads, or None when it is
    not a plain read: a qualified name, a table function off the list, a data-modifying
    CTE, or a text the parser cannot show."""
    tree = _syntax_tree(sql)
    if tree.get("error"):
        return None
    ctes = {
        str(key.get("key", "")).lower() for node in _dicts(tree) for key in node.get("map", []) if isinstance(key, dict)
    }
    tables = set()
    for node in _dicts(tree):
        kind = node.get("type")
        if isinstance(kind, str) and kind.endswith("_QUERY_NODE"):
            return None
        if kind == "BASE_TABLE":
            name = str(node.get("table_name", "")).lower()
            if name in ctes:
                continue
            if node.get("schema_name") or node.get("catalog_name"):
                return None
            tables.add(name)
        elif kind == "TABLE_FUNCTION":
            function = str((node.get("function") or {}).get("function_name", "")).lower()
            if function not in _TABLE_FUNCTIONS:
                return None
    return frozenset(tables)


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> Any:
    """The one value ``sql`` returns (fetched to the end: DuckDB 2.0 wants results finished)."""
    return con.execute(sql, params).fetchall()[0][0]


def sql_guard_available() -> bool:
    """Whether this DuckDB can check the model's SQL (2.0: the plan serialisation and the
    statement time limit the guard relies on). DuckDB 1.x is all Python 3.10 gets; there
    ``db_sql`` is not offered rather than offered unguarded."""
    return int(version("duckdb").split(".")[0]) >= 2
