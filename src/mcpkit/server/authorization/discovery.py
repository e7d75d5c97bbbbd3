"""`discover_verifier`: the verifier an authorization server's metadata calls for."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from mcpkit.auth.resource import TokenVerifier, VerifierUnavailable
from mcpkit.server.authorization.fetch import AuthServerHttp
from mcpkit.server.authorization.introspection import IntrospectionVerifier
from mcpkit.server.authorization.jwt_verifier import JwtVerifier
from mcpkit.server.authorization.metadata import issuer_metadata


async def discover_verifier(issuer: str, audience: str | Collection[str], *,
                            introspection_client: tuple[str, str] | None = None,
                            http: AuthServerHttp | None = None,
                            **options: Any) -> TokenVerifier:
    """Read `issuer`'s metadata once: with `introspection_client` (client id, secret) and an
    `introspection_endpoint`, an IntrospectionVerifier (opaque tokens); else, with a
    `jwks_uri`, a JwtVerifier. `options` go to the verifier's constructor. Raises
    VerifierUnavailable when the metadata cannot be read or offers neither."""
    http = http or AuthServerHttp()
    metadata = await issuer_metadata(issuer, http)
    if introspection_client is not None:
        if metadata.introspection_endpoint is None:
            raise VerifierUnavailable(f"the authorization server {issuer} publishes no "
                                      "introspection_endpoint")
        client_id, client_secret = introspection_client
        return IntrospectionVerifier(metadata.introspection_endpoint, client_id, client_secret,
                                     audience, issuer=issuer, http=http, **options)
    if metadata.jwks_uri is None:
        raise VerifierUnavailable(f"the authorization server {issuer} publishes no jwks_uri "
                                  "(give introspection credentials for opaque tokens)")
    return JwtVerifier(issuer, audience, jwks_uri=metadata.jwks_uri, http=http, **options)
