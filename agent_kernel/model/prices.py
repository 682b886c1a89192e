"""What a model call costs: list prices of the Claude models, in USD per million tokens.

The table holds Anthropic's list prices (platform.claude.com "Pricing", checked November
2026). ``AgentKernel.prices`` adds or replaces models (a negotiated rate, a proxy's own
model names). A model found in neither has no price, and its calls show tokens and no
cost: a cost is never guessed from a similar name.

Cache writes are priced at the 5-minute rate unless the response says which part was
written for an hour. A model with a long-prompt tier (Claude Haiku 5.5) bills every
token of a request whose prompt (input, cache reads and writes together) is over the
threshold at the higher rates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["PRICES", "Price", "call_cost", "price_for", "price_from_setting"]

_MTOK = 1_000_000


@dataclass(frozen=True)
class Price:
    """USD per million tokens of each kind."""

    input: float
    output: float
    cache_write: float  # 5-minute cache writes
    cache_read: float
    cache_write_1h: float | None = None  # defaults to twice the input price
    # Prompts over ``long_threshold`` tokens are billed at ``long`` (None: one tier).
    long_threshold: int | None = None
    long: Price | None = None


def _p(input: float, output: float, write: float, write_1h: float, read: float) -> Price:  # noqa: A002
    return Price(input, output, write, read, write_1h)


PRICES: dict[str, Price] = {
    "claude-fable-5-2": _p(8, 40, 10, 16, 0.20),
    "claude-fable-5-1": _p(10, 50, 12.5, 20, 0.25),
    "claude-mythos-5-1": _p(10, 50, 12.5, 20, 0.25),
    "claude-fable-5": _p(10, 50, 12.5, 20, 1.0),
    "claude-mythos-5": _p(10, 50, 12.5, 20, 1.0),
    "claude-opus-5-5": _p(4, 20, 5, 8, 0.20),
    "claude-opus-5": _p(5, 25, 6.25, 10, 0.50),
    "claude-opus-4-8": _p(5, 25, 6.25, 10, 0.50),
    "claude-opus-4-7": _p(5, 25, 6.25, 10, 0.50),
    "claude-opus-4-6": _p(5, 25, 6.25, 10, 0.50),
    "claude-opus-4-5": _p(5, 25, 6.25, 10, 0.50),
    "claude-opus-4-1": _p(15, 75, 18.75, 30, 1.50),
    "claude-opus-4-0": _p(15, 75, 18.75, 30, 1.50),
    "claude-opus-4": _p(15, 75, 18.75, 30, 1.50),
    "claude-sonnet-5-5": _p(2, 10, 2.5, 4, 0.10),
    "claude-sonnet-5": _p(2, 10, 2.5, 4, 0.20),
    "claude-sonnet-4-6": _p(3, 15, 3.75, 6, 0.30),
    "claude-sonnet-4-5": _p(3, 15, 3.75, 6, 0.30),
    "claude-sonnet-4-0": _p(3, 15, 3.75, 6, 0.30),
    "claude-sonnet-4": _p(3, 15, 3.75, 6, 0.30),
    "claude-3-7-sonnet": _p(3, 15, 3.75, 6, 0.30),
    "claude-haiku-5-5": Price(
        0.10, 0.50, 0.125, 0.01, 0.20, long_threshold=100_000, long=_p(0.50, 2.50, 0.625, 1.0, 0.05)
    ),
    "claude-haiku-4-5": _p(1, 5, 1.25, 2, 0.10),
    "claude-3-5-haiku": _p(0.80, 4, 1, 1.6, 0.08),
    "claude-3-haiku": _p(0.25, 1.25, 0.30, 0.50, 0.03),
}

# A dated snapshot ("claude-haiku-4-5-20251001") or "-latest" alias costs what its model does.
_SUFFIX = re.compile(r"-(\d{8}|latest)$")
_FIELDS = ("input", "output", "cache_write", "cache_read", "cache_write_1h")


def price_for(model: str | None, overrides: Mapping[str, object] | None = None) -> Price | None:
    """The price of ``model``: from ``overrides`` (AgentKernel.prices), else the table, else None."""
    if not model:
        return None
    names = [model]
    base = _SUFFIX.sub("", model)
    if base != model:
        names.append(base)
    for name in names:
        if overrides and name in overrides:
            return price_from_setting(overrides[name])
    for name in names:
        if name in PRICES:
            return PRICES[name]
    return None


def price_from_setting(value: object) -> Price:
    """A :class:`Price` from a ``prices`` setting entry, ``{"input": 3, "output": 15, ...}``.

    ``input`` and ``output`` are required; cache writes default to 1.25 times the input
    price (2 times for one-hour writes) and cache reads to 0.1 times, the API's usual rates.
    Raises ``ValueError`` with a message saying what is wrong.
    """
    if isinstance(value, Price):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"a price is a dict of USD per million tokens, not {value!r}")
    unknown = sorted(set(value) - set(_FIELDS))
    if unknown:
        raise ValueError(f"unknown price field {', '.join(map(repr, unknown))}; the fields are {', '.join(_FIELDS)}")
    missing = [f for f in ("input", "output") if f not in value]
    if missing:
        raise ValueError(f"a price needs {' and '.join(missing)} (USD per million tokens)")
    numbers: dict[str, float] = {}
    for name, number in value.items():
        if isinstance(number, bool) or not isinstance(number, (int, float)) or number < 0:
            raise ValueError(f"{name} must be a number of USD per million tokens (0 or more), not {number!r}")
        numbers[name] = float(number)
    given = numbers["input"]
    return Price(
        input=given,
        output=numbers["output"],
        cache_write=numbers.get("cache_write", given * 1.25),
        cache_read=numbers.get("cache_read", given * 0.1),
        cache_write_1h=numbers.get("cache_write_1h"),
    )


def call_cost(
    price: Price,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read: int = 0,
    cache_write: int = 0,
    cache_write_1h: int = 0,
) -> float:
    """USD for one call. ``cache_write`` counts all cache writes; ``cache_write_1h`` the
    part of them written for one hour."""
    prompt = input_tokens + cache_read + cache_write
    if price.long is not None and price.long_threshold is not None and prompt > price.long_threshold:
        price = price.long
    one_hour = min(cache_write_1h, cache_write)
    write_1h = price.cache_write_1h if price.cache_write_1h is not None else price.input * 2
    return (
        input_tokens * price.input
        + output_tokens * price.output
        + cache_read * price.cache_read
        + (cache_write - one_hour) * price.cache_write
        + one_hour * write_1h
    ) / _MTOK
