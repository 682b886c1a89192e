"""Stopping a turn: kernel interrupts, the Stop button and code time limits, in a real kernel."""

from __future__ import annotations

import json
import re
import time

from agent_kernel.testing import call, reply, say, text
from tests.support.capabilities import needs_widget_replies
from tests.support.interrupts import interrupt, stopped_turn

# "started" is printed from inside the loop: IPython compiles each top-level statement just
# before running it, and an interrupt landing in that compile would show no frame of the code.
LONG_SYNC = (
    "import time\nprogress = 0\nfor progress in range(300):\n"
    "    if progress == 1:\n        print('started', flush=True)\n    time.sleep(0.1)\n"
)
LONG_ASYNC = "import asyncio\nprint('started', flush=True)\nawait asyncio.sleep(30)\n"


def printed(marker: str):
    return lambda m: m["msg_type"] == "stream" and marker in m["content"]["text"]


def assert_valid_after_stop(kernel, scripted_model, interrupted_id):
    """The next turn works and carries a tool_result for the interrupted call."""
    scripted_model.add(say("Carrying on."))
    kernel.ok("%agent what happened?")
    messages = scripted_model.requests[-1]["messages"]
    uses = [b["id"] for m in messages if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"]
    results = {
        b["tool_use_id"]: b for m in messages if m["role"] == "user" for b in m["content"] if b["type"] == "tool_result"
    }
    assert interrupted_id in uses and interrupted_id in results
    assert results[interrupted_id]["is_error"] is True
    assert set(uses) <= set(results)
    assert all(a["role"] != b["role"] for a, b in zip(messages, messages[1:]))


def tool_id(answer) -> str:
    return next(b["id"] for b in answer.content if b["type"] == "tool_use")


def test_interrupt_stops_long_sync_code(kernel, scripted_model):
    answer = call("run_code", code=LONG_SYNC)
    scripted_model.add(answer)
    result, latency = stopped_turn(kernel, "%agent count slowly", printed("started"), interrupt)
    assert latency < 6.0  # the code or answer would run on for 30 s or more
    assert result.status == "error" and [e["evalue"] for e in result.errors] == ["■ Interrupted."]
    stderr = re.sub(r"\x1b\[[0-9;]*m", "", result.stderr)
    # Where the code was, in one line: no traceback naming a cell that is not on the screen.
    # (the loop's sleep, or, when the interrupt came at once, the print that said "started")
    assert "run_code was stopped at line" in stderr
    assert "time.sleep(0.1)" in stderr or "print('started', flush=True)" in stderr, stderr
    assert "KeyboardInterrupt" not in stderr and "Cell In[" not in stderr
    assert "interrupts.py" not in stderr
    assert 0 <= kernel.value("progress") < 150  # variables set before the stop remain
    assert_valid_after_stop(kernel, scripted_model, tool_id(answer))


def test_interrupt_stops_awaiting_code(kernel, scripted_model):
    answer = call("run_code", code=LONG_ASYNC)
    scripted_model.add(answer)
    _, latency = stopped_turn(kernel, "%agent wait", printed("started"), interrupt)
    assert latency < 6.0  # the code or answer would run on for 30 s or more
    assert_valid_after_stop(kernel, scripted_model, tool_id(answer))


def test_interrupt_stops_a_streaming_answer(kernel, scripted_model):
    scripted_model.add(say("slow " * 2000, chunk_size=5, chunk_delay=0.02))

    def first_text(m):
        return m["msg_type"] == "update_display_data" and "slow" in m["content"]["data"].get("text/plain", "")

    result, latency = stopped_turn(kernel, "%agent talk slowly", first_text, interrupt)
    assert latency < 6.0  # the code or answer would run on for 30 s or more
    assert result.seconds < 25  # the whole answer would take ~40 s
    scripted_model.add(say("ok"))
    kernel.ok("%agent and now?")
    texts = [m["content"][-1].get("text") for m in scripted_model.requests[-1]["messages"]]
    assert texts == ["talk slowly\n\nand now?"] or texts[-1] == "and now?"


@needs_widget_replies
def test_stop_button_message_stops_the_turn(kernel, scripted_model):
    answer = call("run_code", code=LONG_ASYNC)
    scripted_model.add(answer)

    def click_stop(kernel):
        # What JupyterLab sends when the Stop button's model.send() runs.
        model_id = widget_ids[0]
        message = kernel.client.session.msg(
            "comm_msg", {"comm_id": model_id, "data": {"method": "custom", "content": {"type": "stop"}}}
        )
        kernel.client.shell_channel.send(message)

    widget_ids: list[str] = []

    def remember_widget(message, kernel):
        data = message["content"].get("data", {}) if message["msg_type"] == "display_data" else {}
        if "application/vnd.jupyter.widget-view+json" in data:
            widget_ids.append(data["application/vnd.jupyter.widget-view+json"]["model_id"])

    def started_and_seen(message):
        remember_widget(message, kernel)
        return printed("started")(message)

    result, latency = stopped_turn(kernel, "%agent wait for me", started_and_seen, click_stop)
    assert widget_ids and latency < 6.0
    assert result.status == "error" and [e["evalue"] for e in result.errors] == ["■ Stopped."]
    # The button is gone from the saved output once the turn ends.
    assert not any("StopButton" in s for s in result.final_texts())
    assert_valid_after_stop(kernel, scripted_model, tool_id(answer))


def test_timeout_stops_only_the_code(kernel, scripted_model):
    scripted_model.add(
        call("run_code", code="import time\ntime.sleep(30)", timeout_s=1),
        call("run_code", code="import asyncio\nawait asyncio.sleep(30)", timeout_s=1),
        say("Both timed out."),
    )
    result = kernel.ok("%agent be slow", timeout=30)
    assert result.seconds < 20  # each code alone would run 30 s
    sync_result, async_result = (
        scripted_model.requests[1]["messages"][-1]["content"][0]["content"],
        scripted_model.requests[2]["messages"][-1]["content"][0]["content"],
    )
    for outcome in (sync_result, async_result):
        assert '"success": false' in outcome
        assert '"type": "TimeoutError"' in outcome and "time limit of 1 s" in outcome
    assert "Both timed out." in result.final_texts()


def test_interrupt_during_a_reply_with_text_and_tool(kernel, scripted_model):
    answer = reply(text("Working on it."), *call("run_code", code=LONG_SYNC).content)
    scripted_model.add(answer)
    result, _ = stopped_turn(kernel, "%agent go", printed("started"), interrupt)
    assert [e["evalue"] for e in result.errors] == ["■ Interrupted."]
    assert_valid_after_stop(kernel, scripted_model, tool_id(answer))


def test_a_far_deadline_leaves_the_watchdog_working_for_the_next_limit():
    import asyncio

    import pytest

    from agent_kernel.kernel.interrupts import TurnInterrupts

    async def turn() -> float:
        with TurnInterrupts() as interrupts:
            for bad in (float("nan"), float("inf"), 0.0, -1.0):
                with pytest.raises(ValueError, match="positive finite number"):
                    await interrupts.run_code(asyncio.sleep(0), bad)
            # Beyond what a condition wait accepts (threading.TIMEOUT_MAX): must not kill the watchdog.
            assert await interrupts.run_code(asyncio.sleep(0.05, "quick"), 1e12) == "quick"
            started = time.perf_counter()
            with pytest.raises(asyncio.CancelledError):
                await interrupts.run_code(asyncio.sleep(30), 0.5)
            assert interrupts.timed_out and interrupts.reason is None
            return time.perf_counter() - started

    assert asyncio.run(turn()) < 2


def test_an_interrupt_as_a_phase_starts_stops_it():
    import asyncio
    import signal

    from agent_kernel.kernel.interrupts import TurnInterrupted, TurnInterrupts

    class InterruptingLoop(asyncio.SelectorEventLoop):
        """Raises SIGINT while a task is being made (its first step scheduled), once armed:
        inside ``phase`` after its check for a stop, before it holds the task."""

        armed = False

        def call_soon(self, *args, **kwargs):
            if self.armed:
                self.armed = False
                signal.raise_signal(signal.SIGINT)
            return super().call_soon(*args, **kwargs)

    async def turn() -> float:
        with TurnInterrupts() as interrupts:
            loop.armed = True
            started = time.perf_counter()
            try:
                await interrupts.phase(asyncio.sleep(10))
            except TurnInterrupted as stop:
                assert stop.reason == "interrupt" and not loop.armed
            return time.perf_counter() - started

    loop = InterruptingLoop()
    try:
        assert loop.run_until_complete(turn()) < 2
    finally:
        loop.close()


def test_a_time_limit_stops_code_that_took_sigint_for_itself(tmp_path):
    """Code that ignores SIGINT is stopped by CodeTimeout raised in it directly, after a grace
    period; the turn's handler is put back for the rest of the turn."""
    import signal

    from agent_kernel.kernel.interrupts import _STOP_GRACE_S
    from tests.support.inprocess import in_process

    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    before = signal.getsignal(signal.SIGINT)
    with in_process(tmp_path) as caller:
        started = time.perf_counter()
        first, after = caller.calls(
            ("run_code", {"code": code, "timeout_s": 0.5}),
            ("run_code", {"code": "import signal\nsignal.getsignal(signal.SIGINT).__name__"}),
        )
        seconds = time.perf_counter() - started
    stopped = json.loads(first.content)
    assert stopped["error"]["type"] == "TimeoutError" and "time limit of 0.5 s" in stopped["error"]["message"]
    assert seconds < 0.5 + _STOP_GRACE_S + 3
    assert json.loads(after.content)["result"] == "'_on_sigint'"  # the turn's handler, back
    assert signal.getsignal(signal.SIGINT) == before  # and the one before the turn after it
