"""The documentation against the code it describes: the README's table of guide pages, the
imports the pages and notebooks show, the public API page, and the tree of errors; and the
one text the scripted model copies from the agent (its summary prompts' starts).

Each test reads what the docs say and what the package has, so a page added, a name
exported or an error class defined without the docs following fails here, not in a
reader's notebook.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from pkgutil import resolve_name
from types import ModuleType

import agent_kernel
from agent_kernel import errors
from agent_kernel.testing import script
from agent_kernel.turn import budget, summaries

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# `.. autoclass:: agent_kernel.Agent` and the option lines under it.
AUTODOC = re.compile(r"^\.\. (auto\w+):: (\S+)\n((?:[ \t]+:[\w-]+:.*\n)*)", re.M)
# Imports of agent_kernel as a page or a cell shows them: `from M import a, b as c` (one
# line, or parenthesised over several) and `import M [as x]`.
FROM_IMPORT = re.compile(r"^[ \t>.]*from[ \t]+(agent_kernel[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*)", re.M)
IMPORT = re.compile(r"^[ \t>.]*import[ \t]+(agent_kernel[\w.]*)", re.M)


# -- what the pages say -----------------------------------------------------------------


def guide_pages() -> list[str]:
    return sorted(f"docs/guide/{page.name}" for page in (DOCS / "guide").glob("*.md") if page.name != "index.md")


def readme_table_links() -> set[str]:
    """The pages the README's table of documentation links to."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("|")]
    return {m.group(1) for row in rows for m in re.finditer(r"\]\(([^)#\s]+)", row)}


def documented() -> dict[str, set[str]]:
    """What docs/api.md documents: each autodoc directive's target -> the members it shows
    (the names of ``:members:``, the module's ``__all__`` for a bare one, else none)."""
    page = (DOCS / "api.md").read_text(encoding="utf-8")
    found: dict[str, set[str]] = {}
    for kind, target, options in AUTODOC.findall(page):
        members: set[str] = set()
        listed = re.search(r":members:(.*)", options)
        if listed and kind == "automodule":
            names = [name.strip() for name in listed.group(1).split(",") if name.strip()]
            members = set(names) if names else set(getattr(resolve_name(target), "__all__", ()))
        found.setdefault(target, set()).update(members)
    return found


def documented_paths() -> set[str]:
    """Every dotted name docs/api.md documents: the targets and their modules' members."""
    return {f"{target}.{m}" for target, members in documented().items() for m in members} | set(documented())


def public_modules() -> set[str]:
    """The package itself and every module docs/api.md documents with ``automodule``."""
    page = (DOCS / "api.md").read_text(encoding="utf-8")
    return {"agent_kernel"} | {target for kind, target, _ in AUTODOC.findall(page) if kind == "automodule"}


def sources() -> list[tuple[str, str]]:
    """(where, text) of every page and notebook cell that may show an import."""
    pages = [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted((DOCS / "guide").glob("*.md"))]
    found = [(str(page.relative_to(ROOT)), page.read_text(encoding="utf-8")) for page in pages]
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        for number, cell in enumerate(cells):
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            found.append((f"{notebook.relative_to(ROOT)} cell {number}", text))
    return found


def imports_in(text: str) -> list[tuple[str, str | None]]:
    """(module, name) of each import of agent_kernel in ``text``; name None for ``import M``."""
    found: list[tuple[str, str | None]] = [(m.group(1), None) for m in IMPORT.finditer(text)]
    for m in FROM_IMPORT.finditer(text):
        for part in m.group(2).strip("()").replace("\n", ",").split(","):
            name = part.strip().split(" as ")[0].strip()
            if name:
                found.append((m.group(1), name))
    return found


def is_public(module: str, name: str | None, public: set[str], paths: set[str]) -> bool:
    """Whether an import names the public API: a documented module, a name in its ``__all__``
    or documented on the API page, or a documented submodule (``from agent_kernel import llm``)."""
    if name is None:
        return module in public
    if f"{module}.{name}" in public:
        return True
    if module not in public:
        return False
    exported: ModuleType = resolve_name(module)
    return name in getattr(exported, "__all__", ()) or f"{module}.{name}" in paths


# -- the README's table ---------------------------------------------------------------------


def test_every_guide_page_is_in_the_readme_table():
    missing = [page for page in guide_pages() if page not in readme_table_links()]
    assert missing == [], f"guide pages the README's table does not list: {missing}"


# -- imports on the pages and in the notebooks ------------------------------------------------


def test_the_import_check_finds_internal_names():
    text = "```python\nfrom agent_kernel import Agent, tool as t\nfrom agent_kernel.turn.loop import (\n    TurnResult,\n)\nimport agent_kernel.store\n```"
    assert imports_in(text) == [
        ("agent_kernel.store", None),
        ("agent_kernel", "Agent"),
        ("agent_kernel", "tool"),
        ("agent_kernel.turn.loop", "TurnResult"),
    ]
    public, paths = public_modules(), documented_paths()
    assert [is_public(m, n, public, paths) for m, n in imports_in(text)] == [False, True, True, False]
    assert is_public("agent_kernel", "llm", public, paths) and is_public("agent_kernel.testing", "say", public, paths)


