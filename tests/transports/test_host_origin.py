"""DNS-rebinding protection: Host and Origin are parsed strictly (`security.py`).

Property-based over the spellings an attacker would try (user info, paths, queries,
fragments, odd ports, trailing dots, IPv6 forms, backslashes), then over real HTTP: the
Streamable HTTP endpoint, the HTTP+SSE endpoint and the WebSocket handshake all refuse
`Origin: http://localhost:80@evil.example`.
"""

from __future__ import annotations

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpkit.transports.server.http.security import HostGuard, parse_authority, parse_origin

from .conftest import inprocess_uvicorn

LOOPBACK = ["localhost", "127.0.0.1", "[::1]"]
loopback = st.sampled_from(LOOPBACK)
ports = st.integers(1, 65535)
junk = st.text(alphabet=st.characters(codec="ascii"), min_size=1, max_size=12)


@given(loopback, ports)
def test_loopback_origins_and_hosts_pass(host: str, port: int) -> None:
    guard = HostGuard()
    for scheme in ("http", "https"):
        assert guard.origin_ok(f"{scheme}://{host}")
        assert guard.origin_ok(f"{scheme}://{host}:{port}")
    assert guard.host_ok(host) and guard.host_ok(f"{host}:{port}")


@given(loopback, st.one_of(st.none(), ports), junk, st.sampled_from(["evil.example", "1.2.3.4"]))
def test_user_info_never_passes(host: str, port: int | None, user: str, evil: str) -> None:
    guard = HostGuard()
    authority = host if port is None else f"{host}:{port}"
    for userinfo in (authority, user, f"{user}:{authority}"):
        assert not guard.origin_ok(f"http://{userinfo}@{evil}")
        assert not guard.host_ok(f"{userinfo}@{evil}")
    assert not guard.origin_ok(f"http://{user}@{authority}")


@given(loopback, st.sampled_from(["/", "/x", "?", "?a=1", "#", "#f", "\\", "\\@evil.example",
                                  " x", "/..", ";x"]))
def test_anything_after_the_authority_is_refused(host: str, tail: str) -> None:
    guard = HostGuard()
    assert not guard.origin_ok(f"http://{host}{tail}")
    assert not guard.origin_ok(f"http://{host}:8080{tail}")


@pytest.mark.parametrize("value", [
    "localhost.", "localhost..", ".localhost", "localhost:", "localhost:65536", "localhost:-1",
    "localhost:1:2", "localhost:0x50", "localhost: 80", "127.0.0.1.", "::1", "[::1", "::1]",
    "[::1]x", "[::1]:99999", "[::ffff:127.0.0.1]", "[fe80::1%25eth0]", "local_host",
    "localhost\x00", "local\thost", "evil.example", "127.0.0.1.evil.example", "",
])
def test_odd_hosts_are_refused(value: str) -> None:
    guard = HostGuard()
    assert not guard.host_ok(value), value
    assert not guard.origin_ok(f"http://{value}"), value


@pytest.mark.parametrize("value", [
    "null", "file://", "ftp://localhost", "chrome-extension://localhost", "http:/localhost",
    "http//localhost", "localhost", "//localhost", "http://", "HTTP://",
])
def test_odd_origins_are_refused(value: str) -> None:
    assert not HostGuard().origin_ok(value), value


def test_ipv6_spellings_of_loopback_and_case() -> None:
    guard = HostGuard()
    assert guard.origin_ok("http://[0:0:0:0:0:0:0:1]:8080")
    assert guard.host_ok("[0::1]") and guard.host_ok("LOCALHOST:8080")
    assert parse_authority("[0:0::1]:80") == ("[::1]", 80)
    assert parse_origin("HTTPS://LocalHost:443") == ("https", "localhost", 443)


def test_listed_hosts_and_origins() -> None:
    guard = HostGuard(["hub.example.com", "hub.internal:8443"], ["https://app.example.com"])
    assert guard.host_ok("hub.example.com") and guard.host_ok("hub.example.com:1")
    assert guard.host_ok("hub.internal:8443")
    assert not guard.host_ok("hub.internal:8444") and not guard.host_ok("localhost")
    assert guard.origin_ok("https://app.example.com") and guard.origin_ok("https://hub.example.com")
    assert not guard.origin_ok("https://app.example.com@evil.example")
    assert not guard.origin_ok("https://hub.example.com@evil.example")
    assert not guard.origin_ok("https://hub.example.com.evil.example")
    assert HostGuard(["*"], ["*"]).origin_ok("http://localhost:80@evil.example")  # as configured


# --- over real HTTP ----------------------------------------------------------------------------

EVIL = "http://localhost:80@evil.example"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_user_info_origin_is_refused_on_every_endpoint() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    headers = {"content-type": "application/json", "accept": "application/json"}
    async with inprocess_uvicorn() as base, aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=20)) as http:
        statuses: dict[tuple[str, str], int] = {}
        for origin in (EVIL, "http://localhost:8080"):
            sent = {**headers, "origin": origin}
            async with http.post(f"{base}/prefix/mcp", data=body, headers=sent) as response:
                statuses[("mcp", origin)] = response.status
            async with http.get(f"{base}/prefix/sse", headers={"origin": origin}) as response:
                statuses[("sse", origin)] = response.status
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(f"{base.replace('http', 'ws')}/prefix/mcp", protocols=["mcp"],
                                  origin=EVIL)
        async with http.ws_connect(f"{base.replace('http', 'ws')}/prefix/mcp", protocols=["mcp"],
                                   origin="http://127.0.0.1:9") as ws:
            assert ws.protocol == "mcp"
    assert statuses[("mcp", EVIL)] == 403 and statuses[("sse", EVIL)] == 403
    assert statuses[("mcp", "http://localhost:8080")] != 403
    assert statuses[("sse", "http://localhost:8080")] == 200
    assert refused.value.status == 403


def test_remembered_verdicts_stay_right_and_bounded() -> None:
    guard = HostGuard()
    for i in range(600):  # more distinct values than the guard remembers
        assert guard.host_ok(f"localhost:{i + 1}")
        assert not guard.host_ok(f"localhost:{i + 1}@evil.example")
        assert not guard.origin_ok(f"http://localhost:{i + 1}@evil.example")
    assert guard.host_ok("localhost:1") and not guard.origin_ok(EVIL)
    assert len(guard._host_verdicts) <= 256 and len(guard._origin_verdicts) <= 256
