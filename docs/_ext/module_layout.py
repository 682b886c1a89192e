"""``module-layout`` and ``test-layout``: the source tree listed from the modules' own docstrings.

Both directives work in MyST and reStructuredText pages alike (they build the nodes
themselves). ``.. module-layout:: agent_kernel`` lists every module of the package, grouped
by package, each with the first sentence of its docstring; ``.. test-layout:: tests``
lists the test folder's helpers (support/), then its test modules folder by folder, as they
mirror the package (``<package>/test_<module>.py``). The files are read with :mod:`ast`, never imported, so
the list cannot miss a module and nothing runs while the site is built.

A module without a docstring is a warning, which ``make test`` (``-W``) turns into a
failure: say what the module is for in the module. A test helper that cannot carry a
docstring of its own (``conftest.py``) is described in the directive's content, one
``NAME: text`` line each.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]

# A sentence ends at a full stop and a space before what starts a sentence. A question mark
# does not end one: "Why did a run fail? One bounded call ..." says what the module does.
_SENTENCE_END = re.compile(r"(?<=\.)\s+(?=[A-Z`*\"(])")
# Inline markup the docstrings use: ``literal``, :role:`target`, `literal`, *emphasis*.
_INLINE = re.compile(r"``(?P<literal>.+?)``|:[\w:]+:`(?P<role>[^`]+)`|`(?P<code>[^`]+)`|\*(?P<emphasis>[^*\s][^*]*?)\*")


def summary(docstring: str) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    return _SENTENCE_END.split(paragraph, maxsplit=1)[0]


def docstring_of(path: Path) -> str | None:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))


def role_text(target: str) -> str:
    """What a cross-reference role shows: its title, or its target (``~`` keeps the last part)."""
    titled = re.fullmatch(r"(.*?)\s*<(.+)>", target)
    if titled:
        return titled.group(1)
    return target[1:].rpartition(".")[2] if target.startswith("~") else target.lstrip("!")


def inline_nodes(text: str) -> list[nodes.Node]:
    """Text with its code and emphasis as nodes; cross-references become plain code (they
    would point into internal packages, which the site does not document)."""
    result: list[nodes.Node] = []
    position = 0
    for match in _INLINE.finditer(text):
        if match.start() > position:
            result.append(nodes.Text(text[position : match.start()]))
        if match.group("emphasis") is not None:
            result.append(nodes.emphasis(text=match.group("emphasis")))
        elif match.group("role") is not None:
            result.append(nodes.literal(text=role_text(match.group("role"))))
        else:
            result.append(nodes.literal(text=match.group("literal") or match.group("code")))
        position = match.end()
    if position < len(text):
        result.append(nodes.Text(text[position:]))
    return result


def entry(name: str, text: str | None, children: nodes.bullet_list | None = None) -> nodes.list_item:
    """One list item: ``name`` and, when there is one, its summary."""
    paragraph = nodes.paragraph("", "", nodes.literal(text=name))
    if text:
        paragraph += nodes.Text(": ")
        paragraph.extend(inline_nodes(text))
    item = nodes.list_item("", paragraph)
    if children is not None and children.children:
        item += children
    return item


def is_package(folder: Path) -> bool:
    return (folder / "__init__.py").is_file()


class _Layout(SphinxDirective):
    required_arguments = 1
    has_content = True

    def folder(self) -> Path:
        return ROOT / self.arguments[0]

    def described(self, path: Path, given: dict[str, str]) -> str | None:
        """The module's summary; a warning when it has none."""
        self.env.note_dependency(str(path))
        docstring = docstring_of(path)
        if docstring:
            return summary(docstring)
        if path.name in given:
            return given[path.name]
        logger.warning(
            "%s has no docstring: say what the module is for in its first line",
            path.relative_to(ROOT),
            location=self.get_location(),
        )
        return None

    def given_descriptions(self) -> dict[str, str]:
        """``NAME: text`` lines of the directive's content."""
        given = {}
        for line in self.content:
            name, sep, text = line.partition(":")
            if sep:
                given[name.strip()] = text.strip()
        return given

    def run(self) -> list[nodes.Node]:
        folder = self.folder()
        if not folder.is_dir():
            logger.warning("%s is not a folder", self.arguments[0], location=self.get_location())
            return []
        self.env.metadata[self.env.docname]["module_layout"] = True
        return [self.listing(folder, self.given_descriptions())]

    def listing(self, folder: Path, given: dict[str, str]) -> nodes.Node:
        raise NotImplementedError


