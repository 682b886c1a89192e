"""An HTTP(S) GET or HEAD from the kernel that cannot be turned against the user's network.

Each hop (the URL, then every redirect, followed here and never by the client):

1. the URL is parsed once, here: http or https only, no user name or password, a host
   without control characters; the request is built from these parts, so no second
   parser can read the URL differently;
2. the host is resolved **once** (a literal address in any spelling is read as such) and
   every address it resolves to must pass :func:`agent_kernel.tools.addresses.refusal`;
3. the connection goes to that validated address only: the request's URL carries the
   address itself, with the ``Host`` header and the TLS server name (SNI and certificate
   check) set to the original host, so no later DNS answer can change where it goes;
4. ports other than the web's usual ones are refused;
5. a redirect to another origin (scheme, host or port) drops every header the caller
   set: a key meant for one service (``Authorization``, ``X-Api-Key``, a cookie) never
   reaches the next, and no list of "credential headers" has to guess which ones matter.

A host or address in the user's ``fetch_allow`` skips steps 2 and 4. Proxies from the
environment are ignored (``trust_env=False``): with a proxy, the proxy would connect.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urljoin, urlsplit

import certifi
import idna

from agent_kernel.tools import addresses
from agent_kernel.tools.addresses import IPAddress

__all__ = ["FetchError", "FetchRefused", "Fetched", "Resolver", "checked_target", "fetch", "parse_url"]

# Resolves a host name to its addresses (a function of host and port); sync or async.
Resolver = Callable[[str, int], Iterable[str] | Awaitable[Iterable[str]]]

PORTS = {80, 443, 8000, 8080, 8443}
MAX_REDIRECTS = 5
_FORBIDDEN_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "upgrade", "te"}


class FetchRefused(Exception):
    """The URL (or a redirect) leads somewhere ``fetch_url`` may not go; the message says why."""


class FetchError(Exception):
    """The fetch failed on the way (connection, timeout, protocol)."""


@dataclass
class Fetched:
    """What came back: the last hop's status, type, the body (up to the cap) and the way there."""

    url: str
    status: int
    content_type: str
    body: bytes
    truncated: bool
    hops: list[str] = field(default_factory=list)  # every URL requested, in order
    addresses: list[str] = field(default_factory=list)  # the address each hop connected to


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str  # as written (lowercased, IDNA-encoded)
    port: int
    target: str  # path and query
    address: IPAddress

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    def pinned_url(self) -> str:
        literal = f"[{self.address}]" if self.address.version == 6 else str(self.address)
        return f"{self.scheme}://{literal}:{self.port}{self.target}"

    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


