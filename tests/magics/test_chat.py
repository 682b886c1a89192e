"""The Agent chat's turns in the kernel: the payload's checks, and a panel turn in a kernel."""

from __future__ import annotations

import base64
import io

import pytest
from IPython.core.error import UsageError
from PIL import Image

from agent_kernel.config import AgentKernel
from agent_kernel.magics.chat import (
    MAX_ATTACHMENTS,
    MAX_PROMPT_CHARS,
    chat_turn,
    configured_models,
    encode,
    panel_defaults,
    session_action,
)
from agent_kernel.testing import call, say


def _png(width: int = 40, height: int = 30) -> str:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode("ascii")


def panel_code(payload: dict) -> str:
    """The code the panel sends: one awaited call with the payload as base64."""
    return (
        f"await __import__('agent_kernel.magics.chat', fromlist=['run_chat_turn']).run_chat_turn({encode(payload)!r})"
    )


# -- the payload's checks ---------------------------------------------------------------------


def test_settings_are_the_agent_flags_fields():
    turn = chat_turn(
        encode({"prompt": " sum it ", "model": "claude-x", "approve": "ask", "thinking": "High", "session": "work"})
    )
    request = turn.request
    assert (request.prompt, request.model, request.approve, request.thinking, request.session) == (
        "sum it",
        "claude-x",
        "ask",
        "high",
        "work",
    )
    assert request.check is False and request.attachments == ()
    assert chat_turn(encode({"prompt": "hi", "new": True})).request.new is True
    assert chat_turn(encode({"prompt": "hi", "new": "notes"})).request.new == "notes"


def test_attachments_become_labelled_text_and_image_blocks():
    request = chat_turn(
        encode(
            {
                "prompt": "why?",
                "attachments": [
                    {"kind": "cell", "label": "cell 3", "text": "1 / 0"},
                    {"kind": "output", "label": "cell 4 output", "image": _png(), "media_type": "image/png"},
                ],
            }
        )
    ).request
    text, heading, image = request.attachments
    assert text == {"type": "text", "text": "Attached by the person (cell: cell 3):\n1 / 0"}
    assert heading["text"] == "Attached by the person (output: cell 4 output):"
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"


@pytest.mark.parametrize(
    ("encoded", "message"),
    [
        (42, "base64 text"),
        ("not base64!", "not base64 of UTF-8 JSON"),
        (encode([1]), "JSON object"),  # type: ignore[arg-type]
        (encode({"prompt": "  "}), "Give the agent a prompt"),
        (encode({"prompt": "x" * (MAX_PROMPT_CHARS + 1)}), "over 100,000 characters"),
        (encode({"prompt": "hi", "code": "import os"}), "Unknown field(s) 'code'"),
        (encode({"prompt": "hi", "approve": "yolo"}), "--approve must be one of"),
        (encode({"prompt": "hi", "thinking": "lots"}), "--think takes one of"),
        (encode({"prompt": "hi", "model": 3}), "model must be a non-empty string"),
        (encode({"prompt": "hi", "session": "a" * 201}), "over 200 characters"),
        (encode({"prompt": "hi", "new": True, "session": "s"}), "either --new"),
        (encode({"prompt": "hi", "attachments": {}}), "must be a list"),
        (
            encode({"prompt": "hi", "attachments": [{"kind": "cell", "text": "x"}] * (MAX_ATTACHMENTS + 1)}),
            "At most 20 attachments",
        ),
        (encode({"prompt": "hi", "attachments": [{"kind": "secret", "text": "x"}]}), "kind is one of"),
        (encode({"prompt": "hi", "attachments": [{"kind": "cell"}]}), "either text or an image"),
        (
            encode({"prompt": "hi", "attachments": [{"kind": "cell", "text": "x", "path": "/etc"}]}),
            "Unknown attachment field(s) 'path'",
        ),
        (encode({"prompt": "hi", "attachments": [{"kind": "output", "image": "@@"}]}), "not valid base64"),
        (
            encode({"prompt": "hi", "attachments": [{"kind": "output", "image": "aGVsbG8="}]}),
            "not a readable image/png",
        ),
        (
            encode({"prompt": "hi", "attachments": [{"kind": "output", "image": _png(), "media_type": "image/svg"}]}),
            "is one of image/png",
        ),
    ],
)
def test_a_bad_payload_is_a_usage_error_naming_the_problem(encoded, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        chat_turn(encoded)


# -- in a kernel ------------------------------------------------------------------------------


def test_a_panel_turn_runs_in_the_kernel_and_lands_in_the_session(kernel, scripted_model):
    scripted_model.add(call("run_code", code="from_panel = 6 * 7"), say("Defined from_panel."))
    kernel.ok("%agent_sessions")  # the notebook's session starts with the next turn
    secret = "sk-ant-" + "s3cr3t" * 8
    kernel.ok(f"import os; os.environ['ANTHROPIC_API_KEY'] = {secret!r}")
    done = kernel.ok(
        panel_code(
            {
                "prompt": "define from_panel",
                "model": "claude-from-panel",
                "attachments": [
                    {"kind": "cell", "label": "cell 1", "text": f"key = {secret!r}"},
                    {"kind": "output", "label": "a plot", "image": _png()},
                ],
            }
        )
    )
    assert "Defined from_panel." in "".join(done.texts()) + "".join(done.texts("text/markdown")) + str(done.messages)
    assert kernel.value("from_panel + 1") == 43  # the next cell uses what the panel's turn defined
    first = scripted_model.requests[0]
    assert first["model"] == "claude-from-panel"
    content = first["messages"][-1]["content"]
    assert [b["type"] for b in content[-4:]] == ["text", "text", "text", "image"]
    assert content[-4]["text"] == "define from_panel"
    assert secret not in str(content) and "Attached by the person (cell: cell 1):" in content[-3]["text"]
    history = "\n".join(kernel.ok("%agent_history").final_texts())
    assert "define from_panel" in history and "Defined from_panel." in history


def test_a_bad_panel_message_fails_without_a_model_call(kernel, scripted_model):
    result = kernel.execute(panel_code({"prompt": "hi", "approve": "everything"}))
    assert result.status == "error"
    assert result.errors == [] and result.stderr.startswith("UsageError: --approve must be one of")
    assert scripted_model.requests == []


def test_the_panel_loads_the_extension_when_the_notebook_has_not(scripted_model, agent_db, tmp_path):
    from tests.support.kernel import Kernel

    scripted_model.add(say("loaded"))
    k = Kernel({}, cwd=str(tmp_path))
    try:
        k.ok(panel_code({"prompt": "hello"}))
        assert len(scripted_model.requests) == 1
        assert "agent" in k.value("sorted(get_ipython().magics_manager.magics['line'])")
    finally:
        k.shutdown()


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"action": "delete", "name": "work"}, "one of rename, archive"),
        ({"action": "rename", "name": "work"}, "new_name must be text"),
        ({"action": "rename", "name": "", "new_name": "x"}, "name must be text"),
        ({"action": "archive", "name": "work", "new_name": "x"}, "takes no new_name"),
        ({"action": "archive", "name": "work", "sql": "drop"}, "JSON object of action"),
    ],
)
def test_a_bad_session_action_is_a_usage_error(payload, message):
    with pytest.raises(UsageError, match=message):
        session_action(encode(payload))


