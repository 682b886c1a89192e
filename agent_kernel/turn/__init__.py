"""One agent turn: the Agent, the loop, approvals, budget, prompt, sub-sessions, warm-up.

Imports go at the top of a module. Two modules here are the exceptions, by design, and
ruff's PLC0415 (import-outside-top-level, on for this package only: see
``[tool.ruff.lint.per-file-ignores]`` in ``pyproject.toml``) lets only them import inside
functions:

- ``warmup.py`` is imported by ``%load_ext agent_kernel``, which must stay cheap (no
  ``anthropic``, no ``duckdb``, nothing the first turn can import later): it imports what
  it warms up inside the functions that do it, in its own thread;
- ``agent.py`` is imported by the magics when the first ``%agent`` cell starts, before that
  turn awaits the warm-up's step in progress (``warmup.wait_for_step``): two threads
  importing the same modules at once can each get a half-initialised module. So it
  imports at its top only what ``%load_ext`` already loaded, makes its parts (the store,
  the registry, the model client) on first use, and imports what a turn needs once the
  warm-up's step is done. Every other module of the package is imported after that, and
  imports at its top.

An optional dependency (``mcp``, ``playwright``) is imported inside the function that uses
it, in the module that wraps it (under ``tools/``), never here.
"""