async def system_resolver(host: str, port: int) -> list[str]:
    """The system's resolver (``getaddrinfo``), run off the event loop."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def _parse(url: str) -> tuple[str, str, int, str]:
    """Scheme, host, port and path+query of ``url``, or :class:`FetchRefused` saying what is wrong."""
    if any(ord(c) < 0x21 or c == "\x7f" for c in url.strip()):
        raise FetchRefused(f"The URL {url!r} holds spaces or control characters; send a clean URL.")
    try:
        parts = urlsplit(url.strip())
        port_given = parts.port
    except ValueError as exc:
        raise FetchRefused(f"The URL {url!r} cannot be read ({exc}).") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise FetchRefused(
            f"fetch_url only fetches http and https URLs, not {scheme or 'a URL without a scheme'}: {url!r}."
        )
    if "@" in parts.netloc or parts.username is not None or parts.password is not None:
        raise FetchRefused(
            f"The URL {url!r} has a user name or password before the host (user@host), which "
            "fetch_url refuses; send credentials in a header instead."
        )
    raw_host = parts.hostname or ""
    if not raw_host or any(c in raw_host for c in "%\\"):
        raise FetchRefused(f"The URL {url!r} has no usable host.")
    host = raw_host
    if not raw_host.startswith("[") and ":" not in raw_host and not raw_host.isascii():
        try:
            host = idna.encode(raw_host, uts46=True).decode("ascii")
        except Exception:  # noqa: BLE001 - idna raises several kinds
            raise FetchRefused(f"The host of {url!r} is not a valid international domain name.") from None
    port = port_given if port_given is not None else (443 if scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return scheme, host.lower(), port, target


def parse_url(url: str) -> tuple[str, str, int, str]:
    """Scheme, host, port and path+query of ``url`` as :func:`fetch` reads it (the host it
    connects to: lower-cased, IDNA-encoded), or :class:`FetchRefused` saying what is wrong."""
    return _parse(url)


async def _target(url: str, allow: list[str], resolve: Resolver) -> _Target:
    scheme, host, port, path = _parse(url)
    try:
        literal = addresses.literal_address(host)
    except ValueError as exc:
        raise FetchRefused(f"The host of {url!r} is refused: {exc}.") from None
    opened = addresses.allowed_by(allow, host)
    if literal is not None:
        found: list[IPAddress] = [literal]
    else:
        try:
            answer = resolve(host, port)
            if asyncio.iscoroutine(answer) or isinstance(answer, Awaitable):
                answer = await answer
            found = [addresses.literal_address(str(a)) or _not_an_address(a) for a in answer]
        except (OSError, UnicodeError) as exc:
            raise FetchError(f"Could not resolve {host}: {exc}.") from None
        if not found:
            raise FetchError(f"{host} resolves to no address.")
    first = found[0]
    if not opened and all(addresses.allowed_by(allow, host, a) for a in found):
        opened = True
    if not opened:
        refused = addresses.refusal_of_all(found)
        if refused is not None:
            address, why = refused
            shown = host if literal is None else url
            named = f"{host} resolves to {address}" if literal is None else f"{address}"
            raise FetchRefused(
                f"Refused {shown}: {named} is {why}. fetch_url only reaches public addresses, so it "
                "cannot be used against the user's own machine or network. If the user trusts this "
                f"host, they can allow it: %config AgentKernel.fetch_allow = [{host!r}] "
                "(a host name, an address or a network such as '10.0.0.0/8')."
            )
        if port not in PORTS:
            raise FetchRefused(
                f"Refused {url}: port {port} is not a web port ({', '.join(map(str, sorted(PORTS)))}). "
                f"The user can allow the host: %config AgentKernel.fetch_allow = [{host!r}]."
            )
    return _Target(scheme, host, port, path, first)


async def checked_target(url: str, allow: list[str]) -> IPAddress:
    """The one address ``url``'s host may be reached at under the rules above (resolved once
    with the system resolver); raise :class:`FetchRefused` or :class:`FetchError`. The
    browser's proxy connects to exactly this address (see tools/browser_proxy.py)."""
    return (await _target(url, allow, system_resolver)).address


def _not_an_address(value: Any) -> IPAddress:
    raise OSError(f"the resolver gave {value!r}, which is not an address")


