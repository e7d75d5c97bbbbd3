"""Signing in to the hub through an external OpenID Connect provider: the real oidc-provider
(tests/auth_e2e) with the hub as its pre-registered confidential client, over real HTTP on
127.0.0.1, on SQLite and PostgreSQL.

Two hubs share one database (like replicas with different settings): one allows sign-up on a
first login, the other does not. A user signs in through the provider in real headless
Chromium, an MCP client's authorization completes and tools are listed through /mcp; a first
login makes a user only with sign-up allowed; a second login is the same user; a name another
user holds is never attached; a disabled user is refused; the provider's tokens are kept
sealed for token exchange; forged and replayed callbacks are refused. The ID-token checks
(nonce, audience, issuer, expiry, signatures) are also tried one by one against an in-test
provider whose tokens the test signs."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import secrets
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from joserfc import jwt
from joserfc.jwk import ECKey, OctKey
from sqlalchemy import text
from tests.auth_e2e.stack import Stack, running_stack
from tests.browser import chromium_path
from tests.hub.hub_helpers import Api, Hub, call, database_for, fresh_user, seed_admin, unique
from tests.hub.oidc_login import CALLBACK_PATH, BrowserOidcLogin, OidcWalk, Stopped
from tests.hub.router.support import hub_app, register, upstream
from tests.procs import free_port, serve_in_thread, serving
from yarl import URL

from mcpkit import Client
from mcpkit.auth.tokens import MemoryRegistrationStore
from mcpkit.client import Timeouts
from mcpkit.client.oauth import OAuth
from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.db.engine import make_engine
from mcpkit.hub.oauth.oidc import OidcRefused, OidcSignIn, user_name_hints
from mcpkit.hub.oauth.oidc_routes import PENDING_COOKIE
from mcpkit.hub.settings import HubSettings, SettingsError
from mcpkit.hub.store import Store

pytestmark = pytest.mark.anyio

SECRET_ENV = "MCPKIT_TEST_HUB_OIDC_CLIENT_SECRET"
REDIRECT = "http://127.0.0.1:33418/callback"
LEGACY = "2025-11-25"


@dataclass
class OidcHubs:
    stack: Stack
    open: Hub
    """Sign-up allowed: a first login makes a hub user."""
    closed: Hub
    """Sign-up off: an unknown subject is refused."""
    upstream_url: str

    @property
    def issuer(self) -> str:
        return self.stack.issuer


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def hubs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[OidcHubs]:
    directory = tmp_path_factory.mktemp("oidc")
    database_url = database_for(request, request.param, directory)
    box = SecretBox([generate_key()])
    token = seed_admin(database_url, box)
    ports = free_port(), free_port()
    callbacks = tuple(f"http://127.0.0.1:{port}{CALLBACK_PATH}" for port in ports)
    with running_stack(directory, hub_redirect_uris=callbacks) as stack, \
            upstream("oidcup") as served:
        os.environ[SECRET_ENV] = stack.hub_client_secret  # read by the hubs at start
        try:
            common: dict[str, Any] = dict(
                database_url=database_url, allow_private_upstreams=True,
                auth_failure_burst=1_000_000, oidc_issuer=stack.issuer,
                oidc_client_id=stack.hub_client_id, oidc_client_secret_env=SECRET_ENV)
            settings = (HubSettings(port=ports[0], oidc_allow_signup=True,
                                    oidc_provider_name="Test IdP", **common),
                        HubSettings(port=ports[1], **common))
            with serve_in_thread(hub_app(settings[0], box), lifespan="on", name="hub-open",
                                 port=ports[0]) as open_url, \
                    serve_in_thread(hub_app(settings[1], box), lifespan="on",
                                    name="hub-closed", port=ports[1]) as closed_url:
                yield OidcHubs(stack, Hub(open_url, token, database_url, settings[0], box),
                               Hub(closed_url, token, database_url, settings[1], box),
                               served.url)
        finally:
            os.environ.pop(SECRET_ENV, None)


# --- helpers -------------------------------------------------------------------------------


def s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@dataclass
class CodeRequest:
    """An MCP client's authorization request at a hub, by hand (DCR, PKCE S256)."""

    hub: Hub
    client_id: str
    verifier: str
    url: str

    @classmethod
    async def new(cls, hub: Hub) -> CodeRequest:
        reply = await call("POST", hub.url + "/oauth/register",
                           json={"redirect_uris": [REDIRECT], "client_name": "oidc tests"})
        assert reply.status == 201, reply.text
        client_id = reply.body["client_id"]
        verifier = secrets.token_urlsafe(48)
        params = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT,
                  "state": secrets.token_hex(8), "scope": "mcp",
                  "resource": hub.url + "/mcp", "code_challenge": s256(verifier),
                  "code_challenge_method": "S256"}
        return cls(hub, client_id, verifier,
                   hub.url + "/oauth/authorize?" + urllib.parse.urlencode(params))

    async def user_of(self, back: str) -> int:
        """Exchange the code the client got back; the hub user its access token is for."""
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(back).query)
        assert query["iss"] == [self.hub.url]
        reply = await call("POST", self.hub.url + "/oauth/token", data={
            "grant_type": "authorization_code", "code": query["code"][0],
            "redirect_uri": REDIRECT, "client_id": self.client_id,
            "code_verifier": self.verifier})
        assert reply.status == 200, reply.text
        return int(unverified_claims(reply.body["access_token"])["sub"])


