"""The hub as an OAuth 2.1 authorization server that MCP clients log in to (issue 24 §2).

    service.py       OAuthService on the hub's context, metadata documents; oauth_component
    routes.py        the endpoints: metadata, DCR, authorize (sign-in, consent), token, revoke
    server.py        Authlib's grant mechanics over the store (code + PKCE S256, refresh
                     rotation, revocation, RFC 9207 iss)
    keys.py          RFC 9068 access tokens for /mcp: signing key, issuing, local checks
    dpop.py          DPoP (RFC 9449): proofs at the token endpoint, the replay cache (Redis
                     when replicas share one, fail closed), the /mcp gate's DPoPGuard
    registration.py  DCR metadata checks (RFC 7591)
    client_documents.py  client ID metadata documents: an https client_id fetched (SSRF-
                     guarded, bounded, cached), checked and used as a public client
    pages.py         the sign-in and consent pages (HTML, escaped, CSRF token)
    sign_in.py       the browser's sign-in to the hub (session cookie, password, CSRF), for
                     /oauth/authorize and the upstream-login callback
    oidc_routes.py   signing in through the OpenID Connect provider (oidc.py)

Users sign in with a hub account whose password an operator sets
(`mcpkit hub user set-password NAME`, hashed by mcpkit.hub.passwords). All state lives in the
database (store.oauth) and the DPoP replay cache in Redis, so any replica serves any step.
"""

from __future__ import annotations

from mcpkit.hub.oauth.routes import router as oauth_router
from mcpkit.hub.oauth.service import OAuthService, oauth_component

__all__ = ["OAuthService", "oauth_component", "oauth_router"]
