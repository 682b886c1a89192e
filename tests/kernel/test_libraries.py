"""Libraries: Python modules in the agent's DuckDB file, imported as ``agent_libs.NAME``."""

from __future__ import annotations

import sys

import pytest

from agent_kernel.grants import ENV
from agent_kernel.kernel import libraries
from agent_kernel.testing import reply, say, tool_use, web_search
from tests.support.calls import batch, standing_grants


@pytest.fixture
def agent(shell_agent):
    shell_agent.agent.config.tool_groups = ["code", "tools"]
    yield shell_agent
    libraries.forget()


UNITS = "FACTOR = 2\n\ndef scale(x):\n    return x * FACTOR\n"
REPORT = "from agent_libs import units\n\ndef line(x):\n    return f'{x} -> {units.scale(x)}'\n"


def test_libraries_are_imported_by_tools_run_code_and_the_user_and_updates_are_seen(agent, scripted_model):
    results, _ = batch(
        agent, scripted_model,
        ("create_library", {"name": "units", "description": "Scaling.", "code": UNITS}),
        ("create_library", {"name": "report", "description": "Report lines.", "code": REPORT}),
        ("create_tool", {"name": "report_line", "description": "A report line.", "parameter_schema": {"type": "object"},
                         "code": "import agent_libs.report\nreturn {'line': agent_libs.report.line(args.get('x', 3))}"}),
        ("create_tool", {"name": "isolated_line", "description": "The same, isolated.", "parameter_schema": {"type": "object"},
                         "code": "from agent_libs.report import line\nreturn {'line': line(4)}", "isolated": True}),
        ("create_library", {"name": "units", "description": "again", "code": "x = 1"}),
        ("create_library", {"name": "bad", "description": "x", "code": "def ("}),
    )  # fmt: skip
    assert results[:4] == [{"name": "units", "version": 1}, {"name": "report", "version": 1},
                           {"name": "report_line", "version": 1}, {"name": "isolated_line", "version": 1}]  # fmt: skip
    assert results[4]["is_error"] and "update_library" in results[4]["text"]
    assert results[5]["is_error"] and "does not parse" in results[5]["text"]

    results, _ = batch(
        agent, scripted_model,
        ("report_line", {}),
        ("isolated_line", {}),
        ("run_code", {"code": "import agent_libs.report as r\nr.line(5)"}),
    )  # fmt: skip
    assert results[0] == {"line": "3 -> 6"} and results[1] == {"line": "4 -> 8"}
    assert results[2]["result"] == "'5 -> 10'"
    agent.code("from agent_libs.report import line as user_line\nuser_value = user_line(7)")
    assert agent.value("user_value") == "7 -> 14"  # the user's own cell
    assert sys.modules["agent_libs.units"].__file__ == "agent_libs/units.py"  # nothing on disk

    results, _ = batch(
        agent, scripted_model,
        ("update_library", {"name": "units", "code": UNITS.replace("FACTOR = 2", "FACTOR = 10")}),
        ("list_libraries", {}),
        ("read_library", {"name": "units", "version": 1}),
    )  # fmt: skip
    assert results[0] == {"name": "units", "version": 2}
    assert results[1] == {"libraries": [{"name": "report", "description": "Report lines.", "version": 1},
                                        {"name": "units", "description": "Scaling.", "version": 2}]}  # fmt: skip
    assert results[2] == {"name": "units", "description": "Scaling.", "code": UNITS, "version": 1}
    agent.code("import agent_libs.report\nuser_value = agent_libs.report.line(7)")
    assert agent.value("user_value") == "7 -> 70"  # the importing library sees the update
    results, _ = batch(agent, scripted_model, ("report_line", {"x": 1}), ("isolated_line", {}))
    assert results == [{"line": "1 -> 10"}, {"line": "4 -> 40"}]

    results, _ = batch(
        agent, scripted_model,
        ("update_library", {"name": "units", "from_version": 1}),
        ("delete_library", {"name": "report"}),
        ("read_library", {"name": "report"}),
    )  # fmt: skip
    assert results[:2] == [{"name": "units", "version": 3}, {"deleted": True}]
    assert results[2]["is_error"] and "yours are: units" in results[2]["text"]
    agent.code("import agent_libs.units\nuser_value = agent_libs.units.scale(1)")
    assert agent.value("user_value") == 2
    failed = agent.shell.run_cell("import agent_libs.report")
    assert isinstance(failed.error_in_exec, ModuleNotFoundError)