class ModuleLayout(_Layout):
    """``.. module-layout:: PACKAGE``: every module of the package, package by package."""

    def listing(self, folder: Path, given: dict[str, str]) -> nodes.Node:
        outer = nodes.bullet_list()
        outer += entry(f"{folder.name}/", None, self.package(folder, given, top=True))
        return outer

    def package(self, folder: Path, given: dict[str, str], *, top: bool = False) -> nodes.bullet_list:
        """The package's modules, then its subpackages (a subpackage's ``__init__.py`` is
        the summary on its own line; the top package lists it like any module)."""
        listing = nodes.bullet_list()
        for path in sorted(folder.glob("*.py")):
            if top or path.name != "__init__.py":
                listing += entry(path.name, self.described(path, given))
        for sub in sorted(p for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"):
            if is_package(sub):
                listing += entry(f"{sub.name}/", self.described(sub / "__init__.py", given), self.package(sub, given))
            elif any(sub.glob("*.py")):
                logger.warning(
                    "%s holds Python modules but no __init__.py", sub.relative_to(ROOT), location=self.get_location()
                )
        return listing


class TestLayout(_Layout):
    """``.. test-layout:: FOLDER``: its conftest.py, the helpers in support/, then a folder per
    package of agent_kernel (``<package>/test_<module>.py``, its own conftest.py first), then
    the test modules of the top-level modules and those across packages."""

    def listing(self, folder: Path, given: dict[str, str]) -> nodes.Node:
        listing = nodes.bullet_list()
        for path in self.modules(folder):
            if not path.name.startswith("test_"):
                listing += entry(path.name, self.described(path, given))
        support = folder / "support"
        if support.is_dir():
            helpers = nodes.bullet_list()
            for path in self.modules(support):
                helpers += entry(path.name, self.described(path, given))
            listing += entry("support/", "helpers, imported by the tests, none of them a test", helpers)
        for sub in sorted(p for p in folder.iterdir() if p.is_dir() and p.name not in ("support", "__pycache__")):
            modules = self.modules(sub)
            if not modules:
                continue
            what = (
                "JupyterLab and Chromium, driven by Playwright"
                if sub.name == "browser"
                else f"agent_kernel/{sub.name}/"
            )
            inner = nodes.bullet_list()
            for path in modules:
                inner += entry(path.name, self.described(path, given))
            listing += entry(f"{sub.name}/", what, inner)
        across = nodes.bullet_list()
        for path in self.modules(folder):
            if path.name.startswith("test_"):
                across += entry(path.name, self.described(path, given))
        listing += entry("test_*.py", "across packages, and the package's top-level modules", across)
        return listing

    @staticmethod
    def modules(folder: Path) -> list[Path]:
        """The folder's Python files, conftest.py first; an empty ``__init__.py`` only marks a package."""
        paths = [
            p
            for p in folder.glob("*.py")
            if not (p.name == "__init__.py" and not p.read_text(encoding="utf-8").strip())
        ]
        return sorted(paths, key=lambda p: (p.name != "conftest.py", p.name))


def outdated(app: Sphinx, env: BuildEnvironment, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    """Pages with a layout are read again on every build: a module added since the last
    build changes their list, and no file they depend on says so."""
    return [docname for docname, meta in env.metadata.items() if meta.get("module_layout") and docname not in removed]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("module-layout", ModuleLayout)
    app.add_directive("test-layout", TestLayout)
    app.connect("env-get-outdated", outdated)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
