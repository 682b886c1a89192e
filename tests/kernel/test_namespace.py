"""Namespace summaries: compact, bounded, and never a copy of the data."""

from __future__ import annotations

import types

import pandas as pd

from agent_kernel.kernel.namespace import briefing, describe, describe_namespace, unwritable_reason, user_names


def test_user_names_skip_private_modules_and_ipython_names():
    ns = {"a": 1, "_b": 2, "pd": pd, "In": [], "Out": {}, "hidden": 3, "os_mod": types}
    assert user_names(ns, hidden={"hidden"}) == ["a"]


def test_dataframe_summary_is_bounded():
    wide = pd.DataFrame({f"c{i}": range(5) for i in range(100)})
    entry = describe("wide", wide)
    assert entry["shape"] == [5, 100] and len(entry["columns"]) == 40
    assert "first 40 columns" in entry["summary"]
    assert entry["columns"][0] == {"name": "c0", "dtype": "int64", "samples": ["0", "1", "2"]}


def test_a_long_string_or_bytes_is_summarised_from_its_redacted_ends(monkeypatch):
    from agent_kernel.secrets import Secrets

    monkeypatch.setenv("AK_TEST_NAMESPACE_KEY", "sk-namespace-0123456789")  # removed again afterwards
    secrets = Secrets()  # the redactor knows its values while it lives
    secrets.set("AK_TEST_NAMESPACE_KEY", "sk-namespace-0123456789")
    middle = "m" * 5_000_000
    text = "sk-namespace-0123456789" + middle + "sk-namespace-0123456789"
    summary = describe("big", text)["summary"]
    assert summary.startswith("5000046 chars: '[secret AK_TEST_NAMESPACE_KEY]")
    assert summary.endswith("[secret AK_TEST_NAMESPACE_KEY]'") and len(summary) < 200
    raw = text.encode()
    summary = describe("raw", raw)["summary"]
    assert "sk-namespace" not in summary and "[secret AK_TEST_NAMESPACE_KEY]" in summary and len(summary) < 200
    del secrets


def test_broken_repr_does_not_break_the_summary():
    class Broken:
        def __repr__(self):
            raise RuntimeError("no")

    assert describe("b", Broken())["summary"].startswith("<Broken instance at 0x")


def test_briefing_lists_variables_compactly():
    ns = {"sales": pd.DataFrame({"month": ["a"], "revenue": [1.0]}), "rate": 0.2, "names": ["x"] * 1000}
    text = briefing(ns)
    assert "- `sales` (pandas.DataFrame, shape (1, 2)) columns month:" in text
    assert "- `rate` (float): 0.2" in text
    assert "1000 items" in text and len(text) < 600
    many = {f"v{i}": "x" * 200 for i in range(200)}
    assert len(briefing(many, limit=1000)) < 1100
    assert len(describe_namespace(many)) == 60


def test_names_a_tool_may_not_write():
    namespace = {"np": types.ModuleType("numpy"), "df": pd.DataFrame({"a": [1]}), "total": 3}
    for name, says in [
        ("__builtins__", "dunder"),
        ("__x__", "dunder"),
        ("print", "builtin"),
        ("list", "builtin"),
        ("np", "module numpy the user imported"),
        ("get_ipython", "IPython's own"),
        ("Out", "IPython's own"),
        ("1x", "not a Python variable name"),
        ("class", "not a Python variable name"),
    ]:
        assert says in (unwritable_reason(name, namespace) or ""), name
    assert "overwrite_protected_names" in unwritable_reason("np", namespace)
    for name in ("df", "total", "result", "_private"):  # the user's own variables may be replaced
        assert unwritable_reason(name, namespace) is None, name
    # The setting lets a builtin's or a module's name be reused; dunders and IPython's names never.
    assert unwritable_reason("print", namespace, overwrite=True) is None
    assert unwritable_reason("np", namespace, overwrite=True) is None
    assert "dunder" in unwritable_reason("__builtins__", namespace, overwrite=True)
    assert "IPython" in unwritable_reason("get_ipython", namespace, overwrite=True)


def test_variables_update_sends_what_changed_since_the_list_the_conversation_holds():
    from agent_kernel.kernel.namespace import briefing_lines, known_variables, variables_update

    first = variables_update(briefing_lines({"a": 1, "b": "text"}), None)
    assert first.startswith("Variables in the kernel (all of them):") and "`a` (int): 1" in first
    known = known_variables([first])
    assert (
        variables_update(briefing_lines({"a": 1, "b": "text"}), known)
        == "Variables in the kernel: unchanged since the last list."
    )
    changed = variables_update(briefing_lines({"a": 2, "c": [1]}), known)
    assert "`a` (int): 2" in changed and "`c` (list)" in changed and "Removed: `b`" in changed
    assert "`b`" not in changed.split("Removed:")[0]
    assert known_variables([first, changed]) == briefing_lines({"a": 2, "c": [1]})
    assert known_variables(["no list here"]) is None
