"""The Agent panel's secrets row: which secrets this kernel declared, where each may go,
and the person binding one to its hosts.

The panel runs these as a silent ``execute_request`` from a click (never during a turn:
the kernel runs it when the turn has ended). A binding is the person's, like
``%agent_secret NAME --host HOST``: :func:`agent_kernel.authority.person` refuses it
while a turn runs, so code the model runs cannot call it to widen where a secret goes.
Values never leave the kernel: the row shows names, whether each is set, and hosts.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from IPython.core.error import UsageError

from agent_kernel.magics import agent as magics
from agent_kernel.magics.chat import MAX_NAME_CHARS, JsonValue, active_magics, decode_payload

__all__ = ["SecretRowJson", "bind_secret_from_panel", "secrets_state"]

_KEYS = frozenset({"name", "hosts"})


class SecretRowJson(TypedDict):
    """One declared secret as the panel shows it (never its value)."""

    name: str
    source: Literal["typed", "environment"]  # %agent_secret, or AgentKernel.secret_env
    set: bool  # it has a value in this kernel now
    hosts: list[str]  # where it may go: bound here or in AgentKernel.secret_hosts
    configured: list[str]  # of those, the ones AgentKernel.secret_hosts names
    allowed: list[str]  # bound to none: the hosts a Send on the approval card allowed
    decided_by: dict[str, str]  # each host bound or allowed here, with the person's event


def secrets_state() -> JsonValue:
    """The declared secrets of this kernel for the panel (an empty list before the
    extension is loaded: the row offers nothing to bind then)."""
    from agent_kernel.secrets import configured_hosts

    active = magics._ACTIVE
    if active is None:
        return JsonValue([])
    secrets, configured = active.kernel_agent.secrets, active.settings.secret_hosts
    typed = secrets.typed()
    rows: list[SecretRowJson] = []
    for name in sorted({*typed, *secrets.env_names()}):
        rows.append({
            "name": name, "source": "typed" if name in typed else "environment",
            "set": secrets.declared(name) is not None,
            "hosts": [str(h) for h in secrets.hosts(name, configured)],
            "configured": [str(h) for h in configured_hosts(configured.get(name, []))],
            "allowed": [str(h) for h in secrets.allowed_hosts(name)],
            "decided_by": secrets.decided_by(name),
        })  # fmt: skip
    return JsonValue(rows)


def bind_secret_from_panel(encoded: str) -> None:
    """Bind a declared secret to the hosts the person typed in the panel (none: unbound, so
    each host asks once), replacing what this kernel bound it to."""
    from agent_kernel.authority import TrustRefused, person
    from agent_kernel.secrets import HOST_CHARS, MOST_HOSTS, parse_host

    payload = decode_payload(encoded, "binding", 4 * (MAX_NAME_CHARS + MOST_HOSTS * (HOST_CHARS + 12)))
    if set(payload) != _KEYS:
        raise UsageError('A binding from the panel is {"name": NAME, "hosts": [HOST, ...]}.')
    name, hosts = payload["name"], payload["hosts"]
    if not isinstance(name, str) or not name.isidentifier() or len(name) > MAX_NAME_CHARS:
        raise UsageError("A secret's name is an environment variable name.")
    if not isinstance(hosts, list) or len(hosts) > MOST_HOSTS:
        raise UsageError(f"A secret is bound to at most {MOST_HOSTS} hosts, given as a list.")
    try:
        parsed = list(dict.fromkeys(parse_host(h) for h in hosts))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    active = active_magics()
    secrets = active.kernel_agent.secrets
    if name not in secrets.typed() and name not in secrets.env_names():
        raise UsageError(f"{name} is not a secret of this kernel: declare it with %agent_secret {name} first.")
    shown = " ".join(str(h) for h in parsed) or "no host"
    try:
        event = person("panel", f"bind {name} to {shown}")
    except TrustRefused as exc:
        raise UsageError(f"Binding a secret is refused here: {exc}") from None
    secrets.bind(name, parsed, event)
