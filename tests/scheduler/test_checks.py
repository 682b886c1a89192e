"""A `jobs` row is untrusted when it runs: the checks, and a hand-made row never executed."""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from agent_kernel.cli import main
from agent_kernel.scheduler import ScheduleError
from agent_kernel.scheduler.checks import (
    InvalidJob,
    check_job,
    check_parameter_cell,
    check_parameters,
    problems,
)
from agent_kernel.scheduler.clock import ManualClock, to_db
from agent_kernel.scheduler.execute import execute_run
from agent_kernel.scheduler.jobs import Jobs, new_job
from agent_kernel.scheduler.rundir import RunDir
from agent_kernel.scheduler.spec import RunSpec
from tests.support.notebooks import write_notebook
from tests.support.scheduling import UTC, add_job, get_job, runs_of, scheduler

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
INJECTION = "x=1\nopen({marker!r},'w').write('pwned')#"


def marker_notebook(path: Path, marker: Path) -> Path:
    """A notebook whose only effect is the marker file (so a run that did start shows)."""
    return write_notebook(path, f"open({str(marker)!r}, 'w').write(str(x))", parameters="x = 0")


def insert_row(store, **columns) -> str:
    """A jobs row written with SQL, as anything that can write the table could."""
    columns = {"id": "handmade01", "name": "handmade", "kind": "notebook", "timezone": "UTC",
               "next_run_at": to_db(T0), "run_at": to_db(T0), **columns}  # fmt: skip
    for name in ("parameters", "options"):
        if name in columns and not isinstance(columns[name], str):
            columns[name] = json.dumps(columns[name])
    names = ", ".join(columns)
    marks = ", ".join("?" * len(columns))
    with store.connect() as con:
        con.execute(f"INSERT INTO jobs ({names}) VALUES ({marks})", list(columns.values()))
    return columns["id"]


# -- the checks ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "parameters, says",
    [
        ({"x=1\nopen('/tmp/pwned','w')#": 1}, "parameter names must be Python identifiers"),
        ({"__builtins__": {}}, "dunder"),
        ({"class": 1}, "keywords"),
        ({"x y": 1}, "identifiers"),
        ({"ｘ": 1}, "identifiers"),  # a non-ASCII name NFKC-folds into another one
        ({"x": math.nan}, "finite"),
        ({"x": math.inf}, "finite"),
        ({"x": 2**70}, "64-bit"),
        ({"x": {1: "a"}}, "non-string key"),
        ({"x": object()}, "only JSON data"),
        ({"x": b"bytes"}, "only JSON data"),
        ({"x": "a" * 70_000}, "bytes as JSON"),
        ({"x": json.loads("[" * 40 + "]" * 40)}, "deeper"),
        (["x", 1], "JSON object"),
        ("x=1", "JSON object"),
    ],
)
def test_parameters_are_identifiers_and_json_data(parameters, says):
    with pytest.raises(InvalidJob, match=says):
        check_parameters(parameters)


def test_json_data_parameters_pass():
    check_parameters({"region": "north", "rows": 3, "ratio": 0.5, "on": True, "none": None,
                      "nested": {"a": [1, {"b": "c"}]}, "tricky": 'x\\"; import os #', "match": 1})  # fmt: skip


def test_the_injected_cell_may_only_assign_literals():
    check_parameter_cell('# Parameters\nregion = "north"\nrows = [1, 2.5, None, True, {"k": "v"}]\n')
    for source in ("x = 1\nopen('/tmp/pwned', 'w')", "x = __import__('os')", "x.y = 1", "x = 1 if True else 2",
                   "import os", "x = (", "x = y = 1"):  # fmt: skip
        with pytest.raises(InvalidJob):
            check_parameter_cell(source)