def test_the_panel_renames_and_archives_a_session(kernel, scripted_model):
    scripted_model.add(say("hi"))
    kernel.ok("%agent --new=first hello")
    action = "__import__('agent_kernel.magics.chat', fromlist=['x']).run_session_action"
    renamed = kernel.ok(f"{action}({encode({'action': 'rename', 'name': 'first', 'new_name': 'kept notes'})!r})")
    assert "Renamed session 'first' to 'kept notes'." in renamed.stdout
    archived = kernel.ok(f"{action}({encode({'action': 'archive', 'name': 'kept notes'})!r})")
    assert "Archived session 'kept notes'" in archived.stdout
    listed = kernel.ok("%agent_sessions").final_texts()[-1]
    assert "kept notes" in listed and "completed" in listed


# -- the settings row: the notebook's defaults in the kernel ----------------------------------

CHAT = "__import__('agent_kernel.magics.chat', fromlist=['x'])"


def test_the_configured_models_are_the_settings_models_once_each():
    settings = AgentKernel(model="claude-a", small_model="claude-b", medium_model="claude-a", large_model="claude-c")
    assert configured_models(settings) == ["claude-a", "claude-b", "claude-c"]


def test_row_choices_are_checked_as_the_flags_are():
    settings = AgentKernel(model="claude-a", small_model="claude-b")
    assert panel_defaults(encode({"model": "claude-b", "approve": "ASK", "thinking": "Low"}), settings) == {
        "model": "claude-b",
        "approve": "ask",
        "thinking": "low",
    }
    assert panel_defaults(encode({"model": None, "new": False, "session": "work"}), settings) == {"session": "work"}


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"model": "claude-unknown"}, "'claude-unknown' is not a configured model; choose one of claude-a"),
        ({"approve": "yolo"}, "--approve must be one of"),
        ({"thinking": "lots"}, "--think takes one of"),
        ({"new": True, "session": "s"}, "either --new"),
        ({"new": "yes"}, "new must be true or false"),
        ({"prompt": "hi"}, "Unknown setting(s) 'prompt'"),
        ({"model": "x" * 201}, "over 200 characters"),
    ],
)
def test_a_bad_row_choice_is_a_usage_error(payload, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        panel_defaults(encode(payload), AgentKernel(model="claude-a"))


def panel_call(kernel, code: str, expression: str | None = None) -> dict:
    """What the panel sends: a silent request whose answer is in ``user_expressions``."""
    client = kernel.client
    content = {
        "code": code,
        "silent": True,
        "store_history": False,
        "user_expressions": {"state": expression} if expression else {},
        "allow_stdin": False,
    }
    request = client.session.msg("execute_request", content)
    client.shell_channel.send(request)
    while True:
        reply = client.get_shell_msg(timeout=60)
        if reply["parent_header"].get("msg_id") == request["header"]["msg_id"]:
            return reply["content"]


def test_the_rows_choices_apply_to_the_next_cell_turn_and_a_flag_wins(kernel, scripted_model):
    small = kernel.value("get_ipython().find_magic('agent').__self__.settings.small_model")
    scripted_model.add(say("one"), say("two"), say("three"))
    kernel.ok("%agent --new=first hello in the first session")
    reply = panel_call(
        kernel, f"{CHAT}.set_panel_defaults({encode({'model': small, 'approve': 'read-only', 'new': True})!r})"
    )
    assert reply["status"] == "ok"
    cell = kernel.ok("%agent from a cell")
    assert scripted_model.requests[1]["model"] == small
    shown = "".join(cell.texts()) + "".join(cell.texts("text/markdown")) + cell.stdout + str(cell.messages)
    assert "From the Agent chat's settings: --model " + small in shown and "--approve read-only" in shown
    assert "--new" in shown  # the next turn only: this cell started a new session
    tools = {t["name"] for t in scripted_model.requests[1].get("tools", [])}
    assert "run_code" not in tools  # read-only: writing tools are not offered
    kernel.ok("%agent --model claude-from-the-flag --approve auto once more")
    last = scripted_model.requests[-1]
    assert last["model"] == "claude-from-the-flag"
    # --new was for one turn: this one continued the session the cell before started.
    prompts = [b.get("text") for m in last["messages"] if m["role"] == "user" for b in m["content"]]
    assert "from a cell" in prompts and "hello in the first session" not in prompts


def test_a_refused_row_choice_is_an_error_reply_with_the_message(kernel, scripted_model):
    reply = panel_call(kernel, f"{CHAT}.set_panel_defaults({encode({'model': 'claude-nope'})!r})")
    assert reply["status"] == "error" and reply["ename"] == "UsageError"
    assert "'claude-nope' is not a configured model" in reply["evalue"]
    state = panel_call(kernel, "", f"{CHAT}.panel_state()")["user_expressions"]["state"]
    assert state["data"]["application/json"]["defaults"]["model"] is None


def test_the_panel_state_names_the_configured_models_and_the_sessions_context(kernel, scripted_model):
    scripted_model.add(say("hi"))
    kernel.ok("%config AgentKernel.context_window = 100_000")
    kernel.ok("%agent --new=metered hello")
    reply = panel_call(
        kernel,
        f"{CHAT}.set_panel_defaults({encode({'thinking': 'high'})!r})",
        f"{CHAT}.panel_state({encode({'name': 'metered'})!r})",
    )
    state = reply["user_expressions"]["state"]["data"]["application/json"]
    settings = kernel.value(
        "(lambda s: [s.model, s.small_model, s.medium_model, s.large_model])"
        "(get_ipython().find_magic('agent').__self__.settings)"
    )
    assert state["models"] == list(dict.fromkeys(settings)) and state["default_model"] == settings[0]
    assert state["defaults"] == {"model": None, "approve": None, "thinking": "high", "session": None, "new": False}
    meter = state["meter"]
    assert meter["session"] == "metered" and meter["window"] == 100_000 and meter["compact_at"] == 70_000
    assert meter["used"] is not None and meter["used"] > 0
    assert meter["steps"][0].startswith("images") and "summarised" in meter["steps"][-1]
    assert meter["compaction"] == "client" and meter["summary_model"] == settings[1]
    assert meter["tokens"] > 0 and meter["token_limit"] == 10_000_000
    new = panel_call(kernel, f"{CHAT}.set_panel_defaults({encode({'new': True})!r})", f"{CHAT}.panel_state()")
    assert new["user_expressions"]["state"]["data"]["application/json"]["meter"] is None


def test_a_kernel_without_the_extension_answers_the_state_without_loading_it(scripted_model, agent_db, tmp_path):
    from tests.support.kernel import Kernel

    k = Kernel({}, cwd=str(tmp_path))
    try:
        state = panel_call(k, "", f"{CHAT}.panel_state()")["user_expressions"]["state"]["data"]["application/json"]
        assert state["meter"] is None and state["models"]
        assert k.value("'duckdb' in __import__('sys').modules or 'anthropic' in __import__('sys').modules") is False
    finally:
        k.shutdown()
