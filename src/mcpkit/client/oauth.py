"""`OAuth`: MCP authorization (the authorization-code flow) for a `Client` over HTTP.

    async with Client(url, auth=OAuth(redirect=my_redirect_handler)) as client: …

The transport asks `headers()` before each POST and hands 401/403 answers to `challenge()`:

    401 (no token yet, or it was refused)  refresh once if there is a refresh token, else
        discover (RFC 9728, RFC 8414) → register → authorize (PKCE, state, resource) →
        check the redirect (state, RFC 9207 iss) → token request; the request is sent again
    403 insufficient_scope  authorize again for the union of the scopes asked before and
        the challenged ones (step-up); other 403s reach the caller
    a token about to expire (`refresh_margin_s`) is refreshed before it is sent

With a persistent store (`store=open_token_store(…)`, mcpkit.client.token_store) a login
outlives the process: the first request for a resource with no grant in memory uses (and
refreshes) the stored grant for it instead of authorizing again, every refresh runs under the
store's cross-process lock with the store read again (mcpkit.client.shared_refresh), and DCR
registrations are kept there too (unless `registrations=` is given).

`await oauth.login(url)` authorizes at once (`mcpkit mcp login`), without waiting for a 401.
A WebSocket server (ws://, wss://) is discovered and named as a resource at its http(s) URL.

Each request answers at most `max_attempts` challenges. When the protected resource names
another authorization server, the client registers there anew: registrations are keyed by
issuer, and configured credentials stay with the issuer they were first used at (or
`client_issuer`). Secrets are masked in repr and never logged.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import anyio

from mcpkit.auth.challenge import BearerChallenge, parse_bearer_challenge
from mcpkit.auth.discovery import http_form
from mcpkit.auth.dpop import DPoPKey, is_dpop_token_type
from mcpkit.auth.errors import AuthorizationError, AuthorizationNotConfigured
from mcpkit.auth.metadata import MAX_DOCUMENT_BYTES, AuthorizationServerMetadata, check_pkce
from mcpkit.auth.scopes import select_scopes, union
from mcpkit.auth.tokens import (
    REFRESH_MARGIN_S,
    ClientRegistration,
    MemoryRegistrationStore,
    MemoryTokenStore,
    TokenKey,
    TokenSet,
    TokenStore,
    mask,
)
from mcpkit.client import oauth_grant, oauth_registration
from mcpkit.client.oauth_client_metadata import check_client_metadata_url
from mcpkit.client.oauth_discovery import discover
from mcpkit.client.oauth_dpop import DPoPOption, dpop_from_option, presenting
from mcpkit.client.oauth_http import HTTP_TIMEOUT_S, OAuthHttp
from mcpkit.client.oauth_redirect import DEFAULT_REDIRECT_URIS, ListeningRedirect, Redirect
from mcpkit.client.oauth_registration import Identity, RegistrationStore
from mcpkit.client.oauth_resume import Configured, pick_stored
from mcpkit.client.shared_refresh import LoginRemoved, refresh_shared
from mcpkit.client.token_records import StoredGrant, TokenStoreError
from mcpkit.client.token_store import PersistentTokenStore
from mcpkit.errors import InvalidArgument

log = logging.getLogger(__name__)

DEFAULT_REDIRECT_URI = DEFAULT_REDIRECT_URIS[0]
"""The redirect URI of a plain `Redirect` (a `LoopbackRedirect` brings its own: the range)."""

CLIENT_METADATA_URL_ENV = "MCPKIT_OAUTH_CLIENT_METADATA_URL"
"""Where `client_metadata_url` comes from when not given (see oauth_client_metadata)."""

PROBE_MESSAGE = {"jsonrpc": "2.0", "method": "notifications/initialized"}
"""What `login()` POSTs, unauthenticated, to learn the server's challenge: a notification,
so a server that needs no authorization answers at once with no stream."""

MAX_ATTEMPTS = 3
"""Default: challenges (authorizations, refreshes, step-ups) one request may answer."""


@dataclass(slots=True)
class _Grant:
    """What one authorization established: where, as whom, for what, and the tokens."""

    metadata: AuthorizationServerMetadata
    client: ClientRegistration
    resource: str
    scopes: list[str]
    tokens: TokenSet
    refreshed_on_401: bool = False
    """The current token came from a refresh forced by a 401: the next 401 re-authorizes."""

    @property
    def key(self) -> TokenKey:
        return TokenKey(self.resource, self.metadata.issuer, self.client.client_id)


async def probe_challenge(http: OAuthHttp, url: str) -> BearerChallenge | None:
    """The challenge an unauthenticated probe (`PROBE_MESSAGE`) of the MCP server at `url`
    (http(s)) gets: its 401/403 `WWW-Authenticate`, None when it sets none."""
    reply = await http.post_json(url, PROBE_MESSAGE)
    value = next((v for k, v in reply.headers.items() if k.lower() == "www-authenticate"),
                 None)
    return parse_bearer_challenge(value) if reply.status in (401, 403) else None


class OAuth:
    """The authorization group of a `Client` (see the module docstring)."""

    def __init__(
        self,
        *,
        redirect: Redirect | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        client_issuer: str | None = None,
        client_metadata_url: str | None = None,
        redirect_uri: str = DEFAULT_REDIRECT_URI,
        scopes: Sequence[str] | None = None,
        client_name: str = "mcpkit",
        store: TokenStore | None = None,
        registrations: RegistrationStore | None = None,
        max_attempts: int = MAX_ATTEMPTS,
        refresh_margin_s: float = REFRESH_MARGIN_S,
        max_document_bytes: int = MAX_DOCUMENT_BYTES,
        http_timeout_s: float = HTTP_TIMEOUT_S,
        dpop: DPoPOption = False,
    ) -> None:
        """`redirect`: shows the authorization URL to the user and returns the final
        redirect URL. `client_id`/`client_secret`: a pre-registered client (for
        `client_issuer` only, when given). `client_metadata_url`: the HTTPS URL of this
        client's Client ID Metadata Document (default: $MCPKIT_OAUTH_CLIENT_METADATA_URL).
        `redirect_uri`: for a plain `redirect`; a `ListeningRedirect` (LoopbackRedirect)
        registers its own `redirect_uris` and uses the one it is bound to. `scopes`: asked
        for instead of the discovered ones (a step-up adds the challenged ones). Limits:
        `max_attempts` challenges per request, `max_document_bytes` per metadata/token response,
        `http_timeout_s` per exchange. `dpop`: True (or a `DPoPKey`) asks for DPoP-bound
        tokens (RFC 9449) and presents them with a fresh proof per request."""
        if max_attempts < 1:
            raise InvalidArgument(f"max_attempts must be at least 1, not {max_attempts}")
        if client_secret is not None and client_id is None:
            raise InvalidArgument("client_secret= needs the client_id= it belongs to")
        self.redirect = redirect
        self.client_id = client_id
        self._client_secret = client_secret
        self.client_issuer = client_issuer
        metadata_url = client_metadata_url or os.environ.get(CLIENT_METADATA_URL_ENV) or None
        self.client_metadata_url = (
            check_client_metadata_url(metadata_url) if metadata_url else None)
        self.redirect_uri = redirect_uri
        self.scopes = list(scopes) if scopes is not None else None
        self.client_name = client_name
        self.store: TokenStore = store if store is not None else MemoryTokenStore()
        if registrations is None:
            registrations = (store.registrations if isinstance(store, PersistentTokenStore)
                             else MemoryRegistrationStore())
        self.registrations: RegistrationStore = registrations
        self.max_attempts = max_attempts
        self.refresh_margin_s = refresh_margin_s
        self._http = OAuthHttp(http_timeout_s, max_document_bytes)
        self._dpop = dpop_from_option(dpop)
        self._grant: _Grant | None = None
        self._looked_in_store = False
        self._lock = anyio.Lock()

    def __repr__(self) -> str:
        return (f"OAuth(client_id={self.client_id!r}, client_secret="
                f"{mask(self._client_secret)}, redirect_uri={self.redirect_uri!r}, "
                f"scopes={self.scopes!r})")

    @property
    def tokens(self) -> TokenSet | None:
        """The current tokens (None before the first authorization)."""
        return self._grant.tokens if self._grant is not None else None

    async def login(self, url: str) -> TokenSet:
        """Authorize now for the MCP server at `url` (`mcpkit mcp login`), whatever tokens
        there are: the challenge comes from an unauthenticated probe of the server (its
        401), else discovery starts at the protected-resource metadata's well-known URLs."""
        target = http_form(url)
        challenge = await probe_challenge(self._http, target)
        async with self._lock:
            await self._authorize(target, challenge or BearerChallenge(), None)
            assert self._grant is not None
            return self._grant.tokens

    # --- HttpAuth --------------------------------------------------------------------------

    async def headers(self, url: str, method: str = "POST") -> Mapping[str, str]:
        if self._grant is None and not self._looked_in_store:
            async with self._lock:
                await self._load(url)
        grant = self._grant
        if grant is None:
            return {}
        if grant.tokens.expiring(self.refresh_margin_s) and grant.tokens.refresh_token:
            seen = grant.tokens
            async with self._lock:
                if self._grant is grant and grant.tokens is seen:
                    try:
                        await self._refresh(grant)
                    except AuthorizationError as exc:
                        log.warning("refreshing the access token failed: %s", exc)
        tokens = self.tokens
        if tokens is None:
            return {}
        return presenting(self._dpop, method, url, tokens)

    async def challenge(self, url: str, status: int, headers: Mapping[str, str]) -> bool:
        if self._dpop is not None and self._dpop.resource_challenge(url, status, headers):
            return True  # the resource wants a DPoP nonce: the same token, a new proof
        value = next((v for k, v in headers.items() if k.lower() == "www-authenticate"), None)
        challenge = parse_bearer_challenge(value) or BearerChallenge()
        seen = self.tokens
        async with self._lock:
            if self.tokens is not seen:
                return True  # another request re-authorized while this one waited
            if self._grant is None and await self._load(url):
                return True  # a login kept in the store: try it before authorizing
            grant = self._grant
            if status == 403:
                if challenge.error != "insufficient_scope":
                    return False
                wanted = union(grant.scopes if grant else [], challenge.scopes)
                log.info("step-up authorization for scopes %s", " ".join(wanted))
                await self._authorize(url, challenge, wanted)
                return True
            if grant is not None and grant.tokens.refresh_token and not grant.refreshed_on_401:
                try:
                    await self._refresh(grant)
                    grant.refreshed_on_401 = True
                    return True
                except AuthorizationError as exc:
                    log.info("refresh after a 401 failed (%s): authorizing again", exc)
            await self._authorize(url, challenge, None)
            return True

    # --- the flow --------------------------------------------------------------------------

    async def _authorize(self, url: str, challenge: BearerChallenge,
                         wanted: list[str] | None) -> None:
        found = await discover(self._http, http_form(url), challenge.resource_metadata)
        metadata, resource = found.metadata, found.resource
        check_pkce(metadata)
        if wanted is not None:  # step-up: what was asked before plus the challenged scopes
            scopes = select_scopes(wanted, None, metadata.scopes_supported)
        elif self.scopes is not None:
            scopes = self.scopes
        else:
            scopes = select_scopes(challenge.scopes, found.resource_scopes,
                                   metadata.scopes_supported)
        log.info("authorizing at %s for %s (scopes: %s)", metadata.issuer, resource,
                 " ".join(scopes) or "none")
        for registration_attempt in range(2):
            client = await self._client(metadata)
            try:
                tokens = await self._code_grant(metadata, client, resource, scopes)
            except oauth_grant.InvalidClient:
                if client.source != "dcr" or registration_attempt:
                    raise
                log.info("the registration at %s is no longer valid: registering again",
                         metadata.issuer)
                await self.registrations.delete(metadata.issuer, self._registration_key())
                continue
            self._grant = _Grant(metadata, client, resource, scopes, tokens)
            await self._keep(self._grant, new_grant=True)
            return

    async def _code_grant(self, metadata: AuthorizationServerMetadata,
                          client: ClientRegistration, resource: str,
                          scopes: list[str]) -> TokenSet:
        if self.redirect is None:
            raise AuthorizationNotConfigured(
                f"{resource} requires authorization: give OAuth(redirect=…) a handler that "
                "shows the authorization URL and returns the redirect")
        redirect, redirect_uri = self.redirect, self.redirect_uri
        if isinstance(redirect, ListeningRedirect):  # bound first: the URL names its port
            async with redirect.listen() as bound:
                redirect_uri = bound.redirect_uri
                request = oauth_grant.authorization_request(metadata, client, redirect_uri,
                                                            resource, scopes)
                redirected = await bound(request.url)
        else:
            request = oauth_grant.authorization_request(metadata, client, redirect_uri,
                                                        resource, scopes)
            redirected = await redirect(request.url)
        code = oauth_grant.code_from_redirect(redirected, request, metadata)
        return await oauth_grant.exchange_code(self._http, metadata, client, code, request,
                                               redirect_uri, resource, self._dpop)

    async def _refresh(self, grant: _Grant) -> None:
        async def refresh(tokens: TokenSet) -> TokenSet:
            return await oauth_grant.refresh(self._http, grant.metadata, grant.client, tokens,
                                             grant.resource, self._dpop)

        async def keep(tokens: TokenSet) -> None:
            grant.tokens = tokens
            await self._keep(grant)

        try:
            if isinstance(self.store, PersistentTokenStore):
                tokens = await refresh_shared(self.store, grant.key, grant.tokens, refresh,
                                              keep, self.refresh_margin_s)
            else:
                tokens = await refresh(grant.tokens)
                await keep(tokens)
        except (oauth_grant.InvalidGrant, LoginRemoved):
            # dead or logged out: never sent again (the next 401 authorizes anew)
            grant.tokens = dataclasses.replace(grant.tokens, refresh_token=None)
            raise
        grant.tokens = tokens
        grant.refreshed_on_401 = False
        log.info("refreshed the access token for %s", grant.resource)

    async def _keep(self, grant: _Grant, *, new_grant: bool = False) -> None:
        """Store the grant's tokens; in a persistent store the whole grant (metadata, client,
        scopes: what a refresh after a restart needs). A store that refuses is logged, and the
        tokens are used anyway (losing a rotated refresh token would be worse)."""
        try:
            if isinstance(self.store, PersistentTokenStore):
                bound = self._dpop is not None and is_dpop_token_type(grant.tokens.token_type)
                await self.store.put_grant(StoredGrant(
                    grant.key, grant.tokens, tuple(grant.scopes), grant.metadata, grant.client,
                    self._dpop.key.private_pem().decode() if self._dpop and bound else None))
            else:
                await self.store.put(grant.key, grant.tokens)
        except TokenStoreError as exc:
            log.error("could not store the %s for %s: %s",
                      "new login" if new_grant else "tokens", grant.resource, exc)

    async def _load(self, url: str) -> bool:
        """Once per OAuth, under `_lock`: resume the stored login for `url` that fits
        (mcpkit.client.oauth_resume); whether there was one."""
        looked, self._looked_in_store = self._looked_in_store, True
        if looked or not isinstance(self.store, PersistentTokenStore):
            return False
        chosen = pick_stored(await self.store.grants(url), url, self.scopes, Configured(
            self.client_id, self._client_secret, self.client_issuer),
            dpop=self._dpop is not None)
        if chosen is None or chosen.metadata is None or chosen.client is None:
            return False
        if self._dpop is not None and chosen.dpop_key is not None:
            self._dpop.key = DPoPKey.from_pem(chosen.dpop_key)  # the key the tokens are bound to
        self._grant = _Grant(chosen.metadata, chosen.client, chosen.resource,
                             list(chosen.scopes), chosen.tokens)
        log.info("using the stored login for %s (issuer %s, client %s, %s store)",
                 chosen.resource, chosen.issuer, chosen.client_id, self.store.kind)
        return True

    async def _client(self, metadata: AuthorizationServerMetadata) -> ClientRegistration:
        uris = self.redirect_uris
        identity = Identity(
            self.client_id, self._client_secret, self.client_issuer, self.client_metadata_url,
            uris, not set(uris) <= set(DEFAULT_REDIRECT_URIS), self.client_name)
        chosen = oauth_registration.configured(identity, metadata)
        if chosen is not None:
            self.client_issuer = metadata.issuer  # configured credentials stay with it
            return chosen
        chosen = oauth_registration.metadata_document(identity, metadata)
        if chosen is not None:
            return chosen
        kept = await self.registrations.get(metadata.issuer, self._registration_key())
        if kept is not None:
            return kept
        registered = await oauth_registration.register(self._http, identity, metadata)
        await self.registrations.put(metadata.issuer, self._registration_key(), registered)
        log.info("registered client %s at %s", registered.client_id, metadata.issuer)
        return registered

    @property
    def redirect_uris(self) -> tuple[str, ...]:
        """The redirect URIs this client registers: a `ListeningRedirect`'s, else
        `redirect_uri`."""
        if isinstance(self.redirect, ListeningRedirect):
            return tuple(self.redirect.redirect_uris)
        return (self.redirect_uri,)

    def _registration_key(self) -> str:
        """A DCR registration is kept per issuer and this: the redirect URIs it was made
        for, space-separated (one URI: just that URI)."""
        return " ".join(self.redirect_uris)

