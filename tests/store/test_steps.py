"""A session's turns read back as steps and cells: real turns in a real kernel, then the store."""

from __future__ import annotations

from agent_kernel.store import Store
from agent_kernel.store.sessions import Sessions
from agent_kernel.store.steps import session_steps, turn_cells, turn_steps
from agent_kernel.testing import call, reply, say, text, tool_use


def scripted_analysis(kernel, scripted_model) -> None:
    scripted_model.add(
        reply(text("Let me compute."), tool_use("run_code", {"code": "x = 21"})),
        call("run_code", code="1 / 0"),
        call("run_code", code="print('elsewhere')", isolated=True),
        call("run_code", code="y = x * 2\nprint(y)"),
        say("y is **42**."),
        call("run_code", code="z = y + 1"),
        say("z is 43."),
    )
    kernel.ok("%agent compute y")
    kernel.ok("%agent and z")


def only_session(store: Store):
    with store.connect() as con:
        (session,) = Sessions(con).list()
    return session


def test_a_turns_successful_kernel_runs_come_back_in_order_with_prompt_and_answer(kernel, scripted_model, agent_db):
    scripted_analysis(kernel, scripted_model)
    store = Store(agent_db)
    session = only_session(store)
    with store.connect() as con:
        first = turn_steps(con, session.id, 1)
        every = session_steps(con, session.id)
        seqs = con.execute(
            "SELECT seq FROM code_executions WHERE session_id = ? AND turn = 1 ORDER BY seq", [session.id]
        ).fetchall()
        assert turn_steps(con, session.id, 9) is None
    assert first is not None
    assert [s.code for s in first.steps] == ["x = 21", "y = x * 2\nprint(y)"]  # not the failed, not the isolated
    assert first.prompt == "compute y" and first.answer == "y is **42**."
    assert [s[0] for s in seqs] == [1, 2, 3, 4]
    assert [(t.turn, [s.code for s in t.steps]) for t in every] == [
        (1, ["x = 21", "y = x * 2\nprint(y)"]),
        (2, ["z = y + 1"]),
    ]
    cells = turn_cells(first)
    assert [c["cell_type"] for c in cells] == ["markdown", "code", "code"]
    assert cells[0]["source"].startswith(f"**Agent turn 1** (session `{session.name}`)\n\n> compute y\n\ny is **42**.")
    assert all(c["metadata"] == {"agent_kernel": {"session": session.id, "turn": 1}} for c in cells)
