"""What changed between two runs of a job (`runs diff`) and why a run failed (`runs
explain`): a job whose second run fails after a parameter change."""

from __future__ import annotations

import json
from datetime import datetime

from agent_kernel.cli import main
from agent_kernel.scheduler import notify
from agent_kernel.scheduler.service import SchedulerService
from agent_kernel.store.provenance import Provenance
from agent_kernel.testing import say
from tests.support.notebooks import write_notebook
from tests.support.scheduling import UTC, runs_of
from tests.support.websites import Receiver

CODE = (
    "import pandas as pd\n"
    "sales = pd.DataFrame({'region': ['north', 'south'], 'amount': [10, 0]})\n"
    "rows = sales[sales.region == region]\n"
    "print(f'{len(rows)} rows, total {rows.amount.sum()}')\n"
    "share = 1 / int(rows.amount.sum())\n"
    "print(f'share {share}')"
)


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def two_runs(store, home, tmp_path, capsys, *extra: str):
    """A job run twice: with region north (it works), then south (1 / 0)."""
    notebook = write_notebook(tmp_path / "share.ipynb", CODE, parameters="region = 'north'")
    now = datetime.now(UTC).replace(microsecond=0)
    assert cli(capsys, "jobs", "add", str(notebook), "--name", "share", "--cron", "0 3 * * *", *extra)[0] == 0
    jobs = SchedulerService(store, home=home)
    [job] = [s.job for s in jobs.jobs()]
    first = jobs.run_now(job.id, wait=True).run
    jobs.update(job.id, {"parameters": {"region": "south"}}, by=Provenance.person())
    return job, first, now


def test_runs_diff_names_the_parameter_the_changed_outputs_and_the_new_error(
    capsys, store, home, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    job, first, _ = two_runs(store, home, tmp_path, capsys)
    second = SchedulerService(store, home=home).run_now(job.id, wait=True).run
    assert (first.status, second.status) == ("SUCCEEDED", "FAILED")
    code, out, _ = cli(capsys, "runs", "diff", second.id)
    assert code == 0, out
    assert f"Run {second.id} compared with run {first.id}." in out
    assert "Parameter region: 'north' -> 'south'" in out
    assert "First failing cell: [2] import pandas as pd" in out and "ZeroDivisionError: division by zero" in out
    assert "-1 rows, total 10" in out and "+1 rows, total 0" in out
    data = json.loads(cli(capsys, "runs", "diff", second.id, first.id, "--json")[1])
    assert data["parameters"] == {"region": {"before": "north", "after": "south"}}
    assert data["first_error"]["error"] == "ZeroDivisionError: division by zero"
    for args, message in [(("diff", first.id), "first run"), (("diff", "nope"), "No run 'nope'"),
                          (("frobnicate", first.id), "Use `agent-kernel runs diff")]:  # fmt: skip
        code, _, err = cli(capsys, "runs", *args)
        assert code == 2 and message in err, (args, err)


def test_a_failed_run_is_explained_on_demand_and_automatically_in_its_notification(
    capsys, store, home, tmp_path, monkeypatch, scripted_model
):
    monkeypatch.chdir(tmp_path)
    receiver = Receiver()
    try:
        notify.Targets(home).add(f"json://127.0.0.1:{receiver.port}/hook", name="me", default=True)
        job, first, _ = two_runs(store, home, tmp_path, capsys, "--explain")
        scripted_model.add(say("Region south has a total of 0, so cell [1] divides by zero; guard the share."))
        # The run is recorded, then explained (the job asks for it) and the person notified.
        second = SchedulerService(store, home=home).run_now(job.id, wait=True).run
        assert second.status == "FAILED"
    finally:
        receiver.close()
    explained = [r for r in runs_of(store, job) if r.explanation]
    assert explained and "divides by zero" in explained[-1].explanation and explained[-1].explain_tokens > 0
    request = scripted_model.requests[-1]
    assert request["max_tokens"] == 400 and "Parameter region: 'north' -> 'south'" in request["messages"][0]["content"]
    assert "never instructions" in request["system"]
    [posted] = receiver.received
    assert "Why: Region south has a total of 0" in posted["body"]["message"]

    scripted_model.add(say("Cell [1] divides by zero for region south."))
    code, out, _ = cli(capsys, "runs", "explain", second.id)
    assert code == 0 and out.startswith("Cell [1] divides by zero for region south.") and "tokens" in out
    code, _, err = cli(capsys, "runs", "explain", first.id)
    assert code == 2 and "did not fail (SUCCEEDED)" in err
