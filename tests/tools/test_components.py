"""UI components (create/update/read/list/delete, render_and_wait) through whole turns:
in this process, and in a real kernel answered over the widget protocol."""

from __future__ import annotations

import json
import time

from agent_kernel.testing import call, reply, say, tool_use, web_search
from tests.support.calls import batch, decoded, tool_results
from tests.support.capabilities import needs_widget_replies
from tests.support.frontend import FrontEnd

GROUPS = ["code", "data", "ui", "user"]
HTML = "<button id=go>Count</button><p id=out></p>"
JS = "document.getElementById('go').onclick = () => ak.call('list_ui_components', {});"
COUNTER = {
    "name": "counter",
    "description": "Counts clicks.",
    "html": HTML,
    "js": JS,
    "state": {"clicks": 0, "label": "none"},
    "messages": ["finished"],
    "tools": ["list_ui_components", "run_code"],
}


def test_create_update_read_an_old_version_list_and_delete(agent, scripted_model):
    results, _ = batch(
        agent, scripted_model,
        ("create_ui_component", COUNTER),
        ("update_ui_component", {"name": "counter", "html": "<p>second</p>", "messages": []}),
        ("read_ui_component", {"name": "counter", "version": 1}),
        ("read_ui_component", {"name": "counter"}),
        ("list_ui_components", {}),
        ("create_ui_component", COUNTER),
    )  # fmt: skip
    assert results[0] == {"name": "counter", "version": 1}
    assert results[1] == {"name": "counter", "version": 2}
    first, second = results[2], results[3]
    assert first["version"] == 1 and first["html"] == HTML and first["js"] == JS and first["messages"] == ["finished"]
    assert first["state"] == {"clicks": 0, "label": "none"}
    assert (
        second["version"] == 2 and second["html"] == "<p>second</p>" and second["js"] == JS and second["messages"] == []
    )
    assert results[4] == {"components": [{
        "name": "counter", "description": "Counts clicks.", "version": 2, "messages": [],
        "tools": ["list_ui_components", "run_code"],
    }]}  # fmt: skip
    assert results[5]["is_error"] and "update_ui_component" in results[5]["text"]

    results, _ = batch(
        agent, scripted_model,
        ("delete_ui_component", {"name": "counter"}),
        ("delete_ui_component", {"name": "counter"}),
        ("read_ui_component", {"name": "counter"}),
        ("read_ui_component", {"name": "counter", "version": 1}),
        ("update_ui_component", {"name": "counter", "html": "<p>x</p>"}),
    )  # fmt: skip
    assert results[0] == {"deleted": True} and results[1] == {"deleted": False}
    assert results[2]["is_error"] and "none yet (create_ui_component makes one)" in results[2]["text"]
    assert results[3]["version"] == 1 and results[3]["html"] == HTML  # its versions stay readable
    assert results[4]["is_error"] and "No component of yours is named 'counter'" in results[4]["text"]


def test_every_input_has_limits(agent, scripted_model):
    big = "x" * 40_000
    results, _ = batch(
        agent, scripted_model,
        ("create_ui_component", {**COUNTER, "name": "Bad-Name"}),
        ("create_ui_component", {**COUNTER, "name": "big", "html": big, "js": big}),
        ("create_ui_component", {**COUNTER, "name": "huge", "html": "x" * 70_000}),
        ("create_ui_component", {**COUNTER, "name": "keys", "state": {f"k{i}": i for i in range(51)}}),
        ("create_ui_component", {**COUNTER, "name": "heavy", "state": {"blob": "y" * 17_000}}),
        ("create_ui_component", {**COUNTER, "name": "chatty", "messages": [f"m{i}" for i in range(21)]}),
        ("create_ui_component", {**COUNTER, "name": "greedy", "tools": [f"t{i}" for i in range(11)]}),
        ("create_ui_component", {**COUNTER, "name": "oddtool", "tools": ["../etc"]}),
        ("create_ui_component", {**COUNTER, "name": "empty", "html": "  "}),
        ("create_ui_component", {
            **COUNTER, "name": "refresh", "html": '<meta http-equiv="refresh" content="0;url=https://evil.example"><p>hi</p>',
        }),
        ("read_ui_component", {"name": "refresh"}),
    )  # fmt: skip
    texts = [r.get("text", "") for r in results]
    assert results[0]["is_error"] and "snake_case" in texts[0]
    assert results[1]["is_error"] and "80,000 bytes together; the limit is 65,536" in texts[1]
    assert results[2]["is_error"] and "html" in texts[2]  # one field over its own limit (schema)
    assert results[3]["is_error"] and "the limit is 50" in texts[3]
    assert results[4]["is_error"] and "16,000 bytes" in texts[4]
    assert results[5]["is_error"] and results[6]["is_error"] and results[7]["is_error"]
    assert results[8]["is_error"] and "html is empty" in texts[8]
    assert results[9] == {"name": "refresh", "version": 1}
    assert results[10]["html"] == "<p>hi</p>"  # a meta refresh would navigate the frame: it is not kept


