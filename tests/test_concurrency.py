"""Two kernels and a script write to one DuckDB file at once: nothing is lost, no lock error shows."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

from agent_kernel.store import Store
from agent_kernel.testing import reply, say, tool_use
from tests.support.kernel import Execution, Kernel

SECONDS = 10.0  # long enough for 3 calls each on a machine the other test workers keep busy

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from agent_kernel.store import Store
    from agent_kernel.store.memories import Memories
    from agent_kernel.store.sessions import Journal, Sessions
    from agent_kernel.store.state import State

    store = Store(sys.argv[1])
    deadline = time.monotonic() + float(sys.argv[2])
    with store.connect() as con:
        session = Sessions(con).create("script", notebook=None)
    journal, n = Journal(session.id, turn=1), 0
    while time.monotonic() < deadline:
        journal.message("user", [{"type": "text", "text": f"script {n}"}])
        with store.connect() as con:
            State(con).set(f"script/{n}", n)
            Memories(con).summarize(f"script summary {n}", summary_type="conversation-summary",
                                    period_key="2025-12-10", chat_id=f"script-{n}")
            journal.write(con)
        n += 1
        time.sleep(0.01)  # a busy script, not one that never lets go of the file
    print(n)
    """
)


def finish(kernel, msg_id, timeout=120):
    """Collect what an execute request sent with ``client.execute`` printed, until it is done."""
    messages, started = [], time.perf_counter()
    while True:
        message = kernel.client.get_iopub_msg(timeout=timeout)
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(message)
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            break
    reply = kernel.client.get_shell_msg(timeout=timeout)
    return Execution(reply["content"]["status"], messages, time.perf_counter() - started)


def prompt_of(body) -> str:
    """The text of this turn's prompt (the last user text)."""
    texts = [
        b["text"] for m in body["messages"] if m["role"] == "user" for b in m["content"] if b.get("type") == "text"
    ]
    return texts[-1]


def results_of(body) -> list[dict]:
    """The tool results of the current turn (after its prompt)."""
    found = []
    for m in body["messages"]:
        if m["role"] == "user" and any(b.get("type") == "text" for b in m["content"]):
            found = []
        elif m["role"] == "user":
            found += [b for b in m["content"] if b.get("type") == "tool_result"]
    return found


def writes(body):
    """Four writes per model call until the writer's time is up, then the end of the turn."""
    text = prompt_of(body)
    if not text.startswith("writer "):
        return say("ready")
    writer, deadline = text.split()[1], float(text.split()[2])
    done = len(results_of(body))
    if time.time() > deadline:
        return say(f"{writer} wrote {done}")
    n = done // 4
    return reply(
        tool_use("set_state", {"key": f"{writer}/{n}/a", "value": {"n": n}}),
        tool_use("set_state", {"key": f"{writer}/{n}/b", "value": [n, writer]}),
        tool_use(
            "memory",
            {
                "action": "store",
                "store": "summaries",
                "summary_type": "conversation-summary",
                "period_key": "2025-12-10",
                "chat_id": f"{writer}-{n}",
                "content": f"{writer} summary {n}",
            },
        ),
        tool_use("memory", {"action": "recall", "query": f"{writer} summary", "limit": 1}),
    )


def test_two_kernels_and_a_script_lose_nothing(scripted_model, agent_db, tmp_path):
    scripted_model.responder = writes
    kernels = {name: Kernel({}, cwd=str(tmp_path)) for name in "AB"}
    executions = {}
    try:
        for k in kernels.values():
            k.ok("%load_ext agent_kernel")
            k.ok("%config AgentKernel.max_model_calls = 1000")  # as many calls as fit in the time
            k.ok("%agent warm up")  # first turn: imports, session, first connection
        deadline = time.time() + SECONDS
        sent = {name: k.client.execute(f"%agent writer {name} {deadline}") for name, k in kernels.items()}
        script = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(agent_db), str(SECONDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, k in kernels.items():
            executions[name] = finish(k, sent[name])
        out, err = script.communicate(timeout=120)
    finally:
        for k in kernels.values():
            k.shutdown()
    assert script.returncode == 0, err
    script_writes = int(out.strip())
    finals = {prompt_of(r).split()[1]: r for r in scripted_model.requests[-2:]}
    with Store(agent_db).connect() as con:
        for name in "AB":
            execution = executions[name]
            assert execution.status == "ok" and not execution.errors
            shown = execution.stdout + execution.stderr + json.dumps(execution.texts())
            assert "lock" not in shown.lower() and "Traceback" not in shown
            last = finals[name]
            results = results_of(last)
            assert results and not [b for b in results if b.get("is_error")], [b for b in results if b.get("is_error")]
            calls = len(results) // 4
            keys = con.execute("SELECT count(*) FROM agent_state WHERE starts_with(key, ?)", [f"{name}/"]).fetchall()
            summaries = con.execute(
                "SELECT count(*) FROM memories WHERE starts_with(chat_id, ?)", [f"{name}-"]
            ).fetchall()
            assert calls >= 3 and keys == [(2 * calls,)] and summaries == [(calls,)]
            session = con.execute(
                "SELECT session_id FROM messages WHERE role = 'user' AND content::VARCHAR LIKE ?", [f"%writer {name} %"]
            ).fetchall()[0][0]
            stored = con.execute("SELECT count(*) FROM messages WHERE session_id = ?", [session]).fetchall()
            assert stored == [(len(last["messages"]) + 1,)]  # every message, and the final answer
        assert script_writes >= 3
        assert con.execute("SELECT count(*) FROM agent_state WHERE starts_with(key, 'script/')").fetchall() == [
            (script_writes,)
        ]
        assert con.execute("SELECT count(*) FROM memories WHERE starts_with(chat_id, 'script-')").fetchall() == [
            (script_writes,)
        ]
        assert con.execute(
            "SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session_id WHERE s.name = 'script'"
        ).fetchall() == [(script_writes,)]
