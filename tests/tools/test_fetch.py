"""fetch_url's SSRF guard, against real servers on 127.0.0.0/8 (no other network).

The refused cases follow Advocate's test suite (JordanMilne/Advocate ``test/test_advocate.py``:
the blocked netblocks, IPv4-mapped, 6to4, Teredo, DNS64, embedded NUL, redirects) and the
OWASP SSRF cheat sheet's address spellings. ``secret`` (127.0.0.1) is the server an attacker
wants to reach: it must never see a request. ``site`` (127.0.0.2) is the host the user
allowed with ``fetch_allow``; it also serves redirects to wherever a test asks.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest

from agent_kernel.tools import addresses
from agent_kernel.tools.fetch import FetchError, FetchRefused, fetch
from tests.support.websites import SECRET_BODY, Server, Site


@pytest.fixture(autouse=True)
def _fresh_hits(secret: Server, site: Site) -> None:
    secret.hits.clear()
    site.hits.clear()


def run(url: str, **options: object):
    return asyncio.run(fetch(url, **options))  # type: ignore[arg-type]


def refused(url: str, **options: object) -> str:
    with pytest.raises(FetchRefused) as caught:
        run(url, **options)
    return str(caught.value)


def resolver(*answers: list[str]):
    """A resolver giving ``answers`` in turn (the last one again when they run out), counting calls."""
    calls: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        calls.append(host)
        return answers[min(len(calls), len(answers)) - 1]

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


# -- refused addresses, in every spelling ------------------------------------------------------

LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "127.1",
    "127.0.1",
    "2130706433",
    "0x7f000001",
    "0x7F.0.0.1",
    "017700000001",
    "0177.0.0.1",
    "0177.0.0.01",
    "127.000.000.001",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[0:0:0:0:0:ffff:7f00:1]",
    "[::ffff:0:7f00:1]",
    "[::127.0.0.1]",
    "[2002:7f00:1::]",
    "[64:ff9b::7f00:1]",
    "[2001:0:4136:e378:8000:63bf:80ff:fffe]",
    "[::1]",
    "0",
    "0.0.0.0",
    "[::]",
    "localhost",
    "LOCALHOST",
    "localhost.",
]


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
def test_loopback_in_every_spelling_is_refused(host: str, secret: Server) -> None:
    message = refused(f"http://{host}:{secret.port}/", resolve=resolver(["127.0.0.1", "::1"]))
    assert "fetch_url only reaches public addresses" in message
    assert "AgentKernel.fetch_allow" in message  # what the user can allow
    assert secret.hits == []


NON_PUBLIC = {
    "10.0.0.1": "a private address",
    "172.16.5.4": "a private address",
    "192.168.1.1": "a private address",
    "169.254.169.254": "cloud metadata",
    "[fd00:ec2::254]": "cloud metadata",
    "168.63.129.16": "cloud metadata",
    "192.0.0.192": "cloud metadata",
    "100.100.100.200": "cloud metadata",
    "100.64.0.1": "not publicly routable",
    "[fe80::1]": "a link-local address",
    "224.0.0.1": "a multicast address",
    "[ff02::1]": "a multicast address",
    "255.255.255.255": "a private address",
    "198.18.0.1": "a private address",
    "240.0.0.1": "a private address",
    "[fc00::1]": "a private address",
    "192.88.99.1": "6to4 relay",
    "[::ffff:a9fe:a9fe]": "cloud metadata",
    "[64:ff9b::a9fe:a9fe]": "cloud metadata",
    "[2002:a9fe:a9fe::]": "cloud metadata",
    "0xa9fea9fe": "cloud metadata",
    "2852039166": "cloud metadata",
}


@pytest.mark.parametrize("host", sorted(NON_PUBLIC))
def test_private_link_local_multicast_and_metadata_are_refused(host: str) -> None:
    message = refused(f"http://{host}/latest/meta-data/")
    assert NON_PUBLIC[host] in message


@pytest.mark.parametrize(
    "url,why",
    [
        ("file:///etc/passwd", "only fetches http and https"),
        ("ftp://127.0.0.2/", "only fetches http and https"),
        ("gopher://127.0.0.2:70/_GET", "only fetches http and https"),
        ("dict://127.0.0.2:11211/stat", "only fetches http and https"),
        ("javascript:alert(1)", "only fetches http and https"),
        ("data:text/plain,hello", "only fetches http and https"),
        ("//127.0.0.2/", "without a scheme"),
        ("http://user:pass@127.0.0.2/", "user name or password"),
        ("http://127.0.0.2:80@127.0.0.1/", "user name or password"),
        ("http://127.0.0.2\\@evil.example/", "user name or password"),
        ("http://127.0.0.2\x00.evil.example/", "control characters"),
        ("http://127.0.0.2 /", "control characters"),
        ("http://[fe80::1%25eth0]/", "no usable host"),
        ("http://93.184.216.34:25/", "port 25 is not a web port"),
        ("http://[::1/", "cannot be read"),
    ],
)
def test_schemes_userinfo_and_malformed_urls_are_refused(url: str, why: str, site: Server) -> None:
    # Even the allowed host is refused when the URL itself is a trick.
    assert why in refused(url, allow=["127.0.0.2"])
    assert site.hits == []


def test_a_name_is_refused_when_any_of_its_addresses_is(secret: Server) -> None:
    resolve = resolver(["93.184.216.34", "127.0.0.1"])
    message = refused(f"http://mixed.example:{secret.port}/", resolve=resolve)
    assert "mixed.example resolves to 127.0.0.1" in message and "a loopback address" in message
    assert secret.hits == []


def test_dns_rebinding_cannot_move_the_connection(secret: Server) -> None:
    """The resolver answers a public address first and the secret one afterwards: the host is
    resolved once, and the request goes to the address that was checked."""
    import httpx

    resolve = resolver(["93.184.216.34"], ["127.0.0.1"])
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, headers={"content-type": "text/plain"}, content=b"public page")

    got = run("http://rebind.example/data", resolve=resolve, transport=httpx.MockTransport(answer))
    assert resolve.calls == ["rebind.example"]  # type: ignore[attr-defined]
    assert got.addresses == ["93.184.216.34"] and got.body == b"public page"
    assert sent[0].url.host == "93.184.216.34" and sent[0].headers["host"] == "rebind.example"
    assert secret.hits == []


def test_https_keeps_the_host_name_for_tls() -> None:
    import httpx

    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(204)

    run("https://api.example:8443/v1?q=1", resolve=resolver(["93.184.216.34"]), transport=httpx.MockTransport(answer))
    request = sent[0]
    assert str(request.url) == "https://93.184.216.34:8443/v1?q=1"
    assert request.extensions["sni_hostname"] == "api.example"  # SNI and the certificate check
    assert request.headers["host"] == "api.example:8443"


# -- redirects ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "to",
    [
        "http://127.0.0.1:{port}/",
        "http://[::ffff:127.0.0.1]:{port}/",
        "http://2130706433:{port}/",
        "http://localhost:{port}/",
        "http://169.254.169.254/latest/meta-data/",
        "file:///etc/passwd",
        "http://user@127.0.0.2:{site}/page",
    ],
)
def test_a_redirect_from_the_allowed_host_to_a_refused_address_is_refused(to: str, site: Site, secret: Server) -> None:
    target = to.format(port=secret.port, site=site.port)
    for status in ("301", "302", "307"):
        url = site.url(f"/redirect?status={status}&to={target}")
        assert SECRET_BODY not in refused(url, allow=["127.0.0.2"], resolve=resolver(["127.0.0.1"]))
    assert secret.hits == []
    assert len(site.hits) == 3  # the redirector was reached, the target never


def test_redirects_within_the_allowed_host_are_followed(site: Site) -> None:
    got = run(site.url(f"/redirect?to={site.url('/json')}"), allow=["127.0.0.2"])
    assert got.status == 200 and got.url == site.url("/json")
    assert got.hops == [site.url(f"/redirect?to={site.url('/json')}"), site.url("/json")]


def test_redirect_loops_end(site: Site) -> None:
    with pytest.raises(FetchError, match="More than 5 redirects"):
        run(site.url("/loop"), allow=["127.0.0.2"])
    assert len(site.hits) == 6


@pytest.fixture(scope="module")
def other_origin() -> Iterator[Site]:
    """A second allowed server on the same address, another port: another origin."""
    server = Site("127.0.0.2")
    yield server
    server.close()


MODEL_HEADERS = {"X-Api-Key": "k3y-for-the-first-service", "Authorization": "Bearer t0ken", "Accept": "text/csv"}


def none_of_the_callers(seen) -> bool:
    """No header value the caller set is among ``seen`` (the client's own ``Accept: */*`` may be)."""
    values = {name.lower(): value for name, value in seen.items()}
    return all(values.get(name.lower()) != value for name, value in MODEL_HEADERS.items())


def headers_seen(got) -> dict[str, str]:
    """The request headers the last hop's server saw (its /headers page echoes them), by lower-case name."""
    return {k.lower(): v for k, v in json.loads(got.body).items()}


def test_no_header_the_caller_set_crosses_to_another_port(site: Site, other_origin: Site) -> None:
    got = run(site.url(f"/redirect?to={other_origin.url('/headers')}"), headers=MODEL_HEADERS, allow=["127.0.0.2"])
    assert got.status == 200 and got.hops[-1] == other_origin.url("/headers")
    seen = headers_seen(got)
    assert none_of_the_callers(seen)
    assert "k3y" not in got.body.decode() and "t0ken" not in got.body.decode()
    assert other_origin.hits == ["/headers"]


def test_no_header_the_caller_set_crosses_to_another_host_on_the_same_port(site: Site) -> None:
    elsewhere = f"http://intranet.example:{site.port}/headers"
    got = run(
        site.url(f"/redirect?to={elsewhere}"),
        headers=MODEL_HEADERS,
        allow=["127.0.0.2", "intranet.example"],
        resolve=resolver(["127.0.0.2"]),
    )
    seen = headers_seen(got)
    assert seen["host"] == f"intranet.example:{site.port}"
    assert none_of_the_callers(seen)


def test_a_same_origin_redirect_keeps_the_headers(site: Site) -> None:
    got = run(site.url(f"/redirect?status=307&to={site.url('/headers')}"), headers=MODEL_HEADERS, allow=["127.0.0.2"])
    seen = headers_seen(got)
    assert got.hops == [site.url(f"/redirect?status=307&to={site.url('/headers')}"), site.url("/headers")]
    assert {name.lower(): value for name, value in MODEL_HEADERS.items()}.items() <= seen.items()


def test_headers_are_dropped_when_the_scheme_changes() -> None:
    import httpx

    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            return httpx.Response(302, headers={"location": "http://api.example/"})
        return httpx.Response(200, content=b"ok")

    run(
        "https://api.example/",
        headers=MODEL_HEADERS,
        resolve=resolver(["93.184.216.34"]),
        transport=httpx.MockTransport(answer),
    )
    assert seen[0].headers["x-api-key"] == MODEL_HEADERS["X-Api-Key"]
    assert none_of_the_callers(seen[1].headers)


# -- what the user allows ------------------------------------------------------------------------


def test_the_allowed_host_is_reached_by_address_name_or_network(site: Site) -> None:
    assert run(site.url("/page"), allow=["127.0.0.2"]).status == 200
    assert run(site.url("/page"), allow=["127.0.0.0/8"]).status == 200
    # A name the user allowed, resolved (once) to the loopback address it stands for.
    named = f"http://intranet.example:{site.port}/json"
    got = run(named, allow=["intranet.example"], resolve=resolver(["127.0.0.2"]))
    assert got.status == 200 and json.loads(got.body) == {"b": [1, 2], "a": "x"}
    got = run(named.replace("intranet", "api.intranet"), allow=["*.example"], resolve=resolver(["127.0.0.2"]))
    assert got.status == 200
    assert len(site.hits) == 4


def test_allowing_one_host_does_not_open_another(site: Site, secret: Server) -> None:
    refused(secret.url("/"), allow=["127.0.0.2"])
    refused(f"http://evil.example:{secret.port}/", allow=["intranet.example"], resolve=resolver(["127.0.0.1"]))
    assert secret.hits == []


def test_size_cap_and_time_limit(site: Site) -> None:
    got = run(site.url("/big"), allow=["127.0.0.2"], max_bytes=1000)
    assert got.truncated and len(got.body) == 1000
    bomb = run(site.url("/gzip-bomb"), allow=["127.0.0.2"], max_bytes=10_000)
    assert bomb.truncated and len(bomb.body) == 10_000  # counted as it unpacks
    started = time.perf_counter()
    with pytest.raises(FetchError, match="within 0.5 s"):
        run(site.url("/slow"), allow=["127.0.0.2"], timeout_s=0.5)
    assert time.perf_counter() - started < 1.5


def test_every_method_and_a_bounded_body(site: Site) -> None:
    assert "not TRACE" in refused("http://93.184.216.34/", method="TRACE")
    assert "A GET request has no body" in refused(site.url("/json"), allow=["127.0.0.2"], body=b"x")
    assert "at most 1,000,000" in refused(site.url("/json"), method="POST", allow=["127.0.0.2"], body=b"x" * 1_000_001)
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        got = run(site.url("/json"), method=method, allow=["127.0.0.2"], body=b'{"n": 1}')
        assert got.status == 200
    assert [(r["method"], r["body"]) for r in site.received[-4:]] == [
        (m, '{"n": 1}') for m in ("POST", "PUT", "PATCH", "DELETE")
    ]


def test_a_body_follows_a_redirect_only_to_the_same_origin(site: Site, other_origin: Site) -> None:
    site.received.clear()
    got = run(site.url("/redirect?status=303&to=/json"), method="POST", allow=["127.0.0.2"], body=b"data")
    assert got.status == 200 and got.url.endswith("/json")  # 303: on as a GET, without the body
    assert [r["path"] for r in site.received] == ["/redirect?status=303&to=/json"]
    away = other_origin.url("/json")
    message = refused(site.url(f"/redirect?status=307&to={away}"), method="POST", allow=["127.0.0.2"], body=b"data")
    assert "its body is not sent there" in message and other_origin.received == []


def test_address_policy_unwraps_every_ipv6_form() -> None:
    ip = addresses.literal_address
    assert addresses.refusal(ip("[2001:4860:4860::8888]")) is None  # a public resolver
    assert addresses.refusal(ip("93.184.216.34")) is None
    assert "inside the IPv6 address" in addresses.refusal(ip("[::ffff:10.0.0.1]"))
    assert ip("example.com") is None and ip("1.2.3.4.5") is None and ip("cafe") is None
