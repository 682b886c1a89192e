"""The package's import graph has no cycle, counting every import the code can run.

Imports inside functions and under ``TYPE_CHECKING`` count: a cycle through either still
ties the modules together (the layers themselves are checked by ``lint-imports``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import agent_kernel

PACKAGE = Path(agent_kernel.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports anywhere in its code."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:
                # `from . import conversation` imports that module; `from .x import name`, x.
                submodule = f"{origin}.{alias.name}"
                found.add(submodule if submodule in modules else origin)
    return {_owner(m, modules) for m in found if _owner(m, modules)} - {name}


def _owner(name: str, modules: set[str]) -> str:
    """The package module ``name`` is (or lies in), or "" when it is not ours."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def import_graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): imported(p, modules) for p in paths}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as the modules along it, or None when it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_graph_sees_function_level_and_type_checking_imports():
    graph = import_graph()
    assert "agent_kernel.turn.loop" in graph["agent_kernel.turn.agent"]  # imported inside Agent._turn
    assert "agent_kernel.store.sessions" in graph["agent_kernel.turn.loop"]
    assert "agent_kernel.turn.approval" in graph["agent_kernel.turn.loop"]  # under TYPE_CHECKING


def test_finding_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def tangles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of modules that import each other, directly or not (strongly connected)."""
    groups: list[set[str]] = []
    seen: set[str] = set()
    for node in sorted(graph):
        if node in seen:
            continue
        ahead = _reachable(graph, node)
        group = {other for other in ahead if node in _reachable(graph, other)}
        if len(group) > 1:
            groups.append(group)
            seen |= group
    return groups


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    found, stack = {start}, [start]
    while stack:
        for target in graph.get(stack.pop(), ()):
            if target not in found:
                found.add(target)
                stack.append(target)
    return found


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    for group in tangles(graph):
        inside = {module: graph[module] & group for module in group}
        raise AssertionError("import cycle: " + " -> ".join(find_cycle(inside) or sorted(group)))


def test_a_cycle_is_found_among_many_modules():
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": set(), "d": {"b"}, "e": {"a"}}
    assert tangles(graph) == [{"b", "d"}]