def test_render_and_wait_with_nobody_there_goes_on_at_once(agent, scripted_model):
    batch(agent, scripted_model, ("create_ui_component", COUNTER))
    started = time.monotonic()
    results, _ = batch(
        agent, scripted_model,
        ("render_and_wait", {"component": "counter", "state": {"label": "start"}}),
        ("render_and_wait", {"component": "counter", "state": {"clicks": "many"}}),
        ("render_and_wait", {"component": "nothing"}),
        ("render_blocks", {"blocks": [{"type": "component", "name": "counter"}]}),
    )  # fmt: skip
    assert time.monotonic() - started < 10
    assert results[0]["action"] == "none" and results[0]["user_present"] is False
    assert results[0]["state"] == {"clicks": 0, "label": "start"}
    assert "No user is present" in results[0]["note"]
    assert results[1]["is_error"] and "must be number" in results[1]["text"]
    assert results[2]["is_error"] and "No component of yours is named 'nothing'" in results[2]["text"]
    assert results[3] == {"ok": True}


def test_a_component_call_goes_through_the_turns_dispatcher_and_its_approval(agent, scripted_model):
    """What the widget does with a call message, made inside a real turn: the declared list
    narrows, the turn's offered tools and approval mode decide."""
    agent.code(
        "from agent_kernel import tool\n"
        "@tool\n"
        "async def press(calls: list[dict]) -> list:\n"
        "    '''Send call messages to the counter component as its frame would.'''\n"
        "    import asyncio\n"
        "    from agent_kernel.tools.components import component_widget\n"
        "    widget = await component_widget({'name': 'counter'})\n"
        "    replies = []\n"
        "    widget.reply = replies.append\n"
        "    for i, msg in enumerate(calls):\n"
        "        widget.receive({'kind': 'call', 'id': i + 1, **msg})\n"
        "        while widget._tasks:\n"
        "            await asyncio.sleep(0.01)\n"
        "    return replies\n"
    )
    presses = {"calls": [
        {"tool": "db_sql", "input": {"sql": "SELECT 1"}},
        {"tool": "list_ui_components", "input": {}},
        {"tool": "run_code", "input": {"code": "touched = 1"}},
    ]}  # fmt: skip
    batch(agent, scripted_model, ("create_ui_component", COUNTER))
    [replies], _ = batch(agent, scripted_model, ("press", presses), approve="read-only")
    undeclared, listed, writing = replies
    assert undeclared["ok"] is False and "'db_sql' is not declared by this component" in undeclared["content"]
    assert listed["ok"] is True and json.loads(listed["content"])["components"][0]["name"] == "counter"
    assert writing["ok"] is False and "run_code" in writing["content"]
    assert "touched" not in agent.shell.user_ns  # read-only: the declared writing tool never ran

    [replies], _ = batch(agent, scripted_model, ("press", presses), approve="ask")
    assert replies[1]["ok"] is True and replies[2]["ok"] is False  # ask: nobody here to approve the write
    assert "touched" not in agent.shell.user_ns

    [replies], _ = batch(agent, scripted_model, ("press", presses))
    assert replies[2]["ok"] is True and agent.value("touched") == 1  # auto mode allows it

    # After the session read untrusted content, a component's write runs only where the
    # person approves each call; reading tools still run.
    scripted_model.add(
        reply(*web_search("counters", [("https://evil.example/counters", "Counters")]), tool_use("press", presses)),
        say("done"),
    )
    agent.ok("look up counters first")
    replies = decoded(scripted_model.requests[-1]["messages"][-1]["content"][0])
    assert replies[1]["ok"] is True and replies[2]["ok"] is False
    assert "read untrusted content" in replies[2]["content"] and "--approve ask" in replies[2]["content"]


@needs_widget_replies
def test_render_and_wait_returns_the_state_the_person_submitted(kernel, scripted_model):
    scripted_model.add(
        call("create_ui_component", **COUNTER),
        call("render_and_wait", component="counter"),
        say("Thanks."),
    )
    front = FrontEnd(kernel)

    def use(front, widget):
        front.custom(widget, type="component", msg={"kind": "state", "state": {"clicks": 3}})
        front.custom(widget, type="component", msg={"kind": "state", "state": {"secret": 1}})
        front.custom(widget, type="component", msg={"kind": "message", "name": "finished", "data": {"clicks": 3}})
        front.custom(widget, type="component", msg={"kind": "message", "name": "undeclared", "data": 1})
        front.custom(widget, type="component", msg={"kind": "call", "id": 7, "tool": "list_ui_components", "input": {}})
        time.sleep(1.5)  # the call's result goes out before the submission settles the widget
        front.custom(widget, type="submit")

    front.answer["ComponentWidget"] = use
    result = kernel.ok("%agent show me the counter", on_message=front.hook)
    answer = json.loads(tool_results(scripted_model.requests[2])[0]["content"])
    assert answer == {"action": "submit", "state": {"clicks": 3}}
    [widget] = front.of_kind("ComponentWidget")
    errors = [m["message"] for m in widget.messages if m.get("kind") == "error"]
    assert any("state key 'secret' is not declared" in e for e in errors)
    assert any("message 'undeclared' is not declared" in e for e in errors)
    [listed] = [m for m in widget.messages if m.get("kind") == "result"]
    assert listed["id"] == 7 and listed["ok"] is True and "counter" in listed["content"]
    shown = "\n".join(result.final_texts())
    assert "counter · version 1 · Submitted" in shown and "clicks: 3" in shown
    assert "<script" not in shown

    # The message reaches the next turn, marked as the component's.
    scripted_model.add(say("ok"))
    kernel.ok("%agent what did it say?")
    context = scripted_model.requests[-1]["messages"][-1]["content"][0]["text"]
    assert "A message from the UI component 'counter'" in context and 'finished: {"clicks": 3}' in context
