"""The ``llm`` group, part one: ``llm_generate``, one model call without tools or conversation.

Its calls are the turn's side calls: stored in ``model_calls`` and counted toward the
session's tokens, cost and limits (see :mod:`agent_kernel.llm`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from agent_kernel.errors import ToolInputError
from agent_kernel.llm import GenerationError, agenerate
from agent_kernel.tools import Tool

PROMPT_CHARS = 400_000  # about 100k tokens
SYSTEM_CHARS = 100_000
SCHEMA_CHARS = 20_000
MAX_TOKENS = 64_000


class Generated(TypedDict):
    """``llm_generate``'s reply: the text, the parsed answer when a schema was given, the usage."""

    text: str
    parsed: NotRequired[object]  # a schema was given and the answer matched it
    usage: dict[str, int]
    error: NotRequired[str]  # the call gave no usable answer


async def llm_generate(
    prompt: Annotated[str, Field(min_length=1, max_length=PROMPT_CHARS)],
    system: Annotated[str, Field(max_length=SYSTEM_CHARS)] | None = None,
    intelligence: Literal["low", "medium", "high"] = "low",
    schema: dict[str, Any] | None = None,
    max_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS)] | None = None,
    temperature: Annotated[float, Field(ge=0, le=1)] | None = None,
) -> Generated:
    """One model call without tools or conversation: classify, extract, summarise, translate.

    Cheaper than doing it yourself for a small, self-contained job. For many items, call
    agent_kernel.llm.generate_many(prompts, ...) from run_code instead (concurrent, results
    in order). Its tokens count toward this session's usage and limits.

    Args:
        prompt: Everything the call needs to know (it sees nothing of this conversation).
        system: A system prompt for the call.
        intelligence: low (cheap and fast: classification, extraction; the default), medium, or high (most capable).
        schema: A JSON Schema the answer must match: the reply is JSON, returned parsed in `parsed`.
        max_tokens: Most output tokens (default 4096).
        temperature: Accepted (0 to 1) but not sent: current models have no sampling temperature.
    """
    if schema is not None and len(json.dumps(schema, default=str)) > SCHEMA_CHARS:
        raise ToolInputError(f"schema is over {SCHEMA_CHARS:,} characters of JSON; send a smaller schema.")
    try:
        result = await agenerate(
            prompt,
            system=system,
            intelligence=intelligence,
            schema=schema,
            max_tokens=max_tokens,
        )  # fmt: skip (temperature: validated above, never sent; see agent_kernel.llm)
    except GenerationError as exc:
        raise ToolInputError(f"llm_generate: {exc}") from None
    except (ValueError, TypeError) as exc:
        raise ToolInputError(f"Invalid input for llm_generate: {exc}") from None
    reply: Generated = {"text": result.text, "usage": dict(result.usage)}
    if result.structured and result.error is None:
        reply = {"text": result.text, "parsed": result.parsed, "usage": dict(result.usage)}
    if result.error is not None:
        reply["error"] = result.error
    return reply


TOOLS = [Tool(llm_generate, name="llm_generate", group="llm")]