def test_every_field_of_a_row_is_checked(tmp_path, home):
    notebook = marker_notebook(tmp_path / "ok.ipynb", tmp_path / "marker")
    later = T0 + timedelta(hours=1)
    good = new_job(name="ok", kind="notebook", now=T0, timezone="UTC", notebook=str(notebook), at=later)
    check_job(good, home=home)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.ipynb").symlink_to(notebook)
    (tmp_path / "dir.ipynb").mkdir()
    (tmp_path / "notes.txt").write_text("{}")
    (tmp_path / "broken.ipynb").write_text("not json")
    in_runs = marker_notebook(home / "runs" / "job" / "run" / "output.ipynb", tmp_path / "marker")
    bad = {
        "notebook": [
            ("ok.ipynb", "absolute path"),
            (str(tmp_path / "sub" / ".." / "ok.ipynb"), "not its own real path"),
            (str(tmp_path / "link.ipynb"), "not its own real path"),
            (str(tmp_path / "notes.txt"), "not an .ipynb file"),
            (str(tmp_path / "dir.ipynb"), "not a regular file"),
            (str(tmp_path / "missing.ipynb"), "no notebook at"),
            (str(tmp_path / "broken.ipynb"), "does not read as a notebook"),
            (str(in_runs), "runs directory"),
            (7, "must be a path"),
        ],
        "cwd": [
            (str(tmp_path / "missing"), "not an existing directory"),
            ("relative", "absolute path"),
            (None, "directory path"),
        ],
        "kernel": [("python3; rm -rf ~", "kernelspec name"), ("no-such-kernel", "not installed")],
        "model": [("claude\n--approve auto", "model id"), (3, "model id")],
        "token_limit": [("1000", "positive whole number"), (True, "whole number"), (-1, "whole number")],
        "name": [("two\nlines", "one line"), ("x" * 300, "at most 200"), (None, "must be text")],
        "parameters": [("not json", "JSON object")],
        "kind": [("shell", "kind must be one of")],
        "timezone": [("Mars/Base", "timezone")],
        "catchup": [("evil", "catchup must be one of")],
        "cron": [("* * *", "fields")],
        "options": [(["quiet"], "options must be a JSON object")],
    }
    for field, cases in bad.items():
        for value, says in cases:
            found = problems(replace(good, **{field: value}), home=home)
            assert any(says.lower() in p.lower() for p in found), (field, value, found)
    task = new_job(name="t", kind="task", now=T0, timezone="UTC", task="Summarise.", at=later, cwd=str(tmp_path))
    assert problems(task) == []
    assert any("at most 100,000" in p for p in problems(replace(task, task="x" * 100_001)))
    assert any("must be text" in p for p in problems(replace(task, task=None)))
    assert any("NUL" in p for p in problems(replace(task, task="a\x00b")))


def test_creating_a_job_applies_the_same_checks(tmp_path):
    notebook = marker_notebook(tmp_path / "ok.ipynb", tmp_path / "marker")
    asks = [
        {"parameters": {"x=1\nopen('/tmp/pwned','w')#": 1}},
        {"parameters": {"x": math.nan}},
        {"kernel": "python3 --evil"},
        {"model": "a b"},
    ]
    for ask in asks:
        with pytest.raises(ScheduleError, match="must be|identifiers|finite|kernelspec"):
            new_job(name="n", kind="notebook", now=T0, timezone="UTC", notebook=str(notebook),
                    at=T0 + timedelta(hours=1), **ask)  # fmt: skip