def unverified_claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    padded = payload + "=" * (-len(payload) % 4)
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(padded))
    return claims


async def login(hub: Hub, account: str) -> tuple[OidcWalk, str | Stopped, CodeRequest]:
    """A fresh browser profile signs `account` in through the provider at `hub`."""
    request = await CodeRequest.new(hub)
    walk = OidcWalk(hub.url, account, REDIRECT)
    return walk, await walk.walk(request.url), request


# --- sign-up, the same user again, names, disabled users ---------------------------------


async def test_a_first_login_makes_a_user_only_with_sign_up_and_a_second_is_the_same_user(
        hubs: OidcHubs) -> None:
    account = unique("ada")
    async with await Store.open(hubs.open.database_url, hubs.open.box) as store:
        # sign-up off: refused with a page that says why (and the subject, for an admin)
        _, ended, _ = await login(hubs.closed, account)
        assert isinstance(ended, Stopped) and ended.status == 403, ended
        assert "does not create users at a first sign-in" in ended.text
        assert account in ended.text
        assert await store.oidc.user_of(hubs.issuer, account) is None

        # sign-up on: a new user, named after preferred_username, whose token /mcp accepts
        walk, back, request = await login(hubs.open, account)
        assert isinstance(back, str), back
        assert walk.pages == ["hub:login", "provider:login", "provider:consent", "hub:consent"]
        user_id = await request.user_of(back)
        assert (await store.users.get(user_id)).name == account
        assert await store.oidc.user_of(hubs.issuer, account) == user_id

        # a second login (a fresh browser) is the same user, at either hub: the identity is
        # known now, so the hub without sign-up lets it in too
        for hub in (hubs.open, hubs.closed):
            _, again, request = await login(hub, account)
            assert isinstance(again, str), again
            assert await request.user_of(again) == user_id
        assert len([u for u in (await store.users.list(limit=200)).items
                    if u.name.startswith(account)]) == 1


async def test_a_name_another_user_holds_is_never_attached_to_a_new_identity(
        hubs: OidcHubs) -> None:
    account = unique("carol")
    root = Api(hubs.open, hubs.open.admin_token)
    existing = await root.post("/api/v1/admin/users", {"name": account})
    assert existing.status == 201, existing.text
    _, back, request = await login(hubs.open, account)
    assert isinstance(back, str), back
    user_id = await request.user_of(back)
    assert user_id != existing.body["id"]
    async with await Store.open(hubs.open.database_url, hubs.open.box) as store:
        assert (await store.users.get(user_id)).name == account + "-2"
        assert await store.oidc.user_of(hubs.issuer, account) == user_id


async def test_a_disabled_user_is_refused(hubs: OidcHubs) -> None:
    account = unique("dave")
    _, back, request = await login(hubs.open, account)
    assert isinstance(back, str), back
    user_id = await request.user_of(back)
    async with await Store.open(hubs.open.database_url, hubs.open.box) as store:
        await store.users.set_disabled(user_id)
        kept = await store.oidc.subject_token(user_id, hubs.issuer)
    _, ended, _ = await login(hubs.open, account)
    assert isinstance(ended, Stopped) and ended.status == 403, ended
    assert "disabled" in ended.text
    async with await Store.open(hubs.open.database_url, hubs.open.box) as store:
        # nothing of a disabled user's is renewed by the refused sign-in
        after = await store.oidc.subject_token(user_id, hubs.issuer)
    assert kept is not None and after is not None and after.id_token == kept.id_token


