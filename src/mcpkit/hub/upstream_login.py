"""A hub user's OAuth login to one of their upstreams: started by the REST API, finished by
the browser at the hub's callback, ended by a logout.

    url = await start_login(context, upstream, return_to=None)     # the authorization URL
    finished = await finish_login(context, query, signed_in=user_id)  # the callback's query
    report = await logout(context, upstream)                       # revoke at the AS, delete

`start_login` is mcpkit's OAuth client (issue 23), step by step: the upstream's challenge
(an unauthenticated probe), discovery (RFC 9728 then RFC 8414; the `resource` is the one the
upstream's metadata names), PKCE S256, `offline_access` when the authorization server lists
it, and the client: a Client ID Metadata Document when one is configured and the AS takes it,
else dynamic client registration for the hub's callback URL - one per authorization server
and callback, kept sealed (store.upstream_clients) and reused for REGISTRATION_TTL_S, dropped
when the server answers invalid_client. What the callback will need
(state, PKCE verifier, metadata, client, resource, scopes, the user and the upstream, expiry)
is kept sealed in the database, found by the sha256 of the state: any replica finishes it.

`finish_login` takes that pending login (single use: a state works once; an expired one is
refused), checks the redirect (state, RFC 9207 iss, an `error` the AS sent), exchanges the
code, and stores the grant for exactly the user and upstream that started it.

The callback is bound to a browser, not only to the state: it finishes only in a browser
signed in to the hub (its session cookie) as the user who started the login. Else user B
could start a login and send the authorization URL to user A: A would log in at the
authorization server as A, and A's upstream identity would be stored as B's login. So the
callback route (api/routes/upstream_oauth.py) first asks a browser without a hub session to
sign in (the hub's sign-in page, then back to the same callback URL), and `finish_login`
refuses a browser signed in as another user (`LoginOfAnotherUser`), spending the pending
login: its code carries that other user's upstream identity, and must never be redeemed for
the starter, in any browser.
"""

from __future__ import annotations

import hashlib
import logging
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

import msgspec

from mcpkit.auth.challenge import BearerChallenge
from mcpkit.auth.discovery import http_form
from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.metadata import AuthorizationServerMetadata, check_pkce
from mcpkit.auth.scopes import select_scopes
from mcpkit.auth.tokens import ClientRegistration, TokenKey
from mcpkit.client import oauth_client_metadata, oauth_grant, oauth_registration
from mcpkit.client.oauth import probe_challenge
from mcpkit.client.oauth_discovery import discover
from mcpkit.client.oauth_http import OAuthHttp
from mcpkit.client.oauth_logout import LogoutReport, revoke_grant
from mcpkit.client.token_records import StoredGrant
from mcpkit.errors import PeerError, UsageError
from mcpkit.hub.oauth.service import UPSTREAM_CALLBACK_PATH
from mcpkit.hub.upstream_auth import RefreshLock, StoredLogin

if TYPE_CHECKING:
    from mcpkit.hub.api.context import HubContext
    from mcpkit.hub.store import UpstreamRecord

log = logging.getLogger(__name__)

CALLBACK_PATH = UPSTREAM_CALLBACK_PATH
"""Where the authorization server sends the browser back (the hub's redirect URI)."""
LOGIN_TTL_S = 600.0
"""A started login must be finished within this long (the user logs in at the AS)."""
CLIENT_NAME = "mcpkit hub"
REGISTRATION_TTL_S = 7 * 24 * 3600.0
"""How long the hub reuses its DCR registration at an authorization server before it
registers again (an AS may drop registrations; a refused one is dropped at once)."""
CLIENT_METADATA_PATH = "/oauth/upstream/client.json"
"""Where the hub serves its own Client ID Metadata Document (client_metadata_document)."""
MAX_QUERY_VALUE = 4096
"""Bound on each callback parameter (a code, a state): a longer one is refused."""


class LoginFailed(PeerError):
    """A login could not be started or finished; `str()` is safe to show the user (no token,
    code or state)."""


class LoginOfAnotherUser(LoginFailed):
    """The callback came back in a browser signed in to the hub as another user than the one
    who started the login: refused, and the pending login cancelled (see `finish_login`)."""


class BadReturnTo(UsageError):
    """A `return_to` that is not a URL of the hub itself."""


@dataclass(frozen=True, slots=True)
class Finished:
    user_id: int
    upstream_id: str
    upstream_name: str
    return_to: str | None


class _Pending(msgspec.Struct):
    """What the callback needs, sealed in the database until then."""

    verifier: str
    redirect_uri: str
    resource: str
    scopes: list[str]
    metadata: AuthorizationServerMetadata
    client_id: str
    client_secret: str | None
    auth_method: str
    client_source: str
    return_to: str | None = None


class _Registration(msgspec.Struct):
    """The hub's DCR registration at an AS, as kept (sealed) in store.upstream_clients."""

    client_id: str
    client_secret: str | None
    auth_method: str


