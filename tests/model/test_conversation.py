"""Repairing stored messages into a valid Messages conversation."""

from __future__ import annotations

from agent_kernel.model.conversation import INTERRUPTED_RESULT, repair


def user(*blocks):
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks):
    return {"role": "assistant", "content": list(blocks)}


def text(value):
    return {"type": "text", "text": value}


def use(tool_id):
    return {"type": "tool_use", "id": tool_id, "name": "run_code", "input": {"code": "1"}}


def result(tool_id, content="ok"):
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


def test_valid_conversation_is_unchanged():
    messages = [user(text("hi")), assistant(text("let me"), use("a")), user(result("a")), assistant(text("done"))]
    assert repair(messages) == messages


def test_dangling_tool_use_gets_an_interrupted_result():
    repaired = repair([user(text("hi")), assistant(use("a"), use("b")), user(result("a"))])
    assert repaired[-1]["content"][0] == result("a")
    assert repaired[-1]["content"][1] == {
        "type": "tool_result",
        "tool_use_id": "b",
        "content": INTERRUPTED_RESULT,
        "is_error": True,
    }


def test_crash_after_tool_use_then_new_prompt():
    repaired = repair([user(text("hi")), assistant(use("a")), user(text("next question"))])
    assert [m["role"] for m in repaired] == ["user", "assistant", "user"]
    last = repaired[-1]["content"]
    assert last[0]["tool_use_id"] == "a" and last[0]["is_error"] is True
    assert last[1] == text("next question")


def test_consecutive_user_messages_merge_results_first():
    repaired = repair([user(text("one")), assistant(use("a")), user(result("a")), user(text("two"))])
    assert repaired[-1] == user(result("a"), text("two"))


def test_stray_results_and_empty_text_are_dropped():
    repaired = repair(
        [assistant(text("orphan")), user(result("zzz"), text("hi")), assistant(text("  ")), user(text("again"))]
    )
    assert repaired == [user(text("hi"), text("again"))]


def test_a_server_tool_call_without_its_result_is_dropped():
    from agent_kernel.testing import web_search

    use, result = web_search("q", [("https://a.example", "A")])
    unanswered = web_search("stopped while paused")[0]
    history = [
        {"role": "user", "content": "search"},
        {"role": "assistant", "content": [use, result, unanswered]},
        {"role": "user", "content": "go on"},
    ]
    assert repair(history)[1]["content"] == [use, result]


def test_a_repair_extended_part_by_part_is_the_repair_of_the_whole():
    from agent_kernel.model.conversation import Repair
    from agent_kernel.testing import web_search

    search, found = web_search("q", [("https://a.example", "A")])
    conversations = [
        [user(text("hi")), assistant(text("let me"), use("a")), user(result("a")), assistant(text("done"))],
        [user(text("hi")), assistant(use("a"), use("b")), user(result("a")), assistant(text("x"))],
        [user(text("hi")), assistant(use("a")), user(text("next question")), assistant(use("b"))],
        [user(text("one")), assistant(use("a")), user(result("a")), user(text("two")), user(result("zz"))],
        [assistant(text("orphan")), user(result("zzz"), text("hi")), assistant(text("  ")), user(text("again"))],
        [{"role": "user", "content": "search"}, assistant(search, found, web_search("x")[0]), user(text("more"))],
    ]
    for messages in conversations:
        whole = repair(messages)
        for cut in range(len(messages) + 1):
            first = Repair().extend(messages[:cut])
            assert first.extend(messages[cut:]).messages() == whole, (messages, cut)
            assert first.messages() == repair(messages[:cut])
        one_by_one = Repair()
        for message in messages:
            one_by_one = one_by_one.extend([message])
        assert one_by_one.messages() == whole


def test_a_tool_search_is_kept_with_its_result_and_dropped_without_one():
    use = {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "tool_search_tool_bm25",
        "input": {"query": "schedule"},
    }
    found = {
        "type": "tool_search_tool_search_result",
        "tool_references": [{"type": "tool_reference", "tool_name": "list_scheduled_tasks"}],
    }
    result = {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1", "content": found}
    call = {"type": "tool_use", "id": "toolu_1", "name": "list_scheduled_tasks", "input": {}}
    kept = repair([
        {"role": "user", "content": "what is scheduled?"},
        {"role": "assistant", "content": [use, result, call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "[]"}]},
    ])  # fmt: skip
    assert kept[1]["content"] == [use, result, call]
    stopped = repair(
        [{"role": "user", "content": "go"}, {"role": "assistant", "content": [{**use, "id": "srvtoolu_2"}]}]
    )
    assert stopped == [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
