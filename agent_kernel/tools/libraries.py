"""The library tools of the ``tools`` group: Python modules the agent keeps in its database.

A library is imported as ``import agent_libs.NAME`` by agent-defined tools, ``run_code``
and the user's own cells (see :mod:`agent_kernel.kernel.libraries`). Every change is a new
stored version; the loaded libraries are dropped so the next import gets it.
"""

from __future__ import annotations

import ast
import keyword
from typing import TYPE_CHECKING, Annotated

from pydantic import Field
from typing_extensions import TypedDict

from agent_kernel.errors import ToolInputError
from agent_kernel.kernel import libraries
from agent_kernel.store import agent_tools as stored
from agent_kernel.store import provenance
from agent_kernel.tools import Tool, current_context
from agent_kernel.tools.agent_tools import (
    GROUP,
    NAME,
    Code,
    Description,
    Name,
    Version,
    atomic,
    edit_base,
    kept_version,
)
from agent_kernel.tools.data import with_connection

if TYPE_CHECKING:
    import duckdb


class LibrarySaved(TypedDict):
    """``create_library``'s and ``update_library``'s reply: the version saved."""

    name: str
    version: int


class LibraryDeleted(TypedDict):
    deleted: bool


class LibraryEntry(TypedDict):
    name: str
    description: str
    version: int


class LibraryList(TypedDict):
    libraries: list[LibraryEntry]


class LibrarySource(TypedDict):
    """``read_library``'s reply: one stored version whole."""

    name: str
    version: int
    description: str
    code: str


async def create_library(name: Name, description: Description, code: Code) -> LibrarySaved:
    """Keep a Python module in your database: `import agent_libs.NAME` works in your tools, run_code and the user's cells.

    Args:
        name: snake_case module name.
        description: What it provides.
        code: The module's source (it may import other agent_libs).
    """
    _check_name(name)
    context = current_context()
    text, source = _text(description), _source(code)

    def save(con: duckdb.DuckDBPyConnection) -> int:
        found = stored.Libraries(con)
        if found.get(name) is not None:
            raise ToolInputError(f"A library named {name!r} exists; change it with update_library.")
        version = found.save(name, text, source, context.session_id)
        provenance.record(con, "library", name, context.provenance(), version=version)
        return version

    version = await with_connection(context.store, atomic(save))
    libraries.forget()
    return {"name": name, "version": version}


async def update_library(
    name: Name,
    description: Description | None = None,
    code: Code | None = None,
    from_version: Annotated[Version | None, Field(description="Roll back: start from this stored version.")] = None,
) -> LibrarySaved:
    """Change your library (only the fields given); a new version, seen by the next import. Roll back with from_version.

    Args:
        name: The library.
        description: New description.
        code: New module source.
        from_version: Start from this earlier version.
    """
    context = current_context()

    def save(con: duckdb.DuckDBPyConnection) -> int:
        found = stored.Libraries(con)
        _, base = edit_base(found, name, from_version, lambda: _unknown(found, name))
        version = found.save(
            name,
            _text(description) if description is not None else base.description,
            _source(code) if code is not None else base.code,
            context.session_id,
        )
        provenance.record(con, "library", name, context.provenance(), version=version, inherit=True)
        return version

    version = await with_connection(context.store, atomic(save))
    libraries.forget()
    return {"name": name, "version": version}


async def delete_library(name: Name) -> LibraryDeleted:
    """Delete your library (its stored versions are kept).

    Args:
        name: The library.
    """
    deleted = await with_connection(current_context().store, lambda con: stored.Libraries(con).delete(name))
    libraries.forget()
    return {"deleted": deleted}


async def list_libraries() -> LibraryList:
    """Your libraries: name, description, version."""
    found = await with_connection(current_context().store, lambda con: stored.Libraries(con).list())
    return {"libraries": [{"name": lib.name, "description": lib.description, "version": lib.version} for lib in found]}


async def read_library(name: Name, version: Version | None = None) -> LibrarySource:
    """Your library's source: name, description, code, version.

    Args:
        name: The library.
        version: An earlier version (default: the current one).
    """

    def read(con: duckdb.DuckDBPyConnection) -> stored.LibraryVersion:
        found = stored.Libraries(con)
        kept: stored.LibraryVersion = kept_version(found, name, version, lambda: _unknown(found, name))
        return kept

    found = await with_connection(current_context().store, read)
    return {"name": found.name, "version": found.version, "description": found.description, "code": found.code}


TOOLS = [
    Tool(create_library, name="create_library", group=GROUP, writes=True),
    Tool(update_library, name="update_library", group=GROUP, writes=True),
    Tool(delete_library, name="delete_library", group=GROUP, writes=True),
    Tool(list_libraries, name="list_libraries", group=GROUP),
    Tool(read_library, name="read_library", group=GROUP),
]


def _check_name(name: str) -> None:
    if not NAME.match(name) or keyword.iskeyword(name):
        raise ToolInputError(
            f"{name!r} is not a library name: use a snake_case Python identifier (a-z, 0-9, _; starting with a letter)."
        )


def _text(description: str) -> str:
    if not description.strip():
        raise ToolInputError("description is empty: say what the library provides.")
    return description.strip()


def _source(code: str) -> str:
    try:
        ast.parse(code, filename="<library>")
    except SyntaxError as exc:
        raise ToolInputError(f"code does not parse: {exc.msg} (line {exc.lineno}).") from None
    return code


def _unknown(found: stored.Libraries, name: str) -> str:
    names = ", ".join(lib.name for lib in found.list()) or "none yet (create_library makes one)"
    return f"No library is named {name!r}; yours are: {names}."
