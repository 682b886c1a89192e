"""The notebook channel: a real kernel, the extension's comm messages sent as a front end would."""

from __future__ import annotations

import ast
import time
from typing import Any

import pytest

from agent_kernel.kernel import channel
from tests.support.frontend import NotebookChannel

HELLO = {"type": "hello", "protocol": 1, "notebook": "work/analysis.ipynb"}


def inspect(kernel: Any, expression: str, **kwargs: Any) -> Any:
    """``expression`` evaluated in the kernel with the channel module as ``c``."""
    code = f"from agent_kernel.kernel import channel as c\nprint(repr({expression}))"
    return ast.literal_eval(kernel.ok(code, **kwargs).stdout.strip())


def attached(kernel: Any) -> Any:
    return inspect(kernel, "(a := c.attached()) and (a.notebook, a.selected_cell)")


def sync(kernel: Any, front: NotebookChannel) -> None:
    """Let the kernel handle what the front end sent (shell messages are handled in order)."""
    kernel.ok("pass", on_message=front.hook)


def test_a_front_end_attaches_reports_focus_and_detaches(kernel):
    assert attached(kernel) is None
    front = NotebookChannel(kernel)
    front.open(HELLO)
    front.send({"type": "focus", "cell": "c0ffee-1"})
    sync(kernel, front)
    assert front.types() == ["welcome"]
    assert attached(kernel) == ("work/analysis.ipynb", "c0ffee-1")
    front.close()
    sync(kernel, front)
    assert attached(kernel) is None


def test_with_several_front_ends_the_one_that_runs_the_cell_is_attached(kernel):
    mine = NotebookChannel(kernel)
    mine.open(HELLO)
    other = NotebookChannel(kernel, client="another-browser")  # a collaborator, said hello last
    other.open(HELLO)
    sync(kernel, other)
    assert inspect(kernel, "c.attached().comm_id") == mine.comm_id  # this client runs the cell
    mine.close()
    sync(kernel, other)
    assert inspect(kernel, "c.attached().comm_id") == other.comm_id  # else the latest hello


def test_hostile_messages_are_refused_and_change_nothing(kernel):
    liar = NotebookChannel(kernel)
    liar.open({"type": "focus", "cell": "x"})  # no hello first
    front = NotebookChannel(kernel)
    front.open(HELLO)
    hostile: list[Any] = [
        "not an object",
        {"type": "run_cell", "code": "import os; os.remove('x')"},  # not a message type of ours
        {"type": "focus", "cell": "../../etc"},
        {"type": "focus", "cell": "a" * 65},
        {"type": "focus", "cell": 7},
        {"type": "focus", "cell": "ok", "pad": "x" * (channel.MAX_MESSAGE_BYTES + 1)},
        {"type": "hello", "protocol": 1, "notebook": "other.ipynb"},  # hello only opens
    ]
    for data in hostile:
        front.send(data)
    kernel.ok("pass", on_message=lambda m, k: (liar.hook(m), front.hook(m)))
    assert liar.closed_by_kernel and [m["type"] for m in liar.received] == ["refused"]
    assert front.types() == ["welcome"] + ["refused"] * len(hostile)
    assert all(m["reason"] for m in front.received[1:])
    assert attached(kernel) == ("work/analysis.ipynb", None)
    assert inspect(kernel, "c._CHANNEL.refused") == len(hostile) + 1
    assert inspect(kernel, "len(c._CHANNEL.attachments)") == 1
    assert liar.comm_id not in inspect(kernel, "list(c._CHANNEL._comms)")


def test_the_running_cell_is_the_one_the_request_names(kernel):
    assert isinstance(inspect(kernel, "c.running_cell()"), str)  # JupyterLab sends cellId
    assert inspect(kernel, "c.running_cell()", notebook=False) is None  # jupyter console does not


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        {"type": None},
        {"type": "hello", "protocol": 2, "notebook": "a.ipynb"},
        {"type": "hello", "protocol": 1, "notebook": "a.py"},
        {"type": "hello", "protocol": 1, "notebook": "a\x00.ipynb"},
        {"type": "hello", "protocol": 1, "notebook": "a" * 2000 + ".ipynb"},
        {"type": "hello", "protocol": 1, "notebook": {"path": "a.ipynb"}},
        {"type": "hello", "protocol": 1, "notebook": "a.ipynb", "root": "relative/root"},
        {"type": "hello", "protocol": 1, "notebook": "a.ipynb", "root": "/srv\x00"},
        {"type": "hello", "protocol": 1, "notebook": "a.ipynb", "root": ""},
        {"type": "moved", "notebook": "b.ipynb"},
        {"type": "moved", "notebook": "b.py", "old": "a.ipynb"},
        {"type": "moved", "notebook": "b.ipynb", "old": 7},
        {"type": "hello", "protocol": 1, "notebook": "a.ipynb", "document": "not-a-uuid"},
        {"type": "moved", "notebook": "b.ipynb", "old": "a.ipynb", "document": 7},
        {"type": "focus", "cell": float("nan")},
        {"type": "focus", "cell": "ok", "x": object()},
        {"type": "edited", "id": 1, "cell": "ok", "rejected": "yes"},
        {"type": "edited", "id": 1, "error": "x" * 501, "rejected": True},
        {"type": "edited", "id": 1, "cell": "../../etc"},
        {"type": "edited", "id": True, "cell": "ok"},
        {"type": "cells", "id": 1, "cells": [], "collaborators": -1},
        {"type": "cells", "id": 1, "cells": [], "collaborators": True},
        {
            "type": "cells",
            "id": 1,
            "cells": [
                {"id": "a", "cell_type": "code", "source": "", "agent_kernel": {"sources": ["x" * 5000]}},
            ],
        },
    ],
)
def test_check_refuses_what_is_not_a_valid_message(data):
    with pytest.raises(channel.Refused):
        channel.check(data)