@dataclass(slots=True)
class LoginOptions:
    """The knobs of the flow (defaults: the named constants)."""

    http: OAuthHttp = field(default_factory=OAuthHttp)
    ttl_s: float = LOGIN_TTL_S
    client_metadata_url: str | None = None
    """A Client ID Metadata Document listing the hub's callback URL (used where the AS
    supports CIMD; else DCR)."""
    registration_ttl_s: float = REGISTRATION_TTL_S

    @classmethod
    def of(cls, context: HubContext) -> LoginOptions:
        """The defaults, with the hub's SSRF rule for every URL the flow fetches (the
        upstream's, and the authorization server's its metadata names), and the hub's Client
        ID Metadata Document URL when one is set (settings.upstream_client_metadata_url)."""
        return cls(http=oauth_http(context),
                   client_metadata_url=context.settings.upstream_client_metadata_url)


def oauth_http(context: HubContext) -> OAuthHttp:
    """The OAuth HTTP client of the hub's upstream logins: private hosts refused unless the
    operator allows private upstreams."""
    return OAuthHttp(allow_private=context.settings.allow_private_upstreams)


def callback_url(context: HubContext) -> str:
    return context.settings.issuer + CALLBACK_PATH


def client_metadata_document(context: HubContext) -> dict[str, object] | None:
    """The hub's Client ID Metadata Document as it serves it at CLIENT_METADATA_PATH: only
    when the configured URL is that very URL of the hub (else None: published elsewhere, or
    none). Its one redirect URI is the hub's callback."""
    url = context.settings.upstream_client_metadata_url
    if url is None or url != context.settings.issuer + CLIENT_METADATA_PATH:
        return None
    document = oauth_client_metadata.client_metadata_document(
        url, client_name=CLIENT_NAME, redirect_uris=(callback_url(context),))
    return {**document, "application_type": "web"}  # a server, its redirect URI an https one


def check_return_to(context: HubContext, return_to: str | None) -> str | None:
    """`return_to` when it is a URL of the hub itself (same scheme, host and port as its
    issuer); `BadReturnTo` otherwise (an open redirect would send the user anywhere)."""
    if return_to is None:
        return None
    hub = urllib.parse.urlsplit(context.settings.issuer)
    try:
        asked = urllib.parse.urlsplit(return_to)
        same = (asked.scheme, asked.netloc) == (hub.scheme, hub.netloc)
    except ValueError:
        same = False
    if not same or len(return_to) > MAX_QUERY_VALUE or any(c in return_to for c in "\r\n\\"):
        raise BadReturnTo("return_to must be a URL of this hub "
                          f"({hub.scheme}://{hub.netloc}/…)")
    return return_to


async def start_login(context: HubContext, upstream: UpstreamRecord, *,
                      return_to: str | None = None,
                      options: LoginOptions | None = None) -> str:
    """The authorization URL for the owner's login to `upstream` (see the module)."""
    options = options or LoginOptions.of(context)
    return_to = check_return_to(context, return_to)
    if upstream.url is None:
        raise LoginFailed(f"{upstream.name}: an upstream without a URL has no OAuth login")
    http, server = options.http, http_form(upstream.url)
    redirect_uri = callback_url(context)
    try:
        challenge = await probe_challenge(http, server) or BearerChallenge()
        found = await discover(http, server, challenge.resource_metadata)
        metadata = found.metadata
        check_pkce(metadata)
        scopes = select_scopes(challenge.scopes, found.resource_scopes,
                               metadata.scopes_supported)
        client = await _client(context, options, metadata, redirect_uri)
    except AuthorizationError as error:
        raise LoginFailed(f"{upstream.name}: cannot start an OAuth login: {error}") from None
    request = oauth_grant.authorization_request(metadata, client, redirect_uri,
                                                found.resource, scopes)
    pending = _Pending(request.verifier, redirect_uri, found.resource, scopes, metadata,
                       client.client_id, client.client_secret, client.auth_method,
                       client.source, return_to)
    expires = context.store.upstream_logins.now() + timedelta(seconds=options.ttl_s)
    await context.store.upstream_logins.save_pending(
        state_hash(request.state), upstream.user_id, upstream.id,
        msgspec.json.encode(pending).decode(), expires)
    log.info("user %s started an OAuth login to upstream %s at %s", upstream.user_id,
             upstream.id, metadata.issuer)
    return request.url


