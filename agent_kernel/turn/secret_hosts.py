"""Secrets go only to their hosts: the approval check's step for ``{secret:NAME}``.

``fetch_url`` puts a declared secret into its headers and body, ``browser_type`` into a
field (see :class:`agent_kernel.tools.web.SecretFill`). Before such a call runs, in every
mode and every turn:

- a secret bound to hosts (``%agent_secret NAME --host HOST``, ``AgentKernel.secret_hosts``,
  an earlier *Send* on this card) goes to one of them, or the call is refused;
- a secret bound to no host asks the person once per host (the card's *Send* binds it to
  that host, with the click's event, until the kernel restarts); with nobody to ask it is
  refused, unless the run's standing grants (:func:`agent_kernel.grants.standing`) name
  the host.

The tool checks again where the value is put in (the host of the URL, or of the page and
frame the field is in as they are then), so the check holds however the tool is called.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from agent_kernel.authority import card_click
from agent_kernel.display.secret_card import ask_to_send
from agent_kernel.grants import standing
from agent_kernel.secrets import Host, normal_host
from agent_kernel.tools.browser import open_page_url, page_host
from agent_kernel.tools.fetch import FetchRefused, parse_url
from agent_kernel.tools.web import bound_elsewhere, bound_nowhere, fetch_secrets, secret_names

if TYPE_CHECKING:
    from agent_kernel.secrets import Secrets
    from agent_kernel.tools import Tool
    from agent_kernel.tools.context import ToolContext


async def check_secret_hosts(
    item: Tool, tool_input: object, context: ToolContext, approver: Callable[..., Awaitable[object]] | None
) -> str | None:
    """None when every ``{secret:NAME}`` in the call goes to a host NAME is bound to (or
    the person allowed now); else why the call is refused. ``approver``: the turn's
    approver, or None when nobody can answer (the card is asked here, not through it)."""
    found = await _sends(item, tool_input, context)
    secrets = context.secrets
    if found is None or secrets is None:
        return None
    names, target, call = found
    unbound: list[str] = []
    for name in names:
        if secrets.declared(name) is None:
            continue  # the tool says it is not declared
        verdict, hosts = secrets.destination(name, target.name, target.port or 0, context.settings.secret_hosts)
        if verdict == "elsewhere":
            return bound_elsewhere(name, hosts, target)
        if verdict == "unbound" and not standing().allows_host(target.name):
            unbound.append(name)
    if not unbound:
        return None
    if approver is None:
        return bound_nowhere(unbound, target)
    return await _ask(unbound, target, call, item, context, secrets)


async def _ask(
    names: list[str], target: Host, call: str, item: Tool, context: ToolContext, secrets: Secrets
) -> str | None:
    """Ask the person to send ``names`` to ``target``; their *Send* binds them to it."""
    answer = await ask_to_send(names, str(target), call, context.session_sources(), context)
    if answer == "run":
        event = card_click(item.name, f"send {' '.join(names)} to {target}")
        for name in names:
            secrets.allow(name, target, event)
        return None
    if answer == "skip":
        return (
            f"The user declined to send {' and '.join(names)} to {target} (they clicked Skip). Do not send "
            "it there again; ask the user where it should go, or go on without it."
        )
    return bound_nowhere(names, target, getattr(answer, "reason", ""))


async def _sends(item: Tool, tool_input: object, context: ToolContext) -> tuple[list[str], Host, str] | None:
    """The secrets the call would send, the host it sends them to (and port) and the call in
    a line; None when it sends none, or its target cannot be read (the tool then refuses)."""
    if item.name == "fetch_url" and item.group == "web":
        found = fetch_secrets(tool_input)
        if found is None or not isinstance(tool_input, dict):  # a call's input is an object
            return None
        names, url = found
        try:
            _, host, port, _ = parse_url(url)
        except FetchRefused:
            return None
        method = str(tool_input.get("method") or "GET").upper()
        return names, Host(normal_host(host), port), f"fetch_url {method} {url[:300]}"
    if item.name == "browser_type" and item.group == "browser":
        if not isinstance(tool_input, dict):
            return None
        text = tool_input.get("text")
        names = secret_names(text) if isinstance(text, str) else []
        if not names:
            return None
        page = await open_page_url(context.session_id) or ""
        host, port = page_host(page)
        if not host:
            return None  # no page on the web is open: the tool types no secret there
        selector = str(tool_input.get("selector", ""))[:200]
        return names, Host(normal_host(host), port), f"browser_type into {selector!r} on {page[:300]}"
    return None
