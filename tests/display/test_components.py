"""The component widget's checks, the frame's policy and the static record."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agent_kernel.display import components as C
from agent_kernel.display.waiting import Nobody
from agent_kernel.store.components import ComponentVersion

DECLARED = {"count": 0, "label": "x", "anything": None}
TALLY = ComponentVersion(
    "tally", 3, "Counts.", "<b>hi</b>", "b{}", "ak.setState({count: 1})", DECLARED, ("done",), ("db_sql",)
)


class Scripts(HTMLParser):
    """The inline scripts of a document, as a browser's parser reads them."""

    def __init__(self, document: str) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[str] = []
        self.policies: list[str] = []
        self._in_script = False
        self.feed(document)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")
        found = dict(attrs)
        if tag == "meta" and (found.get("http-equiv") or "").lower() == "content-security-policy":
            self.policies.append(found.get("content") or "")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


def hashes(policy: str) -> set[str]:
    [scripts] = [part for part in policy.split(";") if part.strip().startswith("script-src")]
    return {word for word in scripts.split() if word.startswith("'sha256-")}


HOSTILE = ComponentVersion(
    "hostile", 1, "x",
    '<b>x</b></script><script>new RTCPeerConnection()</script><meta http-equiv="refresh" content="0;url=/x">',
    "</style><script>alert(1)</script>",
    "const s = '</script><script>new RTCPeerConnection()</script>\u2028\r\n';",
    {"note": "</script>\r"}, (), (),
)  # fmt: skip


def test_each_frame_runs_exactly_the_scripts_its_policy_hashes():
    """Our frame's one script and, inside it, the component's document whose one script
    is the bridge: the policies allow those hashes only, so markup the model wrote
    (``<script>``, handlers, ``javascript:``) never runs by itself in either frame."""
    outer = Scripts(C.frame_document(HOSTILE, HOSTILE.state))
    [outer_policy] = outer.policies
    [frame_script] = outer.scripts
    inner_text = json.loads(frame_script.split("inner.srcdoc = ", 1)[1].split(";\n", 1)[0])
    inner = Scripts(inner_text)
    [inner_policy] = inner.policies
    bridge = C.bridge_script(HOSTILE.state, HOSTILE.js)
    assert hashes(inner_policy) == {C.script_hash(bridge)}
    assert hashes(outer_policy) == {C.script_hash(frame_script), C.script_hash(bridge)}
    # The model's markup closed tags early: its own scripts are there, but no hash allows them.
    assert inner.scripts[-1] == bridge and all(C.script_hash(s) not in inner_policy for s in inner.scripts[:-1])
    assert "'unsafe-inline'" not in outer_policy.split("script-src", 1)[1].split(";")[0]
    for policy in (outer_policy, inner_policy):
        for directive in (
            "default-src 'none'",
            "frame-src 'none'",
            "child-src 'none'",
            "worker-src 'none'",
            "form-action 'none'",
            "base-uri 'none'",
        ):
            assert directive in policy
    # The model's code and state reach the bridge as data: ASCII, no "<", no carriage return.
    assert bridge.isascii() and "\r" not in bridge and "</script" not in bridge.lower() and "<!--" not in bridge
    assert C.script_literal(HOSTILE.js) in bridge and "<" not in C.script_literal(HOSTILE.js)
    assert 'var ak = { state: {"note": "\\u003c/script\\u003e\\r"} };' in bridge
    assert "refresh" not in inner_text


def test_the_bridge_takes_the_peer_connections_away_before_anything_of_the_component_runs():
    bridge = C.bridge_script({}, "window.go()")
    deletion = bridge.index("delete window[names[i]]")
    assert deletion < bridge.index("var ak") < bridge.index("run(") < bridge.index('run("window.go()")')
    # Before it: nothing the component's markup could shadow (document.*, named elements).
    assert "document" not in bridge[bridge.index("(function () {") : deletion]


def test_the_frames_are_sandboxed_with_scripts_only_and_forward_only_their_own_frames_messages():
    js = Path(C.__file__).with_name("js")
    page, frame = (js / "component.js").read_text(), (js / "component_frame.js").read_text()
    assert 'frame.setAttribute("sandbox", "allow-scripts")' in page
    assert 'inner.setAttribute("sandbox", "allow-scripts")' in frame
    for script in (page, frame):
        for never in ("allow-same-origin", "allow-top-navigation", "allow-popups", "allow-modals", "allow-forms"):
            assert never not in script
    assert "event.source !== frame.contentWindow" in page
    assert "event.source === inner.contentWindow" in frame and "event.source === up" in frame


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