async def test_the_provider_tokens_are_kept_sealed_for_token_exchange(
        hubs: OidcHubs, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="mcpkit")
    account = unique("erin")
    _, back, request = await login(hubs.open, account)
    assert isinstance(back, str), back
    user_id = await request.user_of(back)
    async with await Store.open(hubs.open.database_url, hubs.open.box) as store:
        tokens = await store.oidc.subject_token(user_id, hubs.issuer)
        assert await store.oidc.subject_token(user_id, "https://other.example") is None
    assert tokens is not None and tokens.access_token
    claims = unverified_claims(tokens.id_token)
    assert claims["sub"] == account and claims["iss"] == hubs.issuer
    assert claims["aud"] == hubs.stack.hub_client_id
    assert "***" in repr(tokens) and tokens.id_token not in repr(tokens)
    engine = make_engine(hubs.open.database_url)
    try:
        async with engine.connect() as connection:
            stored = (await connection.execute(text(
                "SELECT tokens_sealed FROM oidc_identities WHERE user_id = :id"),
                {"id": user_id})).scalar_one()
    finally:
        await engine.dispose()
    assert tokens.id_token not in stored and tokens.access_token not in stored
    assert "signed in to the hub through the OpenID Connect provider" in caplog.text
    for secret in (tokens.id_token, tokens.access_token, hubs.stack.hub_client_secret):
        assert secret not in caplog.text


# --- forged and replayed callbacks -----------------------------------------------------------


async def test_forged_and_replayed_callbacks_are_refused(hubs: OidcHubs) -> None:
    account = unique("frank")
    request = await CodeRequest.new(hubs.open)
    walk = OidcWalk(hubs.open.url, account, REDIRECT)
    stopped = await walk.walk(request.url, stop_at_callback=True)
    assert isinstance(stopped, Stopped) and stopped.status == 0, stopped
    callback = stopped.url
    pending = walk.jar.filter_cookies(URL(callback))[PENDING_COOKIE].value
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(callback).query))

    async def answer(url: str, cookie: str | None) -> tuple[int, str]:
        headers = {"Cookie": f"{PENDING_COOKIE}={cookie}"} if cookie else {}
        async with aiohttp.ClientSession() as http, \
                http.get(url, headers=headers, allow_redirects=False) as reply:
            return reply.status, await reply.text()

    def with_query(**changed: str) -> str:
        return hubs.open.url + CALLBACK_PATH + "?" + urllib.parse.urlencode(
            {**query, **changed})

    status, page = await answer(with_query(state="forged-" + secrets.token_hex(8)), pending)
    assert status == 403 and "state mismatch" in page
    status, page = await answer(with_query(iss="http://127.0.0.1:1"), pending)
    assert status == 400 and "another issuer" in page
    status, page = await answer(callback, None)  # another browser: no sign-in of its own
    assert status == 400 and "no sign-in through the provider is in progress" in page
    status, page = await answer(callback, "x" + pending[1:])  # a tampered cookie
    assert status == 400 and "no sign-in through the provider is in progress" in page

    status, _ = await answer(callback, pending)  # the real one, once
    assert status == 302
    # replayed with the same (captured) cookie: the provider redeems a code only once
    status, page = await answer(callback, pending)
    assert status == 502 and "refused the code" in page
    assert query["code"] not in page


# --- an MCP client, through real Chromium ----------------------------------------------------


