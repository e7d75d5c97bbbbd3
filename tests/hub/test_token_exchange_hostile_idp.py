"""The hub's token exchange against an identity provider that misbehaves, over real HTTP on
127.0.0.1 (an aiohttp provider in the test, a real store on SQLite): an oversized answer, a
slow one, an error, a token of the wrong type, an upstream whose metadata trusts another
issuer - each a precise `UpstreamUnavailable` naming the step, never a token; the request the
hub sends is an RFC 8693 exchange authenticated as its client, with the upstream's resource."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from aiohttp import web
from tests.procs import free_port, serving

from mcpkit.auth.assertions import ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE_GRANT
from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.oauth.oidc import OidcSignIn
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Store, UpstreamRecord, UpstreamSpec
from mcpkit.hub.store.oidc import IdpTokens
from mcpkit.hub.upstream_auth import UpstreamNeedsLogin
from mcpkit.hub.upstream_client import UpstreamUnavailable
from mcpkit.hub.upstream_token_exchange import UpstreamNeedsSignIn, UpstreamTokenExchange

pytestmark = pytest.mark.anyio

SECRET = "hub-secret-" + "s" * 24
SUBJECT = "provider-access-token-" + "a" * 20
UPSTREAM_TOKEN = "upstream-token-" + "u" * 20


@dataclass
class Idp:
    """Discovery, a token endpoint answering with `answer`, and an upstream's protected-
    resource metadata (`prm`, None: 404) on one port."""

    url: str
    answer: Callable[[], web.Response] = field(default=lambda: web.json_response({}))
    delay_s: float = 0.0
    prm: dict[str, Any] | None = None
    forms: list[dict[str, str]] = field(default_factory=list)

    @property
    def upstream(self) -> str:
        return self.url + "/mcp"


@pytest.fixture
async def idp() -> AsyncIterator[Idp]:
    port = free_port()
    fake = Idp(f"http://127.0.0.1:{port}")

    async def metadata(_: web.Request) -> web.Response:
        return web.json_response({
            "issuer": fake.url, "authorization_endpoint": fake.url + "/auth",
            "token_endpoint": fake.url + "/token", "jwks_uri": fake.url + "/jwks",
            "token_endpoint_auth_methods_supported": ["client_secret_post"]})

    async def token(request: web.Request) -> web.Response:
        fake.forms.append({k: str(v) for k, v in (await request.post()).items()})
        await anyio.sleep(fake.delay_s)
        return fake.answer()

    async def resource_metadata(_: web.Request) -> web.Response:
        if fake.prm is None:
            return web.Response(status=404)
        return web.json_response(fake.prm)

    app = web.Application()
    app.router.add_get("/.well-known/openid-configuration", metadata)
    app.router.add_post("/token", token)
    app.router.add_get("/.well-known/oauth-protected-resource/mcp", resource_metadata)
    async with serving(app, port):
        yield fake


@dataclass
class Setup:
    store: Store
    upstream: UpstreamRecord
    exchange: UpstreamTokenExchange


@pytest.fixture
async def setup(idp: Idp, tmp_path: Path) -> AsyncIterator[Setup]:
    settings = HubSettings(oidc_issuer=idp.url, oidc_client_id="hub",
                           oidc_client_secret_env="UNUSED", oidc_timeout_s=1.0,
                           oidc_max_document_bytes=4096, allow_private_upstreams=True)
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}",
                             SecretBox([generate_key()]))
    try:
        signed = await store.oidc.sign_in(
            idp.url, "subject-1", names=["ada"], allow_signup=True,
            tokens=IdpTokens("id.token.x", SUBJECT, None, time.time() + 3600))
        assert signed is not None
        upstream = await store.upstreams.create(signed.user.id, UpstreamSpec(
            name="tx", transport="http", url=idp.upstream, auth_mode="token_exchange"))
        oidc = OidcSignIn(settings, SECRET, callback_url="http://127.0.0.1:1/cb")
        yield Setup(store, upstream, UpstreamTokenExchange(oidc, SECRET, settings))
    finally:
        await store.close()


async def token_of(setup: Setup) -> str:
    return await setup.exchange.token(setup.store, setup.upstream)


async def refused(setup: Setup) -> str:
    with pytest.raises(UpstreamUnavailable) as caught:
        await token_of(setup)
    message = str(caught.value)
    for secret in (SUBJECT, UPSTREAM_TOKEN, SECRET):
        assert secret not in message
    return message


def good(**changed: Any) -> Callable[[], web.Response]:
    body = {"access_token": UPSTREAM_TOKEN, "issued_token_type": ACCESS_TOKEN_TYPE,
            "token_type": "Bearer", "expires_in": 600, **changed}
    return lambda: web.json_response(body)


async def test_the_request_is_an_rfc_8693_exchange_as_the_hubs_client(
        idp: Idp, setup: Setup) -> None:
    idp.answer = good()
    assert await token_of(setup) == UPSTREAM_TOKEN
    assert await token_of(setup) == UPSTREAM_TOKEN  # cached: one request
    assert idp.forms == [{
        "grant_type": TOKEN_EXCHANGE_GRANT, "requested_token_type": ACCESS_TOKEN_TYPE,
        "subject_token": SUBJECT, "subject_token_type": ACCESS_TOKEN_TYPE,
        "resource": idp.upstream, "client_id": "hub", "client_secret": SECRET}]


async def test_the_upstreams_metadata_names_the_resource_and_must_trust_the_provider(
        idp: Idp, setup: Setup) -> None:
    idp.answer = good()
    idp.prm = {"resource": idp.upstream, "authorization_servers": ["https://elsewhere.test"]}
    message = await refused(setup)
    assert "needs an upstream that trusts the hub's identity provider" in message
    assert "https://elsewhere.test" in message and idp.forms == []
    idp.prm = {"resource": idp.upstream, "authorization_servers": [idp.url]}
    assert await token_of(setup) == UPSTREAM_TOKEN
    assert idp.forms[0]["resource"] == idp.upstream


@pytest.mark.parametrize(("answer", "expected"), [
    (lambda: web.json_response({"pad": "x" * 8000}), "over the 4096-byte limit"),
    (lambda: web.json_response({"error": "invalid_target"}, status=400),
     "refused the token exchange for"),
    (lambda: web.json_response({"error": "server_error"}, status=503), "HTTP 503, server_error"),
    (good(issued_token_type="urn:ietf:params:oauth:token-type:id_token"),
     "not an access token"),
    (good(token_type="N_A"), "token type 'N_A' is not supported"),
    (lambda: web.Response(text="<html>", content_type="text/html"), "not JSON"),
])
async def test_a_bad_answer_is_a_precise_refusal(idp: Idp, setup: Setup,
                                                 answer: Callable[[], web.Response],
                                                 expected: str) -> None:
    idp.answer = answer
    message = await refused(setup)
    assert expected in message and message.startswith("tx: ")
    assert len(setup.exchange.cache) == 0


async def test_a_slow_provider_is_cut_off_at_the_timeout(idp: Idp, setup: Setup) -> None:
    idp.answer, idp.delay_s = good(), 3.0
    message = await refused(setup)
    assert "token exchange at the identity provider" in message
    assert "TimeoutError" in message or "timeout" in message.lower()


async def test_invalid_grant_asks_the_owner_to_sign_in_again(idp: Idp, setup: Setup) -> None:
    idp.answer = lambda: web.json_response({"error": "invalid_grant"}, status=400)
    with pytest.raises(UpstreamNeedsSignIn) as caught:
        await token_of(setup)
    assert isinstance(caught.value, UpstreamNeedsLogin)  # health checks: needs_auth
    assert f"sign in to the hub through {idp.url} again" in str(caught.value)
