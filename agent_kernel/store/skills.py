"""Skills: named Markdown documents the agent reads when a task needs them.

Two sources: the ``skills`` table (skills the agent or the user wrote) and a folder in
the format of Anthropic's Agent Skills (``NAME/SKILL.md`` with YAML front matter holding
``name`` and ``description``). A stored skill shadows a folder skill of the same name.
Folder skills are read-only here; switching one off is kept in ``skill_states``.

The system prompt lists enabled skills by name and description only (:func:`prompt_section`),
sorted, so the text only changes when a skill does.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import yaml

from agent_kernel.errors import ToolInputError
from agent_kernel.paths import agent_home
from agent_kernel.store import provenance
from agent_kernel.store.provenance import Record

if TYPE_CHECKING:
    import duckdb

__all__ = ["Skill", "SkillSummary", "Skills", "folder_skills", "prompt_section"]

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"  # the Agent Skills naming rule, plus underscores
DESCRIPTION_CHARS = 1_024  # Agent Skills' limit on a description
CONTENT_CHARS = 100_000
TAG_CHARS = 50
TAGS = 20
SECTION_CHARS = 4_000  # the most the skill list takes of the system prompt
SKILL_FILE = "SKILL.md"
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


class SkillSummary(TypedDict):
    """One skill as ``list_skills`` returns it."""

    name: str
    description: str
    tags: list[str]
    enabled: bool
    source: str  # "stored" or its SKILL.md path


@dataclass(frozen=True)
class Skill:
    """One skill, from the store (``source`` "stored") or a folder (its SKILL.md path)."""

    name: str
    description: str
    content: str
    tags: list[str] = field(default_factory=list)
    enabled: bool = True
    source: str = "stored"
    version: int | None = None

    def summary(self) -> SkillSummary:
        return {
            "name": self.name,
            "description": self.description,
            "tags": list(self.tags),
            "enabled": self.enabled,
            "source": self.source,
        }


def check_name(name: str) -> str:
    name = name.strip()
    if not re.match(NAME_PATTERN, name):
        raise ToolInputError(
            f"Invalid skill name {name!r}: use lowercase letters, digits, '-' and '_' "
            "(at most 64 characters, starting with a letter or digit)."
        )
    return name


def parse_skill_file(path: Path) -> Skill | None:
    """The skill in an Agent Skills ``SKILL.md``, or None when it has no usable front matter."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    match = _FRONT_MATTER.match(text)
    if match is None:
        return None
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return None
    if not isinstance(meta, dict):
        return None
    name = str(meta.get("name") or path.parent.name).strip()
    description = str(meta.get("description") or "").strip()
    if not description:
        return None
    return Skill(
        name=name,
        description=" ".join(description.split())[:DESCRIPTION_CHARS],
        content=text[match.end() :].strip(),
        source=str(path),
    )


def folder_skills(folder: str | Path | None) -> list[Skill]:
    """The skills in ``folder`` (each ``NAME/SKILL.md``), sorted by name; none if it is missing."""
    if not folder:
        return []
    root = Path(folder).expanduser()
    if not root.is_dir():
        return []
    found = {}
    for path in sorted(root.glob(f"*/{SKILL_FILE}")):
        skill = parse_skill_file(path)
        if skill is not None and skill.name not in found:
            found[skill.name] = skill
    return list(found.values())


