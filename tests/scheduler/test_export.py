"""A session exported as a notebook: its inputs found by ast, a scripted analysis exported
with `agent-kernel export`, run by papermill with no model reachable, and scheduled."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from agent_kernel.cli import main
from agent_kernel.scheduler.export import find_parameters
from agent_kernel.testing import call, say
from tests.support.capabilities import needs_widget_replies

SALES = "region,amount\nnorth,120\nsouth,80\nwest,150\n"
DEAD_MODEL = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "ANTHROPIC_API_KEY": ""}


# -- the inputs ---------------------------------------------------------------------------------


def test_paths_dates_and_numbers_assigned_once_at_top_level_are_inputs():
    found, codes = find_parameters([
        'source = "data/sales.csv"\nsince = "2026-01-01"\nthreshold = 100\nrate = -0.5\nprint(source)',
        "report: str = 'out.xlsx'\nprint(report, threshold)",
    ])  # fmt: skip
    assert found == {"source": "data/sales.csv", "since": "2026-01-01", "threshold": 100, "rate": -0.5,
                     "report": "out.xlsx"}  # fmt: skip
    assert codes == ["print(source)", "print(report, threshold)"]


@pytest.mark.parametrize(
    "codes",
    [
        ["title = 'Sales by region'"],  # text, not a path or a date
        ["url = 'https://example.com/data.csv'"],  # a URL
        ["flag = True"],  # a bool
        ["n = 10\nn += 1"],  # changed later
        ["n = 10", "n = 20"],  # assigned twice
        ["print(n)", "n = 10"],  # read before it is set
        ["n = 10; m = 2"],  # shares its line
        ["for n in range(3):\n    pass\nn = 10"],  # bound by a loop too
        ["_n = 10"],  # private
        ["n = 10", "%time print(n)"],  # mentioned by code that is not plain Python
        ["if True:\n    n = 10"],  # not at top level
        ["n = len('abc')"],  # not a literal
    ],
)
def test_anything_else_stays_in_the_code(codes):
    found, kept = find_parameters(codes)
    assert found == {} and kept == codes


def test_a_cell_left_empty_is_dropped_and_the_inputs_are_bounded():
    found, codes = find_parameters(["path = 'a.csv'\n", "\n".join(f"n{i} = {i}" for i in range(80))])
    assert codes[0] == "" and found["path"] == "a.csv"
    assert len(found) == 50


# -- a scripted analysis, exported -------------------------------------------------------------


def analysis(kernel, scripted_model, tmp_path: Path) -> None:
    """Two turns that read a CSV: one failing step, one isolated, the rest in the kernel."""
    (tmp_path / "sales.csv").write_text(SALES)
    scripted_model.add(
        call("run_code", code=(
            'import csv\nsource = "sales.csv"\nsince = "2026-01-01"\nthreshold = 100\n'
            "rows = list(csv.DictReader(open(source)))\nprint(len(rows), 'rows since', since)"
        )),
        call("run_code", code="undefined_name + 1"),
        call("run_code", code="print('scratch')", isolated=True),
        call("run_code", code="big = [r['region'] for r in rows if int(r['amount']) > threshold]\nprint(big)"),
        say("Two regions sold more than 100."),
        call("run_code", code="total = sum(int(r['amount']) for r in rows)\nprint('total', total)"),
        say("350 in all."),
    )  # fmt: skip
    kernel.ok("%agent which regions sold more than 100?")
    kernel.ok("%agent and the total?")


def printed(notebook: Path) -> list[str]:
    nb = nbformat.read(notebook, as_version=4)
    return [
        "".join(o.get("text", "") for o in c.outputs if o.get("output_type") == "stream")
        for c in nb.cells
        if c.cell_type == "code" and "agent_kernel" in c.metadata
    ]


def test_export_writes_a_clean_notebook_that_papermill_runs_with_no_model(
    kernel, scripted_model, agent_db, tmp_path, capsys, monkeypatch
):
    analysis(kernel, scripted_model, tmp_path)
    ran = kernel.execute("print(len(rows), 'rows since', since); print(big); print('total', total)").stdout
    out = tmp_path / "export" / "sales.ipynb"
    calls = len(scripted_model.requests)
    assert main(["--db", str(agent_db), "export", _session(agent_db), str(out),
                 "--cwd", str(tmp_path)]) == 0  # fmt: skip
    said = capsys.readouterr().out
    assert "parameters: source = 'sales.csv', since = '2026-01-01', threshold = 100." in said
    assert "(2 turns, 3 code cells)" in said
    assert "Verification passed: papermill ran it headless, with no model reachable" in said
    assert "3 of 3 code cells printed what they printed for the agent" in said
    assert len(scripted_model.requests) == calls  # no model call
    nb = nbformat.read(out, as_version=4)
    sources = [c.source for c in nb.cells]
    assert not any(s.lstrip().startswith("%agent") or "%load_ext" in s for s in sources)
    (parameters,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert parameters.source.splitlines()[1:] == ["source = 'sales.csv'", "since = '2026-01-01'", "threshold = 100"]
    assert "undefined_name" not in "".join(sources) and "scratch" not in "".join(sources)
    assert nb.cells.index(parameters) == 1
    # papermill, the model out of reach, gives the outputs the agent's run gave.
    import papermill

    for key, value in DEAD_MODEL.items():
        monkeypatch.setenv(key, value)
    executed = tmp_path / "executed.ipynb"
    papermill.execute_notebook(str(out), str(executed), cwd=str(tmp_path), progress_bar=False, kernel_name="python3")
    assert "".join(printed(executed)) == ran == "3 rows since 2026-01-01\n['north', 'west']\ntotal 350\n"
    # and its parameters change what it does.
    other = tmp_path / "other.ipynb"
    papermill.execute_notebook(str(out), str(other), cwd=str(tmp_path), progress_bar=False, kernel_name="python3",
                               parameters={"threshold": 130})  # fmt: skip
    assert printed(other)[1] == "['west']\n"


def _session(db: Path) -> str:
    from agent_kernel.store import Store
    from agent_kernel.store.sessions import Sessions

    with Store(db).connect() as con:
        (session,) = Sessions(con).list()
    return session.name


def test_schedule_creates_a_job_the_scheduler_runs_succeeded(kernel, scripted_model, agent_db, tmp_path, capsys):
    from agent_kernel.scheduler.runs import SUCCEEDED
    from agent_kernel.scheduler.service import SchedulerService
    from agent_kernel.store import Store

    analysis(kernel, scripted_model, tmp_path)
    out = tmp_path / "sales.ipynb"
    code = main(["--db", str(agent_db), "export", _session(agent_db), str(out), "--cwd", str(tmp_path),
                 "--schedule", "0 8 * * 1", "--timezone", "UTC", "--name", "weekly sales"])  # fmt: skip
    said = capsys.readouterr().out
    assert code == 0, said
    assert "Scheduled job" in said and "(weekly sales)" in said
    store = Store(agent_db)
    service = SchedulerService(store, home=tmp_path / "home")
    (state,) = service.jobs()
    assert state.job.notebook == str(out) and state.job.cron == "0 8 * * 1" and state.job.enabled
    done = service.run_now(state.job.id, wait=True).run
    assert done.status == SUCCEEDED, done.error
    assert "".join(printed(Path(done.output_path))) == "3 rows since 2026-01-01\n['north', 'west']\ntotal 350\n"


def test_a_notebook_that_fails_headless_is_reported_and_not_scheduled(
    kernel, scripted_model, agent_db, tmp_path, capsys
):
    kernel.ok("base = 5")  # the person's own cell: not in the session's code
    scripted_model.add(call("run_code", code="print(base * 2)"), say("10."))
    kernel.ok("%agent double base")
    out = tmp_path / "double.ipynb"
    code = main(["--db", str(agent_db), "export", _session(agent_db), str(out), "--cwd", str(tmp_path),
                 "--schedule", "0 8 * * *"])  # fmt: skip
    said = capsys.readouterr().out
    assert code == 1
    assert "Verification FAILED: cell" in said and "NameError" in said and "base" in said
    assert "Not scheduled: the notebook did not pass its headless run." in said
    from agent_kernel.scheduler.service import SchedulerService
    from agent_kernel.store import Store

    assert SchedulerService(Store(agent_db)).jobs() == []


def test_bad_export_requests_say_what_to_change(kernel, scripted_model, agent_db, tmp_path, capsys):
    assert main(["--db", str(agent_db), "export", "nobody", str(tmp_path / "x.ipynb")]) == 2
    assert "No session 'nobody'" in capsys.readouterr().err
    scripted_model.add(say("No code."))
    kernel.ok("%agent hello")
    name = _session(agent_db)
    assert main(["--db", str(agent_db), "export", name, str(tmp_path / "x.txt")]) == 2
    assert "is an .ipynb file" in capsys.readouterr().err
    assert main(["--db", str(agent_db), "export", name, str(tmp_path / "x.ipynb")]) == 2
    assert "ran no code that succeeded" in capsys.readouterr().err
    assert main(["--db", str(agent_db), "export", name, str(tmp_path / "x.ipynb"), "--timeout", "0"]) == 2


def test_the_magic_exports_the_current_session_and_refuses_bad_input(kernel, scripted_model, agent_db, tmp_path):
    analysis(kernel, scripted_model, tmp_path)
    done = kernel.ok("%agent_export sales.ipynb")
    assert "Exported session" in done.stdout and "Verification passed" in done.stdout
    assert (tmp_path / "sales.ipynb").exists()
    again = kernel.execute("%agent_export sales.ipynb")
    assert again.stderr.startswith("UsageError: ") and "exists" in again.stderr
    assert kernel.execute("%agent_export").stderr.startswith("UsageError: ")
    assert "is an .ipynb file" in kernel.execute("%agent_export notes.txt").stderr
    assert "No session named 'x'" in kernel.execute("%agent_export y.ipynb --session x").stderr
    bad_cron = kernel.execute("%agent_export z.ipynb --no-verify --schedule 'every day'")
    assert "Not scheduled" in bad_cron.stderr


def test_the_models_code_cannot_export_schedule_or_insert_through_the_magics(
    kernel, scripted_model, agent_db, tmp_path
):
    from agent_kernel.scheduler.service import SchedulerService
    from agent_kernel.store import Store
    from tests.support.calls import decoded, tool_results

    scripted_model.add(
        call("run_code", code="%agent_export mine.ipynb --no-verify --schedule '0 8 * * *'"),
        call("run_code", code="%agent_cells --to mine.ipynb"),
        say("Tried."),
    )
    kernel.ok("%agent schedule yourself")
    for request in scripted_model.requests[1:3]:
        (result,) = [decoded(b) for b in tool_results(request)]
        assert result["success"] is False and "the person's command: it cannot run inside an agent turn" in str(result)
    assert not (tmp_path / "mine.ipynb").exists()
    assert SchedulerService(Store(agent_db)).jobs() == []


def _turn(number: int, *codes: str):
    from agent_kernel.store.steps import Step, TurnSteps

    return TurnSteps("s1", "sales", number, f"prompt {number}", "answer", tuple(Step(code) for code in codes))


def _session_row():
    from datetime import datetime

    from agent_kernel.store.sessions import Session

    now = datetime(2026, 1, 1)
    return Session("s1", "sales", None, "idle", None, None, 0, None, None, now, now)


def test_the_extension_is_loaded_only_when_the_code_needs_it_and_nested_turns_are_left_out():
    from agent_kernel.scheduler.export import build_notebook

    plain, _ = build_notebook(_session_row(), [_turn(1, "x = len('ab')"), _turn(2, "%agent do more", "y = x + 1")])
    assert [c.source for c in plain.cells if c.cell_type == "code"][1:] == ["x = len('ab')", "y = x + 1"]
    assert plain.metadata["kernelspec"]["name"] == "python3"
    libs, exported = build_notebook(_session_row(), [_turn(1, "import agent_libs.sales as s\ns.load()")])
    assert [c.source for c in libs.cells if c.cell_type == "code"][1] == "%load_ext agent_kernel"
    assert exported.load_ext and "it loads agent_kernel" in exported.describe()
    nbformat.validate(libs)


# -- a session that read untrusted content --------------------------------------------------


def steered_session(kernel, scripted_model, tmp_path: Path) -> Path:
    """Turn 1 sets a value; turn 2 reads a hostile page, then runs code the person lets run
    on its approval card (it writes the returned marker file each time it runs)."""
    from tests.support.calls import after_hostile_page
    from tests.support.frontend import FrontEnd

    marker = tmp_path / "steered-code-ran"
    kernel.ok("%config AgentKernel.tool_groups = ['code', 'web']")
    scripted_model.add(call("run_code", code="base = len('ab')\nprint(base)"), say("2."))
    kernel.ok("%agent --session web set base")
    steered = f"open({str(marker)!r}, 'a').write('ran')\nprint(base * 21)\nsince = '2026-01-01'"
    scripted_model.add(after_hostile_page(("run_code", {"code": steered})), say("42."))
    person = FrontEnd(kernel)
    person.answer["ChoiceCard"] = lambda front, card: front.custom(card, type="choice", choice="run")
    kernel.ok("%agent --session web read the figures", on_message=person.hook)
    assert [c.state["heading"] for c in person.of_kind("ChoiceCard")] == ["Allow run_code?"]
    assert marker.read_text() == "ran"  # the person let the turn run it
    marker.unlink()
    return marker


@needs_widget_replies
def test_a_tainted_sessions_export_keeps_the_marks_and_runs_its_code_only_with_consent(
    kernel, scripted_model, agent_db, tmp_path, capsys
):
    marker = steered_session(kernel, scripted_model, tmp_path)
    out = tmp_path / "web.ipynb"
    export = ["--db", str(agent_db), "export", "web", str(out), "--cwd", str(tmp_path)]
    assert main(export) == 1  # no terminal to ask on: not verified
    said = capsys.readouterr()
    assert "Not verified: the session read untrusted content" in said.out and not marker.exists()
    assert "keep that mark" in said.out and "agent-kernel cells clear" in said.out
    nb = nbformat.read(out, as_version=4)
    marks = {c.source.splitlines()[0]: c.metadata.get("agent_kernel", {}) for c in nb.cells if c.cell_type == "code"}
    assert "untrusted" not in marks["base = len('ab')"] and marks["base = len('ab')"]["turn"] == 1
    steered = marks[f"open({str(marker)!r}, 'a').write('ran')"]
    assert steered["untrusted"] is True and steered["turn"] == 2
    assert steered["sources"] == ["web_fetch https://evil.example/figures"]
    [parameters] = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert "since = '2026-01-01'" in parameters.source  # an input the steered code gave
    assert parameters.metadata["agent_kernel"]["untrusted"] is True

    # Scheduling it is refused while the mark is there.
    assert main([*export, "--force", "--no-verify", "--schedule", "0 8 * * *"]) == 2
    assert "agent-kernel cells clear" in capsys.readouterr().err

    # The person says yes: it runs.
    assert main([*export, "--force", "--yes"]) == 0
    assert "Verification passed" in capsys.readouterr().out and marker.read_text() == "ran"


@needs_widget_replies
def test_the_magic_asks_before_it_verifies_a_tainted_session(kernel, scripted_model, agent_db, tmp_path):
    marker = steered_session(kernel, scripted_model, tmp_path)
    refused = kernel.execute("%agent_export no.ipynb --session web", answer="n")
    asked = [m for m in refused.messages if m["msg_type"] == "input_request"]
    assert asked and "read untrusted content (web_fetch https://evil.example/figures)" in asked[0]["content"]["prompt"]
    assert "Not verified" in refused.stdout and not marker.exists()
    headless = kernel.execute("%agent_export headless.ipynb --session web", allow_stdin=False)
    assert "Not verified" in headless.stdout and not marker.exists()  # nobody to ask (papermill)
    agreed = kernel.execute("%agent_export yes.ipynb --session web", answer="y")
    assert "Verification passed" in agreed.stdout and marker.read_text() == "ran"