def test_cli_jobs_add_refuses_a_parameter_name_that_is_code(capsys, store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker_notebook(tmp_path / "report.ipynb", tmp_path / "marker")
    code = main(["jobs", "add", "report.ipynb", "--at", "2099-01-01T09:00Z", "-p", "__import__=1"])
    assert code != 0 and "dunder" in capsys.readouterr().err
    with store.connect() as con:
        assert Jobs(con).list() == []


# -- at run time ---------------------------------------------------------------------------------


def test_a_handmade_malicious_row_is_never_executed_and_its_run_is_failed(store, home, tmp_path, capsys):
    marker = tmp_path / "pwned"
    notebook = marker_notebook(tmp_path / "innocent.ipynb", tmp_path / "ran")
    job_id = insert_row(store, notebook=str(notebook), cwd=str(tmp_path),
                        parameters={INJECTION.format(marker=str(marker)): 1})  # fmt: skip
    clock = ManualClock(T0 + timedelta(seconds=5))
    [run] = scheduler(store, home, clock).run_once()
    assert run.job_id == job_id and run.status == "FAILED"
    assert run.error.startswith(
        "Not run: the job's stored definition is invalid: parameter names must be Python identifiers"
    )
    assert "open(" in run.error  # the offending name is quoted
    assert not marker.exists() and not (tmp_path / "ran").exists()
    assert not (home / "runs" / job_id / run.id).exists()  # no run directory: no runner, no papermill
    assert main(["runs", "--job", job_id]) == 0
    shown = capsys.readouterr().out
    assert "FAILED" in shown and "stored definition is invalid" in shown
    [listed] = json.loads((main(["runs", "--json"]), capsys.readouterr().out)[1])
    assert listed["status"] == "FAILED" and "Python identifiers" in listed["error"]


def test_each_column_a_row_could_abuse_is_refused_at_run_time(store, home, tmp_path):
    ran = tmp_path / "ran"
    notebook = marker_notebook(tmp_path / "innocent.ipynb", ran)
    outside = tmp_path / "sub" / ".." / "innocent.ipynb"
    (tmp_path / "sub").mkdir()
    rows = {
        "traversal": dict(notebook=str(outside), cwd=str(tmp_path)),
        "relative": dict(notebook="innocent.ipynb", cwd=str(tmp_path)),
        "kernel": dict(notebook=str(notebook), cwd=str(tmp_path), kernel="../../bin/sh"),
        "cwd": dict(notebook=str(notebook), cwd=str(tmp_path / "nowhere")),
        "value": dict(notebook=str(notebook), cwd=str(tmp_path), parameters='{"x": NaN}'),
        "task": dict(kind="task", notebook=None, task="x" * 100_001, cwd=str(tmp_path)),
        "model": dict(kind="task", notebook=None, task="Hi.", model="m\n%%bash\ntouch /tmp/x", cwd=str(tmp_path)),
    }
    for index, (name, columns) in enumerate(rows.items()):
        insert_row(store, id=f"bad{index:02d}", name=name, **columns)
    finished = scheduler(store, home, ManualClock(T0 + timedelta(seconds=5)), max_concurrent=10).run_once()
    assert sorted(run.job_id for run in finished) == [f"bad{i:02d}" for i in range(len(rows))]
    for run in finished:
        assert run.status == "FAILED" and run.error.startswith("Not run: the job's stored definition is invalid"), run
    assert not ran.exists()
    assert not any((home / "runs").glob("*/*/output.ipynb"))


def test_a_row_whose_schedule_cannot_be_read_fails_once_and_the_others_still_fire(store, home, tmp_path):
    ran = tmp_path / "ran"
    notebook = marker_notebook(tmp_path / "good.ipynb", ran)
    insert_row(store, id="badpolicy", name="bad policy", notebook=str(notebook), cwd=str(tmp_path),
               cron="* * * * *", run_at=None, catchup="evil")  # fmt: skip
    good = add_job(store, name="good", notebook=str(notebook), at=T0 + timedelta(seconds=1), now=T0,
                   parameters={"x": 5})  # fmt: skip
    clock = ManualClock(T0 + timedelta(seconds=5))
    finished = {run.job_id: run for run in scheduler(store, home, clock).run_once()}
    assert finished[good.id].status == "SUCCEEDED" and ran.read_text() == "5"
    [bad] = runs_of(store, "badpolicy")
    assert bad.status == "FAILED" and "catchup must be one of" in bad.error
    with store.connect() as con:
        assert Jobs(con).get("badpolicy").next_run_at is None  # it stops firing
    assert get_job(store, good).next_run_at is None


def test_a_valid_handmade_row_still_runs(store, home, tmp_path):
    ran = tmp_path / "ran"
    notebook = marker_notebook(tmp_path / "innocent.ipynb", ran)
    tricky = 'a\\"; open("/tmp/pwned", "w")#'
    job_id = insert_row(store, notebook=str(notebook), cwd=str(tmp_path), parameters={"x": tricky})
    [run] = scheduler(store, home, ManualClock(T0 + timedelta(seconds=5))).run_once()
    assert run.job_id == job_id and run.status == "SUCCEEDED", run.error
    assert ran.read_text() == tricky  # the value arrived as a string, not as code


def test_the_runner_refuses_a_spec_file_with_code_in_a_parameter_name(tmp_path):
    marker = tmp_path / "pwned"
    notebook = marker_notebook(tmp_path / "innocent.ipynb", tmp_path / "ran")
    run_dir = RunDir(tmp_path / "run").create()
    spec = RunSpec(
        run_id="r1", job_id="j1", job_name="j", attempt=1, run_dir=str(run_dir.path), input_path=str(notebook),
        output_path=str(run_dir.output), cwd=str(tmp_path), parameters={INJECTION.format(marker=str(marker)): 1},
    )  # fmt: skip
    result = execute_run(spec.to_dict())
    assert result["status"] == "FAILED" and "Not run: its spec is invalid" in result["error"]
    assert not marker.exists() and not (tmp_path / "ran").exists() and not run_dir.output.exists()
    assert os.path.exists(run_dir.result)


def test_a_job_name_is_shown_literally_in_the_generated_notebook(tmp_path):
    from agent_kernel.scheduler.runs import Run
    from agent_kernel.scheduler.spec import agent_notebook

    name = "<img src=x onerror=alert(1)> [a](javascript:x) **b**"
    job = new_job(
        name=name, kind="task", now=T0, timezone="UTC", task="Summarise.", at=T0 + timedelta(hours=1), cwd=str(tmp_path)
    )
    run = Run(
        id="r1",
        job_id=job.id,
        scheduled_for=T0,
        attempt=1,
        cause="schedule",
        status="RUNNING",
        not_before=T0,
        created_at=T0,
    )
    heading = agent_notebook(job, run, "Summarise.").cells[0].source
    assert "<img" not in heading and "](javascript" not in heading and "**b**" not in heading
    assert heading.startswith(r"**&lt;img src=x onerror=alert\(1\)&gt; \[a\]\(javascript:x\) \*\*b\*\***")


# -- cells an agent turn wrote after untrusted content ----------------------------------------


def in_a_terminal(args: list[str], typed: str) -> tuple[int, str]:
    """The `agent-kernel` console script run with a terminal as its stdin (as a person
    runs it), ``typed`` typed into it; its exit code and what it showed."""
    import pty
    import subprocess
    import sys

    script = Path(sys.executable).with_name("agent-kernel")
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [str(script), *args], stdin=follower, stdout=follower, stderr=follower, env=dict(os.environ)
    )
    os.close(follower)
    os.write(leader, typed.encode())
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    return process.wait(timeout=60), shown.decode(errors="replace")


