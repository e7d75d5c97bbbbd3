"""The hub as an OAuth authorization server, over real HTTP on 127.0.0.1: mcpkit's own OAuth
client logs in to the hub (DCR, PKCE, the sign-in and consent pages, RFC 9207 iss) and lists
tools through it; a second login skips consent; refresh tokens rotate and a reused one
revokes its family; a revoked login's live access tokens are refused within the re-check
bound (at every replica); expired codes and refresh tokens are purged; a rotated signing key
verifies until it is retired; PKCE, exact redirect URIs, the resource, passwords and CSRF tokens are
enforced; /mcp refuses a token minted for another audience; no secret reaches the log."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import secrets
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey
from tests.form_walk import FirstForm as Form
from tests.hub.hub_helpers import (
    Api,
    Hub,
    call,
    database_for,
    fresh_user,
    mcp_status,
    running_hub,
    seed_admin,
)
from tests.hub.oauth_login import HubLogin
from tests.hub.router.support import hub_app, hub_replicas, register, upstream
from tests.procs import free_port, serve_in_thread

from mcpkit import Client
from mcpkit.auth.tokens import MemoryRegistrationStore
from mcpkit.client import Timeouts
from mcpkit.client.oauth import OAuth
from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.oauth.keys import retire_after, rotate_signing_key
from mcpkit.hub.passwords import hash_password
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Store
from mcpkit.hub.store.oauth import CodeRecord, RefreshRecord

pytestmark = pytest.mark.anyio

REDIRECT = "http://127.0.0.1:33418/callback"
REVOCATION_CHECK_S = 0.5
"""The module hub's re-check of a login's revocation (small, so the tests wait little)."""
KEY_CHECK_S = 0.5
"""The module hub's re-read of its signing keys."""


