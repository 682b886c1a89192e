"""Tool input schemas as sent to the model: what pydantic generates, without its padding.

Every request carries the tool definitions, so their size is paid on every turn. Dropped
here: ``title`` keys (pydantic's restatement of each parameter name) and the
``anyOf [X, null]`` with ``default: null`` of an optional parameter (not listed in
``required``, it may simply be left out). Input is still validated against the full
schema of the function (see :class:`~agent_kernel.tools.Tool`).
"""

from __future__ import annotations

from typing import Any

_NULL = {"type": "null"}


def compact(schema: Any) -> Any:
    """``schema`` without titles and without the null branch of optional parameters."""
    if isinstance(schema, list):
        return [compact(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: compact(item) for name, item in value.items()}  # names stay
        else:
            out[key] = compact(value)
    branches = out.get("anyOf")
    if isinstance(branches, list) and _NULL in branches and "default" in out and out["default"] is None:
        rest = [b for b in branches if b != _NULL]
        del out["anyOf"], out["default"]
        out = {**rest[0], **out} if len(rest) == 1 else {"anyOf": rest, **out}
    return out
