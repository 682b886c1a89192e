"""The layout in docs/contributing.md, made from the modules' docstrings (docs/_ext/module_layout.py):
the line each module gets, and a docstring for every module it lists.

The docs build (``make docs-check``) fails on a module without a docstring; this finds
the same module in a second, without building the site.
"""

from __future__ import annotations

import sys
from pathlib import Path

from docutils import nodes

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import module_layout  # noqa: E402 - docs/_ext is not a package


def test_a_module_gets_the_first_sentence_of_its_first_paragraph():
    wrapped = "``agent-kernel demo``: run a notebook\nheadless, as ``make demo`` does. More.\n\nDetails."
    assert module_layout.summary(wrapped) == "``agent-kernel demo``: run a notebook headless, as ``make demo`` does."
    question = "Why did a run fail? One bounded side call to the small model.\n\nMore."
    assert module_layout.summary(question) == "Why did a run fail? One bounded side call to the small model."
    assert module_layout.summary("Version 1.2 of the file format.") == "Version 1.2 of the file format."


def test_code_and_cross_references_show_as_code():
    shown = module_layout.inline_nodes("A :class:`~agent_kernel.display.Table`, ``x = 1``, `jobs` and *Send*.")
    assert [(type(n).__name__, n.astext()) for n in shown] == [
        ("Text", "A "),
        ("literal", "Table"),
        ("Text", ", "),
        ("literal", "x = 1"),
        ("Text", ", "),
        ("literal", "jobs"),
        ("Text", " and "),
        ("emphasis", "Send"),
        ("Text", "."),
    ]
    assert module_layout.role_text("the guard <agent_kernel.sql.guard>") == "the guard"
    assert isinstance(module_layout.inline_nodes("no markup")[0], nodes.Text)


def test_every_listed_module_has_a_docstring():
    package = [p for p in (ROOT / "agent_kernel").rglob("*.py") if module_layout.is_package(p.parent)]
    tests = [
        p
        for p in (ROOT / "tests").rglob("*.py")
        if p.name != "__init__.py" and p != ROOT / "tests" / "conftest.py" and "artifacts" not in p.parts
    ]
    missing = [str(p.relative_to(ROOT)) for p in package + tests if not module_layout.docstring_of(p)]
    assert missing == [], f"modules without a docstring (docs/contributing.md lists each by it): {missing}"
