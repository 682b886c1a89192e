"""The secrets of a kernel, and the one place text is redacted on its way out.

A secret is either typed by the person with ``%agent_secret NAME`` (kept in the kernel's
memory and environment) or named in ``AgentKernel.secret_env`` (an environment variable
the kernel was started with: papermill, the scheduler, JupyterHub, CI). Code reaches
both as ``os.environ["NAME"]``; values are never stored.

Everything bound for the model or the DuckDB file passes through :func:`scrub` (or
:func:`redact` for one text, :func:`redacted_json` for a value as JSON text): the request the model client sends
(:class:`~agent_kernel.model.client.ModelClient`), every statement the store runs
(:class:`~agent_kernel.store.Store`), and the cuts that shorten text before that (stdout
head and tail, summaries, SQL cells), so a cut never leaves part of a secret. They use
the secrets of every :class:`Secrets` alive in this process, plus the Anthropic key.

A secret names its hosts: ``{secret:NAME}`` in what ``fetch_url`` sends and in what
``browser_type`` types goes only to a host NAME is bound to (:class:`Host`), which the
person binds with ``%agent_secret NAME --host HOST`` or ``AgentKernel.secret_hosts``. A
secret bound to no host goes where the person allows it, asked once per host on the
approval card. :meth:`Secrets.destination` decides.

Credentials nobody declared are secrets too (:mod:`agent_kernel.credentials`):
environment variables named like one (``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``) but
those a kernel's ``AgentKernel.secret_env_ignore`` names, and text in a well-known
credential format, shown as ``[secret <kind>]``.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agent_kernel.credentials import credential_formats, undeclared
from agent_kernel.redaction import MIN_REDACTED_LENGTH, Redactor, clean_text
from agent_kernel.redaction import redacted_json as _redacted_json
from agent_kernel.redaction import scrub as _scrub

if TYPE_CHECKING:
    from agent_kernel.authority import PersonEvent

__all__ = [
    "MIN_REDACTED_LENGTH", "Host", "Secrets", "configured_hosts", "normal_host", "parse_host", "redact", "redact_frame",
    "redacted_json", "redactor", "scrub",
]  # fmt: skip

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Always secret when set, though nobody declared them: the model's own credentials.
_ALWAYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


class Secrets:
    """Named secret values of one kernel: typed ones and environment variables by name.

    ``env_names`` and ``ignore`` (the undeclared credentials not to treat as secrets) are
    read each time (a function returning the names, or the names), so
    ``%config AgentKernel.secret_env = [...]`` applies at once.
    """

    def __init__(
        self,
        env_names: Callable[[], Iterable[str]] | Iterable[str] = (),
        ignore: Callable[[], Iterable[str]] | Iterable[str] = (),
    ) -> None:
        self._values: dict[str, str] = {}
        # The hosts each secret was bound to by the person (a magic), and those a secret bound
        # to none was allowed to (the approval card), each with the label of their event.
        self._hosts: dict[str, dict[Host, str]] = {}
        self._allowed: dict[str, dict[Host, str]] = {}
        self._env_names = env_names
        self._ignore = ignore
        _LIVE.add(self)

    def set(self, name: str, value: str) -> None:
        if not _NAME.match(name):
            raise ValueError(f"{name!r} is not a valid environment variable name.")
        if not value:
            raise ValueError("An empty secret was not stored.")
        self._values[name] = value
        os.environ[name] = value

    def env_names(self) -> list[str]:
        names = self._env_names() if callable(self._env_names) else self._env_names
        return [n for n in names if _NAME.match(n)]

    def ignored(self) -> list[str]:
        names = self._ignore() if callable(self._ignore) else self._ignore
        return list(names)

    def undeclared(self, also_ignored: Iterable[str] = ()) -> list[tuple[str, str]]:
        """``(name, value)`` of the credentials in the environment nobody declared (less
        the names ignored here and ``also_ignored``)."""
        declared = set(self._values) | set(self.env_names())
        ignored = [*self.ignored(), *also_ignored]
        return [(n, v) for n, v in undeclared(os.environ, ignored) if n not in declared]

    def declared(self, name: str) -> str | None:
        """The value of a secret the person declared (typed, or named in ``secret_env``), if set."""
        if name in self._values:
            return self._values[name]
        return os.environ.get(name) or None if name in self.env_names() else None

    def names(self) -> list[str]:
        """The names the model is told: typed ones, ``secret_env`` ones (set or not), and
        the undeclared credentials of the environment (the Anthropic key is not told)."""
        found = {n for n, _ in self.undeclared() if n not in _ALWAYS}
        return sorted(set(self._values) | set(self.env_names()) | found)

    def pairs(self, also_ignored: Iterable[str] = ()) -> list[tuple[str, str]]:
        """``(name, value)`` of every secret that has a value now (a name may have several:
        a URL and its password); ``also_ignored``: undeclared names not to count."""
        found = dict(self._values)
        for name in self.env_names():
            value = os.environ.get(name)
            if value and name not in found:
                found[name] = value
        return list(found.items()) + self.undeclared(also_ignored)

    def redact(self, text: str) -> str:
        """``text`` with every secret of this process replaced by ``[secret NAME]``."""
        return redact(text)

    def typed(self) -> list[str]:
        """The names the person typed a value for in this kernel (``%agent_secret``)."""
        return sorted(self._values)

    def allowed_hosts(self, name: str) -> list[Host]:
        """The hosts ``name``, bound to none, was allowed to on the approval card."""
        return list(self._allowed.get(name, {}))

    def bind(self, name: str, hosts: Iterable[Host], by: PersonEvent) -> None:
        """The person bound ``name`` to ``hosts`` (a magic): they replace what it was bound
        to and allowed in this kernel; no host leaves it unbound (each host asks once)."""
        self._hosts[name] = {host: by.label() for host in hosts}
        self._allowed.pop(name, None)

    def allow(self, name: str, host: Host, by: PersonEvent) -> None:
        """The person allowed ``name``, bound to no host, to go to ``host`` (a click on the
        approval card), for as long as this kernel runs; other hosts still ask."""
        self._allowed.setdefault(name, {})[host] = by.label()

    def hosts(self, name: str, configured: Mapping[str, Iterable[str]] | None = None) -> list[Host]:
        """The hosts ``name`` is bound to: in this kernel and in ``configured``
        (``AgentKernel.secret_hosts``, validated with :func:`parse_host`)."""
        found = list(self._hosts.get(name, {}))
        return found + [h for h in configured_hosts((configured or {}).get(name, ())) if h not in found]

    def decided_by(self, name: str) -> dict[str, str]:
        """Each host ``name`` was bound to or allowed in this kernel, with the person's event."""
        both = {**self._hosts.get(name, {}), **self._allowed.get(name, {})}
        return {str(host): label for host, label in both.items()}

    def destination(
        self, name: str, host: str, port: int, configured: Mapping[str, Iterable[str]] | None = None
    ) -> tuple[Destination, list[Host]]:
        """Whether ``name`` may go to ``host`` at ``port``, and the hosts it is bound to:

        - ``"bound"``: one of its hosts, or (bound to none) one the person allowed it to;
        - ``"elsewhere"``: it is bound to other hosts only: never;
        - ``"unbound"``: bound to no host, and not allowed to this one: the person decides.
        """
        hosts = self.hosts(name, configured)
        if hosts or (configured or {}).get(name):
            return ("bound" if any(h.matches(host, port) for h in hosts) else "elsewhere"), hosts
        if any(h.matches(host, port) for h in self._allowed.get(name, {})):
            return "bound", hosts
        return "unbound", hosts


