"""The tokens of one model call, and an estimate of the next call's input before it is sent.

The API reports, for each response, input tokens in three parts (read from the prompt
cache, written to it, neither) and output tokens (thinking included). :class:`CallUsage`
holds them with the call's cost, when the model has a price (see :mod:`.prices`).

:class:`InputEstimate` says how many input tokens the next request will have without
asking the API: the last reported input plus about a token per four characters of what
the request gained since (a little more or less than the API counts, and never an
extra request).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent_kernel.model.images import sent_chars
from agent_kernel.model.prices import call_cost, price_for
from agent_kernel.model.tool_search import prompt_tools

__all__ = ["CACHE_READS_PER_TOKEN", "CHARS_PER_TOKEN", "CallUsage", "InputEstimate", "request_chars"]

CHARS_PER_TOKEN = 4
# Tokens read from the prompt cache that count as one against a session's token limit: what
# they cost beside an input token (the API bills cache reads at a tenth of the input price or less).
CACHE_READS_PER_TOKEN = 10


@dataclass(frozen=True)
class CallUsage:
    """What one model call used, and what it cost (``None``: the model has no price)."""

    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float | None = None

    @property
    def prompt_tokens(self) -> int:
        """All input tokens, cached or not: the size of the request."""
        return self.input_tokens + self.cache_read + self.cache_write

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.output_tokens

    @property
    def counted(self) -> int:
        """What the call counts against a session's token limit: every token, those read
        from the prompt cache weighed at their price (:data:`CACHE_READS_PER_TOKEN`).

        A long session resends its whole conversation with every call, almost all of it
        from the cache; counted at full weight, that alone would use up a limit meant to
        stop a runaway loop within a day's ordinary work.
        """
        read = -(-self.cache_read // CACHE_READS_PER_TOKEN)
        return self.input_tokens + self.cache_write + self.output_tokens + read

    @classmethod
    def of(cls, model: str, usage: Any, prices: Mapping[str, object] | None = None) -> CallUsage:
        """From a response's ``usage`` (the SDK's model or a dict), priced with ``prices``."""
        given, output = _field(usage, "input_tokens"), _field(usage, "output_tokens")
        cache_read, cache_write = _field(usage, "cache_read_input_tokens"), _field(usage, "cache_creation_input_tokens")
        creation = usage.get("cache_creation") if isinstance(usage, Mapping) else getattr(usage, "cache_creation", None)
        one_hour = _field(creation, "ephemeral_1h_input_tokens") if creation is not None else 0
        price = price_for(model, prices)
        cost = None
        if price is not None:
            cost = call_cost(
                price, input_tokens=given, output_tokens=output,
                cache_read=cache_read, cache_write=cache_write, cache_write_1h=one_hour,
            )  # fmt: skip
        return cls(model, given, output, cache_read, cache_write, cost)


def _field(usage: Any, name: str) -> int:
    value = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)
    return int(value or 0)


def request_chars(params: Mapping[str, Any]) -> int:
    """Characters of what a request sends the model: system prompt, tools and messages
    (an image counted as the characters its tokens stand for, see :mod:`agent_kernel.model.images`).

    A deferred tool definition is left out: the model reads it only once a tool search
    found it (see :mod:`agent_kernel.model.tool_search`).
    """
    size = 0
    for key in ("system", "tools", "messages"):
        value = params.get(key)
        if value is None:
            continue
        if key == "tools":
            value = prompt_tools(value)
        size += len(value) if isinstance(value, str) else sent_chars(value)
    return size


@dataclass
class InputEstimate:
    """The input tokens of the next request, from the last reported size and what was added."""

    tokens: int | None = None  # the last response's reported input (all parts)
    chars: int = 0  # the characters its request had

    def next(self, chars: int) -> int:
        """About how many input tokens a request of ``chars`` characters will have; 0 before
        the session's first response (nothing to measure from: that call is not held back)."""
        if self.tokens is None:
            return 0
        return max(1, self.tokens + (chars - self.chars) // CHARS_PER_TOKEN)

    def reported(self, tokens: int, chars: int) -> None:
        """A response reported ``tokens`` input tokens for a request of ``chars`` characters."""
        self.tokens, self.chars = tokens, chars
