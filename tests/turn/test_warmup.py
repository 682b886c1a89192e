"""The warm-up after ``%load_ext``: off the main thread, after the loading cell, never in a turn's way.

Each test runs a fresh interpreter, so nothing is imported by an earlier test.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agent_kernel.testing import say


@pytest.fixture(autouse=True)
def _warm_up_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up as users have it (tests/conftest.py switches it off for other tests)."""
    monkeypatch.setenv("AGENT_KERNEL_WARM_UP", "1")


LOAD_THEN_WAIT = r"""
import json, sys, threading
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
heavy = lambda: sorted(m for m in ("anthropic", "duckdb", "detect_secrets") if m in sys.modules)
seen = {}

def at_cell_end(result):  # registered first: runs before the warm-up's own callback
    seen["threads"] = sorted(t.name for t in threading.enumerate())
    seen["heavy"] = heavy()

shell.events.register("post_run_cell", at_cell_end)
shell.run_cell("%load_ext agent_kernel")
from agent_kernel.turn import warmup
from agent_kernel.tools.builtin import builtin_registry

warm_up = warmup._CURRENT
finished = warm_up.done.wait(300)
print(json.dumps({
    "heavy_when_the_loading_cell_ended": seen["heavy"],
    "threads_then": seen["threads"],
    "finished": finished,
    "heavy_after": heavy(),
    "steps": warm_up.steps_done,
    "listening": [f for f in shell.events.callbacks["pre_run_cell"] if getattr(f, "__self__", None) is warm_up],
    "described": [n for n, t in builtin_registry().tools.items() if "_sdk_tool" in vars(t)],
    "offered": [t.name for t in builtin_registry().offered(warm_up.settings.tool_groups)],
}, default=str))
"""


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_warm_up_starts_after_the_loading_cell_and_prepares_a_turn(agent_db):
    from agent_kernel.store import Store

    with Store(agent_db).connect():  # an existing store: the warm-up opens it once
        pass
    report = _run(LOAD_THEN_WAIT)
    # The loading cell itself imported neither and started no thread.
    assert report["heavy_when_the_loading_cell_ended"] == []
    assert "agent-kernel-warm-up" not in report["threads_then"]
    # Afterwards, in the background: everything a turn needs.
    assert report["finished"] is True
    assert report["heavy_after"] == ["anthropic", "detect_secrets", "duckdb"]
    steps = report["steps"]
    assert {"duckdb", "anthropic", "agent_kernel.turn.loop", "agent_kernel.tools.builtin"} <= set(steps)
    assert steps[-4:-1] == ["parse a streamed reply", "read the credential formats", "read as a turn starts"]
    assert steps[-1] == "wait for db_sql" and "prepare db_sql" in steps  # beside the imports
    # The tools the first turn offers (every group's, deferred ones too) are described;
    # the API's own web tools have no schema to build.
    assert "describe the tools" in steps
    assert report["described"] == [n for n in report["offered"] if n not in ("web_search", "web_fetch")]
    assert "create_scheduled_task" in report["described"]
    assert report["listening"] == []  # done: it no longer follows the cells


def test_the_warm_up_can_be_switched_off(agent_db, monkeypatch):
    monkeypatch.setenv("AGENT_KERNEL_WARM_UP", "0")
    code = LOAD_THEN_WAIT.replace(
        "warm_up = warmup._CURRENT\n", "print(json.dumps({'current': repr(warmup._CURRENT)})); raise SystemExit\n"
    )
    assert _run(code) == {"current": "None"}


TURN_DURING_WARM_UP = r"""
import json, sys
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
shell.run_cell("%load_ext agent_kernel")
from agent_kernel.turn import warmup

warm_up = warmup._CURRENT
at_start = {}
shell.events.register("pre_run_cell", lambda info: at_start.setdefault("done", warm_up.done.is_set()))
result = shell.run_cell("%agent hello")  # at once: the warm-up is importing meanwhile
steps_at_end = len(warm_up.steps_done)
print(json.dumps({
    "warm_up_was_done": at_start["done"],
    "success": result.success,
    "error": repr(result.error_in_exec or result.error_before_exec),
    "finished_later": warm_up.done.wait(300),
    "steps_after_the_turn": len(warm_up.steps_done) - steps_at_end,
}))
"""


def test_a_turn_started_while_warming_up_waits_for_its_step_then_does_the_rest(scripted_model, agent_db):
    scripted_model.add(say("Hello back."))
    report = _run(TURN_DURING_WARM_UP)
    assert report["success"] is True, report["error"]
    assert report["warm_up_was_done"] is False  # the turn did overlap the warm-up
    assert report["finished_later"] is True
    assert report["steps_after_the_turn"] == 0  # the turn did the rest itself
    assert len(scripted_model.requests) == 1


CELLS_DURING_AN_IMPORT = r"""
import json, sys, time
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
shell.run_cell("%load_ext agent_kernel")
from agent_kernel.turn import warmup

warm_up = warmup._CURRENT
deadline = time.monotonic() + 120
while "anthropic" not in sys.modules and time.monotonic() < deadline:  # its big step has begun
    time.sleep(0.001)
in_step = "anthropic" not in warm_up.steps_done
# A cell that leaves the interpreter lock free: the warm-up waits all the same.
shell.run_cell("import sys, time\n_before = len(sys.modules)\ntime.sleep(1.0)\n_after = len(sys.modules)")
quiet_cell = shell.user_ns["_after"] - shell.user_ns["_before"]
# A cell importing the package the warm-up is in the middle of: it is not kept waiting.
started = time.monotonic()
result = shell.run_cell("import anthropic.types")
print(json.dumps({
    "in_step": in_step,
    "imported_during_the_cell": quiet_cell,
    "import_cell_ok": result.success,
    "import_cell_seconds": time.monotonic() - started,
    "finished_later": warm_up.done.wait(300),
    "steps": warm_up.steps_done,
}))
"""


def test_the_warm_up_waits_before_each_module_while_a_cell_runs_but_never_holds_one_up(agent_db):
    report = _run(CELLS_DURING_AN_IMPORT)
    assert report["in_step"] is True  # the cells ran while the SDK was being imported
    # Hundreds of modules remained to import; during the cell at most the one under way
    # (and what db_sql's share, beside it, imports) came in.
    assert report["imported_during_the_cell"] < 30, report
    assert report["import_cell_ok"] is True
    assert report["import_cell_seconds"] < 30  # the warm-up went on for it, rather than wait for it
    assert report["finished_later"] is True
    assert "anthropic" in report["steps"] and "read as a turn starts" in report["steps"]
