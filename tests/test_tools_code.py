"""run_code and inspect_namespace, called by the scripted model in a real kernel."""

from __future__ import annotations

import json

from agent_kernel.testing import call, say


def run_tools(kernel, scripted_model, *calls, prompt="go"):
    """Script the calls, run one turn, return the decoded tool results in order."""
    scripted_model.add(*calls, say("done"))
    execution = kernel.execute(f"%agent {prompt}")
    assert execution.status == "ok"
    results = []
    for request in scripted_model.requests[-len(calls):]:
        block = request["messages"][-1]["content"][0]
        results.append(json.loads(block["content"]) if not block.get("is_error") else block)
    return results, execution


def test_run_code_returns_outputs_and_shows_them_in_the_cell(kernel, scripted_model):
    code = "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\nvalue = {'a': 1}\nvalue"
    [result], execution = run_tools(kernel, scripted_model, call("run_code", code=code))
    assert result["success"] is True
    assert result["stdout"] == "to stdout\n" and result["stderr"] == "to stderr\n"
    assert result["result"] == "{'a': 1}"
    assert result["duration_ms"] > 0 and len(result["execution_id"]) == 12
    assert "to stdout" in execution.stdout and "to stderr" in execution.stderr
    assert "{'a': 1}" in execution.texts()  # the value is displayed as a cell result would be
    assert kernel.value("value") == {"a": 1}


def test_run_code_error_is_bounded_and_plain(kernel, scripted_model):
    code = "def inner():\n    raise ValueError('\\x1b[31mbad value\\x1b[0m')\ninner()"
    [result], execution = run_tools(kernel, scripted_model, call("run_code", code=code))
    assert result["success"] is False
    assert result["error"]["type"] == "ValueError" and result["error"]["message"] == "bad value"
    trace = result["error"]["traceback"]
    assert "inner()" in trace and "\x1b[" not in trace and "site-packages" not in trace
    # The user sees it too, on stderr: not as an error output, which would fail a papermill run.
    assert execution.errors == [] and "ValueError" in execution.stderr and "inner()" in execution.stderr
    assert "agent_kernel" not in execution.stderr


def test_run_code_output_is_capped(kernel, scripted_model):
    [result], _ = run_tools(
        kernel, scripted_model, call("run_code", code="print('x' * 50_000)\n'y' * 10_000")
    )
    assert len(result["stdout"]) < 9_000 and "characters omitted" in result["stdout"]
    assert len(result["result"]) < 2_100


def test_run_code_syntax_error_and_ipython_syntax(kernel, scripted_model):
    results, _ = run_tools(
        kernel,
        scripted_model,
        call("run_code", code="def broken(:\n    pass"),
        call("run_code", code="%time total = sum(range(10))\ntotal"),
    )
    assert results[0]["success"] is False and results[0]["error"]["type"] == "SyntaxError"
    assert results[1]["success"] is True and results[1]["result"] == "45"


def test_isolated_run_has_no_access_to_the_kernel_or_secrets(kernel, scripted_model):
    kernel.ok("secret_in_kernel = 1")
    code = (
        "import os\n"
        "print(sorted(k for k in os.environ if 'ANTHROPIC' in k or 'AGENT_KERNEL' in k))\n"
        "print('secret_in_kernel' in globals())\n"
        "6 * 7"
    )
    results, _ = run_tools(
        kernel,
        scripted_model,
        call("run_code", code=code, isolated=True),
        call("run_code", code="import time\ntime.sleep(30)", isolated=True, timeout_s=1),
        call("run_code", code="raise KeyError('nope')", isolated=True),
    )
    ok, slow, failing = results
    assert ok["success"] is True and ok["stdout"] == "[]\nFalse\n" and ok["result"] == "42"
    assert slow["success"] is False and slow["error"]["type"] == "TimeoutError"
    assert failing["success"] is False and failing["error"]["type"] == "KeyError"
    assert "nope" in failing["error"]["message"]


