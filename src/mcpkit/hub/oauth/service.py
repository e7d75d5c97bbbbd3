"""`OAuthService`: the hub's authorization server as one object on the hub's context - the
access-token key and checks (keys.py), Authlib's server over the store (server.py) and the
DPoP checks with their replay cache (dpop.py: in Redis when the hub has it) - made by the
built-in `oauth_component` once the store (and Redis) is open."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from mcpkit.hub.crypto import SecretBox
from mcpkit.hub.oauth.dpop import DPOP_ALGORITHMS, HubDPoP
from mcpkit.hub.oauth.keys import AccessTokens
from mcpkit.hub.oauth.server import SCOPES_SUPPORTED, HubAuthorizationServer
from mcpkit.hub.settings import HubSettings

if TYPE_CHECKING:
    from mcpkit.hub.api.context import HubContext

METADATA_PATH = "/.well-known/oauth-authorization-server"
RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource/mcp"  # RFC 9728 §3.1
AUTHORIZE_PATH = "/oauth/authorize"
TOKEN_PATH = "/oauth/token"
REGISTER_PATH = "/oauth/register"
REVOKE_PATH = "/oauth/revoke"
JWKS_PATH = "/oauth/jwks"


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


@asynccontextmanager
async def oauth_component(context: HubContext) -> AsyncIterator[OAuthService]:
    tokens = AccessTokens(context.store, context.box, context.settings)
    service = OAuthService(context.settings, tokens,
                           HubAuthorizationServer(context.store, tokens, context.settings),
                           context.box,
                           anyio.CapacityLimiter(context.settings.oauth_max_password_checks),
                           HubDPoP.for_hub(context.settings, context.redis))
    context.oauth = service
    try:
        yield service
    finally:
        context.oauth = None
