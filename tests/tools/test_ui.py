"""render_blocks, ask_user and send_message in a real kernel, answered over the widget protocol."""

from __future__ import annotations

import json
import time

from agent_kernel.store import Store
from agent_kernel.store.sessions import Sessions
from agent_kernel.testing import call, say
from tests.support.capabilities import needs_widget_replies
from tests.support.frontend import FrontEnd, wait_for

FIELDS = [
    {"name": "name", "label": "Name", "type": "text", "required": True},
    {"name": "age", "label": "Age", "type": "number", "default": 30},
    {"name": "plan", "label": "Plan", "type": "select", "options": ["free", "pro"], "default": "free"},
    {"name": "agree", "label": "I agree", "type": "checkbox"},
    {"name": "bio", "label": "Bio", "type": "textarea"},
    {"name": "start", "label": "Start", "type": "date", "default": "2026-01-15"},
]


def result_of(request: dict, index: int = 0) -> dict:
    return [b for b in request["messages"][-1]["content"] if b["type"] == "tool_result"][index]


def value_of(request: dict, index: int = 0):
    return json.loads(result_of(request, index)["content"])


def session_state(db) -> str:
    with Store(db).connect() as con:
        return Sessions(con).list()[0].state


@needs_widget_replies
def test_form_waits_for_the_submission_and_returns_typed_values(kernel, scripted_model, agent_db):
    scripted_model.add(
        call("render_blocks", title="Welcome", blocks=[{"type": "form", "title": "Sign up", "fields": FIELDS}]),
        say("Welcome."),
    )
    front = FrontEnd(kernel)
    seen_states = []

    def answer(front, form):
        seen_states.append(wait_for(lambda: session_state(agent_db) == "waiting_for_input" and "waiting_for_input"))
        # A number that is not one comes back as an error next to its field; nothing resolves.
        front.custom(
            form,
            type="submit",
            data={"name": "Ada", "age": "thirty", "plan": "pro", "agree": True, "bio": "", "start": "2026-02-01"},
        )
        front.custom(
            form,
            type="submit",
            data={"name": "Ada", "age": "36", "plan": "pro", "agree": True, "bio": "", "start": "2026-02-01"},
        )

    front.answer["FormWidget"] = answer
    result = kernel.ok("%agent sign me up", on_message=front.hook)
    assert seen_states == ["waiting_for_input"]
    assert value_of(scripted_model.requests[1]) == {
        "action": "submit",
        "data": {"name": "Ada", "age": 36, "plan": "pro", "agree": True, "bio": None, "start": "2026-02-01"},
    }
    [form] = front.of_kind("FormWidget")
    assert form.messages == [{"type": "errors", "errors": {"age": "Age must be a number, not 'thirty'."}}]
    static = [t for t in result.final_texts() if t.startswith("Sign up · Submitted")]
    assert static and "Age: 36" in static[0]  # the widget was replaced by what was sent
    assert session_state(agent_db) == "idle"


@needs_widget_replies
def test_form_dismissed(kernel, scripted_model):
    scripted_model.add(call("render_blocks", blocks=[{"type": "form", "fields": FIELDS[:1]}]), say("ok"))
    front = FrontEnd(kernel)
    front.answer["FormWidget"] = lambda front, form: front.custom(form, type="dismiss")
    kernel.ok("%agent ask me", on_message=front.hook)
    assert value_of(scripted_model.requests[1]) == {"action": "dismiss"}


@needs_widget_replies
def test_ask_user_with_options_and_free_text(kernel, scripted_model):
    scripted_model.add(
        call("ask_user", question="Which region?", options=["North", "South"]),
        call("ask_user", question="Anything else?"),
        say("ok"),
    )
    front = FrontEnd(kernel)
    answers = iter(
        [lambda f, w: f.custom(w, type="choice", choice="1"), lambda f, w: f.custom(w, type="text", text="Use euros")]
    )
    front.answer["ChoiceCard"] = lambda f, w: next(answers)(f, w)
    result = kernel.ok("%agent plan", on_message=front.hook)
    assert value_of(scripted_model.requests[1]) == {"answer": "South"}
    assert value_of(scripted_model.requests[2]) == {"answer": "Use euros"}
    [first, second] = front.of_kind("ChoiceCard")
    assert [b["label"] for b in first.state["buttons"]] == ["North", "South"]
    assert second.state["free_text"] is True
    shown = "\n".join(result.final_texts())
    assert "Which region?\nChosen: South" in shown and "Anything else?\nAnswer: Use euros" in shown


def test_ask_user_rejects_empty_options(kernel, scripted_model):
    scripted_model.add(call("ask_user", question="Pick", options=[]), say("ok"))
    kernel.ok("%agent go")
    refusal = result_of(scripted_model.requests[1])
    assert refusal["is_error"] is True and "options must be a non-empty list" in refusal["content"]


