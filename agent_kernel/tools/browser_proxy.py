"""The local proxy every request of the agent's browser goes through, checked like fetch_url.

Chromium is launched with ``--proxy-server`` pointing here (and ``<-loopback>`` so that
loopback is not bypassed). The proxy reads each request's host, resolves it once with the
same rules as ``fetch_url`` (:func:`agent_kernel.tools.fetch.checked_target`: public
addresses and web ports only, unless ``fetch_allow`` opens the host) and connects to
exactly the address it checked, so neither a page's script nor a DNS answer that changes
between two lookups (rebinding) can reach what the check refused. It sees everything
Chromium sends over TCP: documents, sub-resources, ``fetch``, WebSockets (tunnelled with
``CONNECT``) and TLS (``CONNECT`` to the checked address; the certificate is Chromium's
to verify).

Plain HTTP is forwarded one request per connection (``Connection: close``), so a
connection Chromium keeps open cannot carry a second request to another host. The bytes
received for the current page are counted against a cap (:attr:`Proxy.page_bytes`).
"""

from __future__ import annotations

import asyncio
import selectors
import socket
import socketserver
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from agent_kernel.tools.fetch import FetchError, FetchRefused, checked_target

__all__ = ["REFUSED_HEADER", "Proxy"]

REFUSED_HEADER = "X-Agent-Kernel-Refused"
HEAD_BYTES = 64 * 1024  # the most a request line and headers may take
IDLE_S = 60.0  # a tunnel with no traffic this long is closed
_HOP_HEADERS = {"proxy-connection", "proxy-authorization", "connection", "keep-alive"}


class Refused(Exception):
    """A request the address check refused (its message says why and what the user can allow)."""


@dataclass
class Proxy:
    """A threaded HTTP/CONNECT proxy on 127.0.0.1 that checks every address it connects to.

    ``allow`` returns the current ``fetch_allow`` entries (read at each request).
    """

    allow: Callable[[], list[str]]
    page_bytes: int = 20_000_000
    received: int = 0
    refused: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: socketserver.ThreadingTCPServer | None = None

    def start(self) -> int:
        """Start serving on a free loopback port; return the port."""
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                owner._handle(self.request)

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(
            target=server.serve_forever, args=(0.2,), name="agent-kernel-browser-proxy", daemon=True
        ).start()
        self._server = server
        return int(server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def new_page(self) -> None:
        """A navigation starts: its bytes are counted afresh and earlier refusals forgotten."""
        with self._lock:
            self.received = 0
            self.refused.clear()

    def take_refused(self) -> list[str]:
        """The requests refused since the last call (and forget them)."""
        with self._lock:
            found, self.refused = self.refused, []
        return found

    # -- one client connection ---------------------------------------------------------

    def _handle(self, client: socket.socket) -> None:
        client.settimeout(IDLE_S)
        try:
            head, rest = _read_head(client)
            method, target, headers = _parse_head(head)
            if method == "CONNECT":
                host, port = _split_host_port(target, 443)
                upstream = self._connect(
                    f"https://{_bracket(host)}:{port}/", host, port, f"CONNECT {_bracket(host)}:{port}"
                )
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                url = target
                if not url.lower().startswith("http://"):
                    raise Refused(f"the browser's proxy forwards http:// requests only, not {url[:100]!r}")
                parts = urlsplit(url)
                host, port = parts.hostname or "", parts.port or 80
                upstream = self._connect(url, host, port, url)
                path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                kept = [(k, v) for k, v in headers if k.lower() not in _HOP_HEADERS]
                lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in kept), "Connection: close", "", ""]
                upstream.sendall("\r\n".join(lines).encode("latin-1"))
            if rest:
                upstream.sendall(rest)
            with upstream:
                self._splice(client, upstream)
        except Refused as exc:
            self._refuse(client, str(exc))
        except (OSError, ValueError, UnicodeError):
            pass
        finally:
            client.close()

    def _connect(self, url: str, host: str, port: int, shown: str) -> socket.socket:
        """A connection to the one address ``host`` was checked to have (``shown``: the
        request as its refusal names it)."""
        try:
            address = asyncio.run(checked_target(url, list(self.allow())))
        except (FetchRefused, FetchError) as exc:
            why = (
                str(exc)
                .replace("fetch_url only reaches", "The browser only reaches")
                .replace("fetch_url", "the browser")
            )
            raise Refused(why.replace(url, shown, 1)) from None
        with self._lock:
            if self.received > self.page_bytes:
                raise Refused(f"the page is over the browser's page-size cap of {self.page_bytes:,} bytes")
        try:
            return socket.create_connection((str(address), port), timeout=IDLE_S)
        except OSError as exc:
            raise Refused(f"could not connect to {host}:{port} ({address}): {exc}") from None

    def _refuse(self, client: socket.socket, why: str) -> None:
        with self._lock:
            if len(self.refused) < 50:
                self.refused.append(why)
        body = f"Refused by agent-kernel: {why}".encode("utf-8", "replace")
        head = (
            f"HTTP/1.1 403 Forbidden\r\n{REFUSED_HEADER}: 1\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        try:
            client.sendall(head.encode("latin-1") + body)
        except OSError:
            pass

    def _splice(self, client: socket.socket, upstream: socket.socket) -> None:
        """Copy bytes both ways until either side closes; stop at the page-size cap."""
        with selectors.DefaultSelector() as selector:
            selector.register(client, selectors.EVENT_READ, upstream)
            selector.register(upstream, selectors.EVENT_READ, client)
            while True:
                ready = selector.select(IDLE_S)
                if not ready:
                    return
                for key, _ in ready:
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    chunk = source.recv(65536)
                    if not chunk:
                        return
                    if source is upstream:
                        with self._lock:
                            self.received += len(chunk)
                            over = self.received > self.page_bytes
                        if over:
                            with self._lock:
                                self.refused.append(
                                    f"the page is over the browser's page-size cap of {self.page_bytes:,} bytes"
                                )
                            return
                    key.data.sendall(chunk)


def _read_head(client: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = client.recv(8192)
        if not chunk:
            raise ValueError("the client closed before its request was complete")
        data += chunk
        if len(data) > HEAD_BYTES:
            raise ValueError("request head too large")
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _parse_head(head: bytes) -> tuple[str, str, list[tuple[str, str]]]:
    first, *lines = head.decode("latin-1").split("\r\n")
    method, target, _version = first.split(" ", 2)
    headers = []
    for line in lines:
        key, sep, value = line.partition(":")
        if sep:
            headers.append((key.strip(), value.strip()))
    return method.upper(), target, headers


def _split_host_port(target: str, default: int) -> tuple[str, int]:
    if target.startswith("["):
        host, _, rest = target[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = target.rpartition(":") if ":" in target else (target, "", "")
    return host, int(port) if port else default


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host
