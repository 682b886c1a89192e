"""The Agent panel's secrets row in a kernel: what it is told (names and hosts, never a
value), the person binding a secret from it, and code in a turn that cannot."""

from __future__ import annotations

import json

from agent_kernel.magics.chat import encode
from agent_kernel.testing import call, say

MODULE = "__import__('agent_kernel.magics.panel_secrets', fromlist=['secrets_state'])"
SECRETS = "get_ipython().find_magic('agent_secret').__self__.kernel_agent.secrets"


def bind(payload: object) -> str:
    """The code the panel's Bind button sends."""
    encoded = encode(payload) if isinstance(payload, dict) else payload
    return f"{MODULE}.bind_secret_from_panel({encoded!r})"


def test_the_row_names_the_secrets_and_where_they_go_never_their_values(kernel):
    assert kernel.value(f"{MODULE}.secrets_state().value") == []  # nothing loaded yet: nothing loaded by it
    kernel.ok("%load_ext agent_kernel")
    kernel.execute("%agent_secret TYPED_TOKEN --host api.example.com", answer="typed-value-123456")
    kernel.ok(
        "import os; os.environ['FROM_ENV'] = 'env-value-987654'\n"
        "%config AgentKernel.secret_env = ['FROM_ENV', 'NOT_SET']\n"
        "%config AgentKernel.secret_hosts = {'FROM_ENV': ['Data.Example.org:8443']}"
    )
    state = kernel.execute(f"print({MODULE}.secrets_state())").stdout
    assert "typed-value" not in state and "env-value" not in state
    rows = {row["name"]: row for row in json.loads(state)}
    assert rows["TYPED_TOKEN"] == {
        "name": "TYPED_TOKEN", "source": "typed", "set": True, "hosts": ["api.example.com"], "configured": [],
        "allowed": [], "decided_by": {"api.example.com": "magic: %agent_secret TYPED_TOKEN --host api.example.com"},
    }  # fmt: skip
    assert rows["FROM_ENV"]["hosts"] == ["data.example.org:8443"] and rows["FROM_ENV"]["configured"] == [
        "data.example.org:8443"
    ]
    assert rows["NOT_SET"]["set"] is False and rows["NOT_SET"]["source"] == "environment"


def test_the_person_binds_from_the_panel_and_bad_input_is_a_usage_error(kernel):
    kernel.ok("%load_ext agent_kernel")
    kernel.execute("%agent_secret TYPED_TOKEN", answer="typed-value-123456")
    kernel.ok(bind({"name": "TYPED_TOKEN", "hosts": ["API.example.com.", "127.0.0.2:8443", "api.example.com"]}))
    assert kernel.value(f"{SECRETS}.decided_by('TYPED_TOKEN')") == {
        "api.example.com": "panel: bind TYPED_TOKEN to api.example.com 127.0.0.2:8443",
        "127.0.0.2:8443": "panel: bind TYPED_TOKEN to api.example.com 127.0.0.2:8443",
    }
    assert kernel.value(f"{SECRETS}.destination('TYPED_TOKEN', 'evil.example', 443)[0]") == "elsewhere"
    refused = {
        "not base64": "%%%",
        "a list": encode({"name": "TYPED_TOKEN"}),
        "a path": {"name": "TYPED_TOKEN", "hosts": ["example.com/x"]},
        "a wildcard": {"name": "TYPED_TOKEN", "hosts": ["*.example.com"]},
        "too many": {"name": "TYPED_TOKEN", "hosts": [f"h{i}.example" for i in range(101)]},
        "hosts not a list": {"name": "TYPED_TOKEN", "hosts": "api.example.com"},
        "a bad name": {"name": "1; import os", "hosts": []},
        "undeclared": {"name": "OTHER_TOKEN", "hosts": ["api.example.com"]},
        "extra key": {"name": "TYPED_TOKEN", "hosts": [], "by": "card"},
    }
    for why, payload in refused.items():
        result = kernel.execute(bind(payload))
        assert result.status == "error" and result.stderr.startswith("UsageError: "), why
    assert kernel.value(f"{SECRETS}.destination('TYPED_TOKEN', 'api.example.com', 443)[0]") == "bound"
    # No host: bound to none again, so each host asks.
    kernel.ok(bind({"name": "TYPED_TOKEN", "hosts": []}))
    assert kernel.value(f"{SECRETS}.destination('TYPED_TOKEN', 'api.example.com', 443)[0]") == "unbound"


def test_code_in_a_turn_cannot_bind_through_the_panels_call(kernel, scripted_model):
    kernel.ok("%load_ext agent_kernel")
    kernel.execute("%agent_secret TYPED_TOKEN --host api.example.com", answer="typed-value-123456")
    scripted_model.add(
        call("run_code", code=bind({"name": "TYPED_TOKEN", "hosts": ["evil.example"]})), say("Could not.")
    )
    kernel.ok("%agent send my token to evil.example")
    result = json.loads(scripted_model.requests[1]["messages"][-1]["content"][0]["content"])
    assert result["success"] is False
    assert result["error"]["message"].startswith("Binding a secret is refused here: Trust changes")
    assert kernel.value(f"{SECRETS}.destination('TYPED_TOKEN', 'evil.example', 443)[0]") == "elsewhere"
