"""run_code and inspect_namespace, called by the scripted model in a real kernel."""

from __future__ import annotations

import json

from agent_kernel.testing import call, reply, say, tool_use
from tests.support.calls import result_text, tool_results
from tests.support.capabilities import needs_widget_replies
from tests.support.frontend import FrontEnd


def run_tools(kernel, scripted_model, *calls, prompt="go"):
    """Script the calls, run one turn, return the decoded tool results in order."""
    scripted_model.add(*calls, say("done"))
    execution = kernel.execute(f"%agent {prompt}")
    assert execution.status == "ok"
    results = []
    for request in scripted_model.requests[-len(calls) :]:
        block = request["messages"][-1]["content"][0]
        results.append(json.loads(block["content"]) if not block.get("is_error") else block)
    return results, execution


def test_run_code_returns_outputs_and_shows_them_in_the_cell(kernel, scripted_model):
    code = "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\nvalue = {'a': 1}\nvalue"
    [result], execution = run_tools(kernel, scripted_model, call("run_code", code=code))
    assert result["success"] is True
    assert result["stdout"] == "to stdout\n" and result["stderr"] == "to stderr\n"
    assert result["result"] == "{'a': 1}"
    assert result["duration_ms"] > 0 and len(result["execution_id"]) == 12
    assert "to stdout" in execution.stdout and "to stderr" in execution.stderr
    assert "{'a': 1}" in execution.texts()  # the value is displayed as a cell result would be
    assert kernel.value("value") == {"a": 1}


def test_run_code_error_is_bounded_and_plain(kernel, scripted_model):
    code = "def inner():\n    raise ValueError('\\x1b[31mbad value\\x1b[0m')\ninner()"
    [result], execution = run_tools(kernel, scripted_model, call("run_code", code=code))
    assert result["success"] is False
    assert result["error"]["type"] == "ValueError" and result["error"]["message"] == "bad value"
    trace = result["error"]["traceback"]
    assert "inner()" in trace and "\x1b[" not in trace and "site-packages" not in trace
    # The user sees it too, on stderr: not as an error output, which would fail a papermill run.
    assert execution.errors == [] and "ValueError" in execution.stderr and "inner()" in execution.stderr
    assert "agent_kernel" not in execution.stderr


def test_run_code_output_is_capped(kernel, scripted_model):
    [result], _ = run_tools(kernel, scripted_model, call("run_code", code="print('x' * 50_000)\n'y' * 10_000"))
    assert len(result["stdout"]) < 9_000 and "characters omitted" in result["stdout"]
    assert len(result["result"]) < 2_100


def test_run_code_syntax_error_and_ipython_syntax(kernel, scripted_model):
    results, _ = run_tools(
        kernel,
        scripted_model,
        call("run_code", code="def broken(:\n    pass"),
        call("run_code", code="%time total = sum(range(10))\ntotal"),
    )
    assert results[0]["success"] is False and results[0]["error"]["type"] == "SyntaxError"
    assert results[1]["success"] is True and results[1]["result"] == "45"


def test_isolated_run_has_no_access_to_the_kernel_or_secrets(kernel, scripted_model):
    kernel.ok("secret_in_kernel = 1")
    code = (
        "import os\n"
        "print(sorted(k for k in os.environ if 'ANTHROPIC' in k or 'AGENT_KERNEL' in k))\n"
        "print('secret_in_kernel' in globals())\n"
        "6 * 7"
    )
    results, _ = run_tools(
        kernel,
        scripted_model,
        call("run_code", code=code, isolated=True),
        call("run_code", code="import time\ntime.sleep(30)", isolated=True, timeout_s=1),
        call("run_code", code="raise KeyError('nope')", isolated=True),
    )
    ok, slow, failing = results
    assert ok["success"] is True and ok["stdout"] == "[]\nFalse\n" and ok["result"] == "42"
    assert slow["success"] is False and slow["error"]["type"] == "TimeoutError"
    assert failing["success"] is False and failing["error"]["type"] == "KeyError"
    assert "nope" in failing["error"]["message"]