def test_check_accepts_the_extension_messages():
    assert channel.check(HELLO) == HELLO
    assert channel.check({"type": "focus", "cell": None})["cell"] is None
    rejected = {"type": "edited", "id": 3, "error": "the person rejected the edit", "rejected": True}
    assert channel.check(rejected) == rejected
    marked = {"session": "s1", "turn": 2, "untrusted": True, "sources": ["web_fetch https://evil.example/"]}
    cells = {"type": "cells", "id": 4, "collaborators": 2, "cells": [
        {"id": "a", "cell_type": "code", "source": "x = 1", "agent_kernel": marked},
    ]}  # fmt: skip
    assert channel.check(cells) == cells


def test_a_renamed_notebook_is_followed_by_its_absolute_path(kernel, tmp_path):
    front = NotebookChannel(kernel)
    front.open({**HELLO, "root": str(tmp_path)})
    sync(kernel, front)
    assert inspect(kernel, "c.attached().path") == str(tmp_path / "work" / "analysis.ipynb")
    front.send({"type": "moved", "notebook": "done/final.ipynb", "old": "work/analysis.ipynb"})
    sync(kernel, front)
    assert inspect(kernel, "c.attached().path") == str(tmp_path / "done" / "final.ipynb")
    assert front.types() == ["welcome"]
    older = NotebookChannel(kernel)  # an extension that does not say the root
    older.open(HELLO)
    sync(kernel, older)
    assert inspect(kernel, "c.attached().path") is None


def test_check_knows_exactly_the_front_ends_message_types():
    """Every message protocol.py says the front end sends has its checker, and nothing else is accepted."""
    from typing import get_args, get_type_hints

    from agent_kernel.kernel import protocol

    declared = {get_args(get_type_hints(shape)["type"])[0] for shape in get_args(protocol.FrontEndMessage)}
    assert set(channel._CHECKS) == declared
    for kernel_type in ("welcome", "read", "edit", "withdraw", "refused", "kernel"):
        with pytest.raises(channel.Refused, match="unknown message type"):
            channel.check({"type": kernel_type})


def test_the_cell_mark_is_checked_and_anything_odd_reads_as_untrusted():
    from agent_kernel import cellmark

    mark = cellmark.mark("s1", 2, ["web_fetch https://evil.example/a\nsecond line", "b", "c", "d"])
    assert mark == {
        "session": "s1", "turn": 2, "untrusted": True,
        "sources": ["web_fetch https://evil.example/a second line", "b", "c"],
    }  # fmt: skip
    assert cellmark.check(mark) is mark and cellmark.mark("s1", 2) == {"session": "s1", "turn": 2}
    for odd in ({"turn": -1}, {"session": "a b"}, {"untrusted": 1}, {"sources": ["x" * 201]},
                {"sources": ["a", "b", "c", "d"]}, {"cleared": {"by": 1}}, {"extra": 1}, "marked", None):  # fmt: skip
        assert cellmark.untrusted({"agent_kernel": odd}) == ["a malformed agent_kernel mark"], odd
    assert cellmark.untrusted({"agent_kernel": {"session": "s1", "turn": 1, "untrusted": False}}) is None
    assert cellmark.untrusted({}) is None


def test_the_kernel_announces_itself_and_a_front_end_answers_hello(kernel):
    front = NotebookChannel(kernel)
    opened: list[dict[str, Any]] = []

    def watch(message: dict[str, Any], _kernel: Any) -> None:
        content = message["content"]
        if message["msg_type"] == "comm_open" and content.get("target_name") == channel.TARGET:
            opened.append(content)

    kernel.ok("from agent_kernel.kernel import channel as c\nc._CHANNEL.announce()", on_message=watch)
    assert [o["data"] for o in opened] == [{"type": "kernel", "protocol": 1}]
    front.comm_id = opened[0]["comm_id"]
    front.send({"type": "focus", "cell": "abc"})  # before hello: refused
    front.send(HELLO)
    sync(kernel, front)
    assert front.types() == ["refused", "welcome"]
    assert attached(kernel) == ("work/analysis.ipynb", None)


