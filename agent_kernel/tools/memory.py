"""The ``memory`` group: the ``memory`` tool and the self-editing system prompt."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Literal, TypeVar

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from agent_kernel.errors import ToolInputError
from agent_kernel.store import memories as memory_store
from agent_kernel.store import prompts, provenance
from agent_kernel.tools import Tool, current_context
from agent_kernel.tools.data import with_connection

if TYPE_CHECKING:
    import duckdb

T = TypeVar("T")

Category = Literal[
    "fact", "preference", "life-goal", "project", "open-loop", "relationship", "health", "work", "personal-context"
]
SummaryType = Literal[
    "conversation-summary", "daily-summary", "weekly-summary", "monthly-summary", "quarterly-summary", "yearly-summary"
]
StoreName = Literal["user_memory", "summaries"]

QUERY_CHARS = 2_000
ID_CHARS = 200  # ids, period keys, chat ids, dates
Content = Annotated[str, Field(max_length=memory_store.MEMORY_CHARS)]
Short = Annotated[str, Field(max_length=ID_CHARS)]
Tags = Annotated[list[Annotated[str, Field(max_length=memory_store.TAG_CHARS)]], Field(max_length=memory_store.TAGS)]
Instructions = Annotated[str, Field(max_length=prompts.INSTRUCTIONS_CHARS)]


class MemoryReply(TypedDict):
    """The ``memory`` tool's reply: the memories stored, forgotten or found."""

    success: bool
    memories: list[memory_store.MemoryEntry]
    replaced: NotRequired[bool]  # a summary of the same type and period was replaced
    note: NotRequired[str]  # written after untrusted content (provenance.TAINTED_NOTE)


class PromptReply(TypedDict):
    """``read_system_prompt``'s reply."""

    prompt: str
    version: int


class PromptEdited(TypedDict):
    """``edit_system_prompt``'s reply: the version the edit saved."""

    version: int
    note: NotRequired[str]


# A memory stored (remember) or a summary stored and whether it replaced one (summarize).
_Stored = TypeVar("_Stored", memory_store.Memory, tuple[memory_store.Memory, bool])
_Written = TypeVar("_Written", MemoryReply, PromptEdited)


async def memory(
    action: Literal["store", "recall", "list", "forget"],
    store: StoreName | None = None,
    content: Content | None = None,
    tags: Tags | None = None,
    category: Category | None = None,
    pursuingPriority: Annotated[int | None, Field(ge=0, le=100)] = None,  # the contract's name
    summary_type: SummaryType | None = None,
    period_key: Short | None = None,
    chat_id: Short | None = None,
    query: Annotated[str, Field(max_length=QUERY_CHARS)] | None = None,
    store_filter: StoreName | None = None,
    categories: Annotated[list[Category], Field(max_length=20)] | None = None,
    summary_types: Annotated[list[SummaryType], Field(max_length=20)] | None = None,
    from_: Annotated[Short | None, Field(alias="from", description="Stored at or after this ISO time.")] = None,
    to: Short | None = None,
    period_key_prefix: Short | None = None,
    limit: Annotated[int, Field(ge=1, le=100)] = 10,
    memory_id: Short | None = None,
) -> MemoryReply:
    """Remember across sessions: user memories (shown in your system prompt; keep each short) and summaries.

    store: user_memory (default) takes category, tags, pursuingPriority; summaries take
    summary_type and period_key (YYYY-MM-DD, YYYY-Www, YYYY-MM, YYYY-Qn or YYYY; default
    the current period); the same type and period replaces. recall: ranked by query.
    list: newest first. Both filter. forget: memory_id.

    Args:
        action: What to do.
        store: Store to write (store).
        content: Text to store.
        tags: Keywords; recall/list: any of these.
        category: User memory kind (default fact).
        pursuingPriority: How actively the user pursues it.
        summary_type: Summary kind.
        period_key: Period a summary covers.
        chat_id: Session of a conversation-summary (default: this).
        query: What to recall, in words.
        store_filter: Only this store.
        categories: Only these categories.
        summary_types: Only these summary types.
        to: Stored at or before this ISO time.
        period_key_prefix: Period keys starting with this (2025-12).
        limit: Most results.
        memory_id: Memory to forget.
    """
    context = current_context()
    if action in ("store", "forget"):
        context.report.changed_prompt()  # the prompt's memory section changes
    writer = context.provenance()
    if action == "store":
        if not content or not content.strip():
            raise ToolInputError("store needs content: the text to remember.")
        if (store or ("summaries" if summary_type else "user_memory")) == "summaries":
            if summary_type is None:
                raise ToolInputError(f"A summary needs summary_type: one of {', '.join(memory_store.SUMMARY_TYPES)}.")
            key = memory_store.period_key(summary_type, period_key, context.settings.now().date())
            chat = chat_id or (context.session_name if summary_type == "conversation-summary" else None)
            stored, replaced = await _with_memories(
                lambda m: _kept(m, m.summarize(
                    content.strip(), summary_type=summary_type, period_key=key, chat_id=chat,
                    tags=tags or [], session_id=context.session_id,
                ), writer)
            )  # fmt: skip
            answer: MemoryReply = {"success": True, "memories": [stored.as_dict()]}
            if replaced:
                answer["replaced"] = True
            return _written(answer, writer)
        if summary_type is not None or period_key is not None:
            raise ToolInputError("summary_type and period_key belong to store=summaries.")
        stored = await _with_memories(
            lambda m: _kept(m, m.remember(
                content.strip(), category=category or "fact", tags=tags or [],
                pursuing_priority=pursuingPriority, session_id=context.session_id,
            ), writer)
        )  # fmt: skip
        remembered: MemoryReply = {"success": True, "memories": [stored.as_dict()]}
        return _written(remembered, writer)
    if action == "forget":
        if not memory_id:
            raise ToolInputError("forget needs memory_id (recall or list shows the ids).")
        forgotten = await _with_memories(lambda m: m.forget(memory_id.strip()))
        if forgotten is None:
            raise ToolInputError(f"No memory has id {memory_id!r}; recall or list shows the ids.")
        return {"success": True, "memories": [forgotten.as_dict()]}
    filters = memory_store.Filters(
        store=store_filter or store,
        types=[*(categories or []), *(summary_types or [])],
        tags=tags or [],
        chat_id=chat_id,
        since=memory_store.parse_instant(from_, "from"),
        until=memory_store.parse_instant(to, "to"),
        period_key_prefix=period_key_prefix,
    )
    if action == "recall":
        if not query or not query.strip():
            raise ToolInputError("recall needs query: what to look for, in words (list needs none).")
        found = await _with_memories(lambda m: _as_read(m, m.recall(query, filters, limit)))
    else:
        found = await _with_memories(lambda m: _as_read(m, m.list(filters, limit)))
    entries, sources = found
    context.note_untrusted(sources)
    return {"success": True, "memories": entries}


