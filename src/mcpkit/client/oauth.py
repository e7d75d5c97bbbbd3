"""`OAuth`: MCP authorization (the authorization-code flow) for a `Client` over HTTP.

    async with Client(url, auth=OAuth(redirect=my_redirect_handler)) as client: …

The transport asks `headers()` before each POST and hands 401/403 answers to `challenge()`:

    401 (no token yet, or it was refused)  refresh once if there is a refresh token, else
        discover (RFC 9728, RFC 8414) → register → authorize (PKCE, state, resource) →
        check the redirect (state, RFC 9207 iss) → token request; the request is sent again
    403 insufficient_scope  authorize again for the union of the scopes asked before and
        the challenged ones (step-up); other 403s reach the caller
    a token about to expire (`refresh_margin_s`) is refreshed before it is sent

Each request answers at most `max_attempts` challenges. When the protected resource names
another authorization server, the client registers there anew: registrations are keyed by
issuer, and configured credentials stay with the issuer they were first used at (or
`client_issuer`). Secrets are masked in repr and never logged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import anyio

from mcpkit.auth.challenge import BearerChallenge, parse_bearer_challenge
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
from mcpkit.client.oauth_discovery import find_resource, find_server, legacy_server
from mcpkit.client.oauth_http import HTTP_TIMEOUT_S, OAuthHttp
from mcpkit.client.oauth_redirect import Redirect
from mcpkit.client.oauth_registration import Identity, RegistrationStore
from mcpkit.errors import InvalidArgument

log = logging.getLogger(__name__)

DEFAULT_REDIRECT_URI = "http://127.0.0.1:33418/callback"
"""The loopback redirect URI mcpkit registers (a Client ID Metadata Document lists it)."""

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
    ) -> None:
        """`redirect`: shows the authorization URL to the user and returns the final
        redirect URL. `client_id`/`client_secret`: a pre-registered client (for
        `client_issuer` only, when given). `client_metadata_url`: the HTTPS URL of this
        client's Client ID Metadata Document. `scopes`: asked for instead of the
        discovered ones (a step-up adds the challenged ones). Limits: `max_attempts`
        challenges per request, `max_document_bytes` per metadata/token response,
        `http_timeout_s` per exchange."""
        if max_attempts < 1:
            raise InvalidArgument(f"max_attempts must be at least 1, not {max_attempts}")
        if client_secret is not None and client_id is None:
            raise InvalidArgument("client_secret= needs the client_id= it belongs to")
        self.redirect = redirect
        self.client_id = client_id
        self._client_secret = client_secret
        self.client_issuer = client_issuer
        self.client_metadata_url = client_metadata_url
        self.redirect_uri = redirect_uri
        self.scopes = list(scopes) if scopes is not None else None
        self.client_name = client_name
        self.store: TokenStore = store if store is not None else MemoryTokenStore()
        self.registrations: RegistrationStore = (
            registrations if registrations is not None else MemoryRegistrationStore())
        self.max_attempts = max_attempts
        self.refresh_margin_s = refresh_margin_s
        self._http = OAuthHttp(http_timeout_s, max_document_bytes)
        self._grant: _Grant | None = None
        self._lock = anyio.Lock()

    def __repr__(self) -> str:
        return (f"OAuth(client_id={self.client_id!r}, client_secret="
                f"{mask(self._client_secret)}, redirect_uri={self.redirect_uri!r}, "
                f"scopes={self.scopes!r})")

    @property
    def tokens(self) -> TokenSet | None:
        """The current tokens (None before the first authorization)."""
        return self._grant.tokens if self._grant is not None else None

    # --- HttpAuth --------------------------------------------------------------------------

    async def headers(self, url: str) -> Mapping[str, str]:
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
        return {"Authorization": f"Bearer {tokens.access_token}"} if tokens else {}

    async def challenge(self, url: str, status: int, headers: Mapping[str, str]) -> bool:
        value = next((v for k, v in headers.items() if k.lower() == "www-authenticate"), None)
        challenge = parse_bearer_challenge(value) or BearerChallenge()
        seen = self.tokens
        async with self._lock:
            if self.tokens is not seen:
                return True  # another request re-authorized while this one waited
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
        http = self._http
        prm = await find_resource(http, url, challenge.resource_metadata)
        if prm is not None:
            resource = prm.resource
            metadata = await find_server(http, prm.authorization_servers[0])
        else:  # a 2025-03-26 server: no protected-resource metadata
            resource = url
            metadata = await legacy_server(http, url)
        check_pkce(metadata)
        if wanted is not None:  # step-up: what was asked before plus the challenged scopes
            scopes = select_scopes(wanted, None, metadata.scopes_supported)
        elif self.scopes is not None:
            scopes = self.scopes
        else:
            scopes = select_scopes(challenge.scopes, prm.scopes_supported if prm else None,
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
                await self.registrations.delete(metadata.issuer, self.redirect_uri)
                continue
            self._grant = _Grant(metadata, client, resource, scopes, tokens)
            await self._keep(self._grant)
            return

    async def _code_grant(self, metadata: AuthorizationServerMetadata,
                          client: ClientRegistration, resource: str,
                          scopes: list[str]) -> TokenSet:
        if self.redirect is None:
            raise AuthorizationNotConfigured(
                f"{resource} requires authorization: give OAuth(redirect=…) a handler that "
                "shows the authorization URL and returns the redirect")
        request = oauth_grant.authorization_request(metadata, client, self.redirect_uri,
                                                    resource, scopes)
        redirected = await self.redirect(request.url)
        code = oauth_grant.code_from_redirect(redirected, request, metadata)
        return await oauth_grant.exchange_code(self._http, metadata, client, code, request,
                                               self.redirect_uri, resource)

    async def _refresh(self, grant: _Grant) -> None:
        grant.tokens = await oauth_grant.refresh(self._http, grant.metadata, grant.client,
                                                 grant.tokens, grant.resource)
        grant.refreshed_on_401 = False
        log.info("refreshed the access token for %s", grant.resource)
        await self._keep(grant)

    async def _keep(self, grant: _Grant) -> None:
        key = TokenKey(grant.resource, grant.metadata.issuer, grant.client.client_id)
        await self.store.put(key, grant.tokens)

    async def _client(self, metadata: AuthorizationServerMetadata) -> ClientRegistration:
        identity = Identity(
            self.client_id, self._client_secret, self.client_issuer, self.client_metadata_url,
            self.redirect_uri, self.redirect_uri != DEFAULT_REDIRECT_URI, self.client_name)
        chosen = oauth_registration.configured(identity, metadata)
        if chosen is not None:
            self.client_issuer = metadata.issuer  # configured credentials stay with it
            return chosen
        chosen = oauth_registration.metadata_document(identity, metadata)
        if chosen is not None:
            return chosen
        kept = await self.registrations.get(metadata.issuer, self.redirect_uri)
        if kept is not None:
            return kept
        registered = await oauth_registration.register(self._http, identity, metadata)
        await self.registrations.put(metadata.issuer, self.redirect_uri, registered)
        log.info("registered client %s at %s", registered.client_id, metadata.issuer)
        return registered
