"""The transcript in clients that draw no widgets and ignore display updates (jupyter console),
and in one that does both (JupyterLab): the whole answer readable, no duplicates, no reprs."""

from __future__ import annotations

from agent_kernel.testing import call, reply, say, text, tool_use
from tests.support.capabilities import needs_widget_replies
from tests.support.frontend import FrontEnd

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
    execution = kernel.ok(
        "%agent monthly totals please", notebook=False
    )  # stdin allowed, no cell id, no widget acknowledged
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
        "text/plain" not in m["content"]["data"]
        or not m["content"]["data"]["text/plain"].strip()
        or m["content"]["data"]["text/plain"].startswith("Question")
        for m in execution.of_type("update_display_data")
    )
    assert "[run_code] total = 358 (+1 lines)\n358\n[run_code] ok · " in printed  # each card a line
    assert printed.count("Which year?\n") == 2  # the card's line, then the question, settled
    assert "No user present" in printed and "Waiting for an answer" not in printed
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
    # No status line or Stop button (nobody watches or clicks): no output left blank.
    shown = execution.of_type("display_data") + execution.of_type("update_display_data")
    assert shown and all(any(m["content"]["data"].values()) for m in shown)


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


STATUS = "agent-kernel-status"


def status_lines(execution) -> list[str]:
    """Each state of the status line, in order (its turn part's text)."""
    from agent_kernel.display.transcript import TURN_MIME

    found = []
    for message in execution.of_type("display_data", "update_display_data"):
        data = message["content"]["data"]
        if STATUS in data.get("text/html", ""):
            found.append(data[TURN_MIME]["text"])
    return found


def test_the_status_line_comes_first_then_counts_tokens_and_cost_and_goes_at_the_end(kernel, scripted_model):
    kernel.ok('%config AgentKernel.prices = {"scripted-model": {"input": 2, "output": 16}}')
    scripted_model.add(
        reply(text("Let me look. " * 4), tool_use("run_code", {"code": "total = 358"}), chunk_size=6, chunk_delay=0.02),
        # The model takes a moment to answer: a phase shorter than the display interval is
        # folded into the next one.
        say(ANSWER, chunk_size=6, chunk_delay=0.02, delay=0.3),
    )
    execution = kernel.ok("%agent monthly totals please")
    shown = [m for m in execution.of_type("display_data")]
    # The status line is the cell's first output, the Stop button the next, before anything else.
    from agent_kernel.display.transcript import TURN_MIME

    assert STATUS in shown[0]["content"]["data"]["text/html"] and "text/plain" not in shown[0]["content"]["data"]
    assert "application/vnd.jupyter.widget-view+json" in shown[1]["content"]["data"]
    lines = status_lines(execution)
    assert lines[0] == "waiting for the model…"
    # While the first answer streams, its tokens are counted; after that call, the cost too.
    receiving = [line for line in lines if "receiving" in line and "tokens" in line]
    counts = [int(line.split(" tokens")[0].split("· ")[-1].replace(",", "")) for line in receiving]
    assert len(counts) >= 3 and counts == sorted(counts) and counts[0] < counts[-1]
    # The second answer streams priced at the model's output price: its cost grows with it.
    second = [line for line in lines if line.startswith("scripted-model · receiving")]
    costs = [float(line.rsplit("$", 1)[1]) for line in second]
    assert len(costs) >= 3 and costs == sorted(costs) and costs[0] < costs[-1]
    assert any(line.startswith("scripted-model · running run_code…") and "$" in line for line in lines)
    assert any(line.startswith("scripted-model · waiting for the model…") and "$" in line for line in lines)
    # The turn ended: the line is blanked (the footer says it all), in its last update.
    updates = [
        m
        for m in execution.of_type("update_display_data")
        if m["content"]["transient"]["display_id"] == shown[0]["content"]["transient"]["display_id"]
    ]
    assert updates[-1]["content"]["data"] == {"text/plain": ""}
    assert TURN_MIME in execution.of_type("display_data")[-1]["content"]["data"]  # the footer, last


def sample_input(schema: dict) -> dict:
    """An input for a tool's schema: a few words for each string, a small value for the rest."""

    def value(name: str, spec: dict):
        kind = spec.get("type")
        if "enum" in spec:
            return spec["enum"][0]
        if kind == "string" or "anyOf" in spec:
            return f"the {name} here"
        if kind in ("integer", "number"):
            return 3
        if kind == "boolean":
            return True
        if kind == "array":
            return [{"type": "table"}] if name == "blocks" else ["first", "second"]
        return {"a": 1}

    return {name: value(name, spec) for name, spec in schema.get("properties", {}).items()}


def test_every_tool_card_has_a_title_in_words_never_json():
    from agent_kernel.config import AgentKernel
    from agent_kernel.display.transcript import _input_summary
    from agent_kernel.tools.builtin import builtin_registry

    settings = AgentKernel()
    for name, tool in builtin_registry().tools.items():
        definition = tool.definition(settings)
        # The API's server tools (web_search, web_fetch) have no schema here: the API sends their input.
        server_inputs = {"web_search": {"query": "duckdb release"}, "web_fetch": {"url": "https://duckdb.org"}}
        tool_input = server_inputs.get(name) or sample_input(definition.get("input_schema", {}))
        summary = _input_summary(name, tool_input)
        if tool_input:
            assert summary, name
        assert "{" not in summary and '"' not in summary and "\n" not in summary, (name, summary)
        assert len(summary) <= 90, (name, summary)
    blocks = {"title": "Revenue by month", "blocks": [{"type": "table", "data": [{"a": 1}]}, {"type": "chart"}]}
    assert _input_summary("render_blocks", blocks) == "Revenue by month · table, chart"
    assert _input_summary("db_sql", {"sql": "SELECT *\n  FROM sales", "into": "df"}) == "SELECT * FROM sales"
    assert _input_summary("memory", {"action": "search", "query": "revenue"}) == "search revenue"
    assert _input_summary("ask_user", {"question": "Which year?", "options": ["2024"]}) == "Which year?"