def test_a_notebook_cannot_open_comms_without_bound(kernel):
    fronts = [NotebookChannel(kernel) for _ in range(channel.MAX_COMMS + 3)]
    for front in fronts:
        front.open(HELLO)
    kernel.ok("pass", on_message=lambda m, k: [f.hook(m) for f in fronts])
    refused = [f for f in fronts if f.types() == ["refused"]]
    assert len(refused) == 4  # the kernel announced one comm itself
    assert all(f.closed_by_kernel for f in refused)
    assert inspect(kernel, "len(c._CHANNEL._comms)") == channel.MAX_COMMS


CELLS = [
    {"id": "intro", "cell_type": "markdown", "source": "# Sales", "outputs": []},
    {
        "id": "load",
        "cell_type": "code",
        "source": "df = load()",
        "execution_count": 3,
        "outputs": [],
    },
    {
        "id": "todo",
        "cell_type": "code",
        "source": "df.plot()",
        "execution_count": None,
        "outputs": [],
    },
]
READ = "from agent_kernel.kernel import channel as c\ncells = await c.read_cells(timeout=5)\nprint([x['id'] for x in cells])"


def answering(front: NotebookChannel, answers: list[Any]) -> Any:
    """An iopub hook: the front end answers each ``read`` request with the next of ``answers``."""

    def hook(message: dict[str, Any], _kernel: Any) -> None:
        before = len(front.received)
        front.hook(message)
        for request in front.received[before:]:
            if request.get("type") == "read":
                for answer in answers.pop(0):
                    front.send({**answer, "id": answer.get("id", request["id"])})

    return hook


def test_the_running_cell_reads_the_live_notebook_from_its_front_end(kernel):
    front = NotebookChannel(kernel)
    front.open(HELLO)
    result = kernel.ok(READ, on_message=answering(front, [[{"type": "cells", "cells": CELLS}]]))
    assert result.stdout.strip() == "['intro', 'load', 'todo']"


def test_a_bad_or_foreign_answer_is_refused_and_the_read_times_out(kernel):
    front = NotebookChannel(kernel)
    front.open(HELLO)
    bad = [
        {"type": "cells", "cells": [{**CELLS[0], "cell_type": "script"}]},
        {"type": "cells", "cells": [CELLS[0], CELLS[0]]},  # duplicate ids
        {"type": "cells", "cells": [{**CELLS[1], "source": "x" * (channel.MAX_SOURCE_CHARS + 1)}]},
        {"type": "cells", "cells": CELLS, "id": 999},  # answers nothing asked
        {"type": "cells", "cells": "all of them"},
    ]
    code = READ.replace("print(", "print('read', ") + "\n"
    code = (
        "try:\n"
        + "".join("    " + line + "\n" for line in code.splitlines())
        + "except TimeoutError:\n    print('timed out')"
    )
    code = code.replace("timeout=5", "timeout=2")
    result = kernel.ok(code, on_message=answering(front, [bad]))
    assert result.stdout.strip() == "timed out"
    assert front.types() == ["welcome", "read"] + ["refused"] * len(bad) + [
        "withdraw"
    ]  # the front end drops the request


def test_without_a_front_end_nothing_waits(kernel):
    code = "from agent_kernel.kernel import channel as c\ntry:\n    await c.read_cells(timeout=30)\nexcept LookupError as e:\n    print(e)"
    result = kernel.ok(code)
    assert "no notebook front end" in result.stdout and result.seconds < 5


def test_a_turn_waits_for_the_announced_front_end_once_and_only_in_a_notebook(kernel):
    code = "import time\nt = time.monotonic()\nawait c.settle(3)\nprint(round(time.monotonic() - t, 1))"
    assert inspect(kernel, "c._CHANNEL.announced is not None")
    assert float(kernel.ok("from agent_kernel.kernel import channel as c\n" + code, notebook=False).stdout) < 0.5
    kernel.ok("c._CHANNEL.announce()")
    assert float(kernel.ok(code).stdout) >= 2.5  # nobody answered: waited (until 3 s after), once
    assert float(kernel.ok(code).stdout) < 0.5
    # A turn that starts after the wait would have ended does not wait at all.
    kernel.ok("c._CHANNEL.announce()")
    time.sleep(1)
    assert float(kernel.ok(code.replace("settle(3)", "settle(0.5)")).stdout) < 0.2