def _written(answer: _Written, writer: provenance.Provenance) -> _Written:
    if writer.untrusted:
        answer["note"] = provenance.TAINTED_NOTE
    return answer


def _kept(memories: memory_store.Memories, stored: _Stored, writer: provenance.Provenance) -> _Stored:
    """Record who wrote a stored memory (``stored``: a Memory, or (Memory, replaced)) and pass it on.
    A summary stored again replaces its text, so its provenance is the new writer's alone."""
    memory = stored[0] if isinstance(stored, tuple) else stored
    provenance.record(memories.con, "memory", memory.id, writer)
    return stored


def _as_read(
    memories: memory_store.Memories, found: list[memory_store.Memory]
) -> tuple[list[memory_store.MemoryEntry], list[str]]:
    """The memories as the tool returns them, a tainted one's content inside the untrusted
    envelope; and the untrusted sources the turn reads with them (one per tainted memory)."""
    records = provenance.latest(memories.con, "memory", [m.id for m in found])
    answer, sources = [], []
    for memory in found:
        entry = memory.as_dict()
        record = records.get(memory.id)
        if record is not None and record.tainted:
            entry["content"] = provenance.shown(memory.content, record, f"memory {memory.id}")
            sources.append(f"memory {memory.id}")
        answer.append(entry)
    return answer, sources


async def read_system_prompt() -> PromptReply:
    """Your stored instructions (the part of your system prompt you edit) and their version; read before find_replace or delete."""
    context = current_context()

    def read(con: duckdb.DuckDBPyConnection) -> tuple[prompts.PromptVersion, provenance.Record | None]:
        stored = prompts.SystemPrompts(con)
        return stored.current(), stored.taint()

    current, taint = await with_connection(context.store, read)
    if taint is None:
        return {"prompt": current.prompt, "version": current.version}
    context.note_untrusted([f"stored instructions version {current.version}"])
    return {
        "prompt": provenance.shown(current.prompt, taint, f"stored instructions version {current.version}"),
        "version": current.version,
    }


async def edit_system_prompt(
    operation: Literal["replace", "find_replace", "append", "prepend", "delete"],
    content: Instructions | None = None,
    find: Instructions | None = None,
    replace: Instructions | None = None,
    replace_all: bool = False,
) -> PromptEdited:
    """Edit your stored instructions (in every later system prompt): lasting guidance from the user ("from now on ..."). Versioned.

    Args:
        operation: replace (all, with content), find_replace, append, prepend, delete (first occurrence of content).
        content: Text.
        find: Exact text to find.
        replace: New text.
        replace_all: Replace every occurrence.
    """
    context = current_context()
    writer = context.provenance()

    def apply(con: duckdb.DuckDBPyConnection) -> prompts.PromptVersion:
        stored = prompts.SystemPrompts(con)
        current = stored.current()
        text = prompts.edit(
            current.prompt, operation, content=content, find=find, replace=replace, replace_all=replace_all
        )
        return stored.save(
            text, operation=operation, author="agent", session_id=context.session_id,
            writer=writer, inherit=operation != "replace",
        )  # fmt: skip

    saved = await with_connection(context.store, apply)
    context.report.changed_prompt()
    edited: PromptEdited = {"version": saved.version}
    return _written(edited, writer)


def _memory_writes(tool_input: Mapping[str, object]) -> bool:
    return tool_input.get("action") in ("store", "forget")


TOOLS = [
    Tool(memory, name="memory", group="memory", writes=_memory_writes),
    Tool(read_system_prompt, name="read_system_prompt", group="memory"),
    Tool(edit_system_prompt, name="edit_system_prompt", group="memory", writes=True),
]


async def _with_memories(action: Callable[[memory_store.Memories], T]) -> T:
    return await with_connection(current_context().store, lambda con: action(memory_store.Memories(con)))