async def test_a_browser_signs_in_through_the_provider_and_the_client_lists_tools(
        hubs: OidcHubs) -> None:
    account = unique("grace")
    user_id, api = await fresh_user(hubs.closed)
    await register(api, "oidcup", hubs.upstream_url)
    async with await Store.open(hubs.closed.database_url, hubs.closed.box) as store:
        await store.oidc.link(hubs.issuer, account, user_id)  # an admin admits the subject
    browser = BrowserOidcLogin(chromium_path(), hubs.closed.url, account)
    oauth = OAuth(redirect=browser, redirect_uri=browser.redirect_uri,
                  registrations=MemoryRegistrationStore())
    # the era pinned: an era probe is bounded (3 s) and a real browser's sign-in may take
    # longer, which would start the authorization over
    async with Client(hubs.closed.url + "/mcp", auth=oauth, era=LEGACY,
                      timeouts=Timeouts(timeout=30.0)) as client:
        listed = sorted(tool.name for tool in await client.list_tools())
    async with Client(hubs.closed.url + "/mcp", bearer_token=api.token,
                      timeouts=Timeouts(timeout=30.0)) as by_api_token:
        assert listed == sorted(tool.name for tool in await by_api_token.list_tools())
    assert listed
    assert browser.pages == ["hub:login", "provider:login", "provider:consent", "hub:consent"]
    assert oauth.tokens is not None
    assert unverified_claims(oauth.tokens.access_token)["sub"] == str(user_id)


# --- the ID token's checks, against an in-test provider ---------------------------------------

CLIENT_ID = "hub"
CLIENT_SECRET = "s3cret-" + "x" * 32


@dataclass
class FakeProvider:
    """Metadata, keys and a token endpoint on 127.0.0.1; the token endpoint answers with
    `id_token` (set by the test) and records the client authentication it received."""

    issuer: str
    key: ECKey
    id_token: str = ""
    authorization: str = ""

    def sign(self, claims: dict[str, Any], *, key: Any = None, alg: str = "ES256",
             kid: str | None = "k1") -> str:
        header: dict[str, Any] = {"alg": alg, **({"kid": kid} if kid else {})}
        return jwt.encode(header, claims, key or self.key, algorithms=[alg])

    def claims(self, nonce: str, **changed: Any) -> dict[str, Any]:
        now = int(time.time())
        return {"iss": self.issuer, "sub": "subject-1", "aud": CLIENT_ID, "nonce": nonce,
                "iat": now, "exp": now + 300, **changed}


@pytest.fixture
async def provider() -> AsyncIterator[FakeProvider]:
    port = free_port()
    fake = FakeProvider(f"http://127.0.0.1:{port}", ECKey.generate_key("P-256"))

    async def metadata(_: web.Request) -> web.Response:
        return web.json_response({
            "issuer": fake.issuer, "authorization_endpoint": fake.issuer + "/auth",
            "token_endpoint": fake.issuer + "/token", "jwks_uri": fake.issuer + "/jwks",
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_post"]})

    async def keys(_: web.Request) -> web.Response:
        return web.json_response({"keys": [{**fake.key.as_dict(private=False), "kid": "k1",
                                            "use": "sig", "alg": "ES256"}]})

    async def token(request: web.Request) -> web.Response:
        form = await request.post()
        fake.authorization = "post" if form.get("client_secret") == CLIENT_SECRET else "none"
        return web.json_response({"id_token": fake.id_token, "token_type": "Bearer",
                                  "access_token": "at-" + secrets.token_hex(8)})

    app = web.Application()
    app.router.add_get("/.well-known/openid-configuration", metadata)
    app.router.add_get("/tenant/.well-known/openid-configuration", metadata)
    app.router.add_get("/jwks", keys)
    app.router.add_post("/token", token)
    async with serving(app, port):
        yield fake


def client_for(issuer: str, **settings: Any) -> OidcSignIn:
    hub = HubSettings(oidc_issuer=issuer, oidc_client_id=CLIENT_ID,
                      oidc_client_secret_env="UNUSED", **settings)
    return OidcSignIn(hub, CLIENT_SECRET, callback_url="http://127.0.0.1:1/cb")


async def finish(provider: FakeProvider, token_for: Any, **settings: Any) -> dict[str, Any]:
    oidc = client_for(provider.issuer, **settings)
    pending = oidc.new_pending("/oauth/authorize?x=1")
    authorization_url = await oidc.authorization_url(pending)
    sent = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(authorization_url).query))
    assert sent["nonce"] == pending.nonce and sent["code_challenge_method"] == "S256"
    provider.id_token = token_for(pending.nonce)
    login = await oidc.finish({"code": "c", "state": pending.state}, pending)
    return login.claims


async def test_a_good_id_token_is_taken_with_the_advertised_client_authentication(
        provider: FakeProvider) -> None:
    claims = await finish(provider, lambda nonce: provider.sign(provider.claims(nonce)))
    assert claims["sub"] == "subject-1"
    assert provider.authorization == "post"  # client_secret_post, as advertised


