"""Who may change trust: the person's events, refused while a turn runs in the process."""

from __future__ import annotations

import asyncio

import pytest

from agent_kernel.authority import PersonEvent, TrustRefused, card_click, inside_turn, person, turn_running


def test_the_persons_event_says_where_it_came_from_in_one_line():
    event = person("magic", "%agent_tainted   --clear\ttool  csv_summary")
    assert event == PersonEvent("magic", "%agent_tainted   --clear\ttool  csv_summary")
    assert event.label() == "magic: %agent_tainted --clear tool csv_summary"
    assert person("cli").label() == "cli"
    assert len(person("server", "x" * 1000).label()) == len("server: ") + 200
    assert card_click("csv_summary", "read_only").label() == "card: read_only on csv_summary"
    for forged in ("card", "kernel", ""):
        with pytest.raises(ValueError, match="via is one of"):
            person(forged, "x")  # type: ignore[arg-type]


def test_no_trust_change_while_a_turn_runs_in_the_process_nor_in_its_tasks():
    assert not inside_turn()

    async def in_turn() -> list[str]:
        refused = []
        with turn_running():
            for via in ("magic", "cli", "server", "panel", "dialog"):
                try:
                    person(via, "clear")  # type: ignore[arg-type]
                except TrustRefused as exc:
                    refused.append(str(exc))
            # A task the turn started (a sub-session) and a thread are inside it too.
            refused.append(await asyncio.create_task(_refused_in_task()))
            refused.append(await asyncio.to_thread(_refused_now))
            card_click("csv_summary", "trust")  # the card the person clicks during a turn
        return refused

    refused = asyncio.run(in_turn())
    assert len(refused) == 7 and all(
        "come from the person, not from code running inside an agent turn" in r for r in refused
    )
    assert not inside_turn() and person("magic", "after").via == "magic"  # the person's own cell, after


async def _refused_in_task() -> str:
    return _refused_now()


def _refused_now() -> str:
    try:
        person("magic", "%agent_tainted --clear-all")
    except TrustRefused as exc:
        return str(exc)
    return "allowed"


def test_a_turn_that_fails_leaves_the_process_outside_a_turn():
    with pytest.raises(RuntimeError), turn_running():
        raise RuntimeError("the turn crashed")
    assert not inside_turn()


def test_a_command_the_turns_code_starts_refuses_too():
    import subprocess
    import sys

    code = "from agent_kernel.authority import person; person('cli', 'agent-kernel jobs enable 1')"
    with turn_running():
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert child.returncode != 0 and "TrustRefused" in child.stderr
    after = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert after.returncode == 0, after.stderr
