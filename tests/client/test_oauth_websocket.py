"""OAuth over the WebSocket transport, against the real test authorization server and a
protected MCP server that checks the bearer token on the handshake (a refused handshake is
an HTTP 401 with its `WWW-Authenticate` challenge): authorize, send the token on the
handshake, refresh on a 401, and a bounded number of attempts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.client import oauth_server
from tests.client.oauth_server import AuthServer

from mcpkit import Client
from mcpkit.client import ConnectOptions
from mcpkit.client.oauth import OAuth
from mcpkit.client.oauth_redirect import follow_location
from mcpkit.errors import McpkitError

pytestmark = pytest.mark.anyio

ERA = "2025-11-25"
WEBSOCKET = ConnectOptions(kind="websocket")


@pytest.fixture
def server() -> Iterator[AuthServer]:
    with oauth_server.running(name="oauth-ws", ws="websockets-sansio") as auth:
        yield auth


def ws_url(server: AuthServer) -> str:
    return server.resource.replace("http://", "ws://", 1)


async def read(url: str, oauth: OAuth) -> str:
    async with Client(url, era=ERA, connect=WEBSOCKET, auth=oauth) as c:
        result = await c.call_tool("read", {})
        return result.content[0].text  # type: ignore[union-attr,no-any-return]


async def test_the_handshake_401_authorizes_and_the_token_rides_the_handshake(
        server: AuthServer) -> None:
    oauth = OAuth(redirect=follow_location)
    assert await read(ws_url(server), oauth) == "read ok"
    assert server.websocket_handshakes == 2  # refused, then accepted with the token
    [asked] = server.authorize_requests
    assert asked["resource"] == server.resource  # the resource, at its http form
    assert oauth.tokens is not None and oauth.tokens.access_token in server.access
    # a second connection sends the token at once
    assert await read(ws_url(server), oauth) == "read ok"
    assert server.websocket_handshakes == 3 and len(server.authorize_requests) == 1


async def test_a_refused_token_is_refreshed_on_the_handshake(server: AuthServer) -> None:
    oauth = OAuth(redirect=follow_location)
    assert await read(ws_url(server), oauth) == "read ok"
    server.access.clear()  # the resource forgets the token: the next handshake 401s
    assert await read(ws_url(server), oauth) == "read ok"
    assert [r["grant_type"] for r in server.token_requests] == [
        "authorization_code", "refresh_token"]


async def test_handshake_retries_are_bounded(server: AuthServer) -> None:
    server.token_lifetime_s = -1  # every token is expired on arrival: 401 after 401
    oauth = OAuth(redirect=follow_location, max_attempts=2)
    with pytest.raises(McpkitError, match="401"):
        await read(ws_url(server), oauth)
    assert server.websocket_handshakes == 3  # the first, then max_attempts more


async def test_login_for_a_websocket_url(server: AuthServer) -> None:
    oauth = OAuth(redirect=follow_location)
    tokens = await oauth.login(ws_url(server))
    assert tokens.access_token in server.access
    assert await read(ws_url(server), oauth) == "read ok"
    assert len(server.authorize_requests) == 1 and server.websocket_handshakes == 1
