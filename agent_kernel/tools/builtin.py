"""The built-in tools, gathered from each group's module."""

from __future__ import annotations

from agent_kernel.tools import (
    Registry,
    agent_tools,
    browser,
    code,
    components,
    data,
    libraries,
    live_notebook,
    llm,
    memory,
    notebook,
    notepad,
    recall,
    schedule,
    skills,
    subsessions,
    ui,
    web,
)


def builtin_registry() -> Registry:
    """A registry holding every built-in tool (each group's module lists its ``TOOLS``)."""
    registry = Registry()
    modules = (
        code,
        notebook,
        live_notebook,
        data,
        memory,
        recall,
        notepad,
        schedule,
        skills,
        ui,
        components,
        web,
        agent_tools,
        libraries,
        llm,
        subsessions,
        browser,
    )
    for module in modules:
        for item in module.TOOLS:
            registry.add(item)
    return registry
