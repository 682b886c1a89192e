"""The documentation: the settings reference covers every setting, and the README's links lead somewhere.

The site itself is built with warnings as errors by ``make test`` (``make docs-check``),
which checks the links between its pages; the README is not part of the site, so its
relative links are checked here, anchors included, the way GitHub resolves them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from agent_kernel.config import AgentKernel
from agent_kernel.server.app import AgentKernelServer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import traitlets_settings  # noqa: E402 - docs/_ext is not a package

# A Markdown link or image whose target is relative: [text](path#anchor).
LINK = re.compile(r"!?\[[^\]]*\]\((?!https?:|mailto:)([^)\s#]*)(?:#([^)\s]*))?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def github_anchor(heading: str) -> str:
    """The id GitHub (and MyST's heading anchors) give a Markdown heading."""
    text = re.sub(r"[`*_]", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {github_anchor(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+)$", text, re.M)}


def links_of(page: Path) -> list[tuple[str, str]]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [(m.group(1), m.group(2) or "") for m in LINK.finditer(text)]


@pytest.mark.parametrize("cls,own", [(AgentKernel, False), (AgentKernelServer, True)])
def test_every_setting_is_in_the_reference_with_its_help(cls, own):
    listed = [name for name, _ in traitlets_settings.settings_of(cls, own=own)]
    expected = cls.class_own_traits(config=True) if own else cls.class_traits(config=True)
    assert sorted(listed) == sorted(expected)
    undocumented = [name for name, trait in expected.items() if not (trait.help or "").strip()]
    assert undocumented == [], f"settings without a help string: {undocumented}"


def test_the_reference_shows_types_and_the_defaults_of_a_clean_environment(monkeypatch):
    monkeypatch.setenv("AGENT_KERNEL_MODEL", "claude-from-the-environment")
    settings = dict(traitlets_settings.settings_of(AgentKernel))
    defaults = traitlets_settings.defaults_of(AgentKernel, list(settings))
    assert defaults["model"] == "claude-sonnet-5-5"
    assert defaults["token_limit"] == 10_000_000
    assert traitlets_settings.type_of(settings["tool_groups"]) == "list[str]"
    assert traitlets_settings.type_of(settings["approve"]) == "str"
    assert traitlets_settings.choices_of(settings["approve"]) == "``auto``, ``ask``, ``read-only``"


def test_help_text_is_literal_restructuredtext():
    assert traitlets_settings.help_text("names like *_API_KEY, `x`\n  and [a|b]") == (
        r"names like \*\_API\_KEY, \`x\` and \[a\|b\]"
    )


def test_the_readme_is_short_and_its_links_lead_somewhere():
    readme = ROOT / "README.md"
    assert len(readme.read_text(encoding="utf-8").splitlines()) <= 150
    broken = []
    for target, anchor in links_of(readme):
        path = (readme.parent / target).resolve() if target else readme
        if not path.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and path.suffix == ".md" and anchor not in anchors_of(path):
            broken.append(f"{target}#{anchor} (no such heading)")
    assert broken == []
    assert (ROOT / "docs" / "settings.md").exists() and "docs/settings.md" in readme.read_text(encoding="utf-8")


def test_the_link_check_finds_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n## Two words\n\n[ok](#two-words) [bad](missing.md)\n\n```\n[not a link](x.md)\n```\n")
    assert anchors_of(page) == {"a-page", "two-words"}
    assert links_of(page) == [("", "two-words"), ("missing.md", "")]
