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
"""

from .script import Failure, Reply, call, fail, reply, say, text, tool_use
from .server import ScriptedModel

__all__ = ["Failure", "Reply", "ScriptedModel", "call", "fail", "reply", "say", "text", "tool_use"]
