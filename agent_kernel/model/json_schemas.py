"""Compiled JSON Schema validators, cached by the schema's JSON text.

fastjsonschema (drafts 4, 6 and 7) rather than jsonschema: importing jsonschema costs
seconds where its optional format checkers are installed, as Jupyter installs them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache

__all__ = ["Validator", "compiled"]

Validator = Callable[[object], object]
"""A compiled schema: returns the value it was given (with defaults filled in), raises
``fastjsonschema.JsonSchemaValueException`` saying where it does not match."""


@lru_cache(maxsize=256)
def compiled(schema_json: str) -> Validator:
    """The validator of the schema given as JSON text; ``ValueError`` saying why when it is
    no valid JSON Schema."""
    import fastjsonschema  # noqa: PLC0415 - ~90 ms, and only agent-defined tools have schemas to check

    try:
        validator: Validator = fastjsonschema.compile(json.loads(schema_json))
    except fastjsonschema.JsonSchemaDefinitionException as exc:
        raise ValueError(f"not a valid JSON Schema: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - malformed schemas fail in many ways while compiling
        raise ValueError(f"not a valid JSON Schema ({type(exc).__name__}: {exc}).") from None
    return validator
