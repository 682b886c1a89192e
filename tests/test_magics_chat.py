"""The Agent panel's turns in the kernel: the payload's checks, and a panel turn in a kernel."""

from __future__ import annotations

import base64
import io

import pytest
from IPython.core.error import UsageError
from PIL import Image

from agent_kernel.magics.chat import MAX_ATTACHMENTS, MAX_PROMPT_CHARS, chat_turn, encode, session_action
from agent_kernel.testing import call, say


def _png(width: int = 40, height: int = 30) -> str:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode("ascii")


def panel_code(payload: dict) -> str:
    """The code the panel sends: one awaited call with the payload as base64."""
    return (
        "await __import__('agent_kernel.magics.chat', fromlist=['run_chat_turn'])"
        f".run_chat_turn({encode(payload)!r})"
    )


# -- the payload's checks ---------------------------------------------------------------------


def test_settings_are_the_agent_flags_fields():
    turn = chat_turn(encode({"prompt": " sum it ", "model": "claude-x", "approve": "ask", "thinking": "High",
                             "session": "work"}))
    request = turn.request
    assert (request.prompt, request.model, request.approve, request.thinking, request.session) == (
        "sum it", "claude-x", "ask", "high", "work")
    assert request.check is False and request.attachments == ()
    assert chat_turn(encode({"prompt": "hi", "new": True})).request.new is True
    assert chat_turn(encode({"prompt": "hi", "new": "notes"})).request.new == "notes"


def test_attachments_become_labelled_text_and_image_blocks():
    request = chat_turn(encode({"prompt": "why?", "attachments": [
        {"kind": "cell", "label": "cell 3", "text": "1 / 0"},
        {"kind": "output", "label": "cell 4 output", "image": _png(), "media_type": "image/png"},
    ]})).request
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
        (encode({"prompt": "hi", "attachments": [{"kind": "cell", "text": "x"}] * (MAX_ATTACHMENTS + 1)}),
         "At most 20 attachments"),
        (encode({"prompt": "hi", "attachments": [{"kind": "secret", "text": "x"}]}), "kind is one of"),
        (encode({"prompt": "hi", "attachments": [{"kind": "cell"}]}), "either text or an image"),
        (encode({"prompt": "hi", "attachments": [{"kind": "cell", "text": "x", "path": "/etc"}]}),
         "Unknown attachment field(s) 'path'"),
        (encode({"prompt": "hi", "attachments": [{"kind": "output", "image": "@@"}]}), "not valid base64"),
        (encode({"prompt": "hi", "attachments": [{"kind": "output", "image": "aGVsbG8="}]}),
         "not a readable image/png"),
        (encode({"prompt": "hi", "attachments": [{"kind": "output", "image": _png(), "media_type": "image/svg"}]}),
         "is one of image/png"),
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
    done = kernel.ok(panel_code({"prompt": "define from_panel", "model": "claude-from-panel", "attachments": [
        {"kind": "cell", "label": "cell 1", "text": f"key = {secret!r}"},
        {"kind": "output", "label": "a plot", "image": _png()},
    ]}))
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
    from .kernel import Kernel

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
