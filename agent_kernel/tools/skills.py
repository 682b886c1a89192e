"""The ``skills`` group, part one: skills, named Markdown documents listed in the system prompt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from agent_kernel.errors import ToolInputError
from agent_kernel.store import provenance
from agent_kernel.store import skills as skill_store
from agent_kernel.tools import Tool, current_context
from agent_kernel.tools.data import with_connection

Name = Annotated[str, Field(max_length=64)]
Description = Annotated[str, Field(max_length=skill_store.DESCRIPTION_CHARS)]
Content = Annotated[str, Field(max_length=skill_store.CONTENT_CHARS)]
Tags = Annotated[list[Annotated[str, Field(max_length=skill_store.TAG_CHARS)]], Field(max_length=skill_store.TAGS)]
T = TypeVar("T")


class SkillSaved(TypedDict):
    """``create_skill``'s and ``update_skill``'s reply: the version saved."""

    name: str
    version: int
    note: NotRequired[str]  # written after untrusted content (provenance.TAINTED_NOTE)


class SkillDeleted(TypedDict):
    deleted: bool


class SkillList(TypedDict):
    skills: list[skill_store.SkillSummary]


class SkillText(TypedDict):
    """``read_skill``'s reply: the whole skill."""

    name: str
    description: str
    content: str


class SkillEnabled(TypedDict):
    name: str
    enabled: bool


async def create_skill(name: Name, description: Description, content: Content, tags: Tags | None = None) -> SkillSaved:
    """Save a skill: a named Markdown document (a procedure, standard, domain knowledge) you read with read_skill when a task needs it. Your system prompt lists each enabled skill's name and description.

    Args:
        name: Lowercase, digits, - and _.
        description: When to use it (one line).
        content: The Markdown.
        tags: Keywords.
    """
    writer = current_context().provenance()

    def create(skills: skill_store.Skills) -> int:
        version = skills.create(name, description, content, tags or [])
        provenance.record(skills.con, "skill", name.strip(), writer, version=version)
        return version

    version = await _changing(create)
    saved: SkillSaved = {"name": name.strip(), "version": version}
    return _written(saved, writer)


async def update_skill(
    name: Name, description: Description | None = None, content: Content | None = None, tags: Tags | None = None
) -> SkillSaved:
    """Change a skill's description, content or tags (only those given).

    Args:
        name: Skill.
        description: New description.
        content: New Markdown.
        tags: New tags.
    """
    if description is None and content is None and tags is None:
        raise ToolInputError("update_skill needs description, content or tags to change.")
    writer = current_context().provenance()

    def update(skills: skill_store.Skills) -> int:
        version = skills.update(name, description=description, content=content, tags=tags)
        provenance.record(skills.con, "skill", name, writer, version=version, inherit=True)
        return version

    version = await _changing(update)
    saved: SkillSaved = {"name": name, "version": version}
    return _written(saved, writer)


async def delete_skill(name: Name) -> SkillDeleted:
    """Delete a skill you stored.

    Args:
        name: Skill.
    """
    return {"deleted": await _changing(lambda s: s.delete(name))}


async def list_skills() -> SkillList:
    """Every skill (enabled or not): name, description, tags, where it comes from."""
    found, tainted = await _with_skills(lambda s: (s.all(), skill_store.tainted(s.con)))
    listed = []
    for skill in found:
        entry = skill.summary()
        record = tainted.get(skill.name) if skill.source == "stored" else None
        if record is not None:
            entry["description"] = provenance.shown(skill.description, record, f"skill {skill.name}")
        listed.append(entry)
    current_context().note_untrusted([f"skill {name}" for name in sorted(tainted)])
    return {"skills": listed}


async def read_skill(name: Name) -> SkillText:
    """Read a skill's whole content.

    Args:
        name: Skill.
    """
    skill, tainted = await _with_skills(lambda s: (s.get(name), skill_store.tainted(s.con)))
    if skill is None:
        raise ToolInputError(f"No skill named {name!r}; list_skills shows them.")
    record = tainted.get(skill.name) if skill.source == "stored" else None
    if record is None:
        return {"name": skill.name, "description": skill.description, "content": skill.content}
    what = f"skill {skill.name}"
    current_context().note_untrusted([what])
    return {
        "name": skill.name,
        "description": provenance.shown(skill.description, record, f"{what} (description)"),
        "content": provenance.shown(skill.content, record, what),
    }


async def enable_skill(name: Name) -> SkillEnabled:
    """List a skill in your system prompt again.

    Args:
        name: Skill.
    """
    await _changing(lambda s: s.set_enabled(name, True))
    return {"name": name, "enabled": True}


async def disable_skill(name: Name) -> SkillEnabled:
    """Stop listing a skill in your system prompt, without deleting it.

    Args:
        name: Skill.
    """
    await _changing(lambda s: s.set_enabled(name, False))
    return {"name": name, "enabled": False}


def _written(answer: SkillSaved, writer: provenance.Provenance) -> SkillSaved:
    if writer.untrusted:
        answer["note"] = provenance.TAINTED_NOTE
    return answer


async def _with_skills(action: Callable[[skill_store.Skills], T]) -> T:
    context = current_context()
    folder = skill_store.skills_folder(context.settings.skills_dir)
    return await with_connection(context.store, lambda con: action(skill_store.Skills(con, folder)))


async def _changing(action: Callable[[skill_store.Skills], T]) -> T:
    result = await _with_skills(action)
    current_context().report.changed_prompt()  # the prompt's skill list changes
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
