"""Test agent notebooks offline: a scripted model behind ``ANTHROPIC_BASE_URL``.

``ScriptedModel`` is an Anthropic-compatible HTTP server on 127.0.0.1 that answers with
replies you script. The agent and the official SDK run unchanged; only the network
address differs. With pytest, the ``scripted_model`` fixture (installed with this
package) starts one and points ``ANTHROPIC_BASE_URL`` at it::

    from agent_kernel.testing import call, say

    def test_my_notebook(scripted_model):
        scripted_model.add(call("run_code", code="total = 42"), say("The total is 42."))
        ...  # run the notebook with papermill or nbclient
        assert scripted_model.requests[-1]["messages"][-1]["content"][0]["type"] == "tool_result"

Without a kernel, the same script can be served in this process, with no server or
socket: ``http_client`` makes an SDK HTTP client over ``ScriptedModel.transport()``,
and the official SDK still makes every request (streaming, errors, ``count_tokens``;
every request kept in ``requests`` the same way)::

    from agent_kernel import Agent
    from agent_kernel.testing import ScriptedModel, call, say

    def test_my_agent(monkeypatch, tmp_path):
        monkeypatch.setenv("ANTHROPIC_API_KEY", "scripted-test-key")
        model = ScriptedModel([call("run_code", code="x = 41 + 1"), say("x is 42")])
        agent = Agent(http_client=model.http_client, db_path=str(tmp_path / "agent.duckdb"))
        result = agent.run("compute x")  # or: await agent.arun(...) on a running loop
        assert result.text == "x is 42" and agent.shell.user_ns["x"] == 42

Pass the method ``model.http_client`` itself: the agent makes one client per event loop.

When a long session is compacted (``AgentKernel.context_window``), or a session is summarised
for recall (``AgentKernel.summary_idle_minutes``), the agent asks the small model for a summary; the scripted model answers those requests itself, outside the script
(``summary_reply``: the prompts it saw), and keeps them in ``summary_requests`` too. Pass
``summarizer=None`` to script them like any other reply.
"""

from agent_kernel.testing.script import (
    Failure,
    Reply,
    call,
    citation,
    cited,
    document_citation,
    fail,
    pause,
    redacted_thinking,
    reply,
    say,
    search_result,
    server_tool_use,
    signature_for,
    structured,
    text,
    thinking,
    tool_search,
    tool_use,
    web_fetch,
    web_search,
)
from agent_kernel.testing.server import ScriptedModel

__all__ = [
    "Failure", "Reply", "ScriptedModel", "call", "citation", "cited", "document_citation", "fail",
    "pause", "redacted_thinking", "reply", "say", "search_result", "server_tool_use", "signature_for",
    "structured", "text", "thinking", "tool_search", "tool_use", "web_fetch", "web_search",
]  # fmt: skip
