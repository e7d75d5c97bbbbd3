"""`OAuthService`: the hub's authorization server as one object on the hub's context - the
access-token key and checks (keys.py), Authlib's server over the store (server.py) and the
DPoP checks with their replay cache (dpop.py: in Redis when the hub has it) - made by the
built-in `oauth_component` once the store (and Redis) is open."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
from starlette.responses import Response

from mcpkit.hub.crypto import SecretBox
from mcpkit.hub.oauth.dpop import DPOP_ALGORITHMS, HubDPoP
from mcpkit.hub.oauth.keys import AccessTokens
from mcpkit.hub.oauth.oidc import OidcSignIn
from mcpkit.hub.oauth.server import CONSOLE_CLIENT_ID, SCOPES_SUPPORTED, HubAuthorizationServer
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store.oauth import ClientRecord

if TYPE_CHECKING:
    from mcpkit.hub.api.context import HubContext
    from mcpkit.hub.upstream_token_exchange import UpstreamTokenExchange

METADATA_PATH = "/.well-known/oauth-authorization-server"
RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource/mcp"  # RFC 9728 §3.1
AUTHORIZE_PATH = "/oauth/authorize"
TOKEN_PATH = "/oauth/token"
REGISTER_PATH = "/oauth/register"
REVOKE_PATH = "/oauth/revoke"
JWKS_PATH = "/oauth/jwks"
OIDC_CALLBACK_PATH = "/oauth/oidc/callback"
UPSTREAM_CALLBACK_PATH = "/oauth/upstream/callback"
"""Where an upstream's authorization server sends the browser back (hub/upstream_login.py)."""
SESSION_COOKIE = "mcpkit_hub_session"
"""The browser's sign-in to the hub's pages: sealed with the hub's key (any replica opens
it), sent to the hub's /oauth pages only (COOKIE_PATH)."""
CONSOLE_CALLBACK_PATH = "/console/callback"
COOKIE_PATH = "/oauth"
"""The session and CSRF cookies go to /oauth/… only: the authorization endpoint and the
upstream-login callback (both ask for a signed-in browser), never to the REST API or /mcp."""
RESUMABLE_PATHS = frozenset({AUTHORIZE_PATH, UPSTREAM_CALLBACK_PATH})
"""The pages a sign-in may go back to once the browser is signed in."""
MAX_RESUME_CHARS = 8192


def resume_target(candidate: str) -> str | None:
    """`candidate` when it is the path (and query) of one of the hub's own pages that ask for
    a sign-in (RESUMABLE_PATHS), else None. Never a URL with a scheme or a host, a path
    elsewhere, or one with a backslash or control character a browser might read as
    another host: a resume stays on the hub, on those pages (no open redirect)."""
    if not candidate.startswith("/") or candidate.startswith("//") or \
            len(candidate) > MAX_RESUME_CHARS or \
            any(ord(char) < 0x21 or char in "\\\x7f" for char in candidate):
        return None
    try:
        parts = urllib.parse.urlsplit(candidate)
    except ValueError:
        return None
    if parts.scheme or parts.netloc or parts.fragment or parts.path not in RESUMABLE_PATHS:
        return None
    return candidate


@dataclass
class OAuthService:
    settings: HubSettings
    tokens: AccessTokens
    server: HubAuthorizationServer
    box: SecretBox
    """Seals the sign-in session cookie."""
    password_checks: anyio.CapacityLimiter
    """Bounds the argon2 checks running at once (settings.oauth_max_password_checks)."""
    dpop: HubDPoP
    """DPoP proofs at the token endpoint and /mcp, and their replay cache."""
    oidc: OidcSignIn | None = None
    """Sign-in with the OpenID Connect provider (settings.oidc_issuer), when one is set."""
    token_exchange: UpstreamTokenExchange | None = None
    """RFC 8693 exchanges at that provider for token-exchange upstreams (with `oidc`)."""

    def set_session_cookie(self, response: Response, user_id: int) -> None:
        """Sign the browser in as the user for `oauth_sign_in_ttl_s` (by password, or back
        from the OpenID Connect provider)."""
        ttl = self.settings.oauth_sign_in_ttl_s
        sealed = self.box.seal({"user": str(user_id), "expires": str(time.time() + ttl)})
        response.set_cookie(SESSION_COOKIE, sealed, max_age=int(ttl), httponly=True,
                            samesite="lax", secure=self.settings.issuer.startswith("https://"),
                            path=COOKIE_PATH)

    @property
    def resource_metadata_url(self) -> str:
        return self.settings.issuer + RESOURCE_METADATA_PATH

    def metadata(self) -> dict[str, object]:
        """RFC 8414 §2: what the hub's authorization server offers."""
        issuer = self.settings.issuer
        return {
            "issuer": issuer,
            "authorization_endpoint": issuer + AUTHORIZE_PATH,
            "token_endpoint": issuer + TOKEN_PATH,
            "registration_endpoint": issuer + REGISTER_PATH,
            "revocation_endpoint": issuer + REVOKE_PATH,
            "jwks_uri": issuer + JWKS_PATH,
            "scopes_supported": list(SCOPES_SUPPORTED),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "revocation_endpoint_auth_methods_supported": ["none"],
            "authorization_response_iss_parameter_supported": True,
            "dpop_signing_alg_values_supported": list(DPOP_ALGORITHMS),
            "client_id_metadata_document_supported": True,
        }

    def resource_metadata(self) -> dict[str, object]:
        """RFC 9728: the hub's /mcp names the hub itself as its authorization server."""
        from mcpkit.auth.resource import protected_resource_metadata

        return protected_resource_metadata(
            self.settings.mcp_url, [self.settings.issuer], list(SCOPES_SUPPORTED),
            resource_name="mcpkit hub", dpop_signing_alg_values_supported=DPOP_ALGORITHMS)


def console_client(settings: HubSettings) -> ClientRecord:
    """The web console's registration: code + PKCE, back to the console's callback."""
    return ClientRecord(CONSOLE_CLIENT_ID, "mcpkit web console",
                        (settings.issuer + CONSOLE_CALLBACK_PATH,), "web",
                        ("authorization_code", "refresh_token"), "none")


@asynccontextmanager
async def oauth_component(context: HubContext) -> AsyncIterator[OAuthService]:
    settings = context.settings
    tokens = AccessTokens(context.store, context.box, settings)
    oidc = exchange = None
    if settings.oidc_issuer is not None:
        from mcpkit.hub.upstream_token_exchange import UpstreamTokenExchange

        oidc = OidcSignIn(settings, settings.oidc_client_secret(),
                          callback_url=settings.issuer + OIDC_CALLBACK_PATH)
        exchange = UpstreamTokenExchange(oidc, settings.oidc_client_secret(), settings,
                                         redis=context.redis)
    service = OAuthService(settings, tokens,
                           HubAuthorizationServer(context.store, tokens, settings),
                           context.box,
                           anyio.CapacityLimiter(settings.oauth_max_password_checks),
                           HubDPoP.for_hub(settings, context.redis), oidc,
                           exchange)
    await context.store.oauth.put_client(console_client(settings))
    context.oauth = service
    try:
        yield service
    finally:
        context.oauth = None
