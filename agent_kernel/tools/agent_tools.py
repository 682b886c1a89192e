"""The ``tools`` group: tools the agent defines, stores and calls like built-in ones.

A tool's code is the body of a Python function of ``args`` (its input, validated against
its ``parameter_schema`` first) and ``state`` (the state tools' get/set/delete/keys); what
it returns is the result. It runs in the kernel process in a namespace of its own (never
the user's variables), with ``run_code``'s time limit, interrupt and output capture; or,
``isolated``, in a fresh subprocess as ``run_code(isolated=True)`` runs (see
:mod:`agent_kernel.tools.stored_run`). Every change is a new stored version; a tool that
changed is offered from the next model call on (the loop refreshes its tool list when
the call reports ``ToolReport.tools_changed``).
"""

from __future__ import annotations

import ast
import json
import keyword
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypeVar

import fastjsonschema
from pydantic import Field
from typing_extensions import TypedDict

from agent_kernel.errors import ToolInputError
from agent_kernel.kernel import libraries
from agent_kernel.model.json_schemas import compiled
from agent_kernel.store import agent_tools as stored
from agent_kernel.store import provenance
from agent_kernel.tools import USER_TOOLS, Registry, Tool, current_context
from agent_kernel.tools.code import CODE_CHARS
from agent_kernel.tools.data import with_connection
from agent_kernel.tools.isolation import isolation
from agent_kernel.tools.stored_run import run_stored_tool
from agent_kernel.untrusted import mark_untrusted

if TYPE_CHECKING:
    import duckdb

GROUP = "tools"
NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
DESCRIPTION_CHARS = 2_000
SCHEMA_CHARS = 20_000

Name = Annotated[str, Field(max_length=64, description="snake_case name")]
Description = Annotated[str, Field(max_length=DESCRIPTION_CHARS)]
Code = Annotated[str, Field(max_length=CODE_CHARS)]
Version = Annotated[int, Field(ge=1)]
T = TypeVar("T")


class ToolSaved(TypedDict):
    """``create_tool``'s and ``update_tool``'s reply: the version saved."""

    name: str
    version: int


class ToolDeleted(TypedDict):
    deleted: bool


class ToolEnabled(TypedDict):
    name: str
    enabled: bool


class ToolEntry(TypedDict):
    """One tool in ``list_tools``'s reply."""

    name: str
    description: str
    enabled: bool
    version: int


class ToolList(TypedDict):
    tools: list[ToolEntry]


class ToolDefinition(TypedDict):
    """``read_tool``'s reply: one stored version whole."""

    name: str
    version: int
    description: str
    parameter_schema: dict[str, object]
    code: str
    isolated: bool
    writes: bool | None  # None: not declared, treated as writing
    enabled: bool


class _Versioned(Protocol):
    """A stored version of a tool, a library or a component."""

    @property
    def version(self) -> int: ...


_V = TypeVar("_V", bound=_Versioned)
_V_co = TypeVar("_V_co", bound=_Versioned, covariant=True)


class VersionStore(Protocol[_V_co]):
    """Where the versions of the agent's tools, libraries or components are kept."""

    def get(self, name: str, version: int | None = None) -> _V_co | None: ...


async def create_tool(
    name: Name,
    description: Description,
    parameter_schema: dict[str, Any],
    code: Code,
    isolated: bool = False,
    writes: bool | None = None,
) -> ToolSaved:
    """Define a tool of your own, kept in the database and offered from your next call on.

    code is a Python function body of `args` (the validated input) and `state`
    (get/set/delete/keys of the state store); `return` a JSON value. Put reusable code in
    a library (import agent_libs.NAME).

    Args:
        name: snake_case name.
        description: What the tool does (you read it when choosing tools).
        parameter_schema: JSON Schema of the input (type object).
        code: The function body.
        isolated: Run in a fresh subprocess (no kernel variables, no secrets).
        writes: Whether it changes anything (approval); omitted counts as true.
    """
    _check_name(name)
    context = current_context()
    definition = stored.ToolVersion(
        name, 0, _text(description), _schema(parameter_schema), _code(code), isolated, writes
    )

    def save(con: duckdb.DuckDBPyConnection) -> int:
        tools = stored.AgentTools(con)
        if tools.exists(name):
            raise ToolInputError(f"A tool named {name!r} exists; change it with update_tool.")
        version = tools.save(definition, context.session_id)
        provenance.record(con, "tool", name, context.provenance(), version=version)
        return version

    version = await with_connection(context.store, atomic(save))
    context.report.changed_tools()
    return {"name": name, "version": version}


