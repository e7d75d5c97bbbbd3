"""`Client(url, auth=OAuth(…))` against a real authorization server and protected MCP server
on 127.0.0.1 (tests/client/oauth_server.py): the whole authorization-code flow, refresh,
step-up, re-registration, the RFC 9207 `iss` check, and no secret in logs or errors."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import anyio
import pytest
from tests.client import oauth_server
from tests.client.oauth_server import AuthServer

from mcpkit import Client
from mcpkit.auth.errors import AuthorizationError, AuthorizationFailed
from mcpkit.client import ConnectOptions
from mcpkit.client.oauth import OAuth
from mcpkit.client.oauth_redirect import follow_location
from mcpkit.errors import McpkitError

pytestmark = pytest.mark.anyio

ERA = "2025-11-25"  # pinned: no era probe, so each test's first request is the one that 401s


@pytest.fixture
def server() -> Iterator[AuthServer]:
    with oauth_server.running() as auth:
        yield auth


def client(auth: AuthServer, oauth: OAuth) -> Client:
    return Client(auth.resource, era=ERA, auth=oauth)


def assert_no_secrets(auth: AuthServer, *texts: str) -> None:
    assert auth.secrets_seen, "the server issued nothing: the test proves nothing"
    for text in texts:
        for secret in auth.secrets_seen:
            assert secret not in text


async def test_401_discovery_registration_code_token_then_the_call(
        server: AuthServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    oauth = OAuth(redirect=follow_location)
    async with client(server, oauth) as c:
        result = await c.call_tool("read", {})
        assert result.content[0].text == "read ok"  # type: ignore[union-attr]
    assert server.registrations == 1
    [asked] = server.authorize_requests
    # PRM scopes_supported, plus offline_access which the AS lists; the RFC 8707 resource.
    assert asked["scope"].split() == ["mcp:read", "offline_access"]
    assert asked["resource"] == server.resource
    [token_request] = server.token_requests
    assert token_request["grant_type"] == "authorization_code"
    assert token_request["resource"] == server.resource
    assert oauth.tokens is not None and oauth.tokens.access_token in server.access
    assert_no_secrets(server, caplog.text, repr(oauth), repr(oauth.tokens))


async def test_refresh_before_expiry(server: AuthServer) -> None:
    server.token_lifetime_s = 20  # inside the 30 s margin: refreshed before each use
    oauth = OAuth(redirect=follow_location)
    async with client(server, oauth) as c:
        await c.call_tool("read", {})
        first = oauth.tokens
        await c.call_tool("read", {})
        assert oauth.tokens is not first
    grants = [r["grant_type"] for r in server.token_requests]
    assert grants[0] == "authorization_code"
    assert "refresh_token" in grants[1:]
    assert len(server.authorize_requests) == 1  # refreshed, never sent back to log in


async def test_refresh_on_401(server: AuthServer) -> None:
    oauth = OAuth(redirect=follow_location)
    async with client(server, oauth) as c:
        await c.call_tool("read", {})
        server.access.clear()  # the resource forgets the token: the next request 401s
        result = await c.call_tool("read", {})
        assert result.content[0].text == "read ok"  # type: ignore[union-attr]
    assert [r["grant_type"] for r in server.token_requests] == [
        "authorization_code", "refresh_token"]
    assert len(server.authorize_requests) == 1


async def test_step_up_on_403_asks_for_the_union_of_scopes(server: AuthServer) -> None:
    oauth = OAuth(redirect=follow_location)
    async with client(server, oauth) as c:
        await c.call_tool("read", {})
        result = await c.call_tool("write", {})
        assert result.content[0].text == "write ok"  # type: ignore[union-attr]
    first, second = server.authorize_requests
    assert "mcp:write" not in first["scope"].split()
    assert set(second["scope"].split()) == {"mcp:read", "offline_access", "mcp:write"}
    assert server.registrations == 1  # the registration was reused


async def test_step_up_retries_are_bounded(server: AuthServer) -> None:
    server.withheld = {"mcp:write"}  # every step-up comes back without it: 403 again
    oauth = OAuth(redirect=follow_location, scopes=["mcp:read"], max_attempts=2)
    async with client(server, oauth) as c:
        await c.call_tool("read", {})
        with pytest.raises(McpkitError, match="403"):
            await c.call_tool("write", {})
    first, *step_ups = server.authorize_requests
    assert first["scope"] == "mcp:read"  # the configured scopes
    assert len(step_ups) == 2  # max_attempts, then the 403 reaches the caller
    want = {"mcp:read", "mcp:write", "offline_access"}  # offline_access: the AS lists it
    assert all(set(s["scope"].split()) == want for s in step_ups)


async def test_wrong_iss_is_refused_before_any_token_request(
        server: AuthServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server.iss_in_redirect = "wrong"
    oauth = OAuth(redirect=follow_location)
    with pytest.raises(AuthorizationFailed) as caught:
        async with client(server, oauth) as c:
            await c.call_tool("read", {})
    assert isinstance(caught.value.reason, AuthorizationError)
    assert "iss" in str(caught.value)
    assert server.authorize_requests and not server.token_requests
    assert_no_secrets(server, caplog.text, str(caught.value))


async def test_missing_iss_is_refused_when_advertised(server: AuthServer) -> None:
    server.iss_in_redirect, server.advertise_iss = None, True
    with pytest.raises(AuthorizationFailed, match="no iss"):
        async with client(server, OAuth(redirect=follow_location)) as c:
            await c.call_tool("read", {})
    assert not server.token_requests


async def test_registration_holds_the_client_to_no_scope(server: AuthServer) -> None:
    """No `scope` in the registration: an AS may refuse one it does not list (a resource's
    RFC 8707 scopes) or hold the client to it, refusing a later step-up (oidc-provider does
    both: tests/auth_e2e)."""
    oauth = OAuth(redirect=follow_location)
    async with client(server, oauth) as c:
        await c.call_tool("read", {})
        await c.call_tool("write", {})  # a step-up: the same registration serves it
    [registration] = server.registration_requests
    assert "scope" not in registration
    assert registration["application_type"] == "native"
    assert len(server.authorize_requests) == 2


async def test_invalid_client_registers_again(server: AuthServer) -> None:
    server.reject_client_once = True
    oauth = OAuth(redirect=follow_location)
    async with client(server, oauth) as c:
        await c.call_tool("read", {})
    assert server.registrations == 2


async def test_no_redirect_handler_is_a_clear_usage_error(server: AuthServer) -> None:
    with pytest.raises(AuthorizationFailed, match="redirect") as caught:
        async with client(server, OAuth()) as c:
            await c.call_tool("read", {})
    assert not server.token_requests
    assert "OAuth(redirect=" in str(caught.value.reason)


async def test_bearer_token_keeps_working(server: AuthServer) -> None:
    async with client(server, OAuth(redirect=follow_location)) as c:
        await c.call_tool("read", {})
    token = next(iter(server.access))
    async with Client(server.resource, era=ERA, bearer_token=token) as c:
        result = await c.call_tool("read", {})
        assert result.content[0].text == "read ok"  # type: ignore[union-attr]


async def test_http_sse_transport_is_authorized_too(server: AuthServer) -> None:
    server.resource_path = ""  # the PRM's resource covers /sse and /messages
    oauth = OAuth(redirect=follow_location)
    target = server.base + "/sse"
    async with Client(target, era="2024-11-05", connect=ConnectOptions(kind="sse"),
                      auth=oauth) as c:
        result = await c.call_tool("read", {})
        assert result.content[0].text == "read ok"  # type: ignore[union-attr]
        server.access.clear()  # the POSTs 401 now: refreshed, then sent again
        result = await c.call_tool("read", {})
        assert result.content[0].text == "read ok"  # type: ignore[union-attr]
    assert len(server.authorize_requests) == 1
    assert [r["grant_type"] for r in server.token_requests] == [
        "authorization_code", "refresh_token"]


async def test_concurrent_401s_refresh_once(server: AuthServer) -> None:
    oauth = OAuth(redirect=follow_location)
    async with client(server, oauth) as c:
        await c.call_tool("read", {})
        server.access.clear()
        results: list[str] = []

        async def read() -> None:
            result = await c.call_tool("read", {})
            results.append(result.content[0].text)  # type: ignore[union-attr]

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(read)
    assert results == ["read ok"] * 4
    assert [r["grant_type"] for r in server.token_requests] == [
        "authorization_code", "refresh_token"]


async def test_metadata_for_another_resource_is_refused(server: AuthServer) -> None:
    server.resource_path = "/other"  # the 401 points at metadata for base/other
    with pytest.raises(AuthorizationFailed, match="not for") as caught:
        async with Client(server.base + "/mcp", era=ERA,
                          auth=OAuth(redirect=follow_location)) as c:
            await c.call_tool("read", {})
    assert isinstance(caught.value.reason, AuthorizationError)
    assert server.registrations == 0 and not server.authorize_requests
