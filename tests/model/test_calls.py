"""Where agent_kernel.llm's calls go: the turn's caller, else the notebook's, handed down by
model/calls.py (set by the turn around tool calls, by the extension when it loads)."""

from __future__ import annotations

from agent_kernel.model import calls


def test_the_turn_caller_holds_inside_the_block_only():
    outer = calls.Caller(client=object(), settings=object())  # type: ignore[arg-type]
    assert calls.turn_caller() is None
    with calls.calls_through(outer):
        assert calls.turn_caller() is outer
        with calls.calls_through(None):  # a turn whose tools' calls go to the kernel default
            assert calls.turn_caller() is None
        assert calls.turn_caller() is outer
    assert calls.turn_caller() is None


def test_loading_the_extension_makes_the_kernel_agent_the_default_and_unloading_removes_it():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    assert calls.kernel_default() is None
    shell.run_line_magic("load_ext", "agent_kernel")
    try:
        from agent_kernel.magics import agent as magics

        found = calls.kernel_default()
        assert found is not None
        assert found.settings is magics._ACTIVE.settings and found.client is magics._ACTIVE.kernel_agent.model_client
        assert found.record is None and found.limit_reached is None  # outside a turn nothing counts it
    finally:
        shell.run_line_magic("unload_ext", "agent_kernel")
    assert calls.kernel_default() is None
