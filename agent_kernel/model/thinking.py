"""Claude's thinking, as request parameters: ``AgentKernel.thinking`` and ``%agent --think``.

Two API forms exist. Claude 4.6 and later models (and any model whose name does not say
it is older) take *adaptive* thinking, where the model decides how much to think and
``output_config.effort`` steers it; a level here is that effort. Claude 4.5 and earlier
take only *enabled* thinking with a fixed ``budget_tokens``; a level here is a budget,
and ``max_tokens`` grows to leave room for the answer after it.

Adaptive thinking asks for ``display: "summarized"`` so the thinking comes back as text
to show (some models return it empty by default). Thinking tokens are output tokens:
they count in usage and cost like the answer's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal, TypedDict

__all__ = ["LEVELS", "OFF", "ThinkingParams", "thinking_params", "uses_adaptive"]

OFF = ("", "off", "none")
LEVELS = ("adaptive", "low", "medium", "high", "max")
# Budgets for models that take only a fixed thinking budget.
BUDGETS = {"adaptive": 8_000, "low": 2_000, "medium": 8_000, "high": 16_000, "max": 32_000}

_VERSION = re.compile(r"claude-(?:(\d+)-(\d+)-(?:opus|sonnet|haiku)|(?:opus|sonnet|haiku)-(\d+)(?:-(\d))?)(?:-|$)")


def uses_adaptive(model: str) -> bool:
    """Whether ``model`` takes adaptive thinking (False for Claude 4.5 and earlier)."""
    match = _VERSION.search(model)
    if match is None:
        return True  # newer families (fable, mythos) and names this does not know
    if match.group(1) is not None:  # claude-3-7-sonnet, claude-3-5-haiku
        return False
    major, minor = int(match.group(3)), int(match.group(4) or 0)
    return (major, minor) >= (4, 6)


class AdaptiveThinking(TypedDict):
    type: Literal["adaptive"]
    display: Literal["summarized"]


class BudgetThinking(TypedDict):
    type: Literal["enabled"]
    budget_tokens: int


class OutputConfig(TypedDict, total=False):
    """A request's ``output_config``: the thinking effort, a structured answer's format."""

    effort: str
    format: Mapping[str, object]


class ThinkingParams(TypedDict, total=False):
    """The request parameters thinking adds (none of them when it is off)."""

    thinking: AdaptiveThinking | BudgetThinking
    output_config: OutputConfig
    max_tokens: int


def thinking_params(model: str, level: str, max_tokens: int) -> ThinkingParams:
    """The request parameters that turn thinking on at ``level`` (nothing when it is off)."""
    level = level.strip().lower()
    if level in OFF:
        return {}
    if level not in LEVELS:
        raise ValueError(f"thinking must be off or one of {', '.join(LEVELS)}, not {level!r}")
    if uses_adaptive(model):
        params: ThinkingParams = {"thinking": {"type": "adaptive", "display": "summarized"}}
        if level != "adaptive":
            params["output_config"] = {"effort": level}
        return params
    budget = BUDGETS[level]
    return {
        "thinking": {"type": "enabled", "budget_tokens": budget},
        "max_tokens": max_tokens if max_tokens > budget else budget + max_tokens // 2,
    }