async def finish_login(context: HubContext, query: Mapping[str, str], *, signed_in: int,
                       options: LoginOptions | None = None) -> Finished:
    """Finish the login the callback's `query` answers, in a browser signed in to the hub as
    the user id `signed_in` (see the module); `LoginFailed` with a message for the user
    otherwise - `LoginOfAnotherUser` when `signed_in` is not who started it."""
    options = options or LoginOptions.of(context)
    if any(len(value) > MAX_QUERY_VALUE for value in query.values()):
        raise LoginFailed("the authorization response has an oversized parameter")
    state = query.get("state")
    if not state:
        raise LoginFailed("the authorization response has no state")
    taken = await context.store.upstream_logins.take_pending(state_hash(state))
    if taken is None:
        raise LoginFailed("this login is unknown or was already used: start it again")
    if taken.user_id != signed_in:
        # The code in this callback was issued to whoever logged in at the authorization
        # server in THIS browser - its hub user's upstream identity, not the starter's.
        # Redeeming it for the starter is the very mix-up the binding prevents, so the
        # pending login is spent (taken above) and nothing is stored: the starter sees
        # "unknown or already used" if they retry this URL, and starts again.
        log.warning("user %s's browser brought back an upstream login started by user %s "
                    "(upstream %s): refused and cancelled", signed_in, taken.user_id,
                    taken.upstream_id)
        raise LoginOfAnotherUser(
            "This connection was started by another hub user: it was not finished, and it "
            "is cancelled. The user who started it must start it again, signed in to the "
            "hub in the browser that logs in at the upstream.")
    if taken.expires_at <= context.store.upstream_logins.now():
        raise LoginFailed("this login expired before it was finished: start it again")
    pending = msgspec.json.decode(taken.data, type=_Pending)
    upstream = await context.store.upstreams.get(taken.user_id, taken.upstream_id)
    client = ClientRegistration(pending.client_id, pending.client_secret, pending.auth_method,
                                pending.client_source)
    request = oauth_grant.Request("", state, pending.verifier)
    redirected = pending.redirect_uri + "?" + urllib.parse.urlencode(dict(query))
    try:
        code = oauth_grant.code_from_redirect(redirected, request, pending.metadata)
        tokens = await oauth_grant.exchange_code(options.http, pending.metadata, client, code,
                                                 request, pending.redirect_uri,
                                                 pending.resource)
    except AuthorizationError as error:
        if isinstance(error, oauth_grant.InvalidClient) or query.get("error") in (
                "invalid_client", "unauthorized_client"):
            await _forget_client(context, pending)
        raise LoginFailed(f"{upstream.name}: the login failed: {error}") from None
    grant = StoredGrant(TokenKey(pending.resource, pending.metadata.issuer, client.client_id),
                        tokens, tuple(pending.scopes), pending.metadata, client)
    lock = RefreshLock(context.redis)
    async with lock.hold(upstream.user_id, upstream.id):  # not under a refresh of the old one
        await StoredLogin(context.store, lock, upstream.user_id, upstream.id).save(
            grant, new_login=True)
    log.info("user %s connected upstream %s (OAuth login at %s)", upstream.user_id,
             upstream.id, pending.metadata.issuer)
    return Finished(upstream.user_id, upstream.id, upstream.name, pending.return_to)


async def logout(context: HubContext, upstream: UpstreamRecord, *,
                 options: LoginOptions | None = None) -> LogoutReport:
    """Revoke the owner's login to `upstream` at its authorization server (refresh token,
    then access token: RFC 7009) and delete it; a revocation that fails is reported, and the
    login is deleted anyway (a logout always forgets)."""
    options = options or LoginOptions.of(context)
    report = LogoutReport()
    lock = RefreshLock(context.redis)
    async with lock.hold(upstream.user_id, upstream.id):
        grant = await StoredLogin(context.store, lock, upstream.user_id, upstream.id).load()
        if grant is not None:
            await revoke_grant(options.http, grant, report)
        if await context.store.upstream_logins.delete(upstream.user_id, upstream.id):
            report.removed = 1
    return report


def state_hash(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


async def _client(context: HubContext, options: LoginOptions,
                  metadata: AuthorizationServerMetadata, redirect_uri: str
                  ) -> ClientRegistration:
    """CIMD when configured and the AS takes it, else the hub's DCR registration for its
    callback at that AS: the kept one (store.upstream_clients, younger than
    `options.registration_ttl_s`), or a new one, kept for the next logins."""
    metadata_url = options.client_metadata_url
    identity = oauth_registration.Identity(
        None, None, None, metadata_url, (redirect_uri,), metadata_url is None, CLIENT_NAME)
    chosen = oauth_registration.metadata_document(identity, metadata)
    if chosen is not None:
        return chosen
    clients = context.store.upstream_clients
    kept = await clients.get(metadata.issuer, redirect_uri,
                             max_age=timedelta(seconds=options.registration_ttl_s))
    if kept is not None:
        found = msgspec.json.decode(kept, type=_Registration)
        return ClientRegistration(found.client_id, found.client_secret, found.auth_method,
                                  "dcr")
    registered = await oauth_registration.register(options.http, identity, metadata)
    await clients.put(metadata.issuer, redirect_uri, msgspec.json.encode(_Registration(
        registered.client_id, registered.client_secret, registered.auth_method)).decode())
    return registered


async def _forget_client(context: HubContext, pending: _Pending) -> None:
    """The AS no longer knows the hub's kept registration (invalid_client): drop it, so the
    next login registers again."""
    if pending.client_source == "dcr" and await context.store.upstream_clients.forget(
            pending.metadata.issuer, pending.redirect_uri):
        log.info("the hub's registration at %s was refused: the next login registers again",
                 pending.metadata.issuer)