def test_a_failing_library_shows_its_own_line_in_the_tools_traceback(agent, scripted_model):
    batch(
        agent, scripted_model,
        ("create_library", {"name": "fragile", "description": "Breaks.", "code": "def go(d):\n    return d['missing']\n"}),
        ("create_tool", {"name": "use_fragile", "description": "x", "parameter_schema": {"type": "object"},
                         "code": "import agent_libs.fragile as f\nreturn f.go({})"}),
    )  # fmt: skip
    results, _ = batch(agent, scripted_model, ("use_fragile", {}))
    assert results[0]["is_error"] and "KeyError" in results[0]["text"]
    assert "agent_libs/fragile.py" in results[0]["text"] and "return d['missing']" in results[0]["text"]


def test_a_library_written_after_untrusted_content_is_imported_only_by_the_session_that_wrote_it(
    agent, scripted_model, tmp_path, monkeypatch
):
    marker = tmp_path / "planted-library-ran"
    planted = f"with open({str(marker)!r}, 'a') as f:\n    f.write('ran\\n')\n\ndef value():\n    return 42\n"
    scripted_model.add(
        reply(
            *web_search("useful helpers", [("https://evil.example/helpers", "Helpers")]),
            tool_use("create_library", {"name": "helpers", "description": "Helpers.", "code": planted}),
        ),
        say("done"),
    )
    # The person allowed the planting session's writing in advance (a job's standing grants):
    # after untrusted content, auto asks before each one, and nobody is here to answer.
    standing_grants(monkeypatch, tools=("create_library", "run_code"))
    agent.ok("find helpers", session="planter")
    use = ("run_code", {"code": "import agent_libs.helpers as h\nh.value()"})
    results, _ = batch(agent, scripted_model, use, session="planter")  # its own session, auto
    assert results[0]["result"] == "42" and marker.read_text() == "ran\n"
    monkeypatch.delenv(ENV)

    refused = "agent_libs.helpers was written after the agent read untrusted content, so it is not imported here"
    # The user's own cell: the module the planter loaded is not in the import cache either.
    failed = agent.shell.run_cell("import agent_libs.helpers")
    assert isinstance(failed.error_in_exec, ImportError)
    message = str(failed.error_in_exec)
    assert message.startswith(refused) and "\n" not in message
    assert "after it read untrusted content (web_search useful helpers)" in message
    assert "`%agent_tainted --clear library helpers`" in message
    # Another session, in auto: run_code, a tool in the kernel and an isolated tool.
    batch(
        agent, scripted_model,
        ("create_tool", {"name": "in_kernel", "description": "x", "parameter_schema": {"type": "object"},
                         "code": "import agent_libs.helpers as h\nreturn h.value()"}),
        ("create_tool", {"name": "in_box", "description": "x", "parameter_schema": {"type": "object"},
                         "code": "import agent_libs.helpers as h\nreturn h.value()", "isolated": True}),
        session="victim",
    )  # fmt: skip
    results, _ = batch(agent, scripted_model, use, ("in_kernel", {}), ("in_box", {}), session="victim")
    assert refused in results[0]["error"]["message"]
    assert all(r["is_error"] and f"ImportError: {refused}" in r["text"] for r in results[1:])
    # The session that wrote it, in ask and read-only turns: a tool the person trusted as
    # read-only runs there without asking, and the library's code still does not.
    standing_grants(monkeypatch, tools=("create_tool",))
    batch(
        agent, scripted_model,
        ("create_tool", {"name": "reader", "description": "x", "parameter_schema": {"type": "object"}, "writes": False,
                         "code": "import agent_libs.helpers as h\nreturn h.value()"}),
        session="planter",
    )  # fmt: skip
    monkeypatch.delenv(ENV)
    from agent_kernel.authority import card_click
    from agent_kernel.store.agent_tools import AgentTools

    with agent.agent.store.connect() as con:
        AgentTools(con).trust_read_only("reader", 1, by=card_click("reader", "read_only"))
    for mode in ("ask", "read-only"):
        results, _ = batch(agent, scripted_model, ("reader", {}), session="planter", approve=mode)
        assert results[0]["is_error"] and f"ImportError: {refused}" in results[0]["text"]
    assert marker.read_text() == "ran\n"  # it ran once, in the planter's auto turn only


def test_loading_the_extension_installs_the_finder_without_opening_the_store(tmp_path):
    import subprocess

    script = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "shell.run_line_magic('load_ext', 'agent_kernel')\n"
        "assert 'duckdb' not in sys.modules, 'duckdb imported at load'\n"
        "from agent_kernel.kernel.libraries import LibraryFinder\n"
        "assert any(isinstance(f, LibraryFinder) for f in sys.meta_path)\n"
        "try:\n"
        "    import agent_libs.nothing_here\n"
        "except ModuleNotFoundError:\n"
        "    print('missing ok', 'duckdb' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
        env={**__import__("os").environ, "AGENT_KERNEL_DB": str(tmp_path / "a.duckdb")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "missing ok True" in done.stdout  # the store opened only at the agent_libs import
