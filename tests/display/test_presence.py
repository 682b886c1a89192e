"""Unattended runs never wait: papermill notebooks get "no user present" at once."""

from __future__ import annotations

import json

import nbformat
import papermill
import pytest

from agent_kernel.testing import reply, say, tool_use
from tests.support.notebooks import write_notebook


def run_notebook(tmp_path, cells: list[str], **options) -> nbformat.NotebookNode:
    source, output = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    write_notebook(source, *cells)
    papermill.execute_notebook(
        str(source),
        str(output),
        kernel_name="python3",
        progress_bar=False,
        cwd=str(tmp_path),
        execution_timeout=60,
        **options,
    )
    return nbformat.read(output, as_version=4)


def results(request: dict) -> list[dict]:
    return [b for b in request["messages"][-1]["content"] if b["type"] == "tool_result"]


def test_waiting_tools_return_at_once_under_papermill(scripted_model, agent_db, tmp_path):
    form = {
        "type": "form",
        "fields": [
            {"name": "region", "label": "Region", "type": "select", "options": ["North", "South"], "default": "North"},
            {"name": "owner", "label": "Owner", "type": "text", "required": True},
        ],
    }
    scripted_model.add(
        reply(
            tool_use("ask_user", {"question": "Which region?", "options": ["North", "South"]}),
            tool_use("render_blocks", {"blocks": [form]}),
            tool_use("run_code", {"code": "touched = True"}),
        ),
        say("I went on with North and did not change anything."),
    )
    nb = run_notebook(
        tmp_path,
        [
            "%load_ext agent_kernel\n%config AgentKernel.presence_timeout = 30",
            "%agent --approve ask review the regions",
            "print('touched' in globals())",
        ],
    )
    asked, shown, refused = results(scripted_model.requests[1])
    # The reason is the cheap check (nbclient sends allow_stdin=false), not a 30 s wait.
    unattended = "the notebook runs unattended (papermill, nbclient or another runner)"
    answer = json.loads(asked["content"])
    assert answer["answer"] is None and answer["user_present"] is False and unattended in answer["note"]
    defaults = json.loads(shown["content"])
    assert defaults["action"] == "submit" and defaults["defaults_only"] is True
    assert defaults["data"] == {"region": "North", "owner": None}
    assert defaults["required_without_default"] == ["owner"]
    assert refused["is_error"] is True and "no user is present to approve it" in refused["content"]
    assert unattended in refused["content"]
    agent_cell = nb.cells[1]
    html = "\n".join(o.get("data", {}).get("text/html", "") for o in agent_cell.outputs)
    assert "No user present (the notebook runs unattended" in html  # the form's static record
    assert "I went on with North" in "\n".join(o.get("data", {}).get("text/plain", "") for o in agent_cell.outputs)
    assert not any(
        "application/vnd.jupyter.widget-view+json" in o.get("data", {})
        for o in agent_cell.outputs
        if "agent-kernel-form-static" in o.get("data", {}).get("text/html", "")
    )
    assert nb.cells[2].outputs[0]["text"] == "False\n"
    assert "waiting_for_input" not in json.dumps(nb.metadata)


def test_token_limit_under_papermill_ends_without_continue(scripted_model, agent_db, tmp_path):
    scripted_model.add(
        reply(tool_use("run_code", {"code": "step = 1"}), usage={"input_tokens": 900, "output_tokens": 200})
    )
    with pytest.raises(papermill.PapermillExecutionError) as failed:  # the turn did not finish
        run_notebook(tmp_path, ["%load_ext agent_kernel", "%agent --token-limit 1000 work"])
    assert "reached its token limit (1,100 of 1,000 tokens)" in failed.value.evalue
    nb = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    text = "\n".join(o.get("data", {}).get("text/plain", "") for o in nb.cells[-1].outputs)
    assert "Token limit reached" not in text  # no Continue card without a person
    assert len(scripted_model.requests) == 1
