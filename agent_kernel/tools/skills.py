"""The ``skills`` group, part one: skills, named Markdown documents listed in the system prompt."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ..errors import ToolInputError
from ..store import skills as skill_store
from . import Tool, current_context
from .data import with_connection

Name = Annotated[str, Field(max_length=64)]
Description = Annotated[str, Field(max_length=skill_store.DESCRIPTION_CHARS)]
Content = Annotated[str, Field(max_length=skill_store.CONTENT_CHARS)]
Tags = Annotated[list[Annotated[str, Field(max_length=skill_store.TAG_CHARS)]], Field(max_length=skill_store.TAGS)]


async def create_skill(name: Name, description: Description, content: Content, tags: Tags | None = None) -> dict[str, Any]:
    """Save a skill: a named Markdown document (a procedure, standard, domain knowledge) you read with read_skill when a task needs it. Your system prompt lists each enabled skill's name and description.

    Args:
        name: Lowercase, digits, - and _.
        description: When to use it (one line).
        content: The Markdown.
        tags: Keywords.
    """
    version = await _changing(lambda s: s.create(name, description, content, tags or []))
    return {"name": name.strip(), "version": version}


async def update_skill(
    name: Name, description: Description | None = None, content: Content | None = None, tags: Tags | None = None
) -> dict[str, Any]:
    """Change a skill's description, content or tags (only those given).

    Args:
        name: Skill.
        description: New description.
        content: New Markdown.
        tags: New tags.
    """
    if description is None and content is None and tags is None:
        raise ToolInputError("update_skill needs description, content or tags to change.")
    version = await _changing(lambda s: s.update(name, description=description, content=content, tags=tags))
    return {"name": name, "version": version}


async def delete_skill(name: Name) -> dict[str, Any]:
    """Delete a skill you stored.

    Args:
        name: Skill.
    """
    return {"deleted": await _changing(lambda s: s.delete(name))}


async def list_skills() -> dict[str, Any]:
    """Every skill (enabled or not): name, description, tags, where it comes from."""
    found = await _with_skills(lambda s: s.all())
    return {"skills": [s.summary() for s in found]}


async def read_skill(name: Name) -> dict[str, Any]:
    """Read a skill's whole content.

    Args:
        name: Skill.
    """
    skill = await _with_skills(lambda s: s.get(name))
    if skill is None:
        raise ToolInputError(f"No skill named {name!r}; list_skills shows them.")
    return {"name": skill.name, "description": skill.description, "content": skill.content}


async def enable_skill(name: Name) -> dict[str, Any]:
    """List a skill in your system prompt again.

    Args:
        name: Skill.
    """
    await _changing(lambda s: s.set_enabled(name, True))
    return {"name": name, "enabled": True}


async def disable_skill(name: Name) -> dict[str, Any]:
    """Stop listing a skill in your system prompt, without deleting it.

    Args:
        name: Skill.
    """
    await _changing(lambda s: s.set_enabled(name, False))
    return {"name": name, "enabled": False}


async def _with_skills(action: Any) -> Any:
    context = current_context()
    folder = skill_store.skills_folder(context.settings.skills_dir)
    return await with_connection(context.store, lambda con: action(skill_store.Skills(con, folder)))


async def _changing(action: Any) -> Any:
    result = await _with_skills(action)
    current_context().system_prompt_changed = True  # the prompt's skill list changes
    return result


TOOLS = [
    Tool(create_skill, name="create_skill", group="skills", writes=True),
    Tool(update_skill, name="update_skill", group="skills", writes=True),
    Tool(delete_skill, name="delete_skill", group="skills", writes=True),
    Tool(list_skills, name="list_skills", group="skills"),
    Tool(read_skill, name="read_skill", group="skills"),
    Tool(enable_skill, name="enable_skill", group="skills", writes=True),
    Tool(disable_skill, name="disable_skill", group="skills", writes=True),
]
