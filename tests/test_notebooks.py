"""Notebooks run headless through papermill: the quickstart, and %agent feeding later cells."""

from __future__ import annotations

from pathlib import Path

import nbformat
import papermill

from agent_kernel.demo import run_demo
from agent_kernel.store import Store
from agent_kernel.testing import call, reply, say, tool_use
from tests.support.calls import texts_of
from tests.support.notebooks import outputs_text, write_notebook
from tests.support.subsessions import route, wait_for_spawned

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def test_quickstart_runs_headless_on_the_scripted_model(agent_db, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("AGENT_KERNEL_WARM_UP", "1")  # as `make demo` runs it: the warm-up on
    out = run_demo(NOTEBOOKS / "quickstart.ipynb", tmp_path / "out" / "quickstart.ipynb", scripted=True)
    nb = nbformat.read(out, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    agent_cell = next(c for c in code if c.source.startswith("%agent load"))
    shown = outputs_text(agent_cell)
    assert "Here are the monthly revenue totals" in shown and "2025-12" in shown
    assert "offline scripted model, not Claude" in shown
    after = next(c for c in code if c.source.startswith("sales.groupby"))
    assert "North" in outputs_text(after)  # the agent's `sales` was used by the next cell
    history = next(c for c in code if c.source.startswith("%agent_history"))
    assert "read_csv" in outputs_text(history)


def test_agent_cell_defines_a_variable_for_the_next_cell(scripted_model, agent_db, tmp_path):
    scripted_model.add(
        call("run_code", code="import math\nradius = 2\narea = round(math.pi * radius ** 2, 3)\nprint(area)"),
        say("The area is in `area`."),
    )
    source, output = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    write_notebook(
        source,
        "%load_ext agent_kernel",
        "%agent compute the area of a circle of radius 2 into `area`",
        "doubled = area * 2\nprint(doubled)",
    )
    papermill.execute_notebook(str(source), str(output), kernel_name="python3", progress_bar=False, cwd=str(tmp_path))
    done = nbformat.read(output, as_version=4)
    assert "12.566" in outputs_text(done.cells[1])
    assert "The area is in `area`." in outputs_text(done.cells[1])
    # Every output the turn left shows something: no blanked status line or Stop button.
    empty = [o for o in done.cells[1].outputs if not any(o.get("data", {}).values()) and not o.get("text")]
    assert not empty, done.cells[1].outputs
    assert outputs_text(done.cells[2]).strip() == "25.132"
    assert len(scripted_model.requests) == 2


def _run_three_times(cells, tmp_path, stem):
    """Execute the same notebook three times with papermill; the executed copies."""
    source = write_notebook(tmp_path / f"{stem}.ipynb", *cells)
    done = []
    for run in (1, 2, 3):
        output = tmp_path / f"{stem}-run{run}.ipynb"
        papermill.execute_notebook(
            str(source), str(output), kernel_name="python3", progress_bar=False, cwd=str(tmp_path)
        )
        done.append(nbformat.read(output, as_version=4))
    return done


def test_a_named_session_notebook_reruns_and_continues(scripted_model, agent_db, tmp_path):
    scripted_model.add(say("Report 1."), say("Report 2."), say("Report 3."))
    runs = _run_three_times(
        ["%load_ext agent_kernel", "%agent --session daily write today's report"], tmp_path, "daily"
    )
    assert "(new session 'daily':" in outputs_text(runs[0].cells[1])
    assert "(session 'daily':" in outputs_text(runs[2].cells[1])
    assert "new session" not in outputs_text(runs[2].cells[1])
    assert len(scripted_model.requests) == 3
    assert texts_of(scripted_model.requests[2]) == [
        ("user", "write today's report"),
        ("assistant", "Report 1."),
        ("user", "write today's report"),
        ("assistant", "Report 2."),
        ("user", "write today's report"),
    ]


def test_a_new_session_notebook_reruns_fresh_and_keeps_the_older_ones(scripted_model, agent_db, tmp_path):
    scripted_model.add(say("Week 1."), say("Week 2."), say("Week 3."))
    runs = _run_three_times(
        ["%load_ext agent_kernel", "%agent --new=weekly -- write the weekly report", "%agent_sessions --all"],
        tmp_path,
        "weekly",
    )
    assert len(scripted_model.requests) == 3
    assert texts_of(scripted_model.requests[2]) == [("user", "write the weekly report")]
    assert "the earlier one is kept as 'weekly~2'" in outputs_text(runs[2].cells[1])
    listed = outputs_text(runs[2].cells[2])
    for name in ("weekly~1", "weekly~2"):
        assert name in listed
    assert listed.count("weekly") == 3


def test_a_notebook_that_fans_out_to_sub_sessions_reruns(scripted_model, agent_db, tmp_path):
    scripted_model.responder = route(
        {
            "PART-A": [call("run_code", code="part_a = sum(range(10))"), call("report_result", result="A is 45")],
            "PART-B": [call("run_code", code="part_b = sum(range(5))"), call("report_result", result="B is 10")],
            "split the sums": [
                reply(
                    tool_use("spawn_session", {"task": "PART-A sum"}), tool_use("spawn_session", {"task": "PART-B sum"})
                ),
                wait_for_spawned,
                say("Both parts are done."),
            ],
        }
    )
    cells = [
        "%load_ext agent_kernel",
        '%config AgentKernel.tool_groups = ["code", "llm"]\n%config AgentKernel.summary_idle_minutes = 0',
        "%agent --new=fanout -- split the sums between two sub-sessions",
        "print(part_a + part_b)",
    ]
    for run in _run_three_times(cells, tmp_path, "fanout"):
        agent_cell = run.cells[2]
        assert "Both parts are done." in outputs_text(agent_cell)
        assert " tokens incl. 2 sub-sessions: " in outputs_text(agent_cell)  # the footer counts them
        html = [o.get("data", {}).get("text/html", "") for o in agent_cell.outputs]
        sections = [h for h in html if 'class="agent-kernel-subsession"' in h]
        assert sorted("PART-A" in h for h in sections) == [False, True]
        assert all("completed" in h for h in sections)
        assert outputs_text(run.cells[3]).strip() == "55"
    with Store(agent_db).connect() as con:
        children = con.execute("SELECT task, state FROM sessions WHERE parent_id IS NOT NULL").fetchall()
    assert sorted(children) == sorted([(task, "completed") for task in ("PART-A sum", "PART-B sum")] * 3)