def test_send_message_shows_markdown_and_does_not_wait(kernel, scripted_model):
    scripted_model.add(call("send_message", text="Loading **sales.csv**..."), say("Loaded."))
    result = kernel.ok("%agent load it")
    assert value_of(scripted_model.requests[1]) == {"ok": True}
    assert "<blockquote>\n<p>Loading <strong>sales.csv</strong>...</p>\n</blockquote>" in "".join(
        result.final_texts("text/html")
    )


@needs_widget_replies
def test_stop_cancels_a_pending_form(kernel, scripted_model, agent_db):
    answer = call("render_blocks", blocks=[{"type": "form", "fields": FIELDS[:1]}])
    scripted_model.add(answer)
    front = FrontEnd(kernel)

    def stop(front, form):
        [button] = front.of_kind("StopButton")
        front.custom(button, type="stop")

    front.answer["FormWidget"] = stop
    result = kernel.execute("%agent ask me", on_message=front.hook)
    shown = result.final_texts()
    assert [e["evalue"] for e in result.errors] == ["■ Stopped."]
    assert any(t.startswith("Form · Stopped before it was answered") for t in shown)
    scripted_model.add(say("ok"))
    kernel.ok("%agent go on")
    messages = scripted_model.requests[-1]["messages"]
    [tool_result] = [b for m in messages for b in m["content"] if b.get("type") == "tool_result"]
    assert tool_result["is_error"] is True and "stopped the turn" in tool_result["content"]
    assert session_state(agent_db) == "idle"


@needs_widget_replies
def test_a_client_that_shows_no_widgets_is_nobody(kernel, scripted_model):
    """jupyter_client, like jupyter console, allows stdin but renders no widgets."""
    kernel.ok("%config AgentKernel.presence_timeout = 0.5")
    scripted_model.add(
        call("ask_user", question="Which region?", options=["North", "South"]),
        call("ask_user", question="Really?"),
        say("I chose North."),
    )
    blind = FrontEnd(kernel, renders=False)
    result = kernel.ok("%agent plan", on_message=blind.hook)
    first, second = value_of(scripted_model.requests[1]), value_of(scripted_model.requests[2])
    assert first["answer"] is None and first["user_present"] is False
    assert "no front end displayed the question within 0.5 s" in first["note"]
    assert "choose a sensible default yourself" in first["note"]
    # Remembered for the turn: the second question is not shown at all and returns at once.
    assert second["user_present"] is False and "does not display widgets" in second["note"]
    assert len(blind.of_kind("ChoiceCard")) == 1
    assert "No user present: no front end displayed the question within 0.5 s." in "\n".join(result.final_texts())
    # The next turn asks again, and a front end that renders widgets is found.
    scripted_model.add(call("ask_user", question="Now?", options=["yes"]), say("ok"))
    seeing = FrontEnd(kernel)
    seeing.answer["ChoiceCard"] = lambda f, w: f.custom(w, type="choice", choice="0")
    kernel.ok("%agent again", on_message=seeing.hook)
    assert value_of(scripted_model.requests[-1]) == {"answer": "yes"}


def test_read_only_turn_has_nobody_to_ask(kernel, scripted_model):
    scripted_model.add(call("render_blocks", blocks=[{"type": "form", "fields": FIELDS}]), say("ok"))
    front = FrontEnd(kernel)
    result = kernel.ok("%agent --approve read-only go", on_message=front.hook)
    value = value_of(scripted_model.requests[1])
    assert value["user_present"] is False and value["defaults_only"] is True
    assert value["data"] == {
        "name": None,
        "age": 30,
        "plan": "free",
        "agree": False,
        "bio": None,
        "start": "2026-01-15",
    }
    assert value["required_without_default"] == ["name"]
    assert "--approve read-only" in value["note"]
    assert not front.of_kind("FormWidget")  # never shown as a widget
    assert any("No user present" in t for t in result.final_texts())


