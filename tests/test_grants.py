"""Standing grants: what they accept, how they compare hosts, and what a run's kernel reads
from ``AGENT_KERNEL_GRANTS`` (nothing when it is unset or malformed)."""

from __future__ import annotations

import json

import pytest

from agent_kernel import grants
from agent_kernel.grants import StandingGrants, of, parse, standing


def test_names_are_normalised_and_compared_as_hosts_compare():
    granted = of(["API.Example.com.", "[::0001]", "127.0.0.1", "intra_net"], ["run_code", "crm__update_record"])
    assert granted.hosts == {"api.example.com", "::1", "127.0.0.1", "intra_net"}
    assert granted.allows_host("api.EXAMPLE.com") and granted.allows_host("api.example.com.")
    assert granted.allows_host("::1") and granted.allows_host("0:0:0:0:0:0:0:1")
    assert not granted.allows_host("evil.api.example.com") and not granted.allows_host("example.com")
    assert not granted.allows_host("api.example.com:443") and not granted.allows_host("")
    assert granted.allows_tool("run_code") and granted.allows_tool("crm__update_record")
    assert not granted.allows_tool("RUN_CODE") and not granted.allows_tool("create_tool")
    assert parse(granted.as_json()) == granted


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("run_code", "grants are an object"),
        ({"hosts": "a.example"}, "grants' hosts is a list of at most 100 names"),
        ({"hosts": ["a.example"] * 101}, "at most 100 names"),
        ({"after_untrusted": [None]}, "names of 1 to 253 characters without spaces, not None"),
        ({"after_untrusted": [""]}, "names of 1 to 253 characters"),
        ({"after_untrusted": ["x" * 254]}, "names of 1 to 253 characters"),
        ({"after_untrusted": ["run code"]}, "without spaces"),
        ({"after_untrusted": ["run_code\n"]}, "names of 1 to 253 characters"),
        ({"after_untrusted": ["run_code;rm"]}, "tool names such as run_code"),
        ({"after_untrusted": ["*"]}, "tool names such as run_code"),
        ({"hosts": ["https://a.example/"]}, "host names such as api.example.com (no scheme, port or path)"),
        ({"hosts": ["a.example:8443"]}, "no scheme, port or path"),
        ({"hosts": ["*.a.example"]}, "no scheme, port or path"),
        ({"hosts": ["a..example"]}, "host names such as"),
        ({"hosts": ["-a.example"]}, "host names such as"),
        ({"hosts": [".."]}, "host names such as"),
        ({"tools": ["run_code"]}, "grants take hosts and after_untrusted, not tools"),
    ],
)
def test_malformed_grants_are_refused_with_a_sentence(value, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        parse(value)


def test_a_runs_kernel_reads_its_grants_from_the_environment_and_nothing_when_malformed(monkeypatch):
    monkeypatch.delenv(grants.ENV, raising=False)
    assert standing() == StandingGrants() and not standing()
    monkeypatch.setenv(grants.ENV, json.dumps({"hosts": ["a.example"], "after_untrusted": ["run_code"]}))
    assert standing() == of(["a.example"], ["run_code"])
    for malformed in ("{not json", '{"after_untrusted": "run_code"}', '["run_code"]', '{"hosts": ["a b"]}'):
        monkeypatch.setenv(grants.ENV, malformed)
        assert standing() == StandingGrants(), malformed  # a malformed value grants nothing


def test_a_person_reads_them_in_one_line():
    assert StandingGrants().describe() == (
        "no standing grants: after untrusted content, writing actions and new hosts are refused"
    )
    assert of(["b.example", "a.example"], ["run_code"]).describe() == (
        "after untrusted content may: run_code; hosts: a.example, b.example"
    )
    assert of(["a.example"]).describe() == "after untrusted content may: nothing; hosts: a.example"
