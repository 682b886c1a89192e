"""The component widget's checks, the frame's policy and the static record."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_kernel.display import components as C
from agent_kernel.display.waiting import Nobody
from agent_kernel.store.components import ComponentVersion

DECLARED = {"count": 0, "label": "x", "anything": None}
TALLY = ComponentVersion("tally", 3, "Counts.", "<b>hi</b>", "b{}", "ak.setState({count: 1})", DECLARED, ("done",), ("db_sql",))


def test_the_widget_script_puts_the_same_policy_and_only_allow_scripts_on_the_frame():
    script = (Path(C.__file__).with_name("js") / "component.js").read_text()
    policy = script.split("const CSP =", 1)[1].split(";\n", 1)[0]
    joined = "".join(part.strip().strip('"') for part in policy.split("+"))
    assert joined == C.CSP
    assert 'frame.setAttribute("sandbox", "allow-scripts")' in script
    for never in ("allow-same-origin", "allow-top-navigation", "allow-popups", "allow-modals", "allow-forms"):
        assert never not in script
    assert "event.source !== frame.contentWindow" in script


@pytest.mark.parametrize(
    ("state", "problem"),
    [
        ({"secret": 1}, "state key 'secret' is not declared"),
        ({"count": "many"}, "state key 'count' must be number, not string"),
        ([1], "state must be an object"),
        ({"label": "y" * 17_000}, "over 16,000 bytes"),
    ],
)
def test_state_must_fit_the_declaration(state, problem):
    with pytest.raises(C.MessageError, match=problem):
        C.checked_state(DECLARED, state)


def test_state_that_fits_is_kept():
    assert C.checked_state(DECLARED, {"count": 2.5, "anything": [1], "label": None}) == {
        "count": 2.5, "anything": [1], "label": None,
    }  # fmt: skip


def test_a_meta_refresh_is_taken_out():
    markup = '<p>a</p><META http-equiv=Refresh content="0;url=https://evil.example"><meta charset="utf-8">'
    assert C.without_refresh(markup) == '<p>a</p><meta charset="utf-8">'


def test_the_static_record_escapes_everything_and_holds_no_script():
    hostile = {"label": "<script>alert(1)</script>", "count": 1}
    bundle = C.component_bundle(TALLY, "Made by <img src=x onerror=1>", hostile, {"action": "submit", "state": hostile})
    assert "<script" not in bundle["text/html"] and "<img" not in bundle["text/html"]
    assert "&lt;script&gt;" in bundle["text/html"] and "tally · version 3 · Submitted" in bundle["text/plain"]
    nobody = C.component_bundle(TALLY, "", DECLARED, Nobody("papermill"))
    assert "No user present (papermill)" in nobody["text/plain"]


def test_messages_are_kept_for_the_sessions_next_turn_redacted_and_bounded(monkeypatch):
    from agent_kernel.secrets import Secrets

    monkeypatch.setenv("COMPONENT_API_KEY", "sk-component-9Qz4Lm7Ty2")
    live = Secrets()  # a kernel's secrets: their values are redacted while it lives
    C.keep_note("s2", "tally", "done", {"typed": "sk-component-9Qz4Lm7Ty2"})
    [note] = C.take_notes("s2")
    assert "sk-component" not in note and "[secret COMPONENT_API_KEY]" in note
    del live
    for i in range(C.NOTES_KEPT + 5):
        C.keep_note("s1", "tally", "done", {"i": i})
    notes = C.take_notes("s1")
    assert len(notes) == C.NOTES_KEPT and '"i": 24' in notes[-1]
    assert notes[0].startswith("[A message from the UI component 'tally' (sent by its page, not typed by the user)]")
    assert C.take_notes("s1") == []
