"""The line under a finished turn: model, tools, time, tokens, cache share and cost.

    claude-sonnet-5-5 · 2 tool calls · 4.1 s · this turn: 31,204 tokens, 88% of input from cache · $0.0123
    (session 'sales': 2% of its token limit · 195,310 of 10,000,000 tokens, $0.0412)

Each figure says what it counts. "this turn" is every token the turn's calls sent and
received, cache reads included (what the API reports). The session's part is its limits:
its tokens are those its token limit counts, every call's since it started (cache reads at
a tenth, as they are billed; see :attr:`agent_kernel.model.usage.CallUsage.counted`), so
they grow more slowly than the turns' own figures, and its cost is the sum of its turns'.
How close the session is to stopping is the larger share of its token limit and its cost
limit. (The chat's context meter counts a third thing: the size of the last request.)

A turn that started sub-sessions counts their calls as its own (they count against the
session's limits) and says how much of it they were:

    ... · 2 tool calls · 9.0 s · 52,000 tokens incl. 2 sub-sessions: 40,000 tokens, ...

The cache share is the part of the turn's input tokens read from the prompt cache (billed
at a tenth of the input price or less). The cost is shown only for models with a price
(see :mod:`agent_kernel.model.prices`); a turn with calls to a model without one says so
instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TurnFigures", "footer_line", "usd"]


@dataclass(frozen=True)
class TurnFigures:
    """What the footer reports about one turn."""

    model: str
    tool_calls: int
    seconds: float
    tokens: int
    input_tokens: int
    cache_read_tokens: int
    cost: float | None  # USD of the priced calls; None: no call had a price
    unpriced_calls: int
    session: str
    session_tokens: int
    token_limit: int
    session_cost: float
    new_session: bool = False
    web_searches: int = 0  # the API's server-side searches and fetches (billed per use)
    web_fetches: int = 0
    subsessions: int = 0  # started in the turn, at any depth; the figures above include them
    subsession_tokens: int = 0
    subsession_cost: float = 0.0
    cost_limit: float | None = None  # USD per session; None: no cost limit


def usd(amount: float) -> str:
    """Dollars with the precision a small amount needs ($0.0042, $1.23, $1,234.50)."""
    if amount >= 1:
        return f"${amount:,.2f}"
    return f"${amount:.4f}"


def footer_line(f: TurnFigures) -> str:
    model = f.model
    if model.startswith("scripted"):
        model += " (offline scripted model, not Claude)"
    calls = f"{f.tool_calls} tool call{'s' if f.tool_calls != 1 else ''}"
    for count, what in ((f.web_searches, "web search"), (f.web_fetches, "web fetch")):
        if count:
            calls += f" · {count} {what}{'es' if count != 1 else ''}"
    tokens = f"this turn: {f.tokens:,} tokens"
    if f.subsessions:
        plural = "s" if f.subsessions != 1 else ""
        tokens += f" incl. {f.subsessions} sub-session{plural}: {f.subsession_tokens:,} tokens"
        if f.subsession_cost:
            tokens += f" ({usd(f.subsession_cost)})"
    if f.input_tokens:
        tokens += f", {f.cache_read_tokens / f.input_tokens:.0%} of input from cache"
    parts = [model, calls, f"{f.seconds:.1f} s", tokens]
    if f.cost is not None:
        parts.append(usd(f.cost) + (" + unpriced calls" if f.unpriced_calls else ""))
    else:
        parts.append("no price for this model")
    session_cost = f", {usd(f.session_cost)}" if f.session_cost or f.cost is not None else ""
    return (
        " · ".join(parts) + f" ({'new ' if f.new_session else ''}session {f.session!r}: {limit_share(f)} · "
        f"{f.session_tokens:,} of {f.token_limit:,} tokens{session_cost})"
    )


def limit_share(f: TurnFigures) -> str:
    """How close the session is to the limit it will reach first: "34% of its token limit"."""
    shares = [(f.session_tokens / f.token_limit if f.token_limit > 0 else 0.0, "token")]
    if f.cost_limit:
        shares.append((f.session_cost / f.cost_limit, "cost"))
    share, which = max(shares)
    shown = "under 1%" if 0 < share < 0.01 else f"{share:.0%}"
    return f"{shown} of its {which} limit"
