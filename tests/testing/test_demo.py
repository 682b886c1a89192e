"""The offline demo model answers each surface's requests, built by the code that sends them,
through the official SDK and the scripted server."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anthropic
import pytest

from agent_kernel.magics.chat import attachment_blocks
from agent_kernel.scheduler import explain
from agent_kernel.server import completion
from agent_kernel.testing import demo
from agent_kernel.testing.demo import OFFLINE_MODEL, OFFLINE_NOTE, demo_responder, fix_source

CHATCOMMANDS = Path(__file__).resolve().parents[2] / "labextension" / "src" / "chatcommands.ts"


@pytest.fixture
def offline(scripted_model: Any) -> Any:
    scripted_model.responder = demo_responder
    return scripted_model


def _ts_constant(name: str) -> str:
    found = re.search(rf"export const {name} =\s*\n?\s*(['\"])(.*?)\1;", CHATCOMMANDS.read_text(), re.S)
    assert found, name
    return found.group(2)


def test_it_recognises_the_prompts_the_server_the_scheduler_and_the_panel_send():
    assert completion.SYSTEM_PROMPT.startswith(demo.COMPLETION_SYSTEM_STARTS)
    assert explain.SYSTEM.startswith(demo.RUN_EXPLAIN_SYSTEM_STARTS)
    assert _ts_constant("FIX_PROMPT").startswith(demo.FIX_STARTS)
    assert _ts_constant("EXPLAIN_PROMPT").startswith(demo.EXPLAIN_STARTS)
    assert completion.CURSOR == demo.CURSOR


def _completion(client: anthropic.Anthropic, before: str, above: tuple[str, ...] = ()) -> anthropic.types.Message:
    request = completion.CompletionRequest(before=before, after="", cells_above=above, language="python")
    return client.messages.create(**completion.model_request(request, model="claude-haiku-4-5", max_tokens=64))


@pytest.mark.parametrize(
    ("before", "inserted"),
    [
        ("import pan", "das as pd"),
        ("x = 1\nimport numpy", " as np"),
        ("sales.", "head()"),
        ("for month in", " range(10):"),
        ("print('hello')", ""),
    ],
)
def test_inline_completion_continues_a_few_common_lines(offline, client, before, inserted):
    message = _completion(client, before, above=("import pandas as pd",))
    assert "".join(b.text for b in message.content if b.type == "text") == inserted
    assert message.model == OFFLINE_MODEL


def test_a_failed_runs_explanation_names_the_cell_and_the_error(offline, client):
    comparison = (
        "Parameters: unchanged\nFirst failing cell: cell 3\nKeyError: 'revenue'\nDurations: 1.2 s before, 0.4 s now"
    )
    made = explain.explain(comparison, model="claude-haiku-4-5", client=client)
    assert "cell 3" in made.text and "KeyError: 'revenue'" in made.text
    assert "offline scripted demo model" in made.text
    assert made.model == OFFLINE_MODEL and made.output_tokens > 0


def test_a_first_runs_explanation_reads_the_error_in_its_sentence(offline, client):
    comparison = (
        "(Run 1 is its job's first run: there is nothing to compare it with.) The run ended FAILED: KeyError: 'x'"
    )
    made = explain.explain(comparison, model="claude-haiku-4-5", client=client)
    assert made.text.startswith("The run stopped with KeyError: 'x'. A KeyError means a dict or DataFrame")


def _chat_request(prompt: str, *attachments: dict[str, Any]) -> dict[str, Any]:
    """A user message as a chat turn sends it: the prompt, then the attachments' blocks."""
    blocks = [{"type": "text", "text": prompt}]
    for item in attachments:
        blocks.extend(attachment_blocks(item))
    return {"role": "user", "content": blocks}


SOURCE = "prices = [3.5, 4.25, 2.0]\naverage = sum(prices) / len(price)\nprint(average)"
TRACEBACK = (
    "---------------------------------------------------------------------------\n"
    "NameError                                 Traceback (most recent call last)\n"
    "Cell In[3], line 2\n      1 prices = [3.5, 4.25, 2.0]\n----> 2 average = sum(prices) / len(price)\n"
    "NameError: name 'price' is not defined"
)
CELL = {"kind": "cell", "label": "offline_tour.ipynb cell 5 (id 7f3e-a1)", "text": SOURCE}
ERROR = {"kind": "error", "label": "error in offline_tour.ipynb cell 5 (id 7f3e-a1)", "text": TRACEBACK}