def _headers(given: dict[str, str] | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    for key, value in (given or {}).items():
        name = str(key).strip()
        if name.lower() in _FORBIDDEN_HEADERS:
            raise FetchRefused(f"fetch_url sets the {name} header itself; leave it out of headers.")
        if any(c in name + str(value) for c in "\r\n\x00"):
            raise FetchRefused(f"The header {name!r} holds a line break or NUL; send it without.")
        headers[name] = str(value)
    return headers


METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
BODY_BYTES = 1_000_000  # the most a request body may carry


async def fetch(
    url: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    max_bytes: int = 1_000_000,
    timeout_s: float = 20.0,
    allow: Iterable[str] = (),
    resolve: Resolver | None = None,
    transport: Any = None,
    body: bytes | None = None,
) -> Fetched:
    """Fetch ``url`` hop by hop under the rules above; raise :class:`FetchRefused` or
    :class:`FetchError`. ``resolve`` replaces the system resolver (tests, a custom DNS).

    ``body`` (POST, PUT, PATCH, DELETE) goes to the first URL; a redirect answered with 303,
    or 301/302 to a POST, continues as a GET without it (as browsers do); 307 and 308 send
    it again only to the same origin (a redirect elsewhere is refused, never followed with
    the body)."""
    method = method.upper()
    if method not in METHODS:
        raise FetchRefused(f"fetch_url sends {', '.join(METHODS)}, not {method}.")
    if body is not None and method in ("GET", "HEAD"):
        raise FetchRefused(f"A {method} request has no body; use POST, PUT, PATCH or DELETE to send one.")
    if body is not None and len(body) > BODY_BYTES:
        raise FetchRefused(f"The body is {len(body):,} bytes; fetch_url sends at most {BODY_BYTES:,}.")
    try:
        return await asyncio.wait_for(
            _fetch(
                url,
                method,
                _headers(headers),
                max_bytes,
                timeout_s,
                list(allow),
                resolve or system_resolver,
                transport,
                body,
            ),
            timeout_s,
        )
    except asyncio.TimeoutError:
        raise FetchError(f"No complete answer from {url} within {timeout_s:g} s.") from None


async def _fetch(
    url: str,
    method: str,
    headers: dict[str, str],
    max_bytes: int,
    timeout_s: float,
    allow: list[str],
    resolve: Resolver,
    transport: Any,
    body: bytes | None = None,
) -> Fetched:
    import httpx  # noqa: PLC0415 - httpx takes 0.3 s to import and only a fetch needs it

    hops: list[str] = []
    connected: list[str] = []
    previous: _Target | None = None
    async with httpx.AsyncClient(
        trust_env=False, follow_redirects=False, timeout=timeout_s, transport=transport, verify=_tls()
    ) as client:
        while True:
            target = await _target(url, allow, resolve)
            if previous is not None and target.origin() != previous.origin():
                headers = {}
            hops.append(url)
            connected.append(str(target.address))
            sent = {**headers, "Host": target.host_header}
            extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
            if previous is not None and body is not None and target.origin() != previous.origin():
                raise FetchRefused(
                    f"{hops[0]} redirected the {method} to another origin ({url}); its body is not sent there."
                )
            request = client.build_request(
                method, target.pinned_url(), headers=sent, extensions=extensions, content=body
            )
            try:
                response = await client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise FetchError(f"Could not fetch {url}: {type(exc).__name__}: {exc or 'no detail'}.") from None
            try:
                location = response.headers.get("location")
                if response.status_code in (301, 302, 303, 307, 308) and location:
                    if len(hops) > MAX_REDIRECTS:
                        raise FetchError(f"More than {MAX_REDIRECTS} redirects, starting at {hops[0]}.")
                    url = urljoin(url, location)
                    if response.status_code == 303 or (
                        response.status_code in (301, 302) and method not in ("HEAD", "GET")
                    ):
                        method, body = "GET", None
                    previous = target
                    continue
                answer, truncated = await _read(response, max_bytes) if method != "HEAD" else (b"", False)
            except httpx.HTTPError as exc:
                raise FetchError(f"The answer from {url} broke off: {type(exc).__name__}: {exc}.") from None
            finally:
                await response.aclose()
            return Fetched(
                url=url,
                status=response.status_code,
                content_type=response.headers.get("content-type", ""),
                body=answer,
                truncated=truncated,
                hops=hops,
                addresses=connected,
            )


@lru_cache(maxsize=1)
def _tls() -> ssl.SSLContext:
    """The certificate-verifying TLS context of every fetch (made once: loading the CAs is slow)."""
    return ssl.create_default_context(cafile=certifi.where())


async def _read(response: Any, max_bytes: int) -> tuple[bytes, bool]:
    """At most ``max_bytes`` of the decoded body (a compressed body is counted as it unpacks)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            return b"".join(parts)[:max_bytes], True
    return b"".join(parts), False