@dataclass
class OAuthHub:
    hub: Hub
    upstream_url: str

    @property
    def url(self) -> str:
        return self.hub.url


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def oauth_hub(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[OAuthHub]:
    database_url = database_for(request, request.param, tmp_path_factory.mktemp("hub"))
    with serving_oauth_hub(database_url, "oauthup",
                           oauth_revocation_check_s=REVOCATION_CHECK_S,
                           oauth_signing_key_check_s=KEY_CHECK_S) as served:
        assert served.url == served.hub.settings.issuer
        yield served


@contextlib.contextmanager
def serving_oauth_hub(database_url: str, upstream_name: str, **settings: Any
                      ) -> Iterator[OAuthHub]:
    """A hub with `settings` on `database_url` (migrated, an admin seeded), its /mcp router
    and an upstream process named `upstream_name`, private upstreams allowed and failed-token
    limits per address lifted; it stops after the block."""
    box = SecretBox([generate_key()])
    token = seed_admin(database_url, box)
    port = free_port()
    hub_settings = HubSettings(database_url=database_url, port=port,
                               allow_private_upstreams=True, auth_failure_burst=1_000_000,
                               **settings)
    with upstream(upstream_name) as served, serve_in_thread(
            hub_app(hub_settings, box), lifespan="on", name="hub", port=port) as url:
        yield OAuthHub(Hub(url, token, database_url, hub_settings, box), served.url)


async def user_with_password(oauth_hub: OAuthHub) -> tuple[Api, str, str]:
    """A new user with a password and the upstream registered; (api, name, password)."""
    user_id, api = await fresh_user(oauth_hub.hub)
    password = "pw-" + secrets.token_urlsafe(12)
    async with await Store.open(oauth_hub.hub.database_url, oauth_hub.hub.box) as store:
        await store.users.set_password_hash(user_id, hash_password(password))
        name = (await store.users.get(user_id)).name
    await register(api, "oauthup", oauth_hub.upstream_url)
    return api, name, password


def oauth_client(url: str, login: HubLogin, registrations: MemoryRegistrationStore
                 ) -> Client:
    return Client(url + "/mcp", auth=OAuth(redirect=login, registrations=registrations),
                  timeouts=Timeouts(timeout=30.0))


async def tool_names(client: Client) -> list[str]:
    return sorted(tool.name for tool in await client.list_tools())


# --- discovery -------------------------------------------------------------------------------


async def test_metadata_names_the_hub_as_the_authorization_server(oauth_hub: OAuthHub) -> None:
    issuer = oauth_hub.url
    unauthenticated = await call("POST", issuer + "/mcp", json={"jsonrpc": "2.0", "id": 1,
                                                              "method": "ping"})
    assert unauthenticated.status == 401
    challenge = unauthenticated.headers["WWW-Authenticate"]
    prm_url = issuer + "/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{prm_url}"' in challenge
    prm = (await call("GET", prm_url)).body
    assert prm["resource"] == issuer + "/mcp" and prm["authorization_servers"] == [issuer]
    metadata = (await call("GET", issuer + "/.well-known/oauth-authorization-server")).body
    assert metadata["issuer"] == issuer
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert "none" in metadata["token_endpoint_auth_methods_supported"]
    assert metadata["authorization_response_iss_parameter_supported"] is True
    assert metadata["client_id_metadata_document_supported"] is True
    for name in ("authorization", "token", "registration", "revocation"):
        assert metadata[f"{name}_endpoint"].startswith(issuer + "/oauth/")


# --- the whole login with mcpkit's client ----------------------------------------------------


async def test_the_oauth_client_logs_in_and_lists_tools_and_consent_is_remembered(
        oauth_hub: OAuthHub, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="mcpkit")
    caplog.set_level(logging.DEBUG, logger="authlib")
    api, name, password = await user_with_password(oauth_hub)
    registrations = MemoryRegistrationStore()
    login = HubLogin(name, password)
    async with oauth_client(oauth_hub.url, login, registrations) as client:
        listed = await tool_names(client)
    async with Client(oauth_hub.url + "/mcp", bearer_token=api.token,
                      timeouts=Timeouts(timeout=30.0)) as by_api_token:
        assert listed == await tool_names(by_api_token)  # the same user, either way
    assert listed and login.pages == ["login", "consent"]

    # A fresh browser (no session cookie), the same client: sign in again, no consent page.
    again = HubLogin(name, password)
    async with oauth_client(oauth_hub.url, again, registrations) as client:
        assert await tool_names(client) == listed
    assert again.pages == ["login"]
    assert password not in caplog.text


# --- the protocol by hand --------------------------------------------------------------------


def s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


async def register_client(url: str, **metadata: Any) -> str:
    metadata.setdefault("redirect_uris", [REDIRECT])
    reply = await call("POST", url + "/oauth/register", json=metadata)
    assert reply.status == 201, reply.text
    client_id: str = reply.body["client_id"]
    return client_id


def authorization_url(hub_url: str, client_id: str, verifier: str | None, **extra: str) -> str:
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT,
              "state": "st-" + secrets.token_hex(4), "scope": "mcp",
              "resource": hub_url + "/mcp"}
    if verifier is not None:
        params.update(code_challenge=s256(verifier), code_challenge_method="S256")
    params.update(extra)
    return hub_url + "/oauth/authorize?" + urllib.parse.urlencode(params)


async def code_for(hub_url: str, name: str, password: str, client_id: str, verifier: str
                   ) -> str:
    back = await HubLogin(name, password)(authorization_url(hub_url, client_id, verifier))
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(back).query)
    assert query["iss"] == [hub_url]  # RFC 9207
    return query["code"][0]