def test_fix_with_agent_replaces_a_misspelt_name_and_runs_the_cell(offline, client):
    message = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=1024, messages=[_chat_request(_ts_constant("FIX_PROMPT"), CELL, ERROR)]
    )
    calls = [b for b in message.content if b.type == "tool_use"]
    assert message.stop_reason == "tool_use" and [c.name for c in calls] == ["replace_cell"]
    assert calls[0].input == {"cell": "7f3e-a1", "source": SOURCE.replace("len(price)", "len(prices)"), "run": True}
    said = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        messages=[
            _chat_request(_ts_constant("FIX_PROMPT"), CELL, ERROR),
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0].id,
                                          "content": json.dumps({"replaced": "7f3e-a1", "run": "queued"})}]},
        ],
    )  # fmt: skip
    answer = said.content[0].text
    assert "replaced the source of cell `7f3e-a1`" in answer and OFFLINE_NOTE in answer


def test_fix_with_agent_explains_what_it_cannot_fix(offline, client):
    cell = dict(CELL, text="1 / 0")
    error = dict(ERROR, text="ZeroDivisionError: division by zero")
    message = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=1024, messages=[_chat_request(_ts_constant("FIX_PROMPT"), cell, error)]
    )
    answer = message.content[0].text
    assert message.stop_reason == "end_turn"
    assert "ZeroDivisionError" in answer and "divided by zero" in answer and "fixes only misspelt names" in answer


def test_explain_says_what_the_attached_error_means(offline, client):
    message = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=1024, messages=[_chat_request(_ts_constant("EXPLAIN_PROMPT"), ERROR)]
    )
    answer = message.content[0].text
    assert "**NameError**: name 'price' is not defined" in answer and "nothing in the kernel defines" in answer
    assert OFFLINE_NOTE in answer and message.model == OFFLINE_MODEL


def test_a_csv_prompt_runs_code_and_other_prompts_get_the_offline_note(offline, client):
    loaded = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        messages=[{"role": "user", "content": "load sales.csv into a DataFrame called sales and total it by month"}],
    )
    code = loaded.content[0].input["code"]
    assert "sales = pd.read_csv('sales.csv'" in code and "monthly" in code
    other = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=1024, messages=[_chat_request("What can you do here?")]
    )
    assert other.content[0].text == f"You asked: “What can you do here?”.\n\n{OFFLINE_NOTE}"


def test_a_chart_prompt_draws_the_sessions_monthly_totals(offline, client):
    nothing = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=1024, messages=[_chat_request("now chart the monthly totals")]
    )
    assert nothing.content[0].text.startswith("There are no monthly totals in this session to chart yet")
    printed = json.dumps({"success": True, "stdout": "date\n2025-01    9771.82\n2025-02    8876.5\n"})
    history = [
        {"role": "user", "content": "load sales.csv"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "run_code",
                                            "input": {"code": "..."}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": printed}]},
        {"role": "assistant", "content": "Here are the monthly revenue totals."},
        _chat_request("now chart the monthly totals"),
    ]  # fmt: skip
    drawn = client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, messages=history)
    chart = drawn.content[0].input["blocks"][0]
    assert drawn.content[0].name == "render_blocks" and chart["chartType"] == "bar"
    assert chart["data"] == {
        "labels": ["2025-01", "2025-02"],
        "datasets": [{"label": "revenue", "data": [9771.82, 8876.5]}],
    }


def test_fix_source_needs_a_near_name_in_the_cell():
    assert fix_source("total = sum(values)\nprint(totl)", "NameError", "name 'totl' is not defined") == (
        "total = sum(values)\nprint(total)"
    )
    assert fix_source("print(banana)", "NameError", "name 'banana' is not defined") is None
    assert fix_source("1/0", "ZeroDivisionError", "division by zero") is None