async def update_tool(
    name: Name,
    description: Description | None = None,
    parameter_schema: dict[str, Any] | None = None,
    code: Code | None = None,
    isolated: bool | None = None,
    writes: bool | None = None,
    from_version: Annotated[Version | None, Field(description="Roll back: start from this stored version.")] = None,
) -> ToolSaved:
    """Change your tool (only the fields given); a new version. Roll back with from_version.

    Args:
        name: The tool.
        description: New description.
        parameter_schema: New JSON Schema.
        code: New function body.
        isolated: Run in a fresh subprocess.
        writes: Whether it changes anything.
        from_version: Start from this earlier version (read_tool shows versions).
    """
    context = current_context()

    def save(con: duckdb.DuckDBPyConnection) -> int:
        tools = stored.AgentTools(con)
        current, base = edit_base(tools, name, from_version, lambda: _unknown(con, name))
        changed = stored.ToolVersion(
            name,
            0,
            _text(description) if description is not None else base.description,
            _schema(parameter_schema) if parameter_schema is not None else base.parameter_schema,
            _code(code) if code is not None else base.code,
            isolated if isolated is not None else base.isolated,
            writes if writes is not None else base.writes,
            current.enabled,
        )
        version = tools.save(changed, context.session_id)
        provenance.record(con, "tool", name, context.provenance(), version=version, inherit=True)
        return version

    version = await with_connection(context.store, atomic(save))
    context.report.changed_tools()
    return {"name": name, "version": version}


async def delete_tool(name: Name) -> ToolDeleted:
    """Delete your tool (its stored versions are kept).

    Args:
        name: The tool.
    """
    context = current_context()
    deleted = await with_connection(context.store, lambda con: stored.AgentTools(con).delete(name))
    if deleted:
        context.report.changed_tools()
    return {"deleted": deleted}


async def enable_tool(name: Name) -> ToolEnabled:
    """Offer your tool again.

    Args:
        name: The tool.
    """
    return await _set_enabled(name, True)


async def disable_tool(name: Name) -> ToolEnabled:
    """Stop offering your tool (kept; enable_tool brings it back).

    Args:
        name: The tool.
    """
    return await _set_enabled(name, False)


async def list_tools(include_disabled: bool = False) -> ToolList:
    """Your own tools: name, description, enabled, version.

    Args:
        include_disabled: Also the disabled ones.
    """
    found = await with_connection(current_context().store, lambda con: stored.AgentTools(con).list(include_disabled))
    return {
        "tools": [
            {"name": t.name, "description": t.description, "enabled": t.enabled, "version": t.version} for t in found
        ]
    }


async def read_tool(name: Name, version: Version | None = None) -> ToolDefinition:
    """Your tool's whole definition: code, parameter_schema, isolated, writes, enabled, version.

    Args:
        name: The tool.
        version: An earlier version (default: the current one).
    """

    def read(con: duckdb.DuckDBPyConnection) -> stored.ToolVersion:
        found: stored.ToolVersion = kept_version(stored.AgentTools(con), name, version, lambda: _unknown(con, name))
        return found

    found = await with_connection(current_context().store, read)
    return {
        "name": found.name,
        "version": found.version,
        "description": found.description,
        "parameter_schema": found.parameter_schema,
        "code": found.code,
        "isolated": found.isolated,
        "writes": found.writes,
        "enabled": found.enabled,
    }