def test_inspect_namespace_summarises_without_copying(kernel, scripted_model):
    kernel.ok(
        "import pandas as pd\n"
        "df = pd.DataFrame({'city': ['Oslo', 'Rome', None] * 1000, 'temp': range(3000)})\n"
        "_private = 1\n"
        "class Described:\n"
        "    def _repr_llm_(self):\n"
        "        return 'a described object'\n"
        "thing = Described()\n"
        "def helper(x: int) -> int:\n"
        "    '''Double x.'''\n"
        "    return 2 * x\n"
    )
    results, _ = run_tools(
        kernel,
        scripted_model,
        call("inspect_namespace"),
        call("inspect_namespace", names=["df", "missing"]),
    )
    everything = {v["name"]: v for v in results[0]["variables"]}
    assert "_private" not in everything and "pd" not in everything
    assert everything["thing"]["summary"] == "a described object"
    assert everything["helper"]["summary"] == "helper(x: int) -> int - Double x."
    df, missing = results[1]["variables"]
    assert df["shape"] == [3000, 2]
    assert [c["name"] for c in df["columns"]] == ["city", "temp"]
    assert df["columns"][0]["samples"] == ["'Oslo'", "'Rome'", "'Oslo'"]
    assert len(json.dumps(df)) < 1_000
    assert missing == {"name": "missing", "type": "undefined", "summary": "not defined in the kernel"}


def test_extreme_and_non_finite_timeouts_are_refused_and_later_limits_still_hold(kernel, scripted_model, agent_db):
    scripted_model.add(
        call("run_code", code="1", timeout_s=1e308),
        call("run_code", code="1", timeout_s="nan"),
        call("run_code", code="1", timeout_s="inf"),
        call("run_code", code="1", timeout_s=-1),
        call("run_code", code="ran_long_limit = True", timeout_s=3600),
        call("run_code", code="while True: pass", timeout_s=2),
        say("done"),
    )
    execution = kernel.ok("%agent go", timeout=60)
    results = [r["messages"][-1]["content"][0] for r in scripted_model.requests[1:]]
    for refused, why in zip(
        results[:4], ["less than or equal to 3600", "finite number", "finite number", "greater than 0"]
    ):
        assert refused["is_error"] and "timeout_s" in refused["content"] and why in refused["content"]
    assert kernel.value("ran_long_limit") is True
    looped = json.loads(results[5]["content"])
    assert looped["error"]["type"] == "TimeoutError" and 1.9 < looped["duration_ms"] / 1000 < 4
    # Nobody stopped the turn: it ran to the model's last reply, with no stop recorded.
    assert len(scripted_model.requests) == 7
    assert not any("stopped the turn" in str(b.get("content")) for b in results)
    assert not any("Interrupted" in t or "Stopped" in t for t in execution.final_texts())
    from agent_kernel.store import Store

    with Store(agent_db).connect() as con:
        assert con.execute("SELECT state, last_error FROM sessions").fetchall() == [("idle", None)]


# -- what the cell shows is bounded, and printing much costs the kernel little -------------------

MB = 1024 * 1024
# Kernel memory one run_code call may add beyond what the code itself allocates, however
# much it prints (the README's stated bound).
PRINT_OVERHEAD_BYTES = 64 * MB


class PeakMemory:
    """The kernel process's resident memory, sampled with psutil while a cell runs, and the
    kernel's own high-water mark (Linux's ``VmHWM``, which no sampling can miss), reset
    before each cell so an earlier test's peak in the same kernel does not count."""

    def __init__(self, kernel) -> None:
        import psutil

        self.kernel = kernel
        kernel.ok("import os as _os")
        self.process = psutil.Process(kernel.value("_os.getpid()"))
        self.proc = f"/proc/{self.process.pid}"

    def during(self, code: str) -> tuple[int, int, object]:
        """Run ``code``; return (sampled peak growth, high-water growth, execution), in bytes
        over the resident memory before it ran."""
        import threading
        import time

        with open(f"{self.proc}/clear_refs", "w") as reset:
            reset.write("5")  # resets the process's VmHWM to its current resident size
        before = self.process.memory_info().rss
        peak, done = [before], threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], self.process.memory_info().rss)
                time.sleep(0.005)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            execution = self.kernel.execute(code, timeout=120)
        finally:
            done.set()
            sampler.join()
        return peak[0] - before, self._high_water() - before, execution

    def _high_water(self) -> int:
        with open(f"{self.proc}/status") as status:
            [line] = [line for line in status if line.startswith("VmHWM:")]
        return int(line.split()[1]) * 1024  # kB


