"""AgentKernel settings that decide what the model is offered: the master switch and tool groups."""

from __future__ import annotations

import pytest
from traitlets import TraitError

from agent_kernel.config import AgentKernel
from agent_kernel.testing import say
from tests.support.capabilities import needs_sql_guard


@needs_sql_guard
def test_tools_enabled_false_offers_no_tools_at_all(kernel, scripted_model):
    kernel.ok("%config AgentKernel.tools_enabled = False")
    scripted_model.add(say("Just talking."))
    kernel.ok("%agent hello")
    request = scripted_model.requests[-1]
    assert "tools" not in request
    system = request["system"][0]["text"]
    assert "## Your tools" not in system and "## Your database" not in system
    kernel.ok("%config AgentKernel.tools_enabled = True")
    scripted_model.add(say("Tools again."))
    kernel.ok("%agent hello again")
    assert {"run_code", "db_sql", "memory"} <= {t["name"] for t in scripted_model.requests[-1]["tools"]}


@needs_sql_guard
def test_tool_groups_switch_groups_on_and_off(kernel, scripted_model):
    kernel.ok("%config AgentKernel.tool_groups = ['data']")
    scripted_model.add(say("ok"))
    kernel.ok("%agent what can you do?")
    request = scripted_model.requests[-1]
    assert {t["name"] for t in request["tools"]} == {
        "db_sql",
        "db_schema",
        "get_state",
        "set_state",
        "delete_state",
        "list_state_keys",
        "tool_search_tool_bm25",
    }
    assert [t["name"] for t in request["tools"] if not t.get("defer_loading")] == [
        "db_sql",
        "db_schema",
        "tool_search_tool_bm25",
    ]
    assert "## Your database" in request["system"][0]["text"] and "## Your memory" not in request["system"][0]["text"]
    kernel.ok("%config AgentKernel.tool_groups = ['data', 'web2']")  # checked when a turn starts
    bad = kernel.execute("%agent what can you do?")
    assert "UsageError: Unknown tool group 'web2'" in bad.stderr, bad.stderr
    assert "the groups are browser, code, data, llm, mcp, memory" in bad.stderr, bad.stderr


def test_a_group_may_be_named_before_its_tools_exist_and_unknown_ones_stop_the_turn():
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel import Agent, tool
    from agent_kernel.errors import ConfigError
    from agent_kernel.tools import USER_TOOLS

    agent = Agent(shell=InteractiveShell.instance(), tool_groups=["code", "reports"])
    with pytest.raises(ConfigError, match="Unknown tool group 'reports'.*code, data, llm, mcp, memory"):
        agent._offered("auto")

    @tool(group="reports")
    def monthly_report() -> str:
        """The monthly report."""
        return "ok"

    try:
        assert "monthly_report" in {t.name for t in agent._offered("auto")}
    finally:
        USER_TOOLS.remove("monthly_report")


def test_secret_env_takes_names_and_defaults_from_the_environment(monkeypatch):
    from agent_kernel import Agent

    monkeypatch.setenv("AGENT_KERNEL_SECRET_ENV", "SERVICE_TOKEN, DB_PASSWORD")
    assert AgentKernel().secret_env == ["SERVICE_TOKEN", "DB_PASSWORD"]
    with pytest.raises(TraitError, match="'not a name' is not one"):
        AgentKernel().secret_env = ["OK_NAME", "not a name"]
    assert Agent(secret_env=["ONLY_THIS"]).secrets.names() == ["ONLY_THIS"]


def test_the_system_prompt_names_the_secrets_and_never_holds_their_values(monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    from agent_kernel import Agent
    from agent_kernel.secrets import scrub
    from agent_kernel.turn.prompt import assemble

    monkeypatch.setenv("SERVICE_TOKEN", "value-of-the-service-token")
    agent = Agent(secret_env=["SERVICE_TOKEN"], instruction="Use value-of-the-service-token.",
                  shell=InteractiveShell.instance())  # fmt: skip
    monkeypatch.setenv("TYPED_SECRET", "")  # so the value set below leaves with the test
    agent.secrets.set("TYPED_SECRET", "typed-secret-value")
    prompt = assemble(
        [("Instructions from the user", agent.config.instruction)],
        groups=[],
        secrets=agent.secrets.names(),
    )
    assert "`SERVICE_TOKEN`, `TYPED_SECRET`" in prompt and 'os.environ["SERVICE_TOKEN"]' in prompt
    assert "value-of-the-service-token" in prompt  # built raw: the model client scrubs the request
    sent = scrub({"system": prompt})["system"]
    assert "value-of-the-service-token" not in sent and "[secret SERVICE_TOKEN]" in sent


def test_an_instruction_over_its_cap_is_refused():
    from traitlets import TraitError

    from agent_kernel.config import AgentKernel
    from agent_kernel.store.prompts import INSTRUCTIONS_CHARS

    config = AgentKernel()
    config.instruction = "Be brief. " * (INSTRUCTIONS_CHARS // 10)
    with pytest.raises(TraitError, match="over its cap of 20,000"):
        config.instruction = "x" * (INSTRUCTIONS_CHARS + 1)
    assert len(config.instruction) == INSTRUCTIONS_CHARS  # the last good value stays


def test_every_group_but_the_browser_is_on_by_default_behind_tool_search():
    from agent_kernel.config import TOOL_GROUPS

    settings = AgentKernel()
    # mcp is no switch of its own: mcp_servers offers the servers' tools.
    assert settings.tool_groups == [g for g in TOOL_GROUPS if g not in ("browser", "mcp")]
    assert settings.tool_search is True


def test_only_the_person_widens_fetch_allow_or_trusts_an_mcp_server():
    from agent_kernel.authority import turn_running

    settings = AgentKernel(fetch_allow=["127.0.0.1"], mcp_servers={"notes": {"command": "notes"}})
    with turn_running():  # code the model runs inside a turn
        with pytest.raises(TraitError, match="fetch_allow is the person's to widen"):
            settings.fetch_allow = ["127.0.0.1", "10.0.0.0/8"]
        with pytest.raises(TraitError, match="mcp_servers is the person's to widen"):
            settings.mcp_servers = {"notes": {"command": "notes", "trusted": True}}
        with pytest.raises(TraitError, match="mcp_servers is the person's to widen"):
            settings.mcp_servers = {"notes": {"command": "notes"}, "more": {"command": "sh"}}
        settings.fetch_allow = []  # narrowing is always allowed
        settings.mcp_servers = {}
    assert settings.fetch_allow == [] and settings.mcp_servers == {}
    settings.fetch_allow = ["10.0.0.0/8"]  # the person's own cell
    settings.mcp_servers = {"notes": {"command": "notes", "trusted": True}}
    assert settings.mcp_servers["notes"]["trusted"] is True