async def _set_enabled(name: str, enabled: bool) -> ToolEnabled:
    context = current_context()

    def change(con: duckdb.DuckDBPyConnection) -> None:
        if not stored.AgentTools(con).set_enabled(name, enabled):
            raise ToolInputError(_unknown(con, name))

    await with_connection(context.store, change)
    context.report.changed_tools()
    return {"name": name, "enabled": enabled}


TOOLS = [
    Tool(create_tool, name="create_tool", group=GROUP, writes=True),
    Tool(update_tool, name="update_tool", group=GROUP, writes=True),
    Tool(delete_tool, name="delete_tool", group=GROUP, writes=True),
    Tool(enable_tool, name="enable_tool", group=GROUP, writes=True),
    Tool(disable_tool, name="disable_tool", group=GROUP, writes=True),
    Tool(list_tools, name="list_tools", group=GROUP),
    Tool(read_tool, name="read_tool", group=GROUP),
]


# -- the tools themselves -------------------------------------------------------------------


class StoredTool(Tool):
    """An agent-defined tool: its definition from the store, run by :mod:`.stored_run`.

    The model sets ``writes``, so it is a claim, not a permission: a tool counts as
    read-only only when the sandbox enforces it (isolated, on a machine where isolation is
    a sandbox: no network, environment, files or database; state writes refused) or when
    the person trusted this very version as read-only (``trusted``, from the approval
    card). Any other tool counts as writing, whatever it declares.
    """

    def __init__(self, definition: stored.ToolVersion, trusted: bool = False, tainted_by: str = "") -> None:
        claims_read_only = definition.writes is False
        enforced = claims_read_only and definition.isolated and _sandboxed()
        super().__init__(
            _not_called, name=definition.name, group=GROUP, writes=not (enforced or (claims_read_only and trusted)),
            description=definition.description, input_schema=definition.parameter_schema,
        )  # fmt: skip
        self.stored = definition
        self.trusted = trusted
        # Its provenance label when its current version was written after untrusted content:
        # its description is then offered as data inside the untrusted envelope.
        self.tainted_by = tainted_by
        # It says it changes nothing and nothing holds it to that: the card offers the grant.
        self.claims_read_only = claims_read_only and self.writes is True

    def definition(self, settings: Any = None) -> dict[str, Any]:
        description = self.stored.description
        if self.tainted_by:
            description = mark_untrusted(description, f"tool {self.name}, {self.tainted_by}")
        return {"name": self.name, "description": description, "input_schema": self.stored.parameter_schema}

    async def call(self, tool_input: object) -> Any:
        if not isinstance(tool_input, dict):
            raise ToolInputError(f"{self.name} takes a JSON object, got {type(tool_input).__name__}.")
        _validate(self.name, self.stored.parameter_schema, tool_input)
        return await run_stored_tool(self.stored, tool_input)


def _not_called(**_: Any) -> None:  # pragma: no cover - StoredTool.call runs the stored code
    raise AssertionError("a stored tool runs through StoredTool.call")


def sync(registry: Registry, con: duckdb.DuckDBPyConnection) -> None:
    """Put the enabled stored tools (current versions) in ``registry``, and drop the others.

    A ``@tool`` function or built-in tool of the same name wins over a stored one.
    """
    _TAKEN.update(name for name, item in registry.tools.items() if not isinstance(item, StoredTool))
    kept = stored.AgentTools(con)
    current = {t.name: t for t in kept.enabled()}
    trusted = kept.trusted_read_only()
    written = provenance.latest(con, "tool", list(current))
    tainted_by = {name: r.provenance().label() for name, r in written.items() if r.tainted}
    libraries.refresh(stored.Libraries(con).versions())
    for name, item in list(registry.tools.items()):
        if isinstance(item, StoredTool) and (
            name not in current
            or current[name] != item.stored
            or item.trusted != ((name, item.stored.version) in trusted)
            or item.tainted_by != tainted_by.get(name, "")
        ):
            registry.remove(name)
    for name, definition in current.items():
        if name not in registry.tools:
            registry.add(
                StoredTool(
                    definition, trusted=(name, definition.version) in trusted, tainted_by=tainted_by.get(name, "")
                )
            )


