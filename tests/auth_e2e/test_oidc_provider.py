"""mcpkit's OAuth client against a real authorization server: `Client(url, auth=OAuth(…))`
over real HTTP to a protected MCP server (tests/auth_e2e/protected_server.py) that accepts
only the JWT access tokens of the `oidc-provider` npm package (tests/auth_e2e/provider.mjs),
both processes on 127.0.0.1. What the provider did is read from its event log, never from the
client's word: logins, registrations, grants by type, refresh-token consumption, revocations.

- a full login in real headless Chromium (Debian's chromium, Playwright) in both eras, and the
  same pages scripted over plain HTTP with the era detected;
- refresh before expiry and at expiry with no new login, once for eight concurrent calls;
  rotation (the old refresh token is refused, and the provider revokes the grant on its
  reuse); revocation (a logout's part at the provider); step-up to mcp:write; one
  registration for two logins;
- the provider's client-credentials grant, plain and DPoP-bound (mcpkit's DPoP proofs), the
  bound token taken by the protected server only with a fresh proof by its key;
- and that the provider refuses an authorization request without S256 PKCE or for another
  resource, so the logins above prove the client sent both."""

from __future__ import annotations

import base64
import json
import logging
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import anyio
import pytest
from tests.auth_e2e.logins import BrowserLogin, FormLogin
from tests.auth_e2e.stack import Stack
from tests.browser import chromium_path

from mcpkit import Client
from mcpkit.auth.assertions import client_credentials_form
from mcpkit.auth.client_auth import basic_authorization
from mcpkit.auth.dpop import DPoPKey
from mcpkit.auth.tokens import MemoryRegistrationStore
from mcpkit.client.oauth import DEFAULT_REDIRECT_URI, OAuth

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"
MODERN = "2026-07-28"


def claims(jwt: str) -> dict[str, Any]:
    """A JWT's payload, unverified (the protected server verified it; this only reads it)."""
    payload = jwt.split(".")[1]
    padded = payload + "=" * (-len(payload) % 4)
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(padded))
    return decoded


async def read(client: Client) -> str:
    result = await client.call_tool("read", {})
    return result.content[0].text  # type: ignore[union-attr,no-any-return]


