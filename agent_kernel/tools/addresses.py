"""Which network addresses ``fetch_url`` may connect to, and how a host is written.

The policy follows OWASP's SSRF guidance and Advocate's ``addrvalidator``: an address
must be globally routable (``ipaddress``'s ``is_global``) *after* unwrapping every IPv6
form that carries an IPv4 address (IPv4-mapped, IPv4-translated, 6to4, Teredo, NAT64),
and must not be a cloud metadata endpoint (some are in public ranges). Hosts written as
numbers in any of the spellings C's ``inet_aton`` accepts (``127.1``, ``2130706433``,
``0x7f.0.0.1``, ``0177.0.0.1``) are read as the address they name, as the resolver would.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

__all__ = ["IPAddress", "allowed_by", "literal_address", "refusal", "refusal_of_all"]

# Metadata services of cloud providers; some are in ranges is_global accepts.
METADATA = {
    ipaddress.ip_network("169.254.0.0/16"): "a cloud metadata address (AWS, GCP, Azure IMDS)",
    ipaddress.ip_network("168.63.129.16/32"): "a cloud metadata address (Azure WireServer)",
    ipaddress.ip_network("192.0.0.192/32"): "a cloud metadata address (Oracle Cloud)",
    ipaddress.ip_network("100.100.100.200/32"): "a cloud metadata address (Alibaba Cloud)",
    ipaddress.ip_network("fd00:ec2::254/128"): "a cloud metadata address (AWS IPv6 IMDS)",
}
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # IPv4-translated (RFC 2765), not mapped
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated IPv4-compatible (::a.b.c.d)
_SIXTOFOUR_RELAY = ipaddress.ip_network("192.88.99.0/24")

_NUMERIC_HOST = re.compile(r"[0-9a-fA-FxX.]+")


def literal_address(host: str) -> IPAddress | None:
    """The address ``host`` is written as (any IPv4 spelling, or IPv6 with or without
    brackets), or ``None`` when it is a name to resolve.

    Raises ``ValueError`` for an IPv6 literal with a zone (``fe80::1%eth0``): the zone
    picks an interface, which a URL from the model has no business doing.
    """
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if ":" in bare:
        if "%" in bare:
            raise ValueError("an IPv6 address with a zone (%) is not accepted")
        return ipaddress.IPv6Address(bare)
    if _NUMERIC_HOST.fullmatch(bare) and any(c.isdigit() for c in bare):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(bare.rstrip(".")))
        except OSError:
            return None
    return None


def _embedded(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (and which a packet to it would reach)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    found: list[ipaddress.IPv4Address] = []
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address in _TRANSLATED or any(address in net for net in _NAT64):
        found.append(low32)
    if address in _COMPATIBLE and int(address) > 1:
        found.append(low32)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)  # (server, client)
    return found


def _own_refusal(address: IPAddress) -> str | None:
    for network, what in METADATA.items():
        if address.version == network.version and address in network:
            return what
    if address.is_loopback:
        return "a loopback address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private:
        return "a private address"
    if isinstance(address, ipaddress.IPv4Address) and address in _SIXTOFOUR_RELAY:
        return "the 6to4 relay range"
    if any(address in net for net in _NAT64):
        return "a NAT64 address"
    if not address.is_global:
        return "an address that is not publicly routable (reserved or shared)"
    return None


def refusal(address: IPAddress) -> str | None:
    """Why ``fetch_url`` may not connect to ``address``, or ``None`` when it may."""
    for inner in _embedded(address):
        why = _own_refusal(inner)
        if why is not None:
            return f"{why} (as {inner}, inside the IPv6 address)"
    return _own_refusal(address)


def refusal_of_all(addresses: Iterable[IPAddress]) -> tuple[IPAddress, str] | None:
    """The first refused address of a name's records with the reason (every record must pass:
    the connection could be made to any of them)."""
    for address in addresses:
        why = refusal(address)
        if why is not None:
            return address, why
    return None


def _networks(entries: Iterable[str]) -> tuple[list[IPNetwork], set[str]]:
    networks: list[IPNetwork] = []
    names: set[str] = set()
    for entry in entries:
        text = str(entry).strip().lower()
        if not text:
            continue
        try:
            networks.append(ipaddress.ip_network(text.strip("[]"), strict=False))
            continue
        except ValueError:
            pass
        literal = None
        try:
            literal = literal_address(text)
        except ValueError:
            pass
        if literal is not None:
            networks.append(ipaddress.ip_network(literal))
        else:
            names.add(text.rstrip("."))
    return networks, names


def allowed_by(entries: Iterable[str], host: str, address: IPAddress | None = None) -> bool:
    """Whether the user's ``fetch_allow`` entries open ``host`` (or ``address``).

    An entry is a host name (``intranet.example``; ``*.example`` for its subdomains),
    an address (``10.0.0.5``) or a network (``10.0.0.0/8``, ``fd00::/8``).
    """
    networks, names = _networks(entries)
    name = host.strip("[]").lower().rstrip(".")
    if name in names or any(n.startswith("*.") and name.endswith(n[1:]) for n in names):
        return True
    if address is not None:
        return any(address.version == n.version and address in n for n in networks)
    return False