@needs_widget_replies
def test_table_pages_and_sorts_in_the_kernel(kernel, scripted_model):
    kernel.ok("import pandas as pd\nsales = pd.DataFrame({'region': ['N', 'S', 'E'] * 20, 'revenue': list(range(60))})")
    kernel.ok("%config AgentKernel.table_page_size = 10")
    scripted_model.add(
        call("render_blocks", blocks=[{"type": "table", "variable": "sales", "title": "Sales"}]), say("ok")
    )
    front = FrontEnd(kernel)
    first_page = []

    def page_and_sort(front, table):
        first_page.extend(table.state["rows"])
        front.custom(table, type="view", page=1, sort_key="revenue", sort_desc=True)

    front.answer["TableWidget"] = page_and_sort
    result = kernel.ok("%agent show sales", on_message=front.hook)
    [table] = front.of_kind("TableWidget")
    assert table.state["row_count"] == 60 and table.state["numeric"] == ["revenue"]
    assert first_page[0] == ["N", "0"] and len(first_page) == 10  # only a page is sent
    sorted_page = wait_for(lambda: table.state["rows"][0] == ["S", "49"] and table.state["rows"])
    assert [row[1] for row in sorted_page] == [str(v) for v in range(49, 39, -1)]  # page 2, descending
    assert (table.state["page"], table.state["sort_key"], table.state["sort_desc"]) == (1, "revenue", True)
    # Its bundle carries the static first page for viewers without the widget's state.
    bundle = next(
        m["content"]["data"]
        for m in result.of_type("display_data")
        if "Rows 1–10" in m["content"]["data"].get("text/html", "")
    )
    assert "<strong>Sales</strong>" in bundle["text/html"] and "Rows 1–10 of 60." in bundle["text/html"]
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_bad_blocks_say_what_to_fix_and_show_nothing(kernel, scripted_model):
    scripted_model.add(
        call(
            "render_blocks",
            blocks=[{"type": "markdown", "content": "hi"}, {"type": "chart", "chartType": "radar", "data": {}}],
        ),
        call("render_blocks", blocks=[{"type": "table", "variable": "nope"}]),
        say("ok"),
    )
    result = kernel.ok("%agent draw")
    first, second = result_of(scripted_model.requests[1]), result_of(scripted_model.requests[2])
    assert first["is_error"] and "blocks[1].chartType must be one of line, bar, pie, area" in first["content"]
    assert second["is_error"] and "There is no variable 'nope' in the kernel" in second["content"]
    assert not any("<p>hi</p>" in t for t in result.final_texts("text/html"))


SCRIPT = """
from agent_kernel import Agent
result = Agent(approve="ask").run("plan it")
print("STATE", result.state, result.tool_calls)
"""


def test_in_a_plain_script_nobody_is_asked(scripted_model, agent_db, tmp_path):
    import subprocess
    import sys

    from agent_kernel.testing import reply, tool_use

    scripted_model.add(
        reply(
            tool_use("send_message", {"text": "Planning..."}),
            tool_use("ask_user", {"question": "Which region?"}),
            tool_use(
                "render_blocks",
                {"blocks": [{"type": "markdown", "content": "# Plan"}, {"type": "form", "fields": FIELDS[1:2]}]},
            ),
            tool_use("run_code", {"code": "x = 1"}),
        ),
        say("done"),
    )
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert "Planning..." in out.stdout and "# Plan" in out.stdout and "STATE idle 4" in out.stdout
    sent, asked, shown, refused = [b for b in scripted_model.requests[1]["messages"][-1]["content"]]
    assert json.loads(sent["content"]) == {"ok": True}
    assert "no Jupyter front end" in json.loads(asked["content"])["note"]
    assert json.loads(shown["content"])["data"] == {"age": 30}
    assert refused["is_error"] and "no user is present to approve it" in refused["content"]


def test_nul_and_huge_chart_text_never_kill_the_kernel(kernel, scripted_model):
    data = {"labels": ["Jan\x00", "Feb\x01"], "datasets": [{"label": "North\x1b", "data": [1, 2]}]}
    scripted_model.add(
        call(
            "render_blocks",
            blocks=[
                {"type": "chart", "chartType": "bar", "title": "Sales\x00\ufffe", "xLabel": "month\x00", "data": data}
            ],
        ),
        call("render_blocks", blocks=[{"type": "chart", "chartType": "bar", "title": "T" * 100_000, "data": data}]),
        call(
            "render_blocks",
            blocks=[
                {
                    "type": "chart",
                    "chartType": "bar",
                    "title": "t",
                    "data": {"labels": ["x" * 20_000], "datasets": [{"data": [1]}]},
                }
            ],
        ),
        call("send_message", text="m" * 10_001),
        call("ask_user", question="q" * 2_001),
        say("done"),
    )
    started = time.monotonic()
    result = kernel.ok("%agent chart it", timeout=120)
    assert time.monotonic() - started < 60
    drawn = result_of(scripted_model.requests[1])
    text, image = drawn["content"]  # the chart goes back to the model as an image too
    assert drawn.get("is_error") is not True and json.loads(text["text"]) == {
        "ok": True,
        "images": "1 chart(s) attached below as images.",
    }
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    pngs = [d for d in result.final_texts("image/png")]
    assert len(pngs) == 1  # the cleaned chart was drawn
    for index, needle in [
        (2, "blocks[0].title is 100,000 characters; the limit is 300"),
        (3, "blocks[0].data.labels[0] is 20,000 characters; the limit is 10,000"),
        (4, "text"),
        (5, "question"),
    ]:
        refused = result_of(scripted_model.requests[index])
        assert refused["is_error"] is True and needle in refused["content"]
    assert "should have at most 10000 characters" in result_of(scripted_model.requests[4])["content"]
    assert kernel.ok("print(6 * 7)").stdout == "42\n"  # the kernel is alive and answers
