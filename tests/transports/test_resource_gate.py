"""A `Server` as an OAuth resource server (`asgi_app(authorization=ResourceAuth(...))`), over
real HTTP on 127.0.0.1 (uvicorn in this process): challenges, RFC 9728 metadata, scopes
per tool/resource/prompt in both eras, `ctx.auth`, session ownership, HTTP+SSE and the
WebSocket handshake, and hostile Authorization headers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import anyio
import pytest

from mcpkit import Client
from mcpkit.errors import McpkitError
from mcpkit.protocol.sse import EventParser
from mcpkit.server.resource_auth import INSUFFICIENT_SCOPE

from .conftest import serving
from .oauth_fixtures import (
    BRIEF_S,
    ISSUER,
    METADATA_URL,
    NONCE,
    RESOURCE,
    KnownTokens,
    build_guarded_server,
    protection,
)

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"
LEGACY = "2025-11-25"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "0"},
}
JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
TIMEOUT = aiohttp.ClientTimeout(total=10)
CHALLENGE_401 = (f'Bearer resource_metadata="{METADATA_URL}", scope="mcp", '
                 f'DPoP resource_metadata="{METADATA_URL}", algs="ES256", scope="mcp"')


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def guarded(**options: Any) -> AsyncIterator[tuple[str, KnownTokens]]:
    verifier = KnownTokens()
    app = build_guarded_server().asgi_app(authorization=protection(verifier, **options))
    async with serving(app) as (_, port):
        try:
            yield f"http://127.0.0.1:{port}", verifier
        finally:
            app.shutdown()


def modern(method: str, params: dict[str, Any] | None = None, name: str | None = None,
           ) -> tuple[dict[str, Any], dict[str, str]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method,
            "params": {**(params or {}), "_meta": META}}
    headers = {**JSON, "mcp-protocol-version": VERSION, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return body, headers


async def post(http: aiohttp.ClientSession, url: str, body: Any, headers: dict[str, str],
               token: str | None = None, scheme: str = "Bearer",
               ) -> tuple[int, Any, list[dict[str, Any]]]:
    """(status, response headers, the JSON-RPC messages of the body)."""
    if token is not None:
        headers = {**headers, "authorization": f"{scheme} {token}"}
    async with http.post(url, data=json.dumps(body), headers=headers) as response:
        raw = await response.read()
        if response.content_type == "text/event-stream":
            events = EventParser().feed(raw)
            return response.status, response.headers, [json.loads(e.data) for e in events
                                                       if e.data]
        messages = [json.loads(raw)] if raw else []
        return response.status, response.headers, messages


async def open_legacy(http: aiohttp.ClientSession, url: str, token: str) -> str:
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "tests", "version": "0"}}}
    status, headers, messages = await post(http, url, body, JSON, token)
    assert status == 200, messages
    session_id: str = headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    status, _, _ = await post(http, url, note, {**JSON, "mcp-session-id": session_id}, token)
    assert status == 202
    return session_id


# --- challenges and metadata ---------------------------------------------------------------


async def test_no_token_gets_401_with_the_challenge_and_the_metadata_is_public() -> None:
    async with guarded() as (base, verifier), aiohttp.ClientSession(timeout=TIMEOUT) as http:
        body, headers = modern("tools/list")
        status, got, messages = await post(http, base + "/mcp", body, headers)
        assert status == 401
        assert got["www-authenticate"] == CHALLENGE_401
        assert messages[0]["error"]["code"] == -32001
        assert verifier.seen == []  # nothing was verified: there was no token
        for path in ("/.well-known/oauth-protected-resource/mcp",
                     "/.well-known/oauth-protected-resource"):
            async with http.get(base + path, headers={"origin": "https://inspector.test"}) as r:
                assert r.status == 200
                assert r.headers["access-control-allow-origin"] == "*"
                assert await r.json() == {
                    "resource": RESOURCE, "authorization_servers": [ISSUER],
                    "scopes_supported": ["mcp", "admin"], "bearer_methods_supported": ["header"],
                    "resource_name": "Guarded test server",
                    "dpop_signing_alg_values_supported": ["ES256"]}
            async with http.options(base + path, headers={
                    "origin": "https://inspector.test",
                    "access-control-request-method": "GET"}) as r:
                assert r.status == 204
                assert "GET" in r.headers["access-control-allow-methods"]


async def test_invalid_token_401_invalid_token_and_the_url_verified_is_the_one_addressed() -> None:
    async with guarded() as (base, verifier), aiohttp.ClientSession(timeout=TIMEOUT) as http:
        body, headers = modern("tools/list")
        status, got, _ = await post(http, base + "/mcp", body, headers, "not-a-known-token")
        assert status == 401
        assert got["www-authenticate"].startswith(
            f'Bearer resource_metadata="{METADATA_URL}", scope="mcp", error="invalid_token", '
            'error_description="the token is not active"')
        assert verifier.seen == [("Bearer", "POST", base + "/mcp")]


async def test_dpop_nonce_401_then_the_proof_with_the_nonce_passes() -> None:
    async with guarded() as (base, _), aiohttp.ClientSession(timeout=TIMEOUT) as http:
        body, headers = modern("tools/list")
        status, got, _ = await post(http, base + "/mcp", body, {**headers, "dpop": "proof-old"},
                                    "tok-dpop", scheme="DPoP")
        assert status == 401
        assert got["dpop-nonce"] == NONCE
        assert got["www-authenticate"] == (  # the DPoP challenge alone: a DPoP-only error
            f'DPoP resource_metadata="{METADATA_URL}", algs="ES256", scope="mcp", '
            'error="use_dpop_nonce", error_description="resend the proof with the DPoP-Nonce '
            'given"')
        status, _, messages = await post(http, base + "/mcp", body,
                                         {**headers, "dpop": f"proof-{NONCE}"}, "tok-dpop",
                                         scheme="DPoP")
        assert status == 200, messages
        assert "whoami" in {t["name"] for t in messages[0]["result"]["tools"]}


async def test_a_token_without_the_required_scope_gets_403() -> None:
    async with guarded() as (base, _), aiohttp.ClientSession(timeout=TIMEOUT) as http:
        body, headers = modern("tools/list")
        status, got, messages = await post(http, base + "/mcp", body, headers, "tok-carol")
        assert status == 403
        assert got["www-authenticate"].startswith(
            f'Bearer resource_metadata="{METADATA_URL}", scope="mcp other", '
            'error="insufficient_scope"')
        assert messages[0]["error"]["code"] == INSUFFICIENT_SCOPE


# --- scopes per tool, resource and prompt ------------------------------------------------------


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_lists_show_a_caller_what_its_scopes_allow_and_ctx_auth_names_it(era: str) -> None:
    async with guarded() as (base, _):
        async with Client(base + "/mcp", era=era, bearer_token="tok-alice") as alice:
            assert [t.name for t in await alice.list_tools()] == ["whoami"]
            assert [r.uri for r in await alice.list_resources()] == ["res://public"]
            assert await alice.list_resource_templates() == []
            assert [p.name for p in await alice.list_prompts()] == ["hello"]
            me = json.loads((await alice.call_tool("whoami")).content[0].text)  # type: ignore[union-attr]
            assert me == {"subject": "alice", "client_id": "app-1", "scopes": ["mcp"],
                          "email": "alice@example.test", "principal": f"{ISSUER}#alice"}
        async with Client(base + "/mcp", era=era, bearer_token="tok-admin") as admin:
            assert sorted(t.name for t in await admin.list_tools()) == ["whoami", "wipe"]
            assert len(await admin.list_resources()) == 2
            assert [t.uri_template for t in await admin.list_resource_templates()] == [
                "vault://{item}"]
            assert sorted(p.name for p in await admin.list_prompts()) == ["audit", "hello"]
            assert (await admin.call_tool("wipe")).content[0].text == "wiped"  # type: ignore[union-attr]
            read = await admin.read_resource("vault://x")
            assert read.contents[0].text == "vault x"  # type: ignore[union-attr]


async def test_a_call_without_the_scope_gets_the_step_up_challenge_in_both_eras() -> None:
    step_up = (f'Bearer resource_metadata="{METADATA_URL}", scope="admin mcp", '
               'error="insufficient_scope"')
    calls = [("tools/call", {"name": "wipe", "arguments": {}}, "wipe"),
             ("resources/read", {"uri": "res://secret"}, "res://secret"),
             ("resources/read", {"uri": "vault://a"}, "vault://a"),
             ("prompts/get", {"name": "audit"}, "audit")]
    async with guarded() as (base, _), aiohttp.ClientSession(timeout=TIMEOUT) as http:
        session_id = await open_legacy(http, base + "/mcp", "tok-alice")
        for method, params, name in calls:
            body, headers = modern(method, params, name)
            status, got, messages = await post(http, base + "/mcp", body, headers, "tok-alice")
            assert status == 403, (method, messages)
            assert got["www-authenticate"].startswith(step_up)
            legacy = {"jsonrpc": "2.0", "id": 5, "method": method, "params": params}
            status, got, _ = await post(http, base + "/mcp", legacy,
                                        {**JSON, "mcp-session-id": session_id}, "tok-alice")
            assert status == 403, method
            assert got["www-authenticate"].startswith(step_up)
        # The same legacy session, with a token that has the scope (same user: a step-up).
        legacy = {"jsonrpc": "2.0", "id": 6, "method": "tools/list"}
        status, _, messages = await post(http, base + "/mcp", legacy,
                                         {**JSON, "mcp-session-id": session_id}, "tok-alice")
        assert [t["name"] for t in messages[0]["result"]["tools"]] == ["whoami"]


async def test_the_mcpkit_client_with_too_little_scope_fails_clearly() -> None:
    async with guarded() as (base, _):
        async with Client(base + "/mcp", era="modern", bearer_token="tok-alice") as alice:
            with pytest.raises(McpkitError) as refused:
                await alice.call_tool("wipe")
            assert "403" in str(refused.value) or "scope" in str(refused.value)


# --- sessions, HTTP+SSE, WebSocket -----------------------------------------------------------


async def test_a_legacy_session_opened_by_one_user_is_not_found_for_another() -> None:
    async with guarded() as (base, _), aiohttp.ClientSession(timeout=TIMEOUT) as http:
        session_id = await open_legacy(http, base + "/mcp", "tok-alice")
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        hdrs = {**JSON, "mcp-session-id": session_id}
        status, _, _ = await post(http, base + "/mcp", listing, hdrs, "tok-bob")
        assert status == 404
        async with http.delete(base + "/mcp", headers={
                "mcp-session-id": session_id, "authorization": "Bearer tok-bob"}) as r:
            assert r.status == 404
        status, _, messages = await post(http, base + "/mcp", listing, hdrs, "tok-alice")
        assert status == 200 and "result" in messages[0]


async def test_http_sse_is_gated_and_a_session_belongs_to_its_opener() -> None:
    async with guarded() as (base, _), aiohttp.ClientSession(timeout=TIMEOUT) as http:
        async with http.get(base + "/sse") as r:
            assert r.status == 401
            assert r.headers["www-authenticate"] == CHALLENGE_401
        async with http.get(base + "/sse", headers={"authorization": "Bearer tok-alice"}) as r:
            assert r.status == 200
            parser = EventParser()
            endpoint = None
            with anyio.fail_after(5):
                while endpoint is None:
                    events = parser.feed(await r.content.readany())
                    endpoint = next((e.data for e in events if e.event == "endpoint"), None)
            call = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2024-11-05", "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}}
            for token, expected in (("tok-bob", 404), ("nope", 401), ("tok-alice", 202)):
                async with http.post(base + endpoint, json=call, headers={
                        "authorization": f"Bearer {token}"}) as answer:
                    assert answer.status == expected, token
            with anyio.fail_after(5):
                reply = None
                while reply is None:
                    events = parser.feed(await r.content.readany())
                    reply = next((json.loads(e.data) for e in events if e.event == "message"),
                                 None)
            assert reply["id"] == 1 and "result" in reply


async def test_the_websocket_handshake_is_gated_and_the_socket_keeps_its_caller() -> None:
    async with guarded() as (base, _), aiohttp.ClientSession(timeout=TIMEOUT) as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(base + "/ws", protocols=["mcp"])
        assert refused.value.status == 401
        assert refused.value.headers is not None
        assert refused.value.headers["www-authenticate"] == CHALLENGE_401
        async with http.ws_connect(base + "/ws", protocols=["mcp"],
                                   headers={"authorization": "Bearer tok-alice"}) as ws:
            await ws.send_json({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": LEGACY, "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}})
            assert "result" in await ws.receive_json(timeout=5)
            await ws.send_json({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                "params": {"name": "whoami", "arguments": {}}})
            me = await ws.receive_json(timeout=5)
            assert json.loads(me["result"]["content"][0]["text"])["subject"] == "alice"
            # No HTTP status can answer a frame: a JSON-RPC error with the scopes needed.
            await ws.send_json({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                "params": {"name": "wipe", "arguments": {}}})
            refusal = await ws.receive_json(timeout=5)
            assert refusal["error"]["code"] == INSUFFICIENT_SCOPE
            assert refusal["error"]["data"] == {"error": "insufficient_scope", "scope": "admin"}


async def test_a_websocket_is_closed_when_its_token_expires() -> None:
    """Frames carry no token: the handshake's token bounds the socket's life (1008 at its
    expiry), so a socket cannot outlive the access it was granted."""
    async with guarded() as (base, _), aiohttp.ClientSession(timeout=TIMEOUT) as http, \
            http.ws_connect(base + "/ws", protocols=["mcp"],
                            headers={"authorization": "Bearer tok-brief"}) as ws:
        await ws.send_json({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}})
        assert "result" in await ws.receive_json(timeout=5)
        closing = await ws.receive(timeout=BRIEF_S + 5)
        assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert ws.close_code == 1008


# --- hostile headers -------------------------------------------------------------------------


async def test_malformed_and_oversized_authorization_headers() -> None:
    cases = {
        "Bearer": 400,  # our scheme with no token: malformed (RFC 6750 §3.1 invalid_request)
        "Basic dXNlcjpwYXNz": 401,  # not a scheme of ours: the challenge, no error
        "Bearer a b": 400,
        "Bearer tok-alice, Bearer tok-bob": 400,
        "Bearer " + "a" * 17_000: 400,
        "Bearer \"quoted\"": 400,
    }
    async with guarded(failure_burst=100) as (base, verifier), aiohttp.ClientSession(
            timeout=TIMEOUT) as http:
        body, headers = modern("tools/list")
        for value, expected in cases.items():
            async with http.post(base + "/mcp", data=json.dumps(body),
                                 headers={**headers, "authorization": value}) as r:
                assert r.status == expected, value[:40]
                challenge = r.headers["www-authenticate"]
                assert challenge.startswith(f'Bearer resource_metadata="{METADATA_URL}"')
                if expected == 400:
                    assert 'error="invalid_request"' in challenge
                assert "tok-alice" not in challenge and "aaaa" not in challenge
        assert verifier.seen == []  # none of them reached the verifier


async def test_many_bad_tokens_from_one_address_are_rate_limited() -> None:
    async with guarded(failure_burst=5, failures_per_minute=1) as (base, verifier), \
            aiohttp.ClientSession(timeout=TIMEOUT) as http:
        body, headers = modern("tools/list")
        statuses = [(await post(http, base + "/mcp", body, headers, f"bad-{i}"))[0]
                    for i in range(8)]
        assert statuses == [401] * 5 + [429] * 3
        status, got, _ = await post(http, base + "/mcp", body, headers, "tok-alice")
        assert status == 429 and int(got["retry-after"]) >= 1  # not even a right one now
        assert len(verifier.seen) == 5  # the blocked ones never reached the verifier


# --- with the real JWT verifier ----------------------------------------------------------------


async def test_jwt_access_tokens_checked_against_the_issuers_jwks() -> None:
    """`JwtVerifier` (RFC 9068, keys from the issuer's JWKS, served on 127.0.0.1) behind the
    gate: a token for this resource gets in as its issuer-qualified subject; one minted for
    another resource is refused; per-tool scopes hold for JWT scopes too."""
    from tests.auth.resource_tokens import Signer
    from tests.server.authorization_server import running_auth_server

    from mcpkit.server.authorization import JwtVerifier

    with running_auth_server(Signer("k1")) as issuer:
        def mint(**claims: Any) -> str:
            return issuer.signers[0].mint({"iss": issuer.issuer, "aud": RESOURCE,
                                           "scope": "mcp", **claims})

        auth = protection(JwtVerifier(issuer.issuer, RESOURCE),
                          authorization_servers=[issuer.issuer])
        app = build_guarded_server().asgi_app(authorization=auth)
        async with serving(app) as (_, port):
            url = f"http://127.0.0.1:{port}/mcp"
            async with Client(url, bearer_token=mint()) as alice:
                assert [t.name for t in await alice.list_tools()] == ["whoami"]
                me = json.loads((await alice.call_tool("whoami")).content[0].text)  # type: ignore[union-attr]
                assert me["subject"] == "alice" and me["client_id"] == "app"
                assert me["principal"] == f"{issuer.issuer}#alice"
            async with aiohttp.ClientSession(timeout=TIMEOUT) as http:
                body, headers = modern("tools/list")
                elsewhere = mint(aud="https://other.example.test/mcp")
                status, got, _ = await post(http, url, body, headers, elsewhere)
                assert status == 401
                assert 'error="invalid_token"' in got["www-authenticate"]
                status, got, _ = await post(
                    http, url, *modern("tools/call", {"name": "wipe", "arguments": {}}, "wipe"),
                    mint())
                assert status == 403
                assert 'scope="admin mcp", error="insufficient_scope"' in got["www-authenticate"]
            app.shutdown()
