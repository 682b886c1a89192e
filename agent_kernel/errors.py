"""Errors raised by agent-kernel.

Every error the project raises on purpose derives from one root. The classes of this module
are the ones a caller catches; the others are defined beside the code that raises them
(the module in brackets) and are caught as their base::

    AgentKernelError
    ├── ConfigError           a setting or a turn option holds a value that cannot be used
    ├── ModelError            the model could not be reached or refused the request
    │   └── MissingKeyError   no API key in the environment
    ├── SessionError          a session name that does not exist, or already does
    │   └── TurnInProgressError  a turn was started while another one runs
    ├── StoreError            the DuckDB file could not be opened or written
    ├── ToolInputError        a tool was called with input it cannot use
    │   ├── ServerError       an MCP server failed to start, answer or stay up (tools/mcp.py)
    │   ├── ServerRefused     an MCP server answered a call with an error (tools/mcp.py)
    │   └── StoredToolError   an agent-defined tool's code failed (tools/stored_run.py)
    ├── TurnFailedError       a turn did not end normally (raised by %agent; see outcome.py)
    ├── GenerationError       an llm.generate call gave no usable answer (llm.py)
    ├── ScheduleError         a job or reminder cannot be created or changed as asked (scheduler/)
    │   ├── NotFoundError     no job or run answers to the id or name given (scheduler/)
    │   └── InvalidJob        a job holds something the scheduler will not run (scheduler/checks.py)
    └── TrustRefused          code running inside a turn asked to change trust (authority.py)

``tests/test_docs_drift.py`` imports every module and finds each subclass here, under
its base. The magics show these errors as an IPython ``UsageError`` (no traceback), so
each carries a message written for the person reading the cell.
"""

from __future__ import annotations

__all__ = [
    "AgentKernelError",
    "ConfigError",
    "MissingKeyError",
    "ModelError",
    "SessionError",
    "StoreError",
    "ToolInputError",
    "TurnFailedError",
    "TurnInProgressError",
]


class AgentKernelError(Exception):
    """Root of every error agent-kernel raises on purpose."""


class ConfigError(AgentKernelError):
    """A setting (``AgentKernel.tool_groups``) or a turn option (``thinking``) has a value
    agent-kernel cannot use; the message names the values it takes."""


class ModelError(AgentKernelError):
    """The model call failed in a way a retry will not fix."""


class MissingKeyError(ModelError):
    """No API key is configured."""


class SessionError(AgentKernelError):
    """A session could not be found or created."""


class TurnInProgressError(SessionError):
    """A turn was started while another turn of the same agent is running."""


class StoreError(AgentKernelError):
    """The agent's DuckDB file could not be used."""


class ToolInputError(AgentKernelError):
    """A tool's input is unusable; the message is sent to the model as an ``is_error`` result."""


class TurnFailedError(AgentKernelError):
    """An ``%agent`` turn did not end normally; the message is the one line the cell shows.

    IPython, papermill and nbclient show only that line (``_render_traceback_``): the
    frames would be agent-kernel's own, which say nothing about what went wrong.
    """

    def __init__(self, line: str, ending: str, *, footer: str | None = None) -> None:
        super().__init__(line)
        self.line = line
        self.ending = ending
        self.footer = footer  # the turn's footer, shown above the line (which stays last)

    def _render_traceback_(self) -> list[str]:
        return ([self.footer] if self.footer else []) + [f"\x1b[31m{self.line}\x1b[0m"]