# Where a secret may go, as Secrets.destination says.
Destination = Literal["bound", "elsewhere", "unbound"]

MOST_HOSTS = 100  # the hosts one secret may be bound to
HOST_CHARS = 253  # a DNS name's longest spelling
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")


@dataclass(frozen=True)
class Host:
    """A host a secret may go to: a DNS name or an IP address, and a port (``None``: any).

    Names match exactly (no wildcards, no subdomains): lower-cased, without a trailing dot,
    an international name in its ASCII form, an address in its usual spelling.
    """

    name: str
    port: int | None = None

    def matches(self, host: str, port: int) -> bool:
        """Whether a request to ``host`` at ``port`` goes to this host."""
        return self.name == normal_host(host) and (self.port is None or self.port == port)

    def __str__(self) -> str:
        shown = f"[{self.name}]" if ":" in self.name else self.name
        return shown if self.port is None else f"{shown}:{self.port}"


def normal_host(host: str) -> str:
    """``host`` as hosts are compared: lower-cased, without brackets or a trailing dot, an
    international name in IDNA form, an IP address in its usual spelling (another spelling
    of an address, ``2130706433``, stays as written and so matches no binding)."""
    bare = host.strip()
    if bare.startswith("[") and bare.endswith("]"):
        bare = bare[1:-1]
    bare = bare.rstrip(".").lower()
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        pass
    if not bare.isascii():
        try:
            import idna

            bare = idna.encode(bare, uts46=True).decode("ascii")
        except Exception:  # noqa: BLE001 - idna raises several kinds; such a name matches nothing
            return bare
    return bare