class Skills:
    """Skills through one open connection; ``folder`` is where Agent Skills folders are."""

    def __init__(self, con: duckdb.DuckDBPyConnection, folder: str | Path | None = None) -> None:
        self.con = con
        self.folder = folder

    def all(self) -> list[Skill]:
        """Every skill, stored ones first in precedence, sorted by name."""
        states = dict(self.con.execute("SELECT name, enabled FROM skill_states").fetchall())
        skills = {s.name: s for s in folder_skills(self.folder)}
        skills = {
            name: Skill(s.name, s.description, s.content, s.tags, states.get(name, True), s.source)
            for name, s in skills.items()
        }
        rows = self.con.execute("SELECT name, description, content, tags, enabled, version FROM skills").fetchall()
        for name, description, content, tags, enabled, version in rows:
            skills[name] = Skill(name, description, content, list(tags), enabled, "stored", version)
        return [skills[name] for name in sorted(skills)]

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.all() if s.name == name), None)

    def _stored(self, name: str) -> tuple[Any, ...] | None:
        return self.con.execute(
            "SELECT description, content, tags, version FROM skills WHERE name = ?", [name]
        ).fetchone()

    def create(self, name: str, description: str, content: str, tags: list[str]) -> int:
        name = check_name(name)
        if self._stored(name) is not None:
            raise ToolInputError(f"A skill named {name!r} exists; update_skill changes it.")
        _check_text(description, content)
        self.con.execute(
            "INSERT INTO skills (name, description, content, tags, enabled, version) VALUES (?, ?, ?, ?, true, 1)",
            [name, description.strip(), content, _tags(tags)],
        )
        return 1

    def update(self, name: str, *, description: str | None, content: str | None, tags: list[str] | None) -> int:
        row = self._stored(name)
        if row is None:
            folder = self.get(name)
            if folder is None:
                raise ToolInputError(f"No skill named {name!r}; list_skills shows them.")
            # A folder skill is edited by storing a copy, which shadows the file from now on.
            row = (folder.description, folder.content, folder.tags, 0)
            self.con.execute(
                "INSERT INTO skills (name, description, content, tags, enabled, version) VALUES (?, ?, ?, ?, ?, 0)",
                [name, *row[:3], folder.enabled],
            )
        new = (
            (description if description is not None else row[0]).strip(),
            content if content is not None else row[1],
            _tags(tags) if tags is not None else list(row[2]),
        )
        _check_text(new[0], new[1])
        version = int(row[3]) + 1
        self.con.execute(
            "UPDATE skills SET description = ?, content = ?, tags = ?, version = ?, "
            "updated_at = now() AT TIME ZONE 'UTC' WHERE name = ?",
            [*new, version, name],
        )
        return version

    def delete(self, name: str) -> bool:
        """Delete a stored skill; a folder skill is removed from its folder, not here."""
        if self._stored(name) is None:
            if self.get(name) is not None:
                raise ToolInputError(
                    f"{name!r} comes from the skills folder; disable_skill switches it off "
                    "(deleting it means deleting its folder, which is the user's to do)."
                )
            raise ToolInputError(f"No skill named {name!r}; list_skills shows them.")
        self.con.execute("DELETE FROM skills WHERE name = ?", [name])
        return True

    def set_enabled(self, name: str, enabled: bool) -> None:
        if self._stored(name) is not None:
            self.con.execute("UPDATE skills SET enabled = ? WHERE name = ?", [enabled, name])
        elif self.get(name) is not None:
            self.con.execute("INSERT OR REPLACE INTO skill_states (name, enabled) VALUES (?, ?)", [name, enabled])
        else:
            raise ToolInputError(f"No skill named {name!r}; list_skills shows them.")


def prompt_section(con: duckdb.DuckDBPyConnection, folder: str | Path | None, withheld: Collection[str] = ()) -> str:
    """The enabled skills, one line each (name: description), at most :data:`SECTION_CHARS`;
    stored skills named in ``withheld`` are left out (shown elsewhere, as data)."""
    enabled = [s for s in Skills(con, folder).all() if s.enabled and not (s.source == "stored" and s.name in withheld)]
    if not enabled:
        return ""
    lines = ["Read a skill with read_skill before a task it covers."]
    size = len(lines[0])
    for shown, skill in enumerate(enabled):
        line = f"- {skill.name}: {skill.description}"
        if size + len(line) + 1 > SECTION_CHARS:
            lines.append(f"- ... and {len(enabled) - shown} more (list_skills shows all)")
            break
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def _check_text(description: str, content: str) -> None:
    if not description.strip():
        raise ToolInputError("A skill needs a description: one line saying when to use it.")
    if len(description) > DESCRIPTION_CHARS:
        raise ToolInputError(f"The description is over {DESCRIPTION_CHARS} characters; shorten it.")
    if len(content) > CONTENT_CHARS:
        raise ToolInputError(f"The content is over {CONTENT_CHARS:,} characters; split it into several skills.")


def _tags(tags: list[str]) -> list[str]:
    cleaned = [t.strip() for t in tags if t.strip()]
    if len(cleaned) > TAGS or any(len(t) > TAG_CHARS for t in cleaned):
        raise ToolInputError(f"At most {TAGS} tags of at most {TAG_CHARS} characters each.")
    return cleaned


def skills_folder(configured: str) -> Path:
    """The Agent Skills folder: ``configured`` when set, else ``skills/`` in agent-kernel's data directory."""
    if configured:
        return Path(configured).expanduser()
    return agent_home() / "skills"


def tainted(con: duckdb.DuckDBPyConnection) -> dict[str, Record]:
    """The stored skills whose latest write is tainted, by name. A skill read from the
    skills folder is the person's own file, never tainted (unless a stored copy shadows it)."""
    records = provenance.tainted_names(con, "skill")
    if not records:
        return {}
    stored = {name for (name,) in con.execute("SELECT name FROM skills").fetchall()}
    return {name: record for name, record in records.items() if name in stored}
