"""Discovery over HTTP: the protected resource's metadata, then its authorization server's.

    find_resource   RFC 9728, in `protected_resource_urls` order; None when the server
                    publishes none (a 2025-03-26 server)
    find_server     RFC 8414 / OIDC discovery for an issuer; a document naming another issuer
                    is skipped (logged), never used
    legacy_server   2025-03-26: metadata at the server's origin, else the default endpoints
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from mcpkit.auth import discovery
from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.metadata import (
    AuthorizationServerMetadata,
    ProtectedResourceMetadata,
    check_issuer,
    decode_document,
    resource_matches,
)
from mcpkit.client.oauth_http import OAuthHttp

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Discovered:
    """Where to authorize for an MCP server: its protected-resource metadata (None for a
    2025-03-26 server, which has none), the resource to name, the authorization server."""

    prm: ProtectedResourceMetadata | None
    resource: str
    metadata: AuthorizationServerMetadata

    @property
    def resource_scopes(self) -> list[str] | None:
        return self.prm.scopes_supported if self.prm is not None else None


async def discover(http: OAuthHttp, server_url: str, header_url: str | None) -> Discovered:
    """RFC 9728 then RFC 8414 from the challenge's `resource_metadata` (or the well-known
    URLs); a server with no protected-resource metadata is a 2025-03-26 one: its root
    metadata, then the default endpoints, with the server's URL as the resource."""
    prm = await find_resource(http, server_url, header_url)
    if prm is not None:
        return Discovered(prm, prm.resource, await find_server(http, prm.authorization_servers[0]))
    return Discovered(None, server_url, await legacy_server(http, server_url))


async def find_resource(http: OAuthHttp, server_url: str,
                        header_url: str | None) -> ProtectedResourceMetadata | None:
    for url in discovery.protected_resource_urls(server_url, header_url):
        reply = await http.get(url)
        if not reply.ok:
            log.debug("no protected-resource metadata at %s (HTTP %d)", url, reply.status)
            continue
        prm = decode_document(reply.body, ProtectedResourceMetadata,
                              f"the protected-resource metadata at {url}", http.max_bytes)
        if not resource_matches(prm.resource, server_url):
            raise AuthorizationError(
                f"the protected-resource metadata at {url} is for {prm.resource!r}, "
                f"not for {server_url!r}")
        if not prm.authorization_servers:
            raise AuthorizationError(
                f"the protected-resource metadata at {url} names no authorization server")
        return prm
    return None


async def find_server(http: OAuthHttp, issuer: str) -> AuthorizationServerMetadata:
    for url in discovery.authorization_server_urls(issuer):
        metadata = await _server_at(http, url, issuer)
        if metadata is not None:
            return metadata
    raise AuthorizationError(f"no authorization server metadata found for issuer {issuer!r}")


async def legacy_server(http: OAuthHttp, server_url: str) -> AuthorizationServerMetadata:
    issuer = discovery.origin(server_url)
    metadata = await _server_at(http, discovery.legacy_metadata_url(server_url), issuer)
    if metadata is not None:
        return metadata
    log.debug("no authorization server metadata at %s: using the default endpoints", issuer)
    return discovery.legacy_metadata(server_url)


async def _server_at(http: OAuthHttp, url: str,
                     issuer: str) -> AuthorizationServerMetadata | None:
    reply = await http.get(url)
    if not reply.ok:
        log.debug("no authorization server metadata at %s (HTTP %d)", url, reply.status)
        return None
    metadata = decode_document(reply.body, AuthorizationServerMetadata,
                               f"the authorization server metadata at {url}", http.max_bytes)
    try:
        check_issuer(metadata, issuer)
    except AuthorizationError as exc:
        log.warning("ignoring the metadata at %s: %s", url, exc)
        return None
    return metadata