async def token_request(hub_url: str, **form: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, \
            http.post(hub_url + "/oauth/token", data=form) as reply:
        return reply.status, await reply.json(content_type=None)


async def logged_in(oauth_hub: OAuthHub) -> tuple[str, dict[str, Any]]:
    """A client id and the token response of a fresh login by hand."""
    client_id, tokens, _secrets = await logged_in_with_secrets(oauth_hub)
    return client_id, tokens


async def logged_in_with_secrets(oauth_hub: OAuthHub
                                 ) -> tuple[str, dict[str, Any], list[str]]:
    """`logged_in`, and the password, code and verifier it used."""
    _, name, password = await user_with_password(oauth_hub)
    client_id = await register_client(oauth_hub.url, client_name="by hand")
    verifier = secrets.token_urlsafe(48)
    code = await code_for(oauth_hub.url, name, password, client_id, verifier)
    status, tokens = await token_request(
        oauth_hub.url, grant_type="authorization_code", code=code, redirect_uri=REDIRECT,
        client_id=client_id, code_verifier=verifier, resource=oauth_hub.url + "/mcp")
    assert status == 200, tokens
    return client_id, tokens, [password, code, verifier]


async def test_no_secret_reaches_the_log(oauth_hub: OAuthHub,
                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="mcpkit")
    caplog.set_level(logging.DEBUG, logger="authlib")
    caplog.set_level(logging.DEBUG, logger="uvicorn")
    client_id, tokens, used = await logged_in_with_secrets(oauth_hub)
    status, renewed = await token_request(oauth_hub.url, grant_type="refresh_token",
                                          refresh_token=tokens["refresh_token"],
                                          client_id=client_id)
    assert status == 200
    assert await mcp_status(oauth_hub.url, renewed["access_token"]) == 200
    assert caplog.records  # the hub did log (sign-in, registration)
    for secret in (*used, tokens["access_token"], tokens["refresh_token"],
                   renewed["access_token"], renewed["refresh_token"]):
        assert secret not in caplog.text


async def test_refresh_tokens_rotate_and_a_reused_one_revokes_its_family(
        oauth_hub: OAuthHub) -> None:
    client_id, first = await logged_in(oauth_hub)
    assert first["token_type"].lower() == "bearer" and first["expires_in"] > 0
    assert await mcp_status(oauth_hub.url, first["access_token"]) == 200
    status, second = await token_request(oauth_hub.url, grant_type="refresh_token",
                                         refresh_token=first["refresh_token"],
                                         client_id=client_id)
    assert status == 200 and second["refresh_token"] != first["refresh_token"]
    reused, refused = await token_request(oauth_hub.url, grant_type="refresh_token",
                                          refresh_token=first["refresh_token"],
                                          client_id=client_id)
    assert reused == 400 and refused["error"] == "invalid_grant"
    # the reuse revoked the family: the newest refresh token is dead too
    status, after = await token_request(oauth_hub.url, grant_type="refresh_token",
                                        refresh_token=second["refresh_token"],
                                        client_id=client_id)
    assert status == 400 and after["error"] == "invalid_grant"


async def test_a_refresh_for_the_rest_api_is_refused_to_an_mcp_login(
        oauth_hub: OAuthHub) -> None:
    """Only the console's login covers the REST API: another client's /mcp login cannot be
    refreshed into an API token (and the refresh token presented so is spent)."""
    client_id, tokens = await logged_in(oauth_hub)
    status, refused = await token_request(oauth_hub.url, grant_type="refresh_token",
                                          refresh_token=tokens["refresh_token"],
                                          client_id=client_id,
                                          resource=oauth_hub.url + "/api/v1")
    assert status == 400 and refused["error"] == "invalid_target", refused


async def test_revocation_ends_the_refresh_family(oauth_hub: OAuthHub) -> None:
    client_id, tokens = await logged_in(oauth_hub)
    async with aiohttp.ClientSession() as http, http.post(
            oauth_hub.url + "/oauth/revoke",
            data={"token": tokens["refresh_token"], "client_id": client_id}) as reply:
        assert reply.status == 200
    status, refused = await token_request(oauth_hub.url, grant_type="refresh_token",
                                          refresh_token=tokens["refresh_token"],
                                          client_id=client_id)
    assert status == 400 and refused["error"] == "invalid_grant"


def part_of(access_token: str, index: int) -> dict[str, Any]:
    """The JWT's header (0) or claims (1), not verified."""
    part = access_token.split(".")[index]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return decoded


def claims_of(access_token: str) -> dict[str, Any]:
    return part_of(access_token, 1)


async def refused_within(hub_url: str, access_token: str, bound_s: float) -> bool:
    """Whether /mcp starts refusing the token (401) within `bound_s` (polled, bounded)."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if await mcp_status(hub_url, access_token) == 401:
            return True
        await anyio.sleep(0.1)
    return False


async def revoke(hub_url: str, token: str, client_id: str) -> None:
    async with aiohttp.ClientSession() as http, http.post(
            hub_url + "/oauth/revoke", data={"token": token, "client_id": client_id}) as reply:
        assert reply.status == 200


async def test_revoking_a_login_ends_its_live_access_tokens(oauth_hub: OAuthHub) -> None:
    client_id, tokens = await logged_in(oauth_hub)
    _, other = await logged_in(oauth_hub)
    assert claims_of(tokens["access_token"])["sid"] != claims_of(other["access_token"])["sid"]
    assert await mcp_status(oauth_hub.url, tokens["access_token"]) == 200  # now cached
    await revoke(oauth_hub.url, tokens["refresh_token"], client_id)
    # refused within the re-check bound (with headroom), long before the token expires
    assert await refused_within(oauth_hub.url, tokens["access_token"], 10 * REVOCATION_CHECK_S)
    assert await mcp_status(oauth_hub.url, other["access_token"]) == 200  # another login


async def test_revoking_an_access_token_ends_its_login_for_its_client_only(
        oauth_hub: OAuthHub) -> None:
    """RFC 7009 for an access token: the login it names (`sid`) ends - its refresh token and
    its live access tokens - when the client it was issued to revokes it; another client's
    revocation is answered 200 and ends nothing."""
    client_id, tokens = await logged_in(oauth_hub)
    stranger = await register_client(oauth_hub.url)
    await revoke(oauth_hub.url, tokens["access_token"], stranger)
    await anyio.sleep(3 * REVOCATION_CHECK_S)  # past the re-check: a revocation would show
    assert await mcp_status(oauth_hub.url, tokens["access_token"]) == 200
    await revoke(oauth_hub.url, tokens["access_token"], client_id)
    assert await refused_within(oauth_hub.url, tokens["access_token"], 10 * REVOCATION_CHECK_S)
    status, refused = await token_request(oauth_hub.url, grant_type="refresh_token",
                                          refresh_token=tokens["refresh_token"],
                                          client_id=client_id)
    assert status == 400 and refused["error"] == "invalid_grant"


async def test_a_reused_refresh_token_ends_the_live_access_tokens(oauth_hub: OAuthHub) -> None:
    client_id, first = await logged_in(oauth_hub)
    status, second = await token_request(oauth_hub.url, grant_type="refresh_token",
                                         refresh_token=first["refresh_token"],
                                         client_id=client_id)
    assert status == 200
    assert claims_of(second["access_token"])["sid"] == claims_of(first["access_token"])["sid"]
    assert await mcp_status(oauth_hub.url, second["access_token"]) == 200
    status, _ = await token_request(oauth_hub.url, grant_type="refresh_token",
                                    refresh_token=first["refresh_token"], client_id=client_id)
    assert status == 400
    for access_token in (second["access_token"], first["access_token"]):
        assert await refused_within(oauth_hub.url, access_token, 10 * REVOCATION_CHECK_S)


async def test_token_issuance_purges_expired_codes_and_refresh_tokens(
        oauth_hub: OAuthHub) -> None:
    api, _, _ = await user_with_password(oauth_hub)
    user_id = api.user_id
    client_id = await register_client(oauth_hub.url)
    now = datetime.now(UTC)
    hashes = {name: secrets.token_hex(32) for name in ("old code", "live code", "old refresh",
                                                     "live refresh")}
    code = CodeRecord(client_id, user_id, REDIRECT, "mcp", oauth_hub.url + "/mcp", "x" * 43,
                      "S256", secrets.token_hex(16))
    grant = RefreshRecord(secrets.token_hex(16), client_id, user_id, "mcp",
                          oauth_hub.url + "/mcp")
    # written by a store whose clock is a year back, so these saves purge none of them
    async with await Store.open(oauth_hub.hub.database_url, oauth_hub.hub.box,
                                clock=lambda: now - timedelta(days=365)) as past:
        await past.oauth.save_code(hashes["old code"], code, now - timedelta(seconds=1))
        await past.oauth.save_code(hashes["live code"], code, now + timedelta(hours=1))
        await past.oauth.save_refresh(hashes["old refresh"], grant, now - timedelta(seconds=1))
        await past.oauth.save_refresh(hashes["live refresh"], grant, now + timedelta(hours=1))
    async with await Store.open(oauth_hub.hub.database_url, oauth_hub.hub.box) as store:
        expired_codes, expired_refresh = await store.oauth.count_expired()
        assert expired_codes >= 1 and expired_refresh >= 1
        await logged_in(oauth_hub)  # a login over HTTP: a code and a refresh token saved
        assert await store.oauth.count_expired() == (0, 0)
        assert await store.oauth.take_code(hashes["live code"], client_id) is not None
        assert await store.oauth.use_refresh(hashes["live refresh"], client_id) is not None
        assert await store.oauth.take_code(hashes["old code"], client_id) is None


async def test_a_code_is_single_use(oauth_hub: OAuthHub) -> None:
    _, name, password = await user_with_password(oauth_hub)
    client_id = await register_client(oauth_hub.url)
    verifier = secrets.token_urlsafe(48)
    code = await code_for(oauth_hub.url, name, password, client_id, verifier)
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
            "client_id": client_id, "code_verifier": verifier}
    assert (await token_request(oauth_hub.url, **form))[0] == 200
    status, refused = await token_request(oauth_hub.url, **form)
    assert status == 400 and refused["error"] == "invalid_grant"


async def test_pkce_s256_is_required(oauth_hub: OAuthHub) -> None:
    client_id = await register_client(oauth_hub.url)
    for url in (authorization_url(oauth_hub.url, client_id, None),
                authorization_url(oauth_hub.url, client_id, None, code_challenge="x" * 43,
                                  code_challenge_method="plain")):
        location = await _location(url)
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)
        assert query["error"] == ["invalid_request"] and query["iss"] == [oauth_hub.url]
    # a verifier that does not match the challenge
    _, name, password = await user_with_password(oauth_hub)
    verifier = secrets.token_urlsafe(48)
    code = await code_for(oauth_hub.url, name, password, client_id, verifier)
    status, refused = await token_request(
        oauth_hub.url, grant_type="authorization_code", code=code, redirect_uri=REDIRECT,
        client_id=client_id, code_verifier=secrets.token_urlsafe(48))
    assert status == 400 and refused["error"] == "invalid_grant"


async def _location(url: str) -> str:
    async with aiohttp.ClientSession() as http, http.get(url, allow_redirects=False) as reply:
        assert reply.status == 302, await reply.text()
        return reply.headers["Location"]


async def test_redirect_uri_and_resource_are_checked(oauth_hub: OAuthHub) -> None:
    client_id = await register_client(oauth_hub.url)
    verifier = secrets.token_urlsafe(48)
    wrong = authorization_url(oauth_hub.url, client_id, verifier,
                              redirect_uri="https://evil.example/callback")
    async with aiohttp.ClientSession() as http, http.get(wrong, allow_redirects=False) as reply:
        assert reply.status == 400 and "Location" not in reply.headers  # never redirected
    other_port = authorization_url(oauth_hub.url, client_id, verifier,
                                   redirect_uri="http://127.0.0.1:40000/callback")
    async with aiohttp.ClientSession() as http, \
            http.get(other_port, allow_redirects=False) as reply:
        assert reply.status == 200  # loopback: any port (RFC 8252 §7.3), the sign-in page
    other_path = authorization_url(oauth_hub.url, client_id, verifier,
                                   redirect_uri="http://127.0.0.1:33418/elsewhere")
    async with aiohttp.ClientSession() as http, \
            http.get(other_path, allow_redirects=False) as reply:
        assert reply.status == 400
    elsewhere = authorization_url(oauth_hub.url, client_id, verifier,
                                  resource="https://other.example/mcp")
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(await _location(elsewhere)).query)
    assert query["error"] == ["invalid_target"]


async def test_registration_refuses_bad_metadata(oauth_hub: OAuthHub) -> None:
    cases = [
        ({}, "invalid_redirect_uri"),
        ({"redirect_uris": ["http://example.com/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": [REDIRECT + "#frag"]}, "invalid_redirect_uri"),
        ({"redirect_uris": [REDIRECT] * 11}, "invalid_redirect_uri"),
        ({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic"},
         "invalid_client_metadata"),
        ({"redirect_uris": [REDIRECT], "application_type": "desktop"},
         "invalid_client_metadata"),
    ]
    for metadata, error in cases:
        reply = await call("POST", oauth_hub.url + "/oauth/register", json=metadata)
        assert reply.status == 400 and reply.body["error"] == error, (metadata, reply.text)
    huge = await call("POST", oauth_hub.url + "/oauth/register",
                      json={"redirect_uris": [REDIRECT], "client_name": "x" * 20_000})
    assert huge.status == 413


async def test_wrong_password_and_missing_csrf_token_are_refused(oauth_hub: OAuthHub) -> None:
    _, name, password = await user_with_password(oauth_hub)
    client_id = await register_client(oauth_hub.url)
    url = authorization_url(oauth_hub.url, client_id, secrets.token_urlsafe(48))
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as http:
        async with http.get(url) as page:
            form = Form()
            form.feed(await page.text())
        fields = {**form.fields, "username": name, "password": "wrong " + password,
                  "action": "sign-in"}
        async with http.post(url, data=fields, allow_redirects=False) as refused:
            assert refused.status == 401
            assert "wrong user name or password" in await refused.text()
        without = {k: v for k, v in fields.items() if k != "csrf_token"}
        without["password"] = password
        async with http.post(url, data=without, allow_redirects=False) as forged:
            assert forged.status == 403 and "CSRF" in await forged.text()
        async with http.post(url, data={**without, "csrf_token": "guess"},
                             allow_redirects=False) as forged:
            assert forged.status == 403


async def test_a_token_for_another_audience_is_refused_by_mcp(oauth_hub: OAuthHub) -> None:
    _, tokens = await logged_in(oauth_hub)
    key = (await signing_keys(oauth_hub))[0]
    claims = jwt.decode(tokens["access_token"], key).claims
    assert claims["aud"] == oauth_hub.url + "/mcp" and claims["iss"] == oauth_hub.url
    now = int(time.time())
    for changed in ({"aud": "https://other.example/mcp"}, {"iss": "https://other.example"},
                    {"exp": now - 3600}):
        forged = jwt.encode({"alg": "ES256", "typ": "at+jwt", "kid": key.kid},
                            {**claims, **changed}, key)
        assert await mcp_status(oauth_hub.url, forged) == 401, changed
    stranger = ECKey.generate_key("P-256", parameters={"kid": key.kid})
    unsigned_by_hub = jwt.encode({"alg": "ES256", "typ": "at+jwt", "kid": key.kid}, claims,
                                 stranger)
    assert await mcp_status(oauth_hub.url, unsigned_by_hub) == 401
    assert await mcp_status(oauth_hub.url, tokens["access_token"]) == 200


async def signing_keys(oauth_hub: OAuthHub) -> list[ECKey]:
    """The hub's signing keys, newest (the one signing) first."""
    box = oauth_hub.hub.box
    async with await Store.open(oauth_hub.hub.database_url, box) as store:
        return [ECKey.import_key(json.loads(box.open_text(record.private_jwk_sealed)))
                for record in await store.oauth.signing_keys()]


def signed_with(key: ECKey, claims: dict[str, Any]) -> str:
    """A fresh token (new jti: not in any cache) with `claims`, signed with `key`."""
    return jwt.encode({"alg": "ES256", "typ": "at+jwt", "kid": key.kid},
                      {**claims, "jti": secrets.token_urlsafe(16)}, key)


async def jwks_kids(hub_url: str) -> set[str]:
    return {key["kid"] for key in (await call("GET", hub_url + "/oauth/jwks")).body["keys"]}


async def test_a_rotated_signing_key_verifies_until_it_is_retired(oauth_hub: OAuthHub) -> None:
    _, before = await logged_in(oauth_hub)
    old = (await signing_keys(oauth_hub))[0]
    claims = jwt.decode(before["access_token"], old).claims
    async with await Store.open(oauth_hub.hub.database_url, oauth_hub.hub.box) as store:
        new_kid, retired = await rotate_signing_key(store, oauth_hub.hub.box,
                                                    oauth_hub.hub.settings)
    assert retired == []  # the previous key was superseded just now
    await anyio.sleep(2 * KEY_CHECK_S)  # the hub re-reads its keys
    _, after = await logged_in(oauth_hub)
    assert jwt.decode(after["access_token"], (await signing_keys(oauth_hub))[0]).claims
    assert part_of(after["access_token"], 0)["kid"] == new_kid
    assert {old.kid, new_kid} <= await jwks_kids(oauth_hub.url)
    # tokens signed with the previous key keep verifying (a fresh one: no cache involved)
    assert await mcp_status(oauth_hub.url, before["access_token"]) == 200
    assert await mcp_status(oauth_hub.url, signed_with(old, claims)) == 200

    # Once the new key has been in use longer than an old token can live, the next rotation
    # retires the old key (driven by a store whose clock is that much later).
    later = datetime.now(UTC) + retire_after(oauth_hub.hub.settings.oauth_access_token_ttl_s,
                                             KEY_CHECK_S) + timedelta(seconds=5)
    async with await Store.open(oauth_hub.hub.database_url, oauth_hub.hub.box,
                                clock=lambda: later) as store:
        newest, retired = await rotate_signing_key(store, oauth_hub.hub.box,
                                                   oauth_hub.hub.settings)
    assert old.kid in retired and new_kid not in retired
    await anyio.sleep(2 * KEY_CHECK_S)
    # a token signed with the retired key is refused, even one not yet expired
    assert await refused_within(oauth_hub.url, signed_with(old, claims), 10 * KEY_CHECK_S)
    kept = next(key for key in await signing_keys(oauth_hub) if key.kid == new_kid)
    assert await mcp_status(oauth_hub.url, signed_with(kept, claims)) == 200
    kids = await jwks_kids(oauth_hub.url)
    assert old.kid not in kids and {new_kid, newest} <= kids


async def test_a_disabled_user_cannot_sign_in(oauth_hub: OAuthHub, tmp_path: Path) -> None:
    api, name, password = await user_with_password(oauth_hub)
    async with await Store.open(oauth_hub.hub.database_url, oauth_hub.hub.box) as store:
        await store.users.set_disabled(api.user_id)
    client_id = await register_client(oauth_hub.url)
    with pytest.raises(AssertionError, match="401"):
        await HubLogin(name, password)(authorization_url(oauth_hub.url, client_id,
                                                         secrets.token_urlsafe(48)))


async def test_denying_consent_returns_access_denied_with_iss(oauth_hub: OAuthHub) -> None:
    _, name, password = await user_with_password(oauth_hub)
    client_id = await register_client(oauth_hub.url)
    login = HubLogin(name, password, consent="deny")
    back = await login(authorization_url(oauth_hub.url, client_id, secrets.token_urlsafe(48),
                                         state="keep-me"))
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(back).query)
    assert query["error"] == ["access_denied"] and query["state"] == ["keep-me"]
    assert query["iss"] == [oauth_hub.url] and "code" not in query
    assert login.pages == ["login", "consent"]


