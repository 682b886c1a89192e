"""The transcript in clients that draw no widgets and ignore display updates (jupyter console),
and in one that does both (JupyterLab): the whole answer readable, no duplicates, no reprs."""

from __future__ import annotations

from agent_kernel.testing import call, reply, say, text, tool_use

from .capabilities import needs_widget_replies
from .frontend import FrontEnd

ANSWER = "The monthly totals are: January 120, February 95, March 143. " * 4


def console_view(execution) -> list[str]:
    """What jupyter console prints: streams and fresh displays' text/plain; updates are ignored."""
    shown = []
    for message in execution.of_type("stream", "display_data", "execute_result", "error"):
        content = message["content"]
        if message["msg_type"] == "stream":
            shown.append(content["text"])
        elif message["msg_type"] == "error":
            shown.append(content["evalue"])
        elif "text/plain" in content["data"]:
            shown.append(content["data"]["text/plain"])
    return shown


def script_turn(scripted_model):
    scripted_model.add(
        reply(text("Let me look at the data first. " * 3), tool_use("run_code", {"code": "total = 358\nprint(total)"}), chunk_size=8, chunk_delay=0.01),
        call("ask_user", question="Which year?"),
        say(ANSWER, chunk_size=6, chunk_delay=0.005),
    )  # fmt: skip


@needs_widget_replies
def test_a_console_client_gets_the_answer_once_as_it_streams_and_each_card_as_a_line(kernel, scripted_model):
    kernel.ok("%config AgentKernel.presence_timeout = 1")
    script_turn(scripted_model)
    execution = kernel.ok("%agent monthly totals please", notebook=False)  # stdin allowed, no cell id, no widget acknowledged
    shown = console_view(execution)
    printed = "".join(shown)
    # The answer arrives as it streams (many stream messages), once, whole; no display holds a
    # fragment of it, and nothing is repeated at the end.
    answer_streams = [m for m in execution.of_type("stream") if m["content"]["text"] in ANSWER]
    assert len(answer_streams) > 5
    assert printed.count(ANSWER) == 1 and printed.count("Let me look at the data first. " * 3) == 1
    displayed = [m["content"]["data"].get("text/plain", "") for m in execution.of_type("display_data")]
    assert not any(text and (text in ANSWER or text.startswith("Let me")) for text in displayed)
    assert not execution.of_type("update_display_data") or all(
        "text/plain" not in m["content"]["data"] or not m["content"]["data"]["text/plain"].strip()
        or m["content"]["data"]["text/plain"].startswith("Question")
        for m in execution.of_type("update_display_data")
    )
    assert "[run_code] total = 358 (+1 lines)\n358\n[run_code] ok · " in printed  # each card a line
    assert "No user present" in printed  # the question, settled
    assert not any("object at 0x" in s for s in shown)
    assert not any("StopButton" in s or "waiting for the model" in s for s in shown)
    assert shown[-1].startswith("scripted-model")  # the footer comes last, on its own


@needs_widget_replies
def test_a_widget_front_end_gets_one_live_transcript_without_repeats(kernel, scripted_model):
    script_turn(scripted_model)
    front = FrontEnd(kernel)
    front.answer["ChoiceCard"] = lambda f, card: f.custom(card, type="text", text="2025")
    execution = kernel.ok("%agent monthly totals please", on_message=front.hook)
    assert execution.final_texts().count(ANSWER) == 1
    fresh = [m["content"]["data"].get("text/plain", "") for m in execution.of_type("display_data")]
    assert ANSWER not in fresh  # it was built by updates of one display, not repeated
    assert not any(s.startswith("✓ run_code") for s in fresh)
    assert sum(s.startswith("Question\nWhich year?") for s in fresh) == 1  # the card, settled by an update
    assert "Answer: 2025" in "\n".join(execution.final_texts())


def test_an_unattended_runner_gets_no_repeats(kernel, scripted_model):
    script_turn(scripted_model)
    execution = kernel.ok("%agent monthly totals please", allow_stdin=False)  # as nbclient sends
    assert execution.final_texts().count(ANSWER) == 1
    fresh = [m["content"]["data"].get("text/plain", "") for m in execution.of_type("display_data")]
    assert ANSWER not in fresh and not any(s.startswith("✓ run_code") for s in fresh)


def test_each_output_also_carries_its_part_of_the_turn_for_the_jupyterlab_renderer():
    from agent_kernel.display.transcript import TURN_MIME, ToolCard, _card_bundle, _notice_bundle, _text_bundle

    paragraph = _text_bundle("Rows: **42** <img src=x onerror=alert(1)> [doc](javascript:alert(2))")
    part = paragraph[TURN_MIME]
    assert part["version"] == 1 and part["part"] == "text" and part["text"].startswith("Rows: **42**")
    # The renderer shows this HTML (through JupyterLab's sanitiser too): the kernel's rules made it.
    assert "<strong>42</strong>" in part["html"] and "&lt;img src=x" in part["html"]  # raw HTML shows as text
    assert "<img" not in part["html"] and "href" not in part["html"]
    assert part["html"] in paragraph["text/html"]

    card = ToolCard("tu_1", "run_code", {"code": "total = 358\nprint(total)"}, status="ok", duration_ms=12.5)
    tool = _card_bundle(card)[TURN_MIME]["tool"]
    assert tool == {"name": "run_code", "status": "ok", "summary": "total = 358 (+1 lines)",
                    "input": "total = 358\nprint(total)", "duration_ms": 12.5, "detail": ""}  # fmt: skip

    usage = {"model": "claude", "tokens": 900, "tool_calls": 1}
    footer = _notice_bundle("claude · 1 tool call", "muted", usage)[TURN_MIME]
    assert footer == {"version": 1, "part": "notice", "level": "muted", "text": "claude · 1 tool call", "usage": usage}