OTHER_KEY = ECKey.generate_key("P-256")

REFUSED: dict[str, tuple[Any, str]] = {
    "wrong nonce": (lambda p, n: p.sign(p.claims("not-" + n)), "nonce"),
    "another audience": (lambda p, n: p.sign(p.claims(n, aud="someone-else")), "aud"),
    "another issuer": (lambda p, n: p.sign(p.claims(n, iss="https://evil.example")), "iss"),
    "expired": (lambda p, n: p.sign(p.claims(n, exp=int(time.time()) - 3600)), "exp"),
    "no nonce": (lambda p, n: p.sign({k: v for k, v in p.claims(n).items() if k != "nonce"}),
                 "nonce"),
    "several audiences, no azp": (
        lambda p, n: p.sign(p.claims(n, aud=[CLIENT_ID, "other"])), "azp"),
    "another client's azp": (lambda p, n: p.sign(p.claims(n, azp="other")), "azp"),
    "an unpublished key": (lambda p, n: p.sign(p.claims(n), key=OTHER_KEY), "signature"),
    "an unknown kid": (lambda p, n: p.sign(p.claims(n), key=OTHER_KEY, kid="k9"),
                       "does not publish"),
    "HS256 with the client secret": (
        lambda p, n: p.sign(p.claims(n), key=OctKey.import_key(CLIENT_SECRET), alg="HS256"),
        "asymmetric"),
    "alg none": (lambda p, n: unsigned(p.claims(n)), "asymmetric"),
    "not a JWT": (lambda p, n: "not-a-jwt", "not a JWT"),
}


def unsigned(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}."


@pytest.mark.parametrize("case", sorted(REFUSED))
async def test_an_id_token_that_fails_a_check_is_refused(provider: FakeProvider,
                                                         case: str) -> None:
    make, named = REFUSED[case]
    with pytest.raises(OidcRefused) as refused:
        await finish(provider, lambda nonce: make(provider, nonce))
    assert named in refused.value.message
    assert provider.id_token not in refused.value.message


async def test_the_state_must_match_and_the_exchanges_are_bounded(
        provider: FakeProvider) -> None:
    oidc = client_for(provider.issuer)
    pending = oidc.new_pending("/oauth/authorize?x=1")
    with pytest.raises(OidcRefused, match="state mismatch"):
        await oidc.finish({"code": "c", "state": "forged"}, pending)
    provider.id_token = provider.sign(provider.claims(pending.nonce, pad="x" * 4096))
    small = client_for(provider.issuer, oidc_max_document_bytes=2048)
    with pytest.raises(OidcRefused, match="2048-byte limit"):
        await small.finish({"code": "c", "state": pending.state}, pending)


async def test_metadata_for_another_issuer_is_refused(provider: FakeProvider) -> None:
    oidc = client_for(provider.issuer + "/tenant")  # served the provider's own document
    with pytest.raises(OidcRefused, match="names another issuer"):
        await oidc.authorization_url(oidc.new_pending("/oauth/authorize?x=1"))


# --- names and settings ----------------------------------------------------------------------


def test_user_names_come_from_the_claims_made_valid() -> None:
    assert user_name_hints({"preferred_username": "Ada.Lovelace"}, "s")[0] == "ada-lovelace"
    assert user_name_hints({"email": "Bob+x@example.com"}, "s")[0] == "bob-x"
    assert user_name_hints({}, "auth0|1234")[0] == "auth0-1234"
    assert user_name_hints({"preferred_username": "__"}, "%%") == ["user"]
    long = user_name_hints({"preferred_username": "a" * 200}, "s")[0]
    assert len(long) == 40