def test_printing_a_gigabyte_shows_a_bounded_head_and_keeps_kernel_memory_bounded(kernel, scripted_model):
    from agent_kernel.tools.code import CELL_OUTPUT_CHARS

    run_tools(kernel, scripted_model, call("run_code", code="print('warm')"))  # the agent loaded first
    memory = PeakMemory(kernel)
    many_lines = "for _ in range(1000):\n    print('x' * 1_000_000)"
    scripted_model.add(call("run_code", code=many_lines), say("done"))
    grown, high_water, execution = memory.during("%agent print a lot")
    print(f"1000 x 1 MB lines: sampled {grown / MB:.0f} MB, high water {high_water / MB:.0f} MB")
    assert execution.status == "ok"
    shown = execution.stdout
    assert CELL_OUTPUT_CHARS <= len(shown) < CELL_OUTPUT_CHARS + 1_000
    assert "[run_code: 998,001,000 more characters of output were left out of this cell" in shown
    assert "the values the code made are still in the kernel" in shown
    result = json.loads(scripted_model.requests[-1]["messages"][-1]["content"][0]["content"])
    assert len(result["stdout"]) < 9_000 and "characters omitted" in result["stdout"]
    assert grown < PRINT_OVERHEAD_BYTES and high_water < PRINT_OVERHEAD_BYTES

    one_string = "big = 'x' * 10**9\nprint(big)"
    scripted_model.add(call("run_code", code=one_string), say("done"))
    grown, high_water, execution = memory.during("%agent print one gigabyte")
    print(f"one 1 GB string: sampled {grown / MB:.0f} MB, high water {high_water / MB:.0f} MB")
    assert execution.status == "ok"
    assert CELL_OUTPUT_CHARS <= len(execution.stdout) < CELL_OUTPUT_CHARS + 1_000
    assert "[run_code: 998,000,001 more characters" in execution.stdout
    the_string = 10**9
    assert grown < the_string + PRINT_OVERHEAD_BYTES and high_water < the_string + PRINT_OVERHEAD_BYTES
    assert kernel.value("len(big)") == 10**9  # the value itself stays in the kernel

    flood = "while True:\n    print(big[:1_000_000])"
    [result], execution = run_tools(kernel, scripted_model, call("run_code", code=flood, timeout_s=1))
    assert result["error"]["type"] == "TimeoutError"
    assert CELL_OUTPUT_CHARS <= len(execution.stdout) < CELL_OUTPUT_CHARS + 1_000
    assert "more characters of output were left out of this cell" in execution.stdout
    assert "run_code was stopped after its time limit (1 s)." in execution.stderr  # shown all the same

    scripted_model.add(call("run_code", code="big"), say("done"))  # shown as the cell's result
    grown, _, execution = memory.during("%agent show it")
    print(f"the 1 GB string as the result: sampled {grown / MB:.0f} MB")
    [shown] = [text for text in execution.texts() if "xxxx" in text]
    assert len(shown) < CELL_OUTPUT_CHARS + 1_000 and shown.startswith("'xxxx")
    assert shown.endswith("[run_code: the value (str) was cut here to fit the cell; all of it is still in the kernel.]")
    result = json.loads(scripted_model.requests[-1]["messages"][-1]["content"][0]["content"])
    assert len(result["result"]) < 2_100 and "characters omitted" in result["result"]
    assert grown < PRINT_OVERHEAD_BYTES


def test_a_huge_error_message_is_bounded_in_the_cell_and_for_the_model(kernel, scripted_model):
    from agent_kernel.tools.code import CELL_TRACEBACK_CHARS

    code = "def fail():\n    raise ValueError('start ' + 'm' * 100_000_000 + ' end')\nfail()"
    [result], execution = run_tools(kernel, scripted_model, call("run_code", code=code))
    assert result["success"] is False and result["error"]["type"] == "ValueError"
    message, trace = result["error"]["message"], result["error"]["traceback"]
    assert len(message) < 2_100 and message.startswith("start mmm") and message.endswith("mmm end")
    assert len(trace) < 4_100 and trace.endswith("mmm end\n")
    assert len(execution.stderr) < CELL_TRACEBACK_CHARS + 1_000
    assert "fail()" in execution.stderr
    assert "characters of this traceback left out of the cell" in execution.stderr
    assert execution.stderr.rstrip().endswith("mmm end")