async def token_request(stack: Stack, form: dict[str, str],
                        headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.post(
            f"{stack.issuer}/token", data=form, headers=headers or {}) as reply:
        return reply.status, await reply.json()


# --- logging in --------------------------------------------------------------------------


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_browser_login_in_headless_chromium(stack: Stack, era: str) -> None:
    """Chromium shows the provider's sign-in and consent pages; the redirect it is sent to
    carries the code back; the tool call then succeeds in the pinned era."""
    login = BrowserLogin(chromium_path())
    mark = stack.mark()
    oauth = OAuth(redirect=login, redirect_uri=login.redirect_uri)
    async with Client(stack.resource, era=era, auth=oauth) as client:
        assert await read(client) == "read ok"
        assert client.protocol_version == era
    assert login.pages == ["login", "consent"]  # a real sign-in, then consent
    assert len(stack.events_since(mark, "registration_create.success")) == 1
    [grant] = stack.events_since(mark, "grant.success")
    assert grant["grant_type"] == "authorization_code"
    assert oauth.tokens is not None
    token = claims(oauth.tokens.access_token)
    assert token["iss"] == stack.issuer and token["aud"] == stack.resource  # RFC 9068 / 8707


async def test_scripted_login_detects_the_era_and_keeps_secrets_out_of_logs(
        stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    login = FormLogin()
    oauth = OAuth(redirect=login)
    async with Client(stack.resource, auth=oauth) as client:
        assert await read(client) == "read ok"
        assert client.protocol_version == MODERN  # the server speaks both: the newer one
    assert login.pages == ["login", "consent"]
    assert login.returned == [["code", "iss", "state"]]  # RFC 9207: checked by the client
    tokens = oauth.tokens
    assert tokens is not None and tokens.refresh_token
    assert "mcp:read" in tokens.scope.split()
    for secret in (tokens.access_token, tokens.refresh_token):
        assert secret not in caplog.text and secret not in repr(oauth)


# --- after the login ---------------------------------------------------------------------


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_refresh_before_expiry_needs_no_new_login(stack: Stack, era: str) -> None:
    stack.set_access_token_ttl(20)  # inside the client's 30 s margin: refreshed before use
    login = FormLogin()
    oauth = OAuth(redirect=login)
    mark = stack.mark()
    async with Client(stack.resource, era=era, auth=oauth) as client:
        assert await read(client) == "read ok"
        first = oauth.tokens
        assert await read(client) == "read ok"
        assert oauth.tokens is not first
    assert login.pages == ["login", "consent"]  # one login only
    grants = [e["grant_type"] for e in stack.events_since(mark, "grant.success")]
    assert grants[0] == "authorization_code"
    assert grants.count("authorization_code") == 1 and "refresh_token" in grants


async def test_refresh_at_expiry(stack: Stack) -> None:
    # 2 s: the provider's exp is its whole-second iat + TTL, so a token lives at least 1 s
    stack.set_access_token_ttl(2)
    login = FormLogin()
    oauth = OAuth(redirect=login, refresh_margin_s=0)  # only once it has really expired
    mark = stack.mark()
    async with Client(stack.resource, era=LEGACY, auth=oauth) as client:
        assert await read(client) == "read ok"
        expired = oauth.tokens
        assert expired is not None and expired.expires_at is not None
        stack.set_access_token_ttl(3600)  # the refreshed token outlives the test
        await anyio.sleep(max(0.0, expired.expires_at - time.time()) + 0.05)
        assert await read(client) == "read ok"  # expired for client and server alike
        assert oauth.tokens is not expired
    assert login.pages == ["login", "consent"]
    refreshes = stack.events_since(mark, "grant.success", grant_type="refresh_token")
    assert len(refreshes) == 1
    assert not stack.events_since(mark, "grant.error")


async def test_concurrent_calls_refresh_once(stack: Stack) -> None:
    """Eight calls at once find the token about to expire: one refresh at the provider, all
    eight answered (a second use of the rotated token would have revoked the grant)."""
    stack.set_access_token_ttl(20)
    oauth = OAuth(redirect=FormLogin())
    async with Client(stack.resource, era=MODERN, auth=oauth) as client:
        await read(client)
        mark = stack.mark()
        answers: list[str] = []

        async def one() -> None:
            answers.append(await read(client))

        async with anyio.create_task_group() as group:
            for _ in range(8):
                group.start_soon(one)
    assert answers == ["read ok"] * 8
    assert len(stack.events_since(mark, "grant.success", grant_type="refresh_token")) == 1
    assert not stack.events_since(mark, "grant.revoked")


async def test_rotation_refuses_the_old_refresh_token(stack: Stack) -> None:
    stack.set_access_token_ttl(20)
    registrations = MemoryRegistrationStore()
    oauth = OAuth(redirect=FormLogin(), registrations=registrations)
    mark = stack.mark()
    async with Client(stack.resource, era=MODERN, auth=oauth) as client:
        await read(client)
        assert oauth.tokens is not None
        old = oauth.tokens.refresh_token
        await read(client)  # refreshed before use: a new refresh token
        assert oauth.tokens.refresh_token and old and oauth.tokens.refresh_token != old
    assert stack.events_since(mark, "refresh_token.consumed")
    registration = await registrations.get(stack.issuer, DEFAULT_REDIRECT_URI)
    assert registration is not None
    status, answer = await token_request(stack, {
        "grant_type": "refresh_token", "refresh_token": old, "client_id": registration.client_id,
        "resource": stack.resource})
    assert (status, answer["error"]) == (400, "invalid_grant")
    # reuse of a rotated refresh token: the provider revokes the whole grant
    assert stack.events_since(mark, "grant.revoked", client_id=registration.client_id)


async def test_revoked_refresh_token_is_refused(stack: Stack) -> None:
    """What a logout does at the provider (RFC 7009), seen in its event log."""
    registrations = MemoryRegistrationStore()
    oauth = OAuth(redirect=FormLogin(), registrations=registrations)
    async with Client(stack.resource, era=MODERN, auth=oauth) as client:
        await read(client)
    registration = await registrations.get(stack.issuer, DEFAULT_REDIRECT_URI)
    assert registration is not None and oauth.tokens and oauth.tokens.refresh_token
    refresh, mark = oauth.tokens.refresh_token, stack.mark()
    async with aiohttp.ClientSession() as http, http.post(
            f"{stack.issuer}/token/revocation", data={
                "token": refresh, "token_type_hint": "refresh_token",
                "client_id": registration.client_id}) as reply:
        assert reply.status == 200
    assert stack.events_since(mark, "refresh_token.destroyed", client_id=registration.client_id)
    status, answer = await token_request(stack, {
        "grant_type": "refresh_token", "refresh_token": refresh,
        "client_id": registration.client_id, "resource": stack.resource})
    assert (status, answer["error"]) == (400, "invalid_grant")


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_step_up_to_the_write_scope(stack: Stack, era: str) -> None:
    login = FormLogin()
    mark = stack.mark()
    async with Client(stack.resource, era=era, auth=OAuth(redirect=login)) as client:
        assert await read(client) == "read ok"
        result = await client.call_tool("write", {})  # 403 insufficient_scope first
        assert result.content[0].text == "write ok"  # type: ignore[union-attr]
    # the provider's session is kept: the step-up asks only for consent to the new scope
    assert login.pages == ["login", "consent", "consent"]
    first, second = stack.events_since(mark, "authorization.success")
    assert "mcp:write" not in first["scope"].split()
    assert {"mcp:read", "mcp:write"} <= set(second["scope"].split())
    assert len(stack.events_since(mark, "registration_create.success")) == 1


async def test_one_registration_serves_two_logins(stack: Stack) -> None:
    registrations = MemoryRegistrationStore()  # what one process keeps
    mark = stack.mark()
    for _ in range(2):
        oauth = OAuth(redirect=FormLogin(), registrations=registrations)
        async with Client(stack.resource, era=MODERN, auth=oauth) as client:
            assert await read(client) == "read ok"
    assert len(stack.events_since(mark, "registration_create.success")) == 1
    codes = stack.events_since(mark, "grant.success", grant_type="authorization_code")
    assert len(codes) == 2 and codes[0]["client_id"] == codes[1]["client_id"]


# --- machine grants at the provider ------------------------------------------------------


async def test_client_credentials_bearer_token_reaches_the_tool(stack: Stack) -> None:
    form = client_credentials_form(scope=["mcp:read"], resource=stack.resource)
    status, answer = await token_request(stack, dict(form), {
        "Authorization": basic_authorization(stack.machine_client_id, stack.machine_secret)})
    assert status == 200, answer
    assert answer["token_type"] == "Bearer" and "refresh_token" not in answer
    async with Client(stack.resource, era=MODERN,
                      bearer_token=answer["access_token"]) as client:
        assert await read(client) == "read ok"


async def test_client_credentials_with_dpop_binds_the_token_to_the_key(stack: Stack) -> None:
    """The provider binds the token to the proof's key; the protected server then takes it
    only with a fresh proof by that key (so a DPoP client can be tested end to end here)."""
    key = DPoPKey.generate()
    form = client_credentials_form(scope=["mcp:read"], resource=stack.resource)
    status, answer = await token_request(stack, dict(form), {
        "Authorization": basic_authorization(stack.machine_client_id, stack.machine_secret),
        "DPoP": key.proof("POST", f"{stack.issuer}/token")})
    assert status == 200, answer
    assert answer["token_type"] == "DPoP"
    token = answer["access_token"]
    assert claims(token)["cnf"] == {"jkt": key.jkt}

    proof = key.proof("POST", stack.resource, access_token=token)
    assert await initialize(stack, f"DPoP {token}", proof) == 200
    assert await initialize(stack, f"DPoP {token}", proof) == 401  # a replayed proof
    other = DPoPKey.generate().proof("POST", stack.resource, access_token=token)
    assert await initialize(stack, f"DPoP {token}", other) == 401  # not the bound key
    assert await initialize(stack, f"Bearer {token}", None) == 401  # bound: no bearer use


async def initialize(stack: Stack, authorization: str, proof: str | None) -> int:
    """The status of a raw 2025-11-25 `initialize` POST with these credentials."""
    headers = {"Authorization": authorization, "Accept": "application/json, text/event-stream",
               **({"DPoP": proof} if proof else {})}
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}
    async with aiohttp.ClientSession() as http, http.post(
            stack.resource, json=message, headers=headers) as reply:
        return reply.status


# --- the provider holds the client to the rules (so the passes above mean something) -----


@pytest.mark.parametrize(("change", "error"), [
    ({"code_challenge": None, "code_challenge_method": None}, "invalid_request"),  # no PKCE
    ({"code_challenge_method": "plain"}, "invalid_request"),  # S256 only
    ({"resource": "http://127.0.0.1:1/elsewhere"}, "invalid_target"),  # RFC 8707
], ids=["no-pkce", "plain-pkce", "another-resource"])
async def test_the_provider_refuses_what_mcpkit_must_not_send(
        stack: Stack, change: dict[str, str | None], error: str) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{stack.issuer}/reg", json={
                "redirect_uris": [DEFAULT_REDIRECT_URI], "application_type": "native",
                "token_endpoint_auth_method": "none"}) as reply:
            assert reply.status == 201
            client_id = (await reply.json())["client_id"]
        params: dict[str, str | None] = {
            "client_id": client_id, "response_type": "code", "redirect_uri": DEFAULT_REDIRECT_URI,
            "state": "s", "code_challenge": "x" * 43, "code_challenge_method": "S256",
            "resource": stack.resource, **change}
        query = {k: v for k, v in params.items() if v is not None}
        async with http.get(f"{stack.issuer}/auth", params=query,
                            allow_redirects=False) as reply:
            location = reply.headers.get("Location", "")
    assert location.startswith(DEFAULT_REDIRECT_URI), (reply.status, location)
    assert parse_qs(urlsplit(location).query)["error"] == [error]