def test_inspect_namespace_summarises_without_copying(kernel, scripted_model):
    kernel.ok(
        "import pandas as pd\n"
        "df = pd.DataFrame({'city': ['Oslo', 'Rome', None] * 1000, 'temp': range(3000)})\n"
        "_private = 1\n"
        "class Described:\n"
        "    def _repr_llm_(self):\n"
        "        return 'a described object'\n"
        "thing = Described()\n"
        "def helper(x: int) -> int:\n"
        "    '''Double x.'''\n"
        "    return 2 * x\n"
    )
    results, _ = run_tools(
        kernel,
        scripted_model,
        call("inspect_namespace"),
        call("inspect_namespace", names=["df", "missing"]),
    )
    everything = {v["name"]: v for v in results[0]["variables"]}
    assert "_private" not in everything and "pd" not in everything
    assert everything["thing"]["summary"] == "a described object"
    assert everything["helper"]["summary"] == "helper(x: int) -> int - Double x."
    df, missing = results[1]["variables"]
    assert df["shape"] == [3000, 2]
    assert [c["name"] for c in df["columns"]] == ["city", "temp"]
    assert df["columns"][0]["samples"] == ["'Oslo'", "'Rome'", "'Oslo'"]
    assert len(json.dumps(df)) < 1_000
    assert missing == {"name": "missing", "type": "undefined", "summary": "not defined in the kernel"}


def test_extreme_and_non_finite_timeouts_are_refused_and_later_limits_still_hold(kernel, scripted_model, agent_db):
    scripted_model.add(
        call("run_code", code="1", timeout_s=1e308),
        call("run_code", code="1", timeout_s="nan"),
        call("run_code", code="1", timeout_s="inf"),
        call("run_code", code="1", timeout_s=-1),
        call("run_code", code="ran_long_limit = True", timeout_s=3600),
        call("run_code", code="while True: pass", timeout_s=2),
        say("done"),
    )
    execution = kernel.ok("%agent go", timeout=60)
    results = [r["messages"][-1]["content"][0] for r in scripted_model.requests[1:]]
    for refused, why in zip(results[:4], ["less than or equal to 3600", "finite number", "finite number", "greater than 0"]):
        assert refused["is_error"] and "timeout_s" in refused["content"] and why in refused["content"]
    assert kernel.value("ran_long_limit") is True
    looped = json.loads(results[5]["content"])
    assert looped["error"]["type"] == "TimeoutError" and 1.9 < looped["duration_ms"] / 1000 < 4
    # Nobody stopped the turn: it ran to the model's last reply, with no stop recorded.
    assert len(scripted_model.requests) == 7
    assert not any("stopped the turn" in str(b.get("content")) for b in results)
    assert not any("Interrupted" in t or "Stopped" in t for t in execution.final_texts())
    from agent_kernel.store import Store

    with Store(agent_db).connect() as con:
        assert con.execute("SELECT state, last_error FROM sessions").fetchall() == [("idle", None)]


def test_the_agents_code_cannot_end_the_kernel_or_break_its_streams(tmp_path):
    """exit(), quit() and ask_exit() would stop ipykernel's event loop, closing stdout would
    close the cell's stream for good, a lone surrogate would fail the output message."""
    import sys

    from .inprocess import in_process

    with in_process(tmp_path) as caller:
        stdout = sys.stdout
        for code in ("exit()", "quit()", "get_ipython().ask_exit()"):
            error = caller.value("run_code", {"code": code})["error"]
            assert error["type"] == "KernelExitRefused" and "keeps running" in error["message"]
        assert not caller.shell.exit_now and "ask_exit" not in vars(caller.shell)
        assert caller.value("run_code", {"code": "import sys; sys.stdout.close()"})["success"]
        assert sys.stdout is stdout and not stdout.closed
        printed = caller.value("run_code", {"code": "print('a\\ud800b')"})
        assert printed["success"] and printed["stdout"].startswith("a")