def configured_hosts(texts: Iterable[str]) -> list[Host]:
    """The hosts a setting names (``AgentKernel.secret_hosts[NAME]``); a spelling written
    past the setting's check (in place, by code) binds to nothing."""
    found: list[Host] = []
    for text in texts:
        try:
            host = parse_host(text)
        except ValueError:
            continue
        if host not in found:
            found.append(host)
    return found


def parse_host(text: str) -> Host:
    """The host a person wrote (``api.example.com``, ``api.example.com:8443``, ``10.0.0.5``,
    ``[::1]:8080``); raises ``ValueError`` with a sentence saying what is wrong."""
    if not isinstance(text, str) or not 1 <= len(text) <= HOST_CHARS + 8 or not text.isprintable() or " " in text:
        raise ValueError(
            f"A host is a name such as api.example.com (at most {HOST_CHARS} characters), not {str(text)[:80]!r}."
        )
    if any(c in text for c in "/@*?#%\\") or text.count("[") != text.count("]"):
        raise ValueError(
            f"{text!r} is not a host: give the name alone (api.example.com, or api.example.com:8443 "
            "for one port), no scheme, path, user or wildcard."
        )
    name, port = _split_port(text)
    host = normal_host(name)
    if not _is_address(host) and not _is_name(host):
        raise ValueError(f"{text!r} is not a host name or an IP address.")
    return Host(host, port)