def _sandboxed() -> bool:
    """Whether isolated code runs in the sandbox here (probed once per process)."""
    return isolation().sandboxed


# -- checks ---------------------------------------------------------------------------------


def _check_name(name: str) -> None:
    if not NAME.match(name) or "__" in name or keyword.iskeyword(name):
        raise ToolInputError(
            f"{name!r} is not a tool name: use snake_case (a-z, 0-9, _; starting with a letter; no '__')."
        )
    if name in _TAKEN or name in USER_TOOLS.tools:
        raise ToolInputError(f"{name!r} is the name of a built-in or user tool; choose another name.")


# The names of the other tools of the registries synced (built-in and @tool ones).
_TAKEN: set[str] = set()


def _text(description: str) -> str:
    if not description.strip():
        raise ToolInputError("description is empty: say what the tool does and when to use it.")
    return description.strip()


def _schema(schema: dict[str, Any]) -> dict[str, Any]:
    if schema.get("type") != "object":
        raise ToolInputError('parameter_schema must be a JSON Schema with "type": "object" (the input is an object).')
    if len(json.dumps(schema)) > SCHEMA_CHARS:
        raise ToolInputError(f"parameter_schema is over {SCHEMA_CHARS:,} characters; simplify it.")
    _validator(json.dumps(schema, sort_keys=True))
    return schema


def _validator(schema_json: str) -> Any:
    """The compiled validator of a schema given as JSON text."""
    try:
        return compiled(schema_json)
    except ValueError as exc:
        raise ToolInputError(f"parameter_schema is {exc}") from None


def _code(code: str) -> str:
    if not code.strip():
        raise ToolInputError("code is empty: write the body of a function of args and state that returns the result.")
    try:
        ast.parse(code, filename="<tool code>")
    except SyntaxError as exc:
        raise ToolInputError(f"code does not parse: {exc.msg} (line {exc.lineno}).") from None
    return code


def _validate(name: str, schema: dict[str, Any], tool_input: dict[str, Any]) -> None:
    try:
        _validator(json.dumps(schema, sort_keys=True))(tool_input)
    except fastjsonschema.JsonSchemaValueException as exc:
        where = exc.message.removeprefix("data.").removeprefix("data ")
        raise ToolInputError(f"Invalid input for {name}: {where}") from None


def atomic(work: Callable[[duckdb.DuckDBPyConnection], T]) -> Callable[[duckdb.DuckDBPyConnection], T]:
    """``work(con)`` in one transaction: a new version and its provenance row are kept
    together or not at all (a version without its row would count as clean)."""

    def run(con: duckdb.DuckDBPyConnection) -> T:
        con.execute("BEGIN")
        try:
            result = work(con)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
        return result

    return run


def kept_version(kept: VersionStore[_V], name: str, version: int | None, unknown: Callable[[], str]) -> _V:
    """Version ``version`` of ``name`` from ``kept`` (stored tools or libraries; the current
    one when ``version`` is None); a refusal naming what exists when there is none."""
    found = kept.get(name, version)
    if found is not None:
        return found
    current = kept.get(name)
    if current is None:
        raise ToolInputError(unknown())
    raise ToolInputError(f"{name} has no version {version}; it is at version {current.version}.")


def edit_base(kept: VersionStore[_V], name: str, from_version: int | None, unknown: Callable[[], str]) -> tuple[_V, _V]:
    """The current version of ``name`` in ``kept`` and the one an edit starts from
    (``from_version``, else the current one); a refusal naming what exists when there is none."""
    current = kept.get(name)
    if current is None:
        raise ToolInputError(unknown())
    base = current if from_version is None else kept_version(kept, name, from_version, unknown)
    return current, base


def _unknown(con: duckdb.DuckDBPyConnection, name: str) -> str:
    names = [t.name for t in stored.AgentTools(con).list(include_disabled=True)]
    known = ", ".join(names) if names else "none yet (create_tool makes one)"
    return f"No tool of yours is named {name!r}; yours are: {known}."