def test_a_notebook_holding_a_cell_written_after_untrusted_content_runs_only_once_the_person_cleared_it(
    store, home, tmp_path, capsys
):
    import nbformat

    from agent_kernel import authority, cellmark

    ran = tmp_path / "ran"
    notebook = marker_notebook(tmp_path / "report.ipynb", ran)
    job = add_job(store, name="report", notebook=str(notebook), cwd=str(tmp_path), cron="* * * * *", now=T0)
    # A turn that had read a hostile page put a cell into the notebook (as %agent_cells --to does).
    nb = nbformat.read(notebook, as_version=4)
    planted = nbformat.v4.new_code_cell("import os\nsend(os.environ)")
    planted.metadata["agent_kernel"] = cellmark.mark("s1", 3, ["web_fetch https://evil.example/figures"])
    nb.cells.append(planted)
    nbformat.write(nb, notebook)

    [refused] = scheduler(store, home, ManualClock(T0 + timedelta(seconds=61))).run_once()
    assert refused.job_id == job.id and refused.status == "FAILED" and not ran.exists()
    assert f"cell 3 (id {planted.id}: 'import os'); read: web_fetch https://evil.example/figures" in refused.error
    assert f"`agent-kernel cells clear {notebook}`" in refused.error

    # Code cannot clear it: without a terminal nobody can answer, inside a turn it is refused.
    assert main(["cells", "clear", str(notebook)]) == 2
    assert "asks you on a terminal" in capsys.readouterr().err
    with authority.turn_running():
        assert main(["cells", "clear", str(notebook)]) == 2
    assert "not from code running inside an agent turn" in capsys.readouterr().err
    assert cellmark.marked_cells(nbformat.read(notebook, as_version=4).cells)
    code, shown = in_a_terminal(["cells", "clear", str(notebook)], "no\n")
    assert code == 1 and "send(os.environ)" in shown and "Not cleared." in shown

    # The person, in a terminal, after reading the cell.
    code, shown = in_a_terminal(["cells", "clear", str(notebook)], "clear\n")
    assert code == 0, shown
    assert "Cleared the mark of 1 cell" in shown
    mark = nbformat.read(notebook, as_version=4).cells[-1].metadata["agent_kernel"]
    assert "untrusted" not in mark and mark["cleared"]["by"] == f"cli: agent-kernel cells clear {notebook}"
    assert mark["cleared"]["sources"] == "web_fetch https://evil.example/figures"
    assert main(["cells", "list", str(notebook)]) == 0
    assert "No cell" in capsys.readouterr().out

    [done] = scheduler(store, home, ManualClock(T0 + timedelta(seconds=121))).run_once()
    assert done.job_id == job.id and done.status == "FAILED"  # it ran: the planted send() is undefined
    assert "NameError" in (done.error or "") and ran.read_text() == "0"


def test_a_malformed_mark_counts_as_untrusted(tmp_path):
    import nbformat

    notebook = marker_notebook(tmp_path / "odd.ipynb", tmp_path / "ran")
    nb = nbformat.read(notebook, as_version=4)
    nb.cells[-1].metadata["agent_kernel"] = {"session": "s1", "turn": 1, "untrusted": "no"}
    nbformat.write(nb, notebook)
    with pytest.raises(InvalidJob, match="a malformed agent_kernel mark"):
        from agent_kernel.scheduler.checks import check_notebook

        check_notebook(str(notebook))
