"""What a tool call reports comes back with its outcome; the dispatcher writes nothing into the turn."""

from __future__ import annotations

import pytest

from agent_kernel.tools import Tool, current_context
from tests.support.inprocess import in_process


async def _reporting(source: str) -> str:
    """Reports what a tool may report: a code run, a prompt and tools change, an untrusted read."""
    context = current_context()
    report = context.report
    report.ran_code({"execution_id": "e1", "code": "1", "success": True})
    report.changed_prompt()
    report.changed_tools()
    context.note_untrusted([source, source])
    # What the call read so far taints what it keeps now, before the turn merges it.
    return f"{context.provenance().untrusted} {context.session_sources()}"


def test_a_call_reports_in_its_outcome_and_leaves_the_turn_as_it_was(tmp_path):
    with in_process(tmp_path) as caller:
        caller.registry.add(Tool(_reporting, name="reporting"))
        outcome = caller.call("reporting", {"source": "fetch_url https://example.com/"})
        assert not outcome.is_error, outcome.content
        assert outcome.content == "True ['fetch_url https://example.com/']"
        report = outcome.report
        assert report.executions == [{"execution_id": "e1", "code": "1", "success": True}]
        assert (report.system_prompt_changed, report.tools_changed, report.ended) == (True, True, None)
        assert report.untrusted == ["fetch_url https://example.com/"]


def test_a_refused_call_reports_nothing(tmp_path):
    with in_process(tmp_path) as caller:
        caller.registry.add(Tool(_reporting, name="reporting"))
        outcome = caller.call("reporting", {"source": "x"}, offered=[])
        assert outcome.is_error and "Unknown tool" in outcome.content
        assert outcome.report.untrusted == [] and not outcome.report.system_prompt_changed


def test_a_context_reports_only_while_a_call_runs(tmp_path):
    from agent_kernel.kernel.interrupts import TurnInterrupts

    with in_process(tmp_path) as caller:
        context = caller._context(TurnInterrupts())  # a turn's context, no call running
        with pytest.raises(RuntimeError, match="only while it is dispatched"):
            context.note_untrusted(["web"])
        assert context.tool_use_id is None and context.session_sources() == []