def test_the_models_copy_of_a_long_stream_keeps_its_redacted_ends(monkeypatch):
    from agent_kernel.secrets import Secrets
    from agent_kernel.tools.code import KEPT_CHARS, STREAM_CHARS, _Ends

    monkeypatch.setenv("AK_TEST_STREAM_KEY", "sk-stream-0123456789")  # removed again afterwards
    secrets = Secrets()
    secrets.set("AK_TEST_STREAM_KEY", "sk-stream-0123456789")
    ends = _Ends()
    ends.write("sk-stream-0123456789 first line\n")
    for _ in range(10_000):
        ends.write("y" * 99 + "\n")
    ends.write("last line sk-stream-0123456789")
    assert ends.total == 32 + 1_000_000 + 30
    kept = ends.bounded(STREAM_CHARS)
    assert kept.startswith("[secret AK_TEST_STREAM_KEY] first line")
    assert kept.endswith("last line [secret AK_TEST_STREAM_KEY]")
    assert "characters omitted" in kept and len(kept) < STREAM_CHARS + 100
    assert "sk-stream" not in ends.bounded(STREAM_CHARS, keep_head=False)
    short = _Ends()
    short.write("a" * KEPT_CHARS)
    short.write("b" * 10)
    assert short.whole() == "a" * KEPT_CHARS + "b" * 10  # up to twice KEPT_CHARS, all of it is kept
    del secrets


def test_the_agents_code_cannot_end_the_kernel_or_break_its_streams(tmp_path):
    """exit(), quit() and ask_exit() would stop ipykernel's event loop, closing stdout would
    close the cell's stream for good, a lone surrogate would fail the output message."""
    import sys

    from tests.support.inprocess import in_process

    with in_process(tmp_path) as caller:
        stdout = sys.stdout
        for code in ("exit()", "quit()", "get_ipython().ask_exit()"):
            error = caller.value("run_code", {"code": code})["error"]
            assert error["type"] == "KernelExitRefused" and "keeps running" in error["message"]
        assert not caller.shell.exit_now and "ask_exit" not in vars(caller.shell)
        assert caller.value("run_code", {"code": "import sys; sys.stdout.close()"})["success"]
        assert sys.stdout is stdout and not stdout.closed
        printed = caller.value("run_code", {"code": "print('a\\ud800b')"})
        assert printed["success"] and printed["stdout"].startswith("a")


def test_threads_printing_while_calls_end_do_not_crash_the_kernel(kernel, scripted_model):
    """Each call swaps the kernel's streams for its own and back; a thread the code started
    prints through whichever is current, the call's tee too after the call has ended."""
    start = (
        "import threading\n"
        "done = threading.Event()\n"
        "def chatter():\n"
        "    while not done.is_set():\n"
        "        print('tick', 'from', 'a', 'thread', end='')\n"
        "threads = [threading.Thread(target=chatter, daemon=True) for _ in range(2)]\n"
        "for thread in threads:\n"
        "    thread.start()"
    )
    uses = [tool_use("run_code", {"code": start})] + [tool_use("run_code", {"code": f"n = {i}"}) for i in range(60)]
    scripted_model.add(reply(*uses), say("done"))
    assert kernel.execute("%agent go").status == "ok"
    results = tool_results(scripted_model.requests[-1])
    assert len(results) == 61 and all(json.loads(result_text(r))["success"] for r in results)
    kernel.ok("done.set()\nfor thread in threads:\n    thread.join()")
    assert kernel.value("n") == 59


# -- the code runs as the model sent it; redaction is for what is shown and kept ----------

