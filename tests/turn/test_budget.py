"""The context budget: compaction keeps every request under compact_at × context_window.

Whole sessions run in this process (``shell_agent``: an Agent on IPython's shell, the
official SDK talking to the scripted model's in-process transport, a real DuckDB file).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from typing import Any

import pytest
from traitlets import TraitError

from agent_kernel import Agent
from agent_kernel.config import AgentKernel
from agent_kernel.store.compactions import Compaction
from agent_kernel.testing import call, fail, reply, say, text, tool_use
from agent_kernel.testing.script import Reply
from agent_kernel.turn.budget import context_window_for, cuttable, render
from tests.support.calls import without_breakpoints

RESULT_CHARS = 5_000


def long_print(body: dict[str, Any]) -> Reply:
    """Each turn: one run_code printing 5,000 characters, then a short answer."""
    last = body["messages"][-1]["content"]
    if any(b.get("type") == "tool_result" for b in last):
        return say("Printed it.")
    return call("run_code", code=f"print('line {len(body['messages'])} '.ljust({RESULT_CHARS}, 'x'), end='')")


def size(request: dict[str, Any]) -> int:
    """A request's tokens as the budget counts them: a token per four characters of its
    system prompt, tool definitions and messages."""
    return -(-len(json.dumps([request.get("system"), request.get("tools") or [], request["messages"]])) // 4)


def assert_valid(messages: list[dict[str, Any]]) -> None:
    """A conversation the Messages API accepts: user first, roles alternating, every
    tool_use answered in the next message and every tool_result answering one."""
    assert messages[0]["role"] == "user"
    for before, after in zip(messages, messages[1:]):
        assert before["role"] != after["role"]
    for i, message in enumerate(messages):
        blocks = message["content"] if isinstance(message["content"], list) else []
        results = {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"}
        if message["role"] == "assistant":
            uses = {b["id"] for b in blocks if b.get("type") == "tool_use"}
            nxt = messages[i + 1]["content"] if i + 1 < len(messages) else []
            assert uses <= {b.get("tool_use_id") for b in nxt if isinstance(b, dict)}, f"message {i}"
        elif results:
            previous = messages[i - 1]["content"] if i else []
            assert results <= {b.get("id") for b in previous if b.get("type") == "tool_use"}, f"message {i}"


def turns(agent: Agent, prompts: list[str]) -> str:
    """Run each prompt as a turn on one event loop; return what the cells printed."""

    async def run() -> None:
        for prompt in prompts:
            result = await agent.arun(prompt)
            assert not result.failed, result.error
        await agent._model_client.aclose()

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        asyncio.run(run())
    return out.getvalue()


def main_requests(model: Any) -> list[dict[str, Any]]:
    return [r for r in model.requests if not any(r is s for s in model.summary_requests)]


def test_each_request_is_sized_from_the_last_one_not_from_the_whole_conversation(shell_agent, scripted_model):
    """The budget sizes a request as the last one plus what was added; it can only when
    it saw the last request's messages as the conversation keeps them, before the request's
    cache marks went on (a marked last message would never match the same message next time)."""
    from agent_kernel.turn import budget

    agent = shell_agent.agent
    agent.config.tool_groups = ["code"]
    scripted_model.add(*[call("run_code", code=f"step_{n} = {n}") for n in range(4)], say("Done."))
    sized: list[int] = []
    count = budget.chars

    def counted(value: Any) -> int:
        n = count(value)
        sized.append(len(value) if isinstance(value, list) else -1)
        return n

    budget.chars = counted  # type: ignore[assignment]
    try:
        turns(agent, ["run four steps"])
    finally:
        budget.chars = count  # type: ignore[assignment]
    requests = main_requests(scripted_model)
    assert len(requests) == 5 and all("cache_control" in json.dumps(r["messages"][-1]) for r in requests)
    # The system prompt and the tools are sized once (the same objects each request), the
    # first request's messages whole (1 message), each later request by the 2 it adds.
    assert sized[0] == -1 and sized[2:] == [1, 2, 2, 2, 2], sized


def test_a_long_session_stays_under_its_budget(shell_agent, scripted_model, agent_db):
    """150 turns of a 5,000-character tool result each: nine times the budget in all, some
    fifteen compactions. The scripted summary keeps the last 20 prompts, so from the third
    compaction on every one folds an earlier summary of the same size: what a longer
    session would repeat, at the same size."""
    agent = shell_agent.agent
    agent.config.context_window = 30_000
    agent.config.tool_groups = ["code"]
    agent.config.token_limit = 10**9
    scripted_model.responder = long_print
    limit = int(30_000 * 0.7)

    shown = turns(agent, [f"turn {n}: print a long line" for n in range(150)])

    requests = main_requests(scripted_model)
    assert len(requests) == 300
    for n, request in enumerate(requests):
        assert size(request) <= limit, f"request {n} is {size(request):,} tokens"
        assert_valid(request["messages"])
    # Compacted now and then, not every turn; and between two compactions every request
    # starts with the one before (the same summary, the same trimmed results: cacheable).
    notices = [line for line in shown.splitlines() if line.startswith("Context compacted")]
    assert 10 <= len(notices) <= 25
    sent = [without_breakpoints(r["messages"]) for r in requests]  # the cache marks move each request
    changed = sum(1 for a, b in zip(sent, sent[1:]) if b[: len(a)] != a)
    assert changed == len(notices)
    turn_of = [i // 2 for i, (a, b) in enumerate(zip(sent, sent[1:])) if b[: len(a)] != a]
    assert min(b - a for a, b in zip(turn_of, turn_of[1:])) >= 5
    # The summary opens the last request; it came from the small model.
    last = requests[-1]["messages"]
    opening = last[0]["content"][0]["text"]
    assert opening.startswith('<conversation-summary covers="the first ')
    assert "Scripted summary. The user asked, in order:" in opening
    assert scripted_model.summary_requests and all(
        r["model"] == "claude-haiku-4-5" for r in scripted_model.summary_requests
    )
    # Old tool results are sent shortened, and say where the full output is.
    trimmed = [
        b["content"]
        for m in last
        for b in m["content"]
        if b.get("type") == "tool_result" and "characters trimmed" in b["content"]
    ]
    assert trimmed and all(len(t) < 1_500 for t in trimmed)
    execution_id = trimmed[0].split("code_executions.id = '")[1].split("'")[0]
    # The store keeps everything: every message, and each full output under its id.
    with agent.store.connect() as con:
        session_id = con.execute("SELECT id FROM sessions").fetchone()[0]
        assert con.execute("SELECT count(*) FROM messages WHERE session_id = ?", [session_id]).fetchone()[0] == 600
        stdout = con.execute("SELECT stdout FROM code_executions WHERE id = ?", [execution_id]).fetchone()[0]
        assert len(stdout) == RESULT_CHARS
        summaries = con.execute(
            "SELECT count(*) FROM context_summaries WHERE session_id = ? AND summary IS NOT NULL", [session_id]
        ).fetchone()[0]
    assert summaries == len(scripted_model.summary_requests)


def test_a_300_turn_working_session_runs_to_the_end_under_the_default_limits(shell_agent, scripted_model):
    """A day's work: 300 turns of a 5,000-character tool result each, in a 40,000-token
    window, with every limit at its default."""
    agent = shell_agent.agent
    agent.config.context_window = 40_000
    agent.config.tool_groups = ["code"]
    defaults = AgentKernel()
    assert (agent.config.token_limit, agent.config.cost_limit) == (defaults.token_limit, defaults.cost_limit)
    scripted_model.responder = long_print

    shown = turns(agent, [f"turn {n}: print a long line" for n in range(300)])

    assert len(main_requests(scripted_model)) == 600
    result = agent.last_result
    assert result is not None and result.state == "idle" and result.text == "Printed it."
    # Every call resends the conversation, most of it from the prompt cache: counted at full
    # weight that alone is over the limit; counted as billed it is well under it.
    sent = sum(
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        for u in scripted_model.usages
    )
    assert sent > defaults.token_limit
    assert result.session_tokens < defaults.token_limit / 2
    footers = [line for line in shown.splitlines() if "of its token limit" in line]
    assert len(footers) == 300
    share = round(100 * result.session_tokens / defaults.token_limit)
    assert (
        f": {share}% of its token limit · {result.session_tokens:,} of {defaults.token_limit:,} tokens" in footers[-1]
    )


def test_a_runaway_loop_is_stopped_under_the_default_limits(shell_agent, scripted_model):
    """A model that never ends its turn: the default max_model_calls stops the turn, and the
    stop says how to go on."""
    agent = shell_agent.agent
    agent.config.tool_groups = ["code"]
    calls = AgentKernel().max_model_calls
    scripted_model.responder = lambda body: call("run_code", code="print('again ' * 1000)")

    cell = shell_agent.execute("keep going")

    assert len(main_requests(scripted_model)) == calls
    assert cell.result is not None and cell.result.ending == "call_limit"
    assert str(cell.error).startswith(f"Stopped after {calls} model calls in one turn")
    assert "%agent continue" in str(cell.error)


def test_the_summary_is_stored_and_reused_by_another_agent(shell_agent, scripted_model, agent_db):
    settings = {"context_window": 8_000, "tool_groups": ["code"], "token_limit": 10**9}
    for name, value in settings.items():
        setattr(shell_agent.agent.config, name, value)
    scripted_model.responder = long_print
    cells = [shell_agent.ok(f"step {n}") for n in range(5)]
    assert scripted_model.summary_requests, "no summary was made"
    notices = [line for c in cells for line in c.lines if line.startswith("Context compacted")]
    assert any("messages are now a summary" in n and "%agent_history" in n for n in notices)
    session = cells[-1].result.session
    opening = main_requests(scripted_model)[-1]["messages"][0]["content"][0]["text"]
    summaries = len(scripted_model.summary_requests)

    # A second agent (another kernel) on the same file continues the session: it sends the
    # stored summary as it is, without summarising again.
    other = Agent(shell=shell_agent.shell, http_client=scripted_model.http_client, session=session, **settings)
    turns(other, ["one more step"])
    assert len(scripted_model.summary_requests) == summaries
    assert main_requests(scripted_model)[-2]["messages"][0]["content"][0]["text"] == opening
    # %agent_history still shows the whole conversation, the first prompt included.
    with other.store.connect() as con:
        first = con.execute(
            "SELECT content FROM messages m JOIN sessions s ON s.id = m.session_id "
            "WHERE s.name = ? ORDER BY seq LIMIT 1",
            [session],
        ).fetchone()[0]
    assert "step 0" in first
    # Every request of the session is a recorded model call, the summaries' included.
    with other.store.connect() as con:
        recorded = con.execute(
            "SELECT count(*) FROM model_calls c JOIN sessions s ON s.id = c.session_id WHERE s.name = ?", [session]
        ).fetchone()[0]
    assert recorded == len(scripted_model.requests) > len(main_requests(scripted_model))


def test_the_turns_after_a_compaction_go_on_from_memory_as_a_fresh_read_would(shell_agent, scripted_model):
    from agent_kernel.kernel.namespace import known_variables
    from agent_kernel.model.conversation import context_texts, repair
    from agent_kernel.store import compactions
    from agent_kernel.store.sessions import Sessions

    agent = shell_agent.agent
    for name, value in {"context_window": 8_000, "tool_groups": ["code"], "token_limit": 10**9}.items():
        setattr(agent.config, name, value)
    scripted_model.responder = long_print
    shell_agent.ok("step 0")
    store = agent.store
    changes = store.changes
    cells = [shell_agent.ok(f"step {n}") for n in range(1, 10)]
    compacted = [n for n, c in enumerate(cells) if any(line.startswith("Context compacted") for line in c.lines)]
    assert len(compacted) >= 2 and compacted[0] < len(cells) - 1, compacted
    # The turns kept their compactions with the conversation: none read the session again.
    assert store.changes == changes
    # What the next turn starts from is what reading the store afresh gives.
    with store.connect(read_only=True) as con:
        session_id = Sessions(con).by_name(cells[-1].result.session).id
        stored = [{"role": m.role, "content": m.content} for m in Sessions(con).messages(session_id)]
        rows = compactions.load(con, session_id)
    start = agent._starts.last
    assert len(rows) >= 2 and list(start.compactions) == rows
    assert start.conversation.count == len(stored)
    assert start.conversation.repaired.messages() == repair(stored)
    assert dict(start.conversation.known) == known_variables(context_texts(stored))


def test_a_long_turn_is_compacted_between_tool_calls_without_splitting_pairs(shell_agent, scripted_model):
    shell_agent.agent.config.context_window = 12_000
    shell_agent.agent.config.tool_groups = ["code"]
    code = f"print('x' * {RESULT_CHARS})"
    # Two calls in one reply, then single calls: a cut may fall after any results.
    scripted_model.add(reply(tool_use("run_code", {"code": code}), tool_use("run_code", {"code": "1"})))
    scripted_model.add(*[call("run_code", code=code) for _ in range(14)], say("All printed."))
    cell = shell_agent.ok("print a lot")
    assert "All printed." in cell.lines
    assert scripted_model.summary_requests
    requests = main_requests(scripted_model)
    for request in requests:
        assert_valid(request["messages"])
        assert size(request) <= int(12_000 * 0.7)
    # The summarised part ends with tool results; the kept part starts with the next call.
    last = requests[-1]["messages"]
    assert last[0]["content"][0]["text"].startswith("<conversation-summary")
    assert last[1]["role"] == "assistant"


def test_every_cut_the_budget_may_choose_leaves_a_valid_conversation():
    messages = [
        {"role": "user", "content": [text("start")]},
        {"role": "assistant", "content": [text("two calls"), tool_use("a", id="t1"), tool_use("b", id="t2")]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "x" * 3000},
                {"type": "tool_result", "tool_use_id": "t2", "content": "ok"},
            ],
        },
        {"role": "assistant", "content": [text("done")]},
        {"role": "user", "content": [text("next")]},
        {"role": "assistant", "content": [tool_use("c", id="t3")]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3", "content": "y" * 3000}]},
        {"role": "assistant", "content": [text("end")]},
        {"role": "user", "content": [text("last")]},
    ]
    allowed = [c for c in range(1, len(messages)) if cuttable(messages, c)]
    assert allowed == [1, 3, 4, 5, 7, 8]  # never where tool results would lose their calls
    for cut in allowed:
        sent = render(messages, Compaction(covers=cut, trimmed=cut + 2, summary="earlier"))
        assert_valid(sent)
        assert sent[0]["content"][0]["text"].startswith("<conversation-summary")
    trimmed = render(messages, Compaction(trimmed=7))
    assert "characters trimmed" in trimmed[2]["content"][0]["content"]
    assert len(trimmed[2]["content"][0]["content"]) < 1_500
    assert trimmed[2]["content"][1]["content"] == "ok"  # short results are left as they are
    assert render(messages, Compaction()) == messages


def test_a_failed_summary_keeps_the_prompts_and_the_turn_goes_on(shell_agent, scripted_model):
    shell_agent.agent.config.context_window = 8_000
    shell_agent.agent.config.tool_groups = ["code"]
    scripted_model.responder = long_print
    scripted_model.summarizer = lambda body: fail(400, "invalid_request_error", "model: not found")
    cells = [shell_agent.ok(f"step {n}") for n in range(5)]
    shown = [line for c in cells for line in c.lines]
    assert any(line.startswith("Summarising the conversation failed (Model request failed (400") for line in shown)
    opening = main_requests(scripted_model)[-1]["messages"][0]["content"][0]["text"]
    assert "The user asked, in order:\n- step 0" in opening
    for request in main_requests(scripted_model):
        assert size(request) <= int(8_000 * 0.7)


def test_server_mode_asks_the_api_to_compact(shell_agent, scripted_model):
    shell_agent.agent.config.compaction = "server"
    shell_agent.agent.config.context_window = 100_000
    compaction = {"type": "compaction", "content": "Earlier: the user loaded sales.csv."}
    scripted_model.add(reply(compaction, text("Carrying on.")), say("Still here."))
    first = shell_agent.ok("go on")
    assert any(line.startswith("The API compacted the context") for line in first.lines)
    shell_agent.ok("and now?")
    request = scripted_model.requests[0]
    assert request["context_management"] == {
        "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 70_000}}]
    }
    assert "compact-2026-01-12" in scripted_model.headers[0]["anthropic-beta"]
    # The compaction block goes back to the API as it came.
    assert scripted_model.requests[1]["messages"][1]["content"][0] == compaction


def test_context_window_comes_from_the_model_unless_set():
    assert context_window_for("claude-sonnet-4-5") == 200_000
    assert context_window_for("claude-instant-1.2") == 100_000
    assert context_window_for("some-other-model") == 200_000
    assert context_window_for("claude-sonnet-4-5", 50_000) == 50_000
    config = AgentKernel()
    assert (config.context_window, config.compact_at, config.compaction) == (0, 0.7, "client")
    assert config.small_model == "claude-haiku-4-5"
    with pytest.raises(TraitError, match="between 0.1 and 0.95"):
        config.compact_at = 1.5
    with pytest.raises(TraitError, match="at least 1,000"):
        config.context_window = 500
    with pytest.raises(TraitError):
        config.compaction = "sometimes"


def draw_figure(body: dict[str, Any]) -> Reply:
    """Each turn: one run_code displaying a 1568x1176 image and printing 2,500 characters."""
    last = body["messages"][-1]["content"]
    if any(b.get("type") == "tool_result" for b in last):
        return say("Drawn.")
    return call("run_code", code="draw()")


def test_old_images_go_before_old_text_when_a_session_of_figures_is_compacted(shell_agent, scripted_model, agent_db):
    agent = shell_agent.agent
    agent.config.context_window = 60_000
    agent.config.tool_groups = ["code"]
    agent.config.token_limit = 10**9
    shell_agent.code(
        "import io, random\nfrom PIL import Image as _PIL\nfrom IPython.display import Image, display\n"
        "def draw():\n"
        "    picture = _PIL.new('RGB', (1568, 1176), (random.randrange(256), 40, 90))\n"
        "    out = io.BytesIO(); picture.save(out, 'PNG')\n"
        "    display(Image(data=out.getvalue()))\n"
        "    print('values: ' + 'v' * 2_500)\n"
    )
    scripted_model.responder = draw_figure

    shown = turns(agent, [f"turn {n}: draw the figure" for n in range(40)])

    notices = [line for line in shown.splitlines() if line.startswith("Context compacted")]
    assert notices and notices[0].startswith("Context compacted: older images are now one-line placeholders")
    requests = main_requests(scripted_model)
    first = next(r for r in requests if "px) was here" in json.dumps(r["messages"]))
    results = [
        b
        for m in first["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    kinds = [[c.get("type") for c in r["content"]] if isinstance(r["content"], list) else ["text"] for r in results]
    assert "image" not in kinds[0] and "image" in kinds[-1]  # old images placeholders, the newest kept
    old = json.dumps(results[0]["content"])
    assert "px) was here" in old and "v" * 2_500 in old  # the old text is whole
    with agent.store.connect() as con:
        rows = con.execute("SELECT covers, trimmed, unimaged FROM context_summaries ORDER BY created_at").fetchall()
    assert rows[0][:2] == (0, 0) and rows[0][2] > 0
