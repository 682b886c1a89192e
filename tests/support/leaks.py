"""A corpus of attempts to leak a secret to the model or the store, and the search for it.

The secret holds quotes, a backslash and URL-special characters. Each attempt is a
tool call of the scripted model (or a cell the user runs): code printing the secret
raw, encoded, spaced, cut by a truncation window; kernel variables the briefing and
inspect_namespace describe; memory, stored instructions, ``AgentKernel.instruction``,
a table comment and a ``@tool`` description written from code; ``{var}`` and
``{os.environ}`` interpolated into a prompt. :func:`findings` searches a text for the
value, its encodings and every 10-character piece of it.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from pathlib import Path
from typing import Any

from agent_kernel.testing import reply, say, tool_use

NAME = "AK_LEAK_TOKEN"
SECRET = 'sk-Q9"zw\\8Lm4#Pq7&Vr2!x_T0ken/+e'

# Run by the user before the turns: what code the model runs can reach.
SETUP = """\
import os, sys, json, base64, binascii, urllib.parse, logging
import pandas as pd
from agent_kernel import tool
from agent_kernel.store.memories import Memories
from agent_kernel.store.prompts import SystemPrompts
from agent_kernel.store.state import State
agent = get_ipython().find_magic("agent").__self__.kernel_agent
"""

S = f'os.environ["{NAME}"]'

# Cells the user runs before the turns, the secret typed into a source: the turn context
# (the cells run since the last turn) and notebook_cells show them.
USER_CELLS = [
    f"typed_token = {SECRET!r}  # typed in by hand",
    "typed_token",
    "print('using', typed_token)",
]

# (what it tries, code run with run_code)
CODE_ATTEMPTS: list[tuple[str, str]] = [
    ("raw print", f"print({S})"),
    ("json.dumps print", f"print(json.dumps({S}))"),
    ("repr print", f"print(repr({S}))"),
    ("bytes print", f"print({S}.encode())"),
    ("os.environ print", "print(os.environ)"),
    ("dict of env print", f"print({{'token': {S}}})"),
    ("base64 std align 0", f"print(base64.b64encode({S}.encode()).decode())"),
    ("base64 std align 1", f"print(base64.b64encode(b'u' + {S}.encode()).decode())"),
    ("base64 std align 2", f"print(base64.b64encode(b'us' + {S}.encode()).decode())"),
    ("base64 urlsafe align 0", f"print(base64.urlsafe_b64encode({S}.encode()).decode())"),
    ("base64 urlsafe align 1", f"print(base64.urlsafe_b64encode(b'u' + {S}.encode()).decode())"),
    ("base64 urlsafe align 2", f"print(base64.urlsafe_b64encode(b'us' + {S}.encode()).decode())"),
    ("base64 basic auth", f"print(base64.b64encode(b'user:' + {S}.encode()).decode())"),
    ("hex lower", f"print({S}.encode().hex())"),
    ("hex upper", f"print({S}.encode().hex().upper())"),
    ("url-encoding", f"print(urllib.parse.quote({S}, safe=''))"),
    ("url-encoding plus", f"print(urllib.parse.quote_plus({S}))"),
    ("url query", f"print(urllib.parse.urlencode({{'key': {S}}}))"),
    ("reversed", f"print({S}[::-1])"),
    ("letter-spaced", f"print(' '.join({S}))"),
    ("newline-inserted", f"print('\\n'.join({S}))"),
    ("split across prints", f"s = {S}\nprint(s[:11])\nprint(s[11:])"),
    ("stdout head window", f"print('h' * 3990 + {S} + 'y' * 20000)"),
    ("stdout tail window", f"print('y' * 20000 + {S} + 't' * 3985)"),
    ("stderr", f"sys.stderr.write({S})"),
    ("logging", f"logging.warning('token %s', {S})"),
    ("exception message", f"raise ValueError({S})"),
    ("traceback window", f"raise ValueError({S} + 'q' * 3990)"),
    ("last expression", f"{S}"),
    ("result repr window", f"'a' * 985 + {S} + 'b' * 3000"),
    ("json in dict result", f"{{'nested': {{'deep': [{S}]}}}}"),
    (
        "variables for the briefing",
        f"leak_str = {S}\n"
        f"leak_dict = {{{S}: 1}}\n"
        f"class Leaky:\n    def __repr__(self):\n        return 'Leaky(' + {S} + ')'\n"
        "leak_obj = Leaky()\n"
        f"leak_series = pd.Series([{S}, 'other'])\n"
        f"leak_frame = pd.DataFrame({{{S}: [1, 2]}})\n"
        f"def leak_fn(token={S}):\n    '''Uses a token.'''\n"
        f"leak_long = 'w' * 270 + {S} + 'v' * 20\n"
        f"leak_cells = pd.DataFrame({{'v': ['c' * 990 + {S} + 'd' * 50]}})",
    ),
    ("DataFrame print", "print(leak_frame)"),
    (
        "memory written from code",
        f"with agent.store.connect() as con:\n    Memories(con).remember('the token is ' + {S})",
    ),
    (
        "stored instructions written from code",
        f"with agent.store.connect() as con:\n"
        f"    SystemPrompts(con).save('Always use ' + {S}, operation='edit', author='code')",
    ),
    ("state written from code", f"with agent.store.connect() as con:\n    State(con).set('leak', {{'token': {S}}})"),
    ("AgentKernel.instruction", f"agent.config.instruction = 'Token: ' + {S}"),
    (
        "COMMENT ON TABLE",
        "with agent.store.connect() as con:\n"
        "    con.execute('CREATE OR REPLACE TABLE ai_leak (x INTEGER)')\n"
        f'    con.execute("COMMENT ON TABLE ai_leak IS \'" + {S} + "\'")',
    ),
    (
        "@tool description",
        f"@tool(description='Calls the service with ' + {S})\n"
        f"def leak_tool(x: int) -> dict:\n    return {{'echo': {S}, 'lines': '\\n'.join({S})}}",
    ),
    ("@tool raising", f"@tool\ndef leak_raise(x: int) -> str:\n    '''Fails.'''\n    raise RuntimeError({S})"),
    ("@tool long result", f"@tool\ndef leak_big(x: int) -> str:\n    '''Big.'''\n    return 'z' * 19990 + {S} * 3"),
]

# Code attempts whose result shows no output (they write where later requests read).
SILENT = {
    "variables for the briefing",
    "memory written from code",
    "stored instructions written from code",
    "state written from code",
    "AgentKernel.instruction",
    "COMMENT ON TABLE",
    "@tool description",
    "@tool raising",
    "@tool long result",
}
# Code attempts cut by a truncation window right where the secret was (and its marker is).
WINDOWS = {"stdout head window", "stdout tail window", "result repr window"}

# (what it tries, tool name, input) after the code above ran
TOOL_ATTEMPTS: list[tuple[str, str, dict[str, Any]]] = [
    ("inspect_namespace all", "inspect_namespace", {}),
    (
        "inspect_namespace names",
        "inspect_namespace",
        {"names": ["leak_str", "leak_dict", "leak_obj", "leak_series", "leak_frame", "leak_fn", "leak_long"]},
    ),
    ("db_sql cell window", "db_sql", {"sql": "SELECT v FROM leak_cells"}),
    ("get_state", "get_state", {"key": "leak"}),
    ("memory tool list", "memory", {"action": "list"}),
    ("read_system_prompt", "read_system_prompt", {}),
    ("db_schema", "db_schema", {}),
    ("notebook_cells", "notebook_cells", {"matching": "typed_token"}),
]

# The @tool functions defined above, offered from the next turn on.
USER_TOOL_ATTEMPTS: list[tuple[str, str, dict[str, Any]]] = [
    ("@tool structured result", "leak_tool", {"x": 1}),
    ("@tool error", "leak_raise", {"x": 1}),
    ("@tool cut result", "leak_big", {"x": 1}),
]

# Prompts of later turns: interpolation of a variable and of the environment.
PROMPTS = [
    "look at {leak_str}",
    "and the environment {os.environ}",
]


def attempts() -> int:
    return len(CODE_ATTEMPTS) + len(TOOL_ATTEMPTS) + len(USER_TOOL_ATTEMPTS) + len(PROMPTS) + 1  # + briefing


def script() -> list[Any]:
    """The scripted model's replies: three turns, six requests.

    1. every code attempt (request 0), every tool attempt (1), a final answer (2);
    2. (prompt ``{leak_str}``; the briefing, memory, instructions, the table comment and
       the tool description are in this turn's system prompt and tools) the @tool
       attempts (3), an answer (4);
    3. (prompt ``{os.environ}``) an answer (5).
    """
    code = reply(*[tool_use("run_code", {"code": c}) for _, c in CODE_ATTEMPTS])
    tools = reply(*[tool_use(name, args) for _, name, args in TOOL_ATTEMPTS])
    user_tools = reply(*[tool_use(name, args) for _, name, args in USER_TOOL_ATTEMPTS])
    return [code, tools, say("done one"), user_tools, say("done two"), say("done three")]


def forms(value: str = SECRET) -> list[str]:
    """What must not appear: the value, its encodings, and every 10-character piece."""
    data = value.encode()
    found = {
        value,
        value[::-1],
        data.hex(),
        data.hex().upper(),
        urllib.parse.quote(value, safe=""),
        urllib.parse.quote_plus(value),
        json.dumps(value)[1:-1],
        repr(value)[1:-1],
    }
    for shift in range(3):
        aligned = data[shift:][: (len(data) - shift) // 3 * 3]
        found.add(base64.b64encode(aligned).decode())
        found.add(base64.urlsafe_b64encode(aligned).decode())
    found |= {value[i : i + 10] for i in range(len(value) - 9)}
    return sorted(found)


def findings(text: str, value: str = SECRET) -> list[str]:
    """The forms of ``value`` in ``text`` (also with all whitespace taken out)."""
    squeezed = "".join(text.split())
    return [f for f in forms(value) if f in text or "".join(f.split()) in squeezed]


def strings(value: Any) -> list[str]:
    """Every string in a JSON value (keys too)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings(k), *strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def request_leaks(requests: list[dict[str, Any]], value: str = SECRET) -> list[tuple[int, str]]:
    return [(i, f) for i, body in enumerate(requests) for s in strings(body) for f in findings(s, value)]


def store_leaks(db_path: str, value: str = SECRET) -> list[tuple[str, str, str]]:
    """``(table, column, form)`` for every text column of every table holding a form."""
    import duckdb

    leaks = []
    with duckdb.connect(db_path, read_only=True) as con:
        columns = con.execute(
            "SELECT schema_name, table_name, column_name FROM duckdb_columns() "
            "WHERE NOT internal AND (data_type IN ('VARCHAR', 'JSON') OR data_type LIKE 'VARCHAR[]%')"
        ).fetchall()
        for schema, table, column in columns:
            rows = con.execute(f'SELECT CAST("{column}" AS VARCHAR) FROM "{schema}"."{table}"').fetchall()
            for (text,) in rows:
                for form in findings(text or "", value):
                    leaks.append((table, column, form))
        comments = con.execute(
            "SELECT table_name, coalesce(comment, '') FROM duckdb_tables() WHERE NOT internal"
        ).fetchall()
        leaks += [(t, "COMMENT", f) for t, c in comments for f in findings(c, value)]
    return leaks


# -- credentials nobody declared --------------------------------------------------------
# Set in the kernel's environment, in no secret_env: found by their names.

UNDECLARED = {
    "OPENAI_API_KEY": "sk-proj-Zq81vNw4Lx0pTb6Ke2Yh9Rj3Mc7Ud5Sa",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCY9q2Lw8vTz1",
}
_OPENAI, _AWS = (f'os.environ["{name}"]' for name in UNDECLARED)

# (what it tries, code run with run_code)
UNDECLARED_CODE: list[tuple[str, str]] = [
    ("printed", f"print({_OPENAI}, {_AWS})"),
    ("printed base64", f"print(base64.b64encode({_AWS}.encode()).decode())"),
    ("environment printed", "print(dict(os.environ))"),
    ("error message", f"raise ValueError('bad key ' + {_OPENAI})"),
    (
        "memory written from code",
        f"with agent.store.connect() as con:\n    Memories(con).remember('keys: ' + {_OPENAI} + ' ' + {_AWS})",
    ),
    (
        "frame",
        f"creds_frame = pd.DataFrame({{'key': [{_OPENAI}, {_AWS}], {_AWS}: [1, 2]}})\n"
        f"@tool\ndef creds_tool(x: int) -> dict:\n    '''Returns the keys.'''\n    return {{'openai': {_OPENAI}, 'aws': {_AWS}}}\n"
        f"@tool\ndef creds_raise(x: int) -> str:\n    '''Fails.'''\n    raise RuntimeError({_AWS})",
    ),
]
UNDECLARED_TOOLS: list[tuple[str, str, dict[str, Any]]] = [
    ("frame stored in an ai_ table", "db_sql", {"sql": "CREATE TABLE ai_creds AS SELECT * FROM creds_frame"}),
    ("ai_ table read back", "db_sql", {"sql": "SELECT * FROM ai_creds"}),
    ("memory listed", "memory", {"action": "list"}),
]
UNDECLARED_USER_TOOLS: list[tuple[str, str, dict[str, Any]]] = [
    ("@tool result", "creds_tool", {"x": 1}),
    ("@tool error", "creds_raise", {"x": 1}),
]


def undeclared_script() -> list[Any]:
    """Two turns: the code (request 0), the tools (1), an answer (2); the @tools (3), an answer (4)."""
    return [
        reply(*[tool_use("run_code", {"code": c}) for _, c in UNDECLARED_CODE]),
        reply(*[tool_use(name, args) for _, name, args in UNDECLARED_TOOLS]),
        say("done one"),
        reply(*[tool_use(name, args) for _, name, args in UNDECLARED_USER_TOOLS]),
        say("done two"),
    ]


def file_leaks(db_path: str, values: list[str]) -> list[str]:
    """The values (raw, or as UTF-8 bytes anywhere) in the DuckDB file, checkpointed first."""
    import duckdb

    with duckdb.connect(db_path) as con:
        con.execute("CHECKPOINT")
    data = Path(db_path).read_bytes()
    return [v for v in values if v.encode() in data or v[:16].encode() in data]