def _split_port(text: str) -> tuple[str, int | None]:
    """The host part of ``text`` and its port, if it names one."""
    if text.startswith("["):
        name, _, rest = text[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ValueError(f"{text!r} is not a host: text follows the address.")
        return name, _port(text, rest[1:]) if rest else None
    if text.count(":") == 1:
        name, port = text.split(":")
        return name, _port(text, port)
    return text, None


def _port(text: str, port: str) -> int:
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{text!r} has no valid port (1 to 65535 after the colon).")
    return int(port)


def _is_address(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return not (isinstance(address, ipaddress.IPv6Address) and address.scope_id)


def _is_name(host: str) -> bool:
    labels = host.split(".")
    if len(host) > HOST_CHARS or not all(_LABEL.fullmatch(label) for label in labels) or labels[-1].isdigit():
        return False
    try:  # an address in another spelling (127.1, 0x7f.1) is no name
        socket.inet_aton(host)
    except OSError:
        return True
    return False


_LIVE: weakref.WeakSet[Secrets] = weakref.WeakSet()
_cached: tuple[tuple[tuple[str, str], ...], Redactor] | None = None
# What the cached redactor was made from (see _sources), and that redactor.
_made_from: tuple[Any, Redactor] | None = None


def redactor() -> Redactor:
    """The redactor for every secret this process knows now (cached while they stay the same)."""
    global _cached, _made_from
    live = list(_LIVE)
    sources = _sources(live)
    made = _made_from
    if made is not None and sources is not None and made[0] == sources:
        return made[1]
    pairs: dict[str, str] = {}
    # A name a kernel's settings ignore is no undeclared credential for any Secrets of the
    # process (they share the environment); a declared one stays a secret.
    ignored = {name for secrets in live for name in secrets.ignored()}
    for secrets in live:
        for name, value in secrets.pairs(ignored):
            pairs.setdefault(value, name)
    if not live:  # a process without a kernel's settings (the scheduler, the server)
        for name, value in undeclared(os.environ):
            pairs.setdefault(value, name)
    for name in _ALWAYS:
        set_value = os.environ.get(name)
        if set_value and len(set_value) >= 8:
            pairs.setdefault(set_value, name)
    key = tuple(sorted((n, v) for v, n in pairs.items()))
    if _cached is None or _cached[0] != key:
        _cached = (key, Redactor(key, formats=credential_formats()))
    _made_from = (sources, _cached[1]) if sources is not None else None
    return _cached[1]


def _sources(live: list[Secrets]) -> tuple[Any, ...] | None:
    """Everything :func:`redactor` reads, copied (``None`` where the environment cannot be
    copied whole): the environment and each live :class:`Secrets`' values and names.

    Reading the secrets from them walks the environment in Python and matches each name
    (a tenth of a millisecond and more), and every statement the store runs and every
    request asks for the redactor; comparing this copy with the last one is a few
    microseconds."""
    environ = getattr(os.environ, "_data", None)  # the process's variables, encoded
    if not isinstance(environ, dict):
        return None
    return dict(environ), [(tuple(s._values.items()), s.env_names(), s.ignored()) for s in live]


def redact(text: str) -> str:
    """``text``, encodable, with every known secret replaced by ``[secret NAME]``."""
    return redactor().text(clean_text(text))


def scrub(value: Any, *, default: Callable[[Any], Any] | None = None) -> Any:
    """A JSON-ready copy of ``value``: encodable, depth-bounded, every known secret redacted."""
    return _scrub(value, redactor(), default=default)


def redacted_json(value: Any, *, default: Callable[[Any], Any] | None = None) -> str:
    """The JSON text of ``value`` (non-ASCII kept), encodable, every known secret redacted
    in its raw strings: ``json.dumps(scrub(value))``, walking ``value`` only when it must."""
    return _redacted_json(value, redactor(), default=default)


def redact_frame(frame: Any) -> Any:
    """``frame`` with its column names and text cells (also text inside list and dict
    cells) redacted: a pandas frame itself when it holds no secret, else a copy; a pyarrow
    or polars frame comes back as pandas.

    For a write of kernel frames into the store (``CREATE TABLE ai_x AS SELECT * FROM df``):
    the values DuckDB reads from a frame do not pass through a statement's parameters.
    """
    import pandas as pd

    strings = redactor()
    if not strings:
        return frame
    if not isinstance(frame, pd.DataFrame):
        frame = frame.to_pandas()
    names = [str(c) for c in frame.columns]
    renamed = strings.texts(names)
    changed: dict[Any, pd.Series] = {}
    for column in frame.columns:
        values = frame[column]
        kind = values.dtype
        if not (pd.api.types.is_object_dtype(kind) or isinstance(kind, (pd.StringDtype, pd.CategoricalDtype))):
            continue
        cells = values.tolist()
        redacted = _redacted_cells(cells, strings)
        if redacted is not cells:
            dtype = None if isinstance(kind, pd.CategoricalDtype) else kind
            changed[column] = pd.Series(redacted, index=frame.index, dtype=dtype)
    if not changed and renamed is names:
        return frame
    copy = frame.copy()
    for column, series in changed.items():
        copy[column] = series
    copy.columns = renamed
    return copy


def _redacted_cells(cells: list[Any], strings: Redactor) -> list[Any]:
    """``cells`` with their text redacted (the same list when none changed)."""
    texts = [c for c in cells if isinstance(c, str)]
    redacted = iter(strings.texts([clean_text(t) for t in texts]))
    out: list[Any] = []
    changed = False
    for cell in cells:
        new: Any
        if isinstance(cell, str):
            new = next(redacted)
        elif isinstance(cell, (list, tuple, dict)):
            new = _scrub(cell, strings)
            new = cell if new == (list(cell) if isinstance(cell, tuple) else cell) else new
        else:
            new = cell
        changed = changed or new is not cell
        out.append(new)
    return out if changed else cells
