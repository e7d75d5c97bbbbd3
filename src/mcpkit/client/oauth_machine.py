"""`MachineAuth`: MCP authorization without a user in the loop, for a `Client` over HTTP.

    grant = ClientCredentialsGrant("my-service", client_secret=os.environ["SECRET"])
    async with Client(url, auth=MachineAuth(grant, dpop=True)) as client: …

The grants (oauth_machine_grants): client credentials (client secret or private_key_jwt),
workload identity federation (RFC 7523 jwt-bearer with the workload's JWT) and
enterprise-managed authorization (ID token → ID-JAG at the IdP → jwt-bearer).

The transport asks `headers()` before each request and hands 401/403 answers to
`challenge()`:

    401  discover (RFC 9728 protected-resource metadata → RFC 8414 authorization server
         metadata; once, then kept), run the grant, send the request again; a 401 with a
         token in use means it was refused: the grant runs again
    401 `DPoP error="use_dpop_nonce"`  the same token, a new proof with the server's nonce
    403 insufficient_scope  the grant runs again for the union of the scopes
    a token about to expire (`refresh_margin_s`) is replaced before it is sent

Grants run under one lock: concurrent requests that find no token (or an expired one) wait
for one grant and share its token. A grant the server refuses is not retried (nor another
grant tried): the request fails with `AuthorizationFailed` naming the OAuth error code.
Each request answers at most `max_attempts` challenges.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Mapping, Sequence

import anyio

from mcpkit.auth.challenge import BearerChallenge, parse_bearer_challenge
from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.forms import merge_fields
from mcpkit.auth.metadata import MAX_DOCUMENT_BYTES
from mcpkit.auth.scopes import union, unique
from mcpkit.auth.tokens import REFRESH_MARGIN_S, TokenSet, parse_token_response
from mcpkit.client.oauth_discovery import discover
from mcpkit.client.oauth_dpop import DPoPOption, dpop_from_option, header_values, presenting
from mcpkit.client.oauth_http import HTTP_TIMEOUT_S, OAuthHttp
from mcpkit.client.oauth_machine_grants import (
    GrantTarget,
    MachineGrant,
    client_auth_fields,
    token_error,
)
from mcpkit.errors import InvalidArgument

__all__ = ["MAX_ATTEMPTS", "MachineAuth"]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
"""Default: challenges (grants, DPoP nonces, step-ups) one request may answer."""


class MachineAuth:
    """The authorization group of a `Client` for a machine grant (see the module
    docstring). `scopes`: asked for instead of the discovered ones. `dpop`: True (or a
    `DPoPKey`) binds the tokens to a key (RFC 9449). Limits: `max_attempts` challenges per
    request, `max_document_bytes` per metadata/token response, `http_timeout_s` per
    exchange."""

    def __init__(self, grant: MachineGrant, *, scopes: Sequence[str] | None = None,
                 dpop: DPoPOption = False, max_attempts: int = MAX_ATTEMPTS,
                 refresh_margin_s: float = REFRESH_MARGIN_S,
                 max_document_bytes: int = MAX_DOCUMENT_BYTES,
                 http_timeout_s: float = HTTP_TIMEOUT_S) -> None:
        if max_attempts < 1:
            raise InvalidArgument(f"max_attempts must be at least 1, not {max_attempts}")
        if isinstance(scopes, str):
            raise InvalidArgument("scopes= takes a sequence of scopes, not one string")
        self.grant = grant
        self.scopes = list(scopes) if scopes is not None else None
        self.max_attempts = max_attempts
        self.refresh_margin_s = refresh_margin_s
        self._dpop = dpop_from_option(dpop)
        self._http = OAuthHttp(http_timeout_s, max_document_bytes)
        self._target: GrantTarget | None = None
        self._tokens: TokenSet | None = None
        self._lock = anyio.Lock()

    def __repr__(self) -> str:
        return (f"MachineAuth({self.grant!r}, scopes={self.scopes!r}, dpop={self._dpop!r}, "
                f"tokens={self._tokens!r})")

    @property
    def tokens(self) -> TokenSet | None:
        """The current tokens (None before the first grant)."""
        return self._tokens

    # --- HttpAuth --------------------------------------------------------------------------

    async def headers(self, url: str, method: str = "POST") -> Mapping[str, str]:
        tokens = self._tokens
        if tokens is None:
            return {}  # the first 401 says where to get one
        if tokens.expiring(self.refresh_margin_s) and self._target is not None:
            async with self._lock:
                if self._tokens is tokens:
                    try:
                        await self._obtain(self._target)
                    except AuthorizationError as exc:
                        # The old token goes out; its 401 runs the grant again.
                        log.warning("replacing the expiring access token failed: %s", exc)
            tokens = self._tokens
            assert tokens is not None
        return presenting(self._dpop, method, url, tokens)

    async def challenge(self, url: str, status: int, headers: Mapping[str, str]) -> bool:
        if self._dpop is not None and self._dpop.resource_challenge(url, status, headers):
            return True  # the resource wants a DPoP nonce: the same token, a new proof
        values = header_values(headers, "WWW-Authenticate")
        challenge = parse_bearer_challenge(values[0] if len(values) == 1 else None)
        challenge = challenge or BearerChallenge()
        seen = self._tokens
        async with self._lock:
            if self._tokens is not seen:
                return True  # another request got a token while this one waited
            target = self._target
            if status == 403:
                if challenge.error != "insufficient_scope" or target is None:
                    return False
                scopes = tuple(union(target.scopes, challenge.scopes))
                log.info("asking again for scopes %s", " ".join(scopes))
                target = GrantTarget(target.metadata, target.resource, scopes)
            elif target is None:
                target = await self._discover(url, challenge)
            await self._obtain(target)
            return True

    # --- discovery and the grant -----------------------------------------------------------

    async def _discover(self, url: str, challenge: BearerChallenge) -> GrantTarget:
        found = await discover(self._http, url, challenge.resource_metadata)
        if self.scopes is not None:
            scopes = self.scopes
        else:  # no offline_access: a machine grant runs again instead of refreshing
            scopes = unique(challenge.scopes or found.resource_scopes or [])
        return GrantTarget(found.metadata, found.resource, tuple(scopes))

    async def _obtain(self, target: GrantTarget) -> None:
        """Run the grant at `target`'s token endpoint; its tokens become the current ones."""
        metadata = target.metadata
        endpoint = metadata.token_endpoint
        auth_form, headers = client_auth_fields(self.grant.credentials, metadata)
        form = merge_fields(await self.grant.fields(self._http, target), auth_form)
        body = urllib.parse.urlencode(form)
        log.info("requesting a token from %s for %s (%s)", metadata.issuer, target.resource,
                 form.get("grant_type"))
        if self._dpop is not None:
            reply = await self._dpop.post_token(self._http, endpoint, body, headers)
        else:
            reply = await self._http.post_form(endpoint, body, headers)
        if not reply.ok:
            raise token_error(f"the token endpoint {endpoint}", reply)
        self._tokens = parse_token_response(reply.body, max_bytes=self._http.max_bytes,
                                            dpop=self._dpop is not None)
        self._target = target