def test_pages_and_notebooks_import_only_public_names():
    public, paths = public_modules(), documented_paths()
    internal = [
        f"{where}: {module}" + (f" import {name}" if name else "")
        for where, text in sources()
        for module, name in imports_in(text)
        if not is_public(module, name, public, paths)
    ]
    assert internal == [], f"imports of names the API page does not make public: {internal}"


# -- the API page ---------------------------------------------------------------------------------


def test_the_api_page_documents_exactly_what_agent_kernel_exports():
    """``agent_kernel.__all__`` and the names the API page documents as the package's: either
    as ``agent_kernel.NAME`` or as the same object under its module (the errors)."""
    paths = documented_paths()
    objects = {id(resolve_name(path)) for path in paths}
    as_package = {
        path.split(".")[1]
        for path in paths
        if path.count(".") == 1 and path.startswith("agent_kernel.") and not isinstance(resolve_name(path), ModuleType)
    }
    exported = set(agent_kernel.__all__)
    undocumented = sorted(name for name in exported if id(getattr(agent_kernel, name)) not in objects)
    not_exported = sorted(as_package - exported)
    assert undocumented == [], f"exported by agent_kernel, missing from docs/api.md: {undocumented}"
    assert not_exported == [], f"documented as agent_kernel.NAME but not in agent_kernel.__all__: {not_exported}"


# -- the tree of errors -------------------------------------------------------------------------

# Imports every module of the package in a fresh process (importing them all here would
# change this test process: hooks, registries) and prints each AgentKernelError subclass.
_WALK = """
import importlib, json, pkgutil, sys
import agent_kernel
from agent_kernel.errors import AgentKernelError

skipped = []
for module in pkgutil.walk_packages(agent_kernel.__path__, "agent_kernel."):
    try:
        importlib.import_module(module.name)
    except ModuleNotFoundError as error:  # an optional dependency this environment lacks
        if (error.name or "").split(".")[0] == "agent_kernel":
            raise
        skipped.append(module.name)

def walk(cls):
    for sub in cls.__subclasses__():
        yield {"name": sub.__name__, "module": sub.__module__, "base": cls.__name__}
        yield from walk(sub)

json.dump({"classes": list(walk(AgentKernelError)), "skipped": skipped}, sys.stdout)
"""


def drawn_tree(docstring: str) -> dict[str, str | None]:
    """The tree the errors module's docstring draws: each name -> the name drawn above it."""
    block = docstring.split("::\n", 1)[1].lstrip("\n").split("\n\n")[0]
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    indent = None
    for line in block.splitlines():
        m = re.match(r"^(\s*)([│├└─\s]*?)([A-Z]\w+)", line)
        if not m:
            continue
        indent = len(m.group(1)) if indent is None else indent
        depth = (len(m.group(1)) + len(m.group(2)) - indent) // 4
        del stack[depth:]
        parents[m.group(3)] = stack[-1] if stack else None
        stack.append(m.group(3))
    return parents


def test_the_tree_reader_reads_depths():
    tree = "Errors::\n\n    Root\n    ├── Alpha   text\n    │   └── Beta  text\n    └── Gamma\n\nAfter."
    assert drawn_tree(tree) == {"Root": None, "Alpha": "Root", "Beta": "Alpha", "Gamma": "Root"}


def test_every_error_class_is_in_the_tree_under_its_base():
    walked = subprocess.run([sys.executable, "-c", _WALK], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert walked.returncode == 0, walked.stderr
    result = json.loads(walked.stdout)
    classes = result["classes"]
    tree = drawn_tree(errors.__doc__ or "")
    assert tree.get("AgentKernelError", "") is None
    wrong = [
        f"{c['module']}.{c['name']} (derives from {c['base']}, drawn under {tree.get(c['name'], 'nothing')})"
        for c in classes
        if tree.get(c["name"], "missing") != c["base"]
    ]
    assert wrong == [], f"errors the tree in agent_kernel/errors.py does not draw where they are: {wrong}"
    if not result["skipped"]:  # a module not imported here may define what the tree draws
        extra = sorted(set(tree) - {c["name"] for c in classes} - {"AgentKernelError"})
        assert extra == [], f"drawn in the tree but not an AgentKernelError subclass: {extra}"


# -- the scripted model's copy of the summary prompts ---------------------------------------


def test_the_scripted_model_knows_the_agents_summary_requests_as_the_agent_does():
    """agent_kernel.testing may not import the turn (pyproject.toml's import contracts), so
    it keeps how the summary prompts start; it must answer exactly the requests the agent
    counts as its own summaries."""
    probes = [
        prompt[:length]
        for prompt in (budget.SUMMARY_SYSTEM, summaries.SESSION_SUMMARY_SYSTEM)
        for length in (len(prompt), 81, 80, 79, 20)
    ]
    bodies = [{"system": system} for system in [*probes, "You are a helpful assistant.", ""]] + [{}, {"system": [{}]}]
    for body in bodies:
        agent_says = budget.is_summary_request(body) or summaries.is_session_summary_request(body)
        assert script.is_summary_request(body) == agent_says, body
    assert script.is_summary_request({"system": budget.SUMMARY_SYSTEM})
    assert script.is_summary_request({"system": summaries.SESSION_SUMMARY_SYSTEM})
