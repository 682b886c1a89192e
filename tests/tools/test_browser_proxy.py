"""The browser's proxy on its own, spoken to over raw sockets as Chromium would: ``site``
(127.0.0.2) is allowed, ``secret`` (127.0.0.1) must never see a request."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from agent_kernel.tools.browser_proxy import REFUSED_HEADER, Proxy
from tests.support.websites import Server, Site


@pytest.fixture
def proxy(site: Site, secret: Server) -> Iterator[Proxy]:
    site.hits.clear()
    secret.hits.clear()
    made = Proxy(lambda: ["127.0.0.2"], page_bytes=10_000)
    made.port = made.start()  # type: ignore[attr-defined]
    yield made
    made.close()


def exchange(proxy: Proxy, raw: bytes) -> bytes:
    """Send ``raw`` to the proxy and read until it closes the connection."""
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as conn:  # type: ignore[attr-defined]
        conn.sendall(raw)
        got = b""
        while chunk := conn.recv(65536):
            got += chunk
    return got


def test_an_allowed_page_is_forwarded_and_a_refused_one_never_sent(proxy, site, secret):
    ok = exchange(
        proxy, f"GET {site.url('/page')} HTTP/1.1\r\nHost: 127.0.0.2\r\nProxy-Connection: keep-alive\r\n\r\n".encode()
    )
    assert ok.startswith(b"HTTP/1.") and b" 200 " in ok.split(b"\r\n")[0] and b"Quarterly figures" in ok
    refused = exchange(proxy, f"GET {secret.url('/')} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    assert b" 403 " in refused.split(b"\r\n")[0] and REFUSED_HEADER.encode() in refused
    assert b"127.0.0.1 is a loopback address" in refused
    tunnel = exchange(proxy, f"CONNECT 127.0.0.1:{secret.port} HTTP/1.1\r\n\r\n".encode())
    assert b" 403 " in tunnel.split(b"\r\n")[0]
    assert secret.hits == [] and site.hits == ["/page"]
    first, second = proxy.take_refused()
    assert first.startswith(f"Refused {secret.url('/')}: ") and second.startswith(
        f"Refused CONNECT 127.0.0.1:{secret.port}: "
    )


def test_one_request_per_connection_so_a_second_cannot_ride_on_the_first(proxy, site, secret):
    first = f"GET {site.url('/page')} HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n"
    second = f"GET {secret.url('/')} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    exchange(proxy, (first + second).encode())
    assert secret.hits == []


def test_schemes_other_than_http_are_refused(proxy):
    refused = exchange(proxy, b"GET ftp://127.0.0.2/x HTTP/1.1\r\n\r\n")
    assert b" 403 " in refused.split(b"\r\n")[0] and b"http:// requests only" in refused


def test_a_page_stops_at_its_size_cap(proxy, site):
    got = exchange(proxy, f"GET {site.url('/big')} HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n".encode())
    assert len(got) < 50_000  # the body is 50,000 bytes; the cap is 10,000
    assert any("page-size cap of 10,000 bytes" in r for r in proxy.take_refused())
    again = exchange(proxy, f"GET {site.url('/page')} HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n".encode())
    assert b" 403 " in again.split(b"\r\n")[0]  # nothing more for this page
    proxy.new_page()
    assert (
        b" 200 "
        in exchange(proxy, f"GET {site.url('/page')} HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n".encode()).split(b"\r\n")[0]
    )
