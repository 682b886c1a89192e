"""Loading the extension: cheap, complete, reversible."""

from __future__ import annotations

import json
import subprocess
import sys

import agent_kernel

CHEAP_LOAD = r"""
import json, sys, time
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
before = set(sys.modules)
started = time.perf_counter()
shell.run_line_magic("load_ext", "agent_kernel")
seconds = time.perf_counter() - started
loaded = set(sys.modules) - before
heavy = sorted(m for m in loaded if m.split(".")[0] in {"anthropic", "duckdb", "httpx2", "ipywidgets", "anywidget", "pandas", "pydantic", "playwright"})
print(json.dumps({"heavy": heavy, "seconds": seconds, "magics": sorted(shell.magics_manager.magics["line"])}))
"""


def test_load_imports_neither_anthropic_nor_duckdb(tmp_path):
    # A fresh interpreter, so nothing was imported by an earlier test.
    env = {"AGENT_KERNEL_DB": str(tmp_path / "never-created.duckdb"), "PATH": ""}
    out = subprocess.run([sys.executable, "-c", CHEAP_LOAD], capture_output=True, text=True, env=env, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["heavy"] == []
    assert {"agent", "agent_sessions", "agent_history"} <= set(report["magics"])
    assert not (tmp_path / "never-created.duckdb").exists()


def test_public_names():
    from agent_kernel import errors, tools
    from agent_kernel.tools import context
    from agent_kernel.turn import loop

    assert sorted(agent_kernel.__all__) == sorted(
        [
            "Agent",
            "ToolContext",
            "TurnResult",
            "load_ipython_extension",
            "tool",
            "unload_ipython_extension",
            *errors.__all__,
        ]
    )
    assert agent_kernel.Agent.__name__ == "Agent"
    assert agent_kernel.tool is tools.tool
    assert agent_kernel.TurnResult is loop.TurnResult
    assert agent_kernel.ToolContext is context.ToolContext
    for name in errors.__all__:
        assert getattr(agent_kernel, name) is getattr(errors, name)
    assert set(agent_kernel.__all__) <= set(dir(agent_kernel))


PUBLIC_IMPORTS = r"""
import json, sys
from agent_kernel import AgentKernelError, TurnFailedError, load_ipython_extension
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {"anthropic", "duckdb", "httpx"})
print(json.dumps({"heavy": heavy, "loop": "agent_kernel.turn.loop" in sys.modules}))
"""


def test_importing_public_names_imports_only_what_they_need():
    out = subprocess.run([sys.executable, "-c", PUBLIC_IMPORTS], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"heavy": [], "loop": False}


def test_config_help_and_lsmagic_in_kernel(kernel):
    kernel.ok("%config AgentKernel.model = 'claude-test-model'")
    assert kernel.value("get_ipython().find_magic('agent').__self__.settings.model") == "claude-test-model"
    listing = kernel.ok("%lsmagic").final_texts()[-1]
    assert "%agent" in listing and "%%agent" in listing
    help_text = kernel.ok("%config AgentKernel").stdout
    assert "AgentKernel.token_limit" in help_text and "AgentKernel.approve" in help_text
    doc = kernel.ok("print(get_ipython().find_magic('agent').__doc__)").stdout
    assert "--new [NAME]" in doc and "--token-limit N" in doc


def test_unload_removes_the_rewrite_and_magics(kernel):
    kernel.ok("%unload_ext agent_kernel")
    assert kernel.value("get_ipython().find_magic('agent_sessions') is None") is True
    assert kernel.value("get_ipython().find_magic('agent_key') is None") is True
    assert (
        kernel.value(
            "any(getattr(f, '__name__', '') == 'rewrite_agent_cells' for f in get_ipython().input_transformers_cleanup)"
        )
        is False
    )
    kernel.ok("%load_ext agent_kernel")
    assert kernel.value("get_ipython().find_magic('agent_sessions') is not None") is True
    assert kernel.value("get_ipython().find_magic('agent_key') is not None") is True


def test_bad_settings_are_refused_with_a_clear_message():
    import pytest
    from traitlets import TraitError

    from agent_kernel.config import AgentKernel

    settings = AgentKernel()
    with pytest.raises(TraitError, match="Unknown timezone 'Mars/Olympus'"):
        settings.timezone = "Mars/Olympus"
    with pytest.raises(TraitError, match="token_limit must be positive"):
        settings.token_limit = 0
    settings.timezone = "Europe/Paris"
    assert settings.timezone == "Europe/Paris"
