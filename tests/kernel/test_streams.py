"""The kernel's output streams during a turn: flushed only when they hold unsent text."""

from __future__ import annotations

import sys
import textwrap

from agent_kernel.kernel.streams import FlushWhenPending, quick_flushes
from agent_kernel.testing import call, say


class _Stream:
    """A stream with ipykernel's pending flags (this process has no kernel streams)."""

    def __init__(self) -> None:
        self._flush_pending = False
        self._subprocess_flush_pending = False
        self.flushes = 0
        self.written: list[str] = []

    def write(self, text: str) -> int:
        self.written.append(text)
        self._flush_pending = True
        return len(text)

    def flush(self) -> None:
        self.flushes += 1
        self._flush_pending = False


def test_flush_reaches_the_stream_only_when_text_waits():
    stream = _Stream()
    wrapped = FlushWhenPending(stream)
    wrapped.flush()
    assert stream.flushes == 0
    wrapped.write("a line\n")
    wrapped.flush()
    wrapped.flush()
    assert stream.flushes == 1 and stream.written == ["a line\n"]
    stream._subprocess_flush_pending = True  # a forked child wrote
    wrapped.flush()
    assert stream.flushes == 2


def test_a_stream_without_the_flags_is_always_flushed():
    class Plain:
        flushes = 0

        def flush(self) -> None:
            self.flushes += 1

    plain = Plain()
    FlushWhenPending(plain).flush()
    assert plain.flushes == 1


def test_streams_that_are_not_the_kernels_are_left_alone():
    before = sys.stdout, sys.stderr
    with quick_flushes():
        assert (sys.stdout, sys.stderr) == before


ORDER = textwrap.dedent(
    """
    from IPython.display import display
    from agent_kernel.kernel.streams import FlushWhenPending, quick_flushes
    import sys
    kernel_stdout = sys.stdout
    with quick_flushes():
        wrapped = sys.stdout
        print("printed first")
        display("displayed second")
        display("displayed third")
        print("printed fourth")
        display("displayed fifth")
    print(isinstance(wrapped, FlushWhenPending), sys.stdout is kernel_stdout)
    with quick_flushes():
        assert sys.stdout is wrapped  # one wrapper per kernel stream, kept
        replaced = sys.stdout = open("/dev/null", "w")
    print(sys.stdout is replaced)
    sys.stdout = kernel_stdout
    """
)


def test_in_a_kernel_prints_and_displays_keep_their_order(kernel):
    execution = kernel.ok(ORDER)
    seen = []
    for message in execution.messages:
        if message["msg_type"] == "stream":
            seen += [line for line in message["content"]["text"].splitlines() if line]
        elif message["msg_type"] == "display_data":
            seen.append(message["content"]["data"]["text/plain"].strip("'"))
    assert seen[:5] == ["printed first", "displayed second", "displayed third", "printed fourth", "displayed fifth"]
    # The kernel's stream is back after the block, unless the block replaced it.
    assert "True True" in execution.stdout


def test_a_turns_output_keeps_its_order_around_the_code_it_ran(kernel, scripted_model):
    scripted_model.add(
        call("run_code", code="print('from the first call')"),
        call("run_code", code="print('from the second call')"),
        say("Both ran."),
    )
    execution = kernel.ok("%agent run two snippets")
    order = []
    for message in execution.messages:
        if message["msg_type"] == "stream" and "from the" in message["content"]["text"]:
            order.append(message["content"]["text"].strip())
        elif message["msg_type"] == "display_data" and "run_code" in str(
            message["content"]["data"].get("text/plain", "")
        ):
            order.append("card")
    assert order == ["card", "from the first call", "card", "from the second call"]
    assert "sys.stdout" not in execution.stderr
