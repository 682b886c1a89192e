"""The audit trail: error categories, and every tool call and code run stored by a real turn."""

from __future__ import annotations

import json

import pytest

from agent_kernel.store import Store
from agent_kernel.store.audit import AuditLog, error_category, failures, stats
from agent_kernel.testing import call, reply, say, tool_use
from tests.support.capabilities import needs_sql_guard


@pytest.mark.parametrize(
    ("error", "category"),
    [
        (None, None),
        ({"type": "SyntaxError", "message": "invalid syntax"}, "syntax"),
        ({"type": "IndentationError", "message": "unexpected indent"}, "syntax"),
        ({"type": "ModuleNotFoundError", "message": "No module named 'polarz'"}, "import"),
        ({"type": "TypeError", "message": "unsupported operand"}, "type"),
        ({"type": "NameError", "message": "name 'df2' is not defined"}, "reference"),
        ({"type": "AttributeError", "message": "'DataFrame' object has no attribute 'foo'"}, "reference"),
        ({"type": "TimeoutError", "message": "stopped after 1 s"}, "timeout"),
        ({"type": "ConnectionRefusedError", "message": "[Errno 111] Connection refused"}, "network"),
        ({"type": "ConnectError", "message": "all connection attempts failed"}, "network"),
        ({"type": "OSError", "message": "[Errno -2] Name or service not known"}, "network"),
        ({"type": "KeyError", "message": "'revenue'"}, "runtime"),
        ({"type": "ZeroDivisionError", "message": "division by zero"}, "runtime"),
    ],
)
def test_error_categories(error, category):
    assert error_category(error) == category


def test_a_log_is_written_once_in_two_statements(tmp_path):
    store = Store(tmp_path / "agent.duckdb")
    log = AuditLog("s1", 3, "make a chart")
    use = {"id": "toolu_1", "name": "run_code", "input": {"code": "1/0", "isolated": True}}
    run = {
        "execution_id": "e1",
        "code": "1/0",
        "success": False,
        "stdout": "",
        "stderr": "",
        "duration_ms": 2.5,
        "error": {"type": "ZeroDivisionError", "message": "division by zero", "traceback": "tb"},
    }
    log.tool_call(use, result_chars=120, is_error=False, duration_ms=3.0, executions=[run])
    log.tool_call(
        {"id": "toolu_2", "name": "db_sql", "input": {"sql": "SELECT 1"}},
        result_chars=40,
        is_error=True,
        duration_ms=None,
    )
    with store.connect() as con:
        log.write(con)
        log.write(con)  # nothing new: nothing twice
        calls = con.execute(
            "SELECT session_id, turn, tool_use_id, tool, input, result_chars, is_error, duration_ms FROM tool_calls ORDER BY tool_use_id"
        ).fetchall()
        runs = con.execute(
            "SELECT id, code, success, error_type, error_category, trigger_prompt, isolated, traceback FROM code_executions"
        ).fetchall()
        summary = stats(con, 7)
        failed = failures(con, 5)
    assert calls == [
        ("s1", 3, "toolu_1", "run_code", json.dumps({"code": "1/0", "isolated": True}), 120, False, 3.0),
        ("s1", 3, "toolu_2", "db_sql", json.dumps({"sql": "SELECT 1"}), 40, True, None),
    ]
    assert runs == [("e1", "1/0", False, "ZeroDivisionError", "runtime", "make a chart", True, "tb")]
    assert (summary.executions, summary.failed, summary.categories) == (1, 1, [("runtime", 1)])
    assert (summary.tool_calls, summary.tool_errors) == (2, 1)
    assert [f.code for f in failed] == ["1/0"]


CODE = {
    "ok": "total = 6 * 7\nprint(total)",
    "syntax": "def broken(:\n    pass",
    "import": "import polarz",
    "type": "'a' + 1",
    "reference": "undefined_name + 1",
    "timeout": "import time\ntime.sleep(10)",
}


def test_every_tool_call_and_code_run_of_a_turn_is_recorded(shell_agent, scripted_model, agent_db):
    uses = [tool_use("run_code", {"code": code, "timeout_s": 1}) for code in CODE.values()]
    uses.append(tool_use("db_sql", {"sql": "DELETE FROM sessions"}))
    scripted_model.add(reply(*uses), say("done"))
    execution = shell_agent.execute("try a few things")
    assert execution.error is None  # the failures show in the cell as a cell's errors would
    with Store(agent_db).connect() as con:
        calls = con.execute(
            "SELECT c.tool, c.is_error, c.result_chars, c.duration_ms, c.input, s.name, c.turn "
            "FROM tool_calls c JOIN sessions s ON s.id = c.session_id ORDER BY c.created_at"
        ).fetchall()
        runs = con.execute(
            "SELECT code, success, error_category, stdout, duration_ms, trigger_prompt, turn "
            "FROM code_executions ORDER BY created_at"
        ).fetchall()
    assert [c[0] for c in calls] == ["run_code"] * 6 + ["db_sql"]
    assert [c[1] for c in calls] == [False] * 6 + [True]  # run_code failures are results, not errors
    assert all(c[2] > 20 and c[3] > 0 and c[5].startswith("kernel-") and c[6] == 1 for c in calls)
    assert json.loads(calls[-1][4]) == {"sql": "DELETE FROM sessions"}
    assert [r[0] for r in runs] == list(CODE.values())
    assert [r[2] for r in runs] == [None, "syntax", "import", "type", "reference", "timeout"]
    assert runs[0][1] is True and runs[0][3] == "42\n" and runs[5][4] >= 1000
    assert {r[5] for r in runs} == {"try a few things"} and {r[6] for r in runs} == {1}


@needs_sql_guard
def test_the_model_cannot_change_the_trail(shell_agent, scripted_model, agent_db):
    scripted_model.add(call("run_code", code="x = 1"), say("done"))
    shell_agent.ok("run something")
    scripted_model.add(
        reply(
            tool_use("db_sql", {"sql": "DELETE FROM code_executions"}),
            tool_use("db_sql", {"sql": "UPDATE tool_calls SET is_error = false"}),
            tool_use("db_sql", {"sql": "SELECT count(*) FROM code_executions"}),
        ),
        say("done"),
    )
    shell_agent.ok("cover your tracks")
    blocks = scripted_model.requests[-1]["messages"][-1]["content"]
    assert blocks[0]["is_error"] and blocks[1]["is_error"] and not blocks[2].get("is_error")
    assert json.loads(blocks[2]["content"])["rows"] == [[1]]  # readable, not writable
    with Store(agent_db).connect() as con:
        assert con.execute("SELECT count(*) FROM code_executions").fetchall() == [(1,)]
