"""Token exchange (RFC 8693) for upstreams that trust the hub's own OpenID Connect provider
(`auth_mode` "token_exchange"): the owner's identity at the provider is exchanged for an access
token for the upstream at each connection, instead of a login stored per upstream.

    exchange = UpstreamTokenExchange(oidc, client_secret, settings)  # on the OAuthService
    auth = exchange.auth_for(store, upstream)     # an HttpAuth for the upstream's connections

The exchange, as the hub's confidential client at the provider (its token endpoint from the
provider's discovery document, client_secret_basic or _post as it advertises):

    subject_token         the owner's provider ACCESS token from their latest sign-in to the
                          hub (store.oidc.subject_token), subject_token_type access_token.
                          Not the ID token: that is addressed to the hub (its `aud`), a
                          statement for the hub to read, not a credential to present on.
    resource              the upstream's resource: the `resource` its RFC 9728 metadata
                          names (which must list the hub's provider among its authorization
                          servers), else its URL
    requested_token_type  access_token; the answer must say `issued_token_type` access_token

The upstream token lives in this process's memory only (`ExchangedTokens`: keyed by owner AND
upstream, so never another user's; bounded in bytes; dropped shortly before it expires, or
when the upstream refuses it); it is never stored, and nothing but it is sent upstream (the
caller's hub token never is). Concurrent connections of one owner to one upstream wait for
one exchange. A provider access token about to expire is refreshed first when the sign-in
brought a refresh token (the hub asks for offline_access only if --oidc-scopes says so; some
providers issue one anyway): one refresh per user at a time across replicas (the upstream
logins' `RefreshLock`, the store read again under it), the rotated tokens stored sealed.
Without a refresh token, an expired one means signing in to the hub again.

Errors (no token in any of them, nor in a log):

    no identity at the provider (a password account), no access token from the sign-in,
    the access token expired (and no refresh token, or the provider refusing it), the
    provider refusing the access token (invalid_grant)
                          UpstreamNeedsSignIn (an UpstreamNeedsLogin: the health check shows
                          needs_auth), telling the owner to sign in through the provider again
    the provider down, refusing otherwise (invalid_target: it does not know the resource),
    a malformed answer, an upstream trusting another issuer
                          UpstreamUnavailable, naming the step and the OAuth error code
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mcpkit.auth.assertions import (
    InvalidTokenExchangeResponse,
    access_token_exchange_form,
    parse_exchanged_access_token,
)
from mcpkit.auth.client_auth import ClientCredentials, choose_auth_method, client_authentication
from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.forms import SecretFields, merge_fields
from mcpkit.auth.tokens import TokenSet, parse_token_response
from mcpkit.client.oauth_discovery import find_resource
from mcpkit.client.oauth_http import OAuthHttp, Reply
from mcpkit.errors import PeerError
from mcpkit.hub.crypto import CredentialError
from mcpkit.hub.exchanged_tokens import CacheKey, ExchangedTokens
from mcpkit.hub.keyed_locks import KeyedLocks
from mcpkit.hub.store.oidc import IdpTokens
from mcpkit.hub.upstream_auth import LockTimeout, RefreshLock, UpstreamNeedsLogin
from mcpkit.hub.upstream_client import UpstreamUnavailable

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from mcpkit.hub.oauth.oidc import OidcSignIn, ProviderMetadata
    from mcpkit.hub.settings import HubSettings
    from mcpkit.hub.store import Store, UpstreamRecord

log = logging.getLogger(__name__)

PROVIDER_REFRESH_MARGIN_S = 30.0
"""The owner's provider access token is refreshed (when a refresh token came with the
sign-in) this long before it expires, so it is not presented on its last breath."""


class UpstreamNeedsSignIn(UpstreamNeedsLogin):
    """A token-exchange upstream whose owner has no usable identity at the hub's provider:
    they must sign in to the hub through the provider (again). A `UpstreamNeedsLogin`, so
    health checks show needs_auth."""

    def __init__(self, upstream: UpstreamRecord, issuer: str, why: str) -> None:
        self.upstream_id = upstream.id
        UpstreamUnavailable.__init__(
            self, f"{upstream.name}: token exchange needs its owner's identity at the hub's "
                  f"OpenID Connect provider ({why}): sign in to the hub through {issuer} again")


class UpstreamTokenExchange:
    """The hub's token exchanges at its OpenID Connect provider (one per hub process)."""

    def __init__(self, oidc: OidcSignIn, client_secret: str, settings: HubSettings, *,
                 redis: Redis | None = None, cache_bytes: int | None = None,
                 http: OAuthHttp | None = None) -> None:
        self.oidc = oidc
        self.refresh_lock = RefreshLock(redis)
        """One refresh of a user's provider tokens at a time, across replicas."""
        self.issuer = oidc.issuer
        self._credentials = ClientCredentials(oidc.client_id, client_secret)
        self.http = http if http is not None else OAuthHttp(
            timeout_s=settings.oidc_timeout_s, max_bytes=settings.oidc_max_document_bytes)
        # the upstream's metadata: a URL a user gave, so under the hub's SSRF rule (the
        # provider is the operator's: any address)
        self.upstream_http = OAuthHttp(timeout_s=settings.oidc_timeout_s,
                                       max_bytes=settings.oidc_max_document_bytes,
                                       allow_private=settings.allow_private_upstreams)
        self.cache = ExchangedTokens(settings.token_exchange_cache_bytes
                                     if cache_bytes is None else cache_bytes)
        self._flights: KeyedLocks[CacheKey] = KeyedLocks()

    def __repr__(self) -> str:
        return f"UpstreamTokenExchange(issuer={self.issuer!r}, cached={len(self.cache)})"

    def auth_for(self, store: Store, upstream: UpstreamRecord) -> ExchangedAuth:
        return ExchangedAuth(self, store, upstream)

    async def token(self, store: Store, upstream: UpstreamRecord, *,
                    refused: str | None = None) -> str:
        """The owner's access token for `upstream`: the cached one (unless it is `refused`,
        the one the upstream just turned down), else a new exchange - one at a time per key:
        the others wait and take its result."""
        key = _key(upstream)
        cached = self.cache.get(key)
        if cached is not None and cached.access_token != refused:
            return cached.access_token
        async with self._flights.hold(key):
            cached = self.cache.get(key)
            if cached is not None and cached.access_token != refused:
                return cached.access_token
            tokens = await self._exchange(store, upstream)
            self.cache.put(key, tokens)
            return tokens.access_token

    def forget(self, upstream: UpstreamRecord, access_token: str) -> None:
        """The upstream refused `access_token`: it is not handed out again."""
        self.cache.drop(_key(upstream), access_token)

    async def _exchange(self, store: Store, upstream: UpstreamRecord) -> TokenSet:
        subject = await self._subject_token(store, upstream)
        metadata = await self._metadata(upstream)
        resource = await self._resource(upstream)
        reply = await self._post(upstream, metadata,
                                 access_token_exchange_form(subject, resource=resource))
        if not reply.ok:
            raise self._refusal(upstream, reply, token="access token", failure=(
                f"the identity provider refused the token exchange for {resource}"))
        try:
            tokens = parse_exchanged_access_token(reply.body, max_bytes=self.http.max_bytes)
        except InvalidTokenExchangeResponse as error:
            raise UpstreamUnavailable(f"{upstream.name}: the identity provider's token-"
                                      f"exchange answer: {error}") from None
        log.info("exchanged user %s's provider identity for a token for upstream %s (%s)",
                 upstream.user_id, upstream.id, resource)
        return tokens

    async def _post(self, upstream: UpstreamRecord, metadata: ProviderMetadata,
                    form: SecretFields) -> Reply:
        """The exchange request, authenticated as the hub's client (the method the provider
        advertises: client_secret_basic, else _post)."""
        method = choose_auth_method(self._credentials,
                                    metadata.token_endpoint_auth_methods_supported)
        fields, headers = client_authentication(method, self._credentials,
                                                audience=self.issuer)
        body = urllib.parse.urlencode(merge_fields(form, fields))
        try:
            return await self.http.post_form(metadata.token_endpoint, body, headers)
        except AuthorizationError as error:
            raise UpstreamUnavailable(f"{upstream.name}: token exchange at the identity "
                                      f"provider: {error}") from None

    def _refusal(self, upstream: UpstreamRecord, reply: Reply, *, token: str, failure: str
                 ) -> UpstreamNeedsSignIn | UpstreamUnavailable:
        """The error for a refused exchange or refresh: the provider's invalid_grant means the
        sign-in's `token` is dead (the owner signs in again); any other refusal is `failure`
        with the HTTP status and the OAuth error code."""
        code = reply.oauth_error()
        if code == "invalid_grant":
            return UpstreamNeedsSignIn(upstream, self.issuer, f"the provider refused the "
                                       f"{token} of the last sign-in (invalid_grant)")
        return UpstreamUnavailable(f"{upstream.name}: {failure} (HTTP {reply.status}"
                                   f"{', ' + code if code else ''})")

    async def _metadata(self, upstream: UpstreamRecord) -> ProviderMetadata:
        try:
            return await self.oidc.metadata()
        except PeerError as error:
            raise UpstreamUnavailable(f"{upstream.name}: token exchange: {error}") from None

    async def _subject_token(self, store: Store, upstream: UpstreamRecord) -> str:
        """The owner's provider access token, refreshed first when it is about to expire
        and the sign-in brought a refresh token."""
        identity = await self._identity(store, upstream)
        if _expiring(identity, PROVIDER_REFRESH_MARGIN_S) and identity.refresh_token:
            identity = await self._refresh_identity(store, upstream, identity)
        if _expiring(identity, 0.0):
            raise UpstreamNeedsSignIn(upstream, self.issuer, "the provider's access token "
                                      "from the last sign-in has expired")
        assert identity.access_token is not None
        return identity.access_token

    async def _identity(self, store: Store, upstream: UpstreamRecord) -> IdpTokens:
        try:
            identity = await store.oidc.subject_token(upstream.user_id, self.issuer)
        except CredentialError as error:
            log.error("the provider tokens of user %s cannot be opened: %s",
                      upstream.user_id, error)
            raise UpstreamNeedsSignIn(upstream, self.issuer, "the provider tokens of the "
                                      "last sign-in cannot be read") from None
        if identity is None:
            raise UpstreamNeedsSignIn(upstream, self.issuer,
                                      "the owner has never signed in through it")
        if not identity.access_token:
            raise UpstreamNeedsSignIn(upstream, self.issuer, "the last sign-in brought no "
                                      "access token from the provider")
        return identity

    async def _refresh_identity(self, store: Store, upstream: UpstreamRecord,
                                seen: IdpTokens) -> IdpTokens:
        """The owner's provider tokens refreshed (RFC 6749 §6) under the refresh lock, the
        store read again first: another replica may have refreshed them meanwhile (a
        provider rotating refresh tokens takes each once)."""
        try:
            async with self.refresh_lock.hold(upstream.user_id, f"oidc:{self.issuer}"):
                current = await self._identity(store, upstream)
                if current.access_token != seen.access_token or \
                        not _expiring(current, PROVIDER_REFRESH_MARGIN_S):
                    return current
                fresh = await self._refresh_request(upstream, current)
                await store.oidc.refreshed(upstream.user_id, self.issuer, fresh)
                log.info("refreshed the provider tokens of user %s", upstream.user_id)
                return fresh
        except LockTimeout as error:
            raise UpstreamUnavailable(f"{upstream.name}: refreshing the provider token: "
                                      f"{error}") from None

    async def _refresh_request(self, upstream: UpstreamRecord, current: IdpTokens
                               ) -> IdpTokens:
        assert current.refresh_token is not None
        metadata = await self._metadata(upstream)
        form = SecretFields(grant_type="refresh_token", refresh_token=current.refresh_token)
        reply = await self._post(upstream, metadata, form)
        if not reply.ok:
            raise self._refusal(upstream, reply, token="refresh token",
                                failure="refreshing the provider token failed")
        try:
            tokens = parse_token_response(reply.body, max_bytes=self.http.max_bytes,
                                          previous_refresh=current.refresh_token)
        except AuthorizationError as error:
            raise UpstreamUnavailable(f"{upstream.name}: the provider's refresh answer: "
                                      f"{error}") from None
        # the ID token stays the sign-in's (verified then); only the tokens to present change
        return IdpTokens(current.id_token, tokens.access_token, tokens.refresh_token,
                         tokens.expires_at, tokens.scope or current.scope)

    async def _resource(self, upstream: UpstreamRecord) -> str:
        """The upstream's RFC 9728 resource (its metadata must name the hub's provider), or
        its URL when it publishes no metadata."""
        url = upstream.url
        if url is None:
            raise UpstreamUnavailable(f"{upstream.name}: token exchange needs an HTTP upstream")
        try:
            prm = await find_resource(self.upstream_http, url, None)
        except AuthorizationError as error:
            raise UpstreamUnavailable(f"{upstream.name}: token exchange: {error}") from None
        if prm is None:
            return url
        trusted = [server.rstrip("/") for server in prm.authorization_servers]
        if self.issuer.rstrip("/") not in trusted:
            raise UpstreamUnavailable(
                f"{upstream.name}: token exchange needs an upstream that trusts the hub's "
                f"identity provider {self.issuer}; its metadata names "
                f"{', '.join(prm.authorization_servers[:4])}")
        return prm.resource