CREDENTIAL_URL = "https://alice:pw@example.org/data.csv"
GITHUB_TOKEN = "ghp_" + "Xa81Lq2Nw7Vc3Zt6Hy5Km0Bd4Rf9Gs1Jp2Ue"
LITERALS_CODE = f"url = {CREDENTIAL_URL!r}\ntoken = {GITHUB_TOKEN!r}\nprint(len(url), len(token))"


def test_credential_shaped_literals_run_as_sent_and_stay_redacted_for_the_model_store_and_screen(
    kernel, scripted_model, agent_db
):
    from tests.support import leaks

    [result], execution = run_tools(kernel, scripted_model, call("run_code", code=LITERALS_CODE))
    assert result["success"] is True and result["stdout"] == "37 40\n"
    assert kernel.value("(len(url), url)") == (37, CREDENTIAL_URL)
    assert kernel.value("(len(token), token)") == (40, GITHUB_TOKEN)
    # What the model is sent back, the store and the cell's tool card keep the redacted form.
    sent = scripted_model.requests[-1]["messages"][-2]["content"][0]["input"]["code"]
    assert "alice:[secret Basic Auth Credentials]@example.org" in sent and "[secret GitHub Token]" in sent
    for value in (GITHUB_TOKEN, "alice:pw@"):
        assert leaks.request_leaks(scripted_model.requests, value) == []
        assert leaks.store_leaks(str(agent_db), value) == []
        assert not [text for text in execution.texts("text/html") + execution.texts() if value in text]
    assert any("[secret GitHub Token]" in text for text in execution.texts("text/html") + execution.texts())


@needs_widget_replies
def test_the_approval_card_shows_the_code_redacted_says_so_and_the_approved_code_runs_as_sent(kernel, scripted_model):
    scripted_model.add(call("run_code", code=LITERALS_CODE), say("done"))
    front = FrontEnd(kernel)
    front.answer["ChoiceCard"] = lambda f, card: f.custom(card, type="choice", choice="run")
    kernel.ok("%agent --approve ask load it", on_message=front.hook)
    [card] = front.of_kind("ChoiceCard")
    shown = json.dumps(card.state)
    assert GITHUB_TOKEN not in shown and "alice:pw@" not in shown
    assert card.state["code"] == (
        "url = 'https://alice:[secret Basic Auth Credentials]@example.org/data.csv'\n"
        "token = '[secret GitHub Token]'\nprint(len(url), len(token))"
    )
    assert "2 values shown redacted here (Basic Auth Credentials, GitHub Token)" in card.state["text"]
    assert "runs with them as the agent wrote them" in card.state["text"]
    assert kernel.value("(len(url), len(token))") == (37, 40) and kernel.value("token") == GITHUB_TOKEN


def test_the_tool_card_shows_the_code_redacted_while_it_streams_in(kernel, scripted_model):
    code = f"token = {GITHUB_TOKEN!r}\n" + "".join(f"step_{n} = {n}\n" for n in range(60))
    streamed = reply(tool_use("run_code", {"code": code}), chunk_delay=0.02)  # about 2 s of deltas
    scripted_model.add(streamed, say("done"))
    execution = kernel.ok("%agent go")
    shown = execution.texts("text/html") + execution.texts()
    assert any("step_" in text and "[secret GitHub Token]" in text for text in shown)
    assert not [text for text in shown if GITHUB_TOKEN in text or GITHUB_TOKEN[:12] in text]
    assert kernel.value("token") == GITHUB_TOKEN


def test_tools_that_show_or_send_their_input_get_it_redacted_only_run_code_gets_it_as_sent(kernel, scripted_model):
    """What a tool shows (a message, a question) is the screen, and fetch_url sends its
    input off the machine: they get the redacted copy, as before; only the code run_code
    runs is the code the model wrote."""
    scripted_model.add(
        reply(
            tool_use("send_message", {"text": f"Your token is {GITHUB_TOKEN}."}),
            tool_use("run_code", {"code": LITERALS_CODE}),
        ),
        say("done"),
    )
    execution = kernel.ok("%agent go")
    shown = execution.texts("text/html") + execution.texts() + [execution.stdout]
    assert any("Your token is [secret GitHub Token]." in text for text in shown), shown
    assert not [text for text in shown if GITHUB_TOKEN in text]
    assert kernel.value("(len(url), len(token))") == (37, 40)