def test_oidc_settings_are_checked_and_the_secret_comes_from_the_environment() -> None:
    with pytest.raises(SettingsError, match="oidc_client_id"):
        HubSettings(oidc_issuer="https://idp.example")
    with pytest.raises(SettingsError, match="oidc_client_secret_env"):
        HubSettings(oidc_issuer="https://idp.example", oidc_client_id="hub")
    with pytest.raises(SettingsError, match="openid"):
        HubSettings(oidc_issuer="https://idp.example", oidc_client_id="hub",
                    oidc_client_secret_env="V", oidc_scopes="profile")
    settings = HubSettings.from_env({"MCPKIT_HUB_OIDC_ISSUER": "https://idp.example",
                                     "MCPKIT_HUB_OIDC_CLIENT_ID": "hub",
                                     "MCPKIT_HUB_OIDC_CLIENT_SECRET_ENV": "IDP_SECRET",
                                     "MCPKIT_HUB_OIDC_ALLOW_SIGNUP": "1"})
    assert settings.oidc_allow_signup and settings.oidc_scopes == "openid profile email"
    assert settings.oidc_client_secret({"IDP_SECRET": "shh"}) == "shh"
    with pytest.raises(SettingsError, match="'IDP_SECRET'") as unset:
        settings.oidc_client_secret({})
    assert "shh" not in str(unset.value)


# --- the command line ------------------------------------------------------------------------


def test_an_admin_links_a_subject_and_serve_needs_the_secret_variable(tmp_path: Any) -> None:
    import anyio
    from tests.hub.test_hub_cli import hub, ok

    from mcpkit.hub.store import Conflict

    issuer, url = "https://idp.example", f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"

    async def add_user() -> int:
        async with await Store.open(url) as store:
            return (await store.users.create("hana")).id

    async def linked_user() -> int | None:
        async with await Store.open(url) as store:
            with pytest.raises(Conflict, match="linked to a user already"):
                await store.oidc.link(issuer, "sub-1", 1)
            return await store.oidc.user_of(issuer, "sub-1")

    user_id = anyio.run(add_user)
    linked = ok(hub(tmp_path, "user", "link-oidc", "hana", "--subject", "sub-1",
                    "--issuer", issuer))
    assert "sub-1" in linked
    assert anyio.run(linked_user) == user_id

    unset = hub(tmp_path, "serve", "--port", "0", "--oidc-issuer", issuer,
                "--oidc-client-id", "hub", "--oidc-client-secret-env", "NO_SUCH_SECRET_VAR")
    assert unset.returncode == 2
    assert unset.stderr.strip().endswith(
        "the environment variable 'NO_SUCH_SECRET_VAR' holding the OIDC client secret is not set")


async def test_refused_callbacks_spend_the_address_budget_and_the_password_form_stays(
        provider: FakeProvider, tmp_path: Any) -> None:
    """A hub whose provider is the in-test one: its sign-in page keeps the password form
    beside "Sign in with …"; forged callbacks past the auth-failure burst get 429."""
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    box = SecretBox([generate_key()])
    port = free_port()
    os.environ[SECRET_ENV + "_FAKE"] = CLIENT_SECRET
    try:
        settings = HubSettings(database_url=database_url, port=port, auth_failure_burst=2,
                               auth_failures_per_minute=1, oidc_issuer=provider.issuer,
                               oidc_client_id=CLIENT_ID, oidc_provider_name="Fake <IdP>",
                               oidc_client_secret_env=SECRET_ENV + "_FAKE")
        with serve_in_thread(hub_app(settings, box), lifespan="on", name="hub-fake",
                             port=port) as url:
            hub = Hub(url, "", database_url, settings, box)
            request = await CodeRequest.new(hub)
            jar = aiohttp.CookieJar(unsafe=True)
            async with aiohttp.ClientSession(cookie_jar=jar) as http:
                async with http.get(request.url) as page:
                    shown = await page.text()
                assert 'name="password"' in shown and "Sign in with Fake &lt;IdP&gt;" in shown
                csrf = shown.split('name="csrf_token" value="')[1].split('"')[0]
                async with http.post(request.url, data={"csrf_token": csrf, "action": "oidc"},
                                     allow_redirects=False) as started:
                    assert started.status == 302
                    assert started.headers["Location"].startswith(provider.issuer + "/auth?")
                    pending = started.cookies[PENDING_COOKIE].value
            statuses = []
            async with aiohttp.ClientSession() as http:  # the pending sign-in each time
                for _ in range(3):
                    async with http.get(url + CALLBACK_PATH + "?code=c&state=forged",
                                        headers={"Cookie": f"{PENDING_COOKIE}={pending}"},
                                        allow_redirects=False) as answer:
                        statuses.append(answer.status)
                        last = await answer.text()
            assert statuses == [403, 403, 429]
            assert "too many failed sign-ins from this address" in last
    finally:
        os.environ.pop(SECRET_ENV + "_FAKE", None)