def test_wrong_passwords_spend_the_address_budget(tmp_path: Path) -> None:
    """The sign-in form shares the API tokens' per-address budget of failures: past it, 429
    even for the right password, until the budget refills."""
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    with running_hub(database_url, auth_failure_burst=3, auth_failures_per_minute=1) as hub:
        async def attempt() -> None:
            oauth_hub = OAuthHub(hub, "")
            user_id, _ = await fresh_user(hub)
            async with await Store.open(hub.database_url, hub.box) as store:
                await store.users.set_password_hash(user_id, hash_password("right password"))
                name = (await store.users.get(user_id)).name
            client_id = await register_client(oauth_hub.url)
            url = authorization_url(hub.url, client_id, secrets.token_urlsafe(48),
                                    resource=hub.settings.mcp_url)
            statuses = []
            for password in ["wrong one!"] * 3 + ["right password"]:
                async with aiohttp.ClientSession(
                        cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
                    async with http.get(url) as page:
                        form = Form()
                        form.feed(await page.text())
                    fields = {**form.fields, "username": name, "password": password,
                              "action": "sign-in"}
                    async with http.post(url, data=fields, allow_redirects=False) as reply:
                        statuses.append(reply.status)
            assert statuses == [401, 401, 401, 429]

        anyio.run(attempt)


def test_any_replica_serves_any_step(tmp_path: Path) -> None:
    """Two hubs on one database and one secret key (replicas behind one public URL): the
    sign-in at one, the code redeemed at the other, its access token accepted by both, the
    refresh at the first, and the rotated-out refresh token's reuse caught at the second."""
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    box = SecretBox([generate_key()])
    token = seed_admin(database_url, box)
    with hub_replicas(box, database_url=database_url, allow_private_upstreams=True,
                      oauth_revocation_check_s=REVOCATION_CHECK_S) as (first, second):
        hub = Hub(first, token, database_url, HubSettings(database_url=database_url,
                                                          public_url=first), box)

        async def steps() -> None:
            user_id, _ = await fresh_user(hub)
            async with await Store.open(database_url, box) as store:
                await store.users.set_password_hash(user_id, hash_password("replica password"))
                name = (await store.users.get(user_id)).name
            client_id = await register_client(first)
            verifier = secrets.token_urlsafe(48)
            code = await code_for(first, name, "replica password", client_id, verifier)
            status, tokens = await token_request(
                second, grant_type="authorization_code", code=code, redirect_uri=REDIRECT,
                client_id=client_id, code_verifier=verifier)
            assert status == 200, tokens
            assert await mcp_status(first, tokens["access_token"]) == 200
            assert await mcp_status(second, tokens["access_token"]) == 200
            status, renewed = await token_request(first, grant_type="refresh_token",
                                                  refresh_token=tokens["refresh_token"],
                                                  client_id=client_id)
            assert status == 200
            assert await mcp_status(second, renewed["access_token"]) == 200
            status, reused = await token_request(second, grant_type="refresh_token",
                                                 refresh_token=tokens["refresh_token"],
                                                 client_id=client_id)
            assert status == 400 and reused["error"] == "invalid_grant"
            status, _ = await token_request(first, grant_type="refresh_token",
                                            refresh_token=renewed["refresh_token"],
                                            client_id=client_id)
            assert status == 400  # the family went with the reuse
            # ... and so did its live access tokens, at both replicas
            for replica_url in (first, second):
                assert await refused_within(replica_url, renewed["access_token"],
                                            10 * REVOCATION_CHECK_S)

        anyio.run(steps)


def test_registrations_spend_a_budget_per_address(tmp_path: Path) -> None:
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    with running_hub(database_url, rate_limit_burst=3, rate_limit_per_minute=1) as hub:
        async def register_many() -> list[int]:
            statuses = []
            for _ in range(4):
                reply = await call("POST", hub.url + "/oauth/register",
                                   json={"redirect_uris": [REDIRECT]})
                statuses.append(reply.status)
            return statuses

        assert anyio.run(register_many) == [201, 201, 201, 429]
