"""The tests' layout: each test module mirrors a module of agent_kernel, and shares code only
through tests/support/.

``tests/<package>/test_<module>.py`` tests ``agent_kernel/<package>/<module>.py`` (top-level
modules' tests are in tests/ itself); ``test_<package>.py`` in its package's folder, and
``test_init.py``, test the package's ``__init__.py``. What several test modules use lives in
tests/support/ (helpers) or a conftest.py (fixtures, which pytest finds by name): a test module
that imported another would run that module's setup and tie the two together.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "agent_kernel"
SUPPORT = TESTS / "support"

# Folders whose tests follow what a person does across the packages, not one module.
CROSS_CUTTING_FOLDERS = {
    "browser": "JupyterLab and Notebook 7 in Chromium, the extension and the kernel together",
}
# Test modules that check behaviour across packages, or the project rather than a module.
CROSS_CUTTING = {
    "test_attack_planting.py": "an attacker's planting turn, end to end through a kernel",
    "test_security_plants.py": "what a hostile page planted cannot act later, through papermill",
    "test_concurrency.py": "two kernels and a script writing to one DuckDB file",
    "test_notebooks.py": "the shipped notebooks run headless through papermill",
    "test_console.py": "the agent in jupyter console and terminal IPython",
    "test_install.py": "the wheel installed in a fresh venv",
    "test_imports.py": "the package's import graph",
    "test_docs.py": "the documentation",
    "test_docs_drift.py": "the documentation against the package's public names",
    "test_docs_layout.py": "the layout listed in docs/contributing.md",
    "test_benchmarks.py": "the benchmarks in benchmarks/",
    "test_layout.py": "this layout",
    "scheduler/test_grants.py": "standing grants from the CLI through the store to a run's kernel",
    "server/test_install.py": "the installed package enables the server and the JupyterLab extension",
    "tools/test_fuzz.py": "every tool of every group, driven with malformed input",
}


def _test_modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if SUPPORT not in p.parents)


def _python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "artifacts" not in p.relative_to(TESTS).parts)


def _mirrored(path: Path) -> bool:
    folders = path.parent.relative_to(TESTS).parts
    name = path.stem.removeprefix("test_")
    base = PACKAGE.joinpath(*folders)
    if (base / f"{name}.py").is_file() or (base / name / "__init__.py").is_file():
        return True
    return name in {"init", *folders[-1:]} and (base / "__init__.py").is_file()


def _imported_modules(path: Path) -> list[str]:
    """The modules ``path`` imports, relative imports resolved (``from . import x`` as ``pkg.x``)."""
    package = ["tests", *path.parent.relative_to(TESTS).parts]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found += [module] if node.module else [f"{module}.{alias.name}" for alias in node.names]
    return found


def test_every_test_module_mirrors_a_module_of_agent_kernel():
    stray = []
    for path in _test_modules():
        relative = path.relative_to(TESTS)
        if relative.parts[0] in CROSS_CUTTING_FOLDERS or relative.as_posix() in CROSS_CUTTING:
            continue
        if not _mirrored(path):
            stray.append(relative.as_posix())
    assert not stray, (
        "these test modules mirror no module of agent_kernel: move each to tests/<package>/test_<module>.py "
        f"for the module it tests, or add it to CROSS_CUTTING with the reason: {stray}"
    )


def test_the_cross_cutting_lists_name_what_is_there():
    missing = [name for name in CROSS_CUTTING if not (TESTS / name).is_file()]
    missing += [name for name in CROSS_CUTTING_FOLDERS if not (TESTS / name).is_dir()]
    assert not missing


def test_no_test_module_imports_another_only_support():
    crossing = {}
    for path in _python_files():
        imported = [
            module
            for module in _imported_modules(path)
            if (module == "tests" or module.startswith("tests."))
            and module != "tests.support"
            and not module.startswith("tests.support.")
        ]
        if imported:
            crossing[path.relative_to(TESTS).as_posix()] = imported
    assert not crossing, f"import what is shared from tests/support/ (or use a conftest.py fixture): {crossing}"


def test_helpers_live_in_support_and_every_folder_is_a_package():
    misplaced = [
        path.relative_to(TESTS).as_posix()
        for path in _python_files()
        if SUPPORT not in path.parents
        and not path.name.startswith("test_")
        and path.name not in {"conftest.py", "__init__.py"}
    ]
    assert not misplaced, f"helpers belong in tests/support/: {misplaced}"
    folders = {path.parent for path in _python_files()}
    assert not [f for f in folders if not (f / "__init__.py").is_file()]