class ExchangedAuth:
    """An `HttpAuth` (mcpkit.auth.provider) for one owner's connection to one token-exchange
    upstream: `Authorization: Bearer <the exchanged token>`; a 401 drops that token and
    retries once with a new exchange."""

    max_attempts = 1

    def __init__(self, exchange: UpstreamTokenExchange, store: Store,
                 upstream: UpstreamRecord) -> None:
        self.exchange = exchange
        self.store = store
        self.upstream = upstream
        self._sent: str | None = None
        self._refused: str | None = None

    def __repr__(self) -> str:
        return f"ExchangedAuth(upstream={self.upstream.id!r}, token='***')"

    async def headers(self, url: str, method: str = "POST") -> Mapping[str, str]:
        token = await self.exchange.token(self.store, self.upstream, refused=self._refused)
        self._sent = token
        return {"Authorization": f"Bearer {token}"}

    async def challenge(self, url: str, status: int, headers: Mapping[str, str]) -> bool:
        if status != 401 or self._sent is None:
            return False  # a 403 (insufficient_scope) is not cured by the same exchange
        self._refused = self._sent
        self.exchange.forget(self.upstream, self._sent)
        return True


def _expiring(identity: IdpTokens, margin_s: float) -> bool:
    return identity.expires_at is not None and identity.expires_at - margin_s <= time.time()


def _key(upstream: UpstreamRecord) -> CacheKey:
    return (upstream.user_id, upstream.id, upstream.url or "")


__all__ = ["ExchangedAuth", "UpstreamNeedsSignIn", "UpstreamTokenExchange"]
