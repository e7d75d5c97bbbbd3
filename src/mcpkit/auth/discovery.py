"""The well-known URLs a client tries, in the order the MCP specification gives.

    protected_resource_urls   RFC 9728 §3.1: the header's URL, then path-inserted, then root
    authorization_server_urls RFC 8414 §3.1 and OpenID Discovery, with path insertion
    check_endpoint_url        HTTPS, or HTTP on loopback only
    legacy_*                  the 2025-03-26 revision: metadata at the MCP server's origin, else
                              the default endpoints /authorize, /token, /register there
"""

from __future__ import annotations

import urllib.parse

from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.metadata import AuthorizationServerMetadata

PRM_WELL_KNOWN = "/.well-known/oauth-protected-resource"
OAUTH_WELL_KNOWN = "/.well-known/oauth-authorization-server"
OIDC_WELL_KNOWN = "/.well-known/openid-configuration"

LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


def check_endpoint_url(url: str) -> None:
    """OAuth endpoints and metadata (the client's and the resource server's: JWKS,
    introspection) must be HTTPS (OAuth 2.1 §1.5, MCP security best practices); plain HTTP
    only on the loopback interface (local servers and tests)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        return
    if parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS:
        return
    raise AuthorizationError(
        f"refusing the OAuth URL {url!r}: only HTTPS (or HTTP on loopback) is allowed")


def http_form(url: str) -> str:
    """The http(s) URL of an MCP server's URL: a WebSocket server (ws, wss) is discovered,
    named as a resource, probed, and has its logins kept at its http/https form."""
    parts = urllib.parse.urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme.lower())
    if scheme is None:
        return url
    return urllib.parse.urlunsplit((scheme, parts.netloc, parts.path, parts.query, parts.fragment))


def origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _path(url: str) -> str:
    return urllib.parse.urlsplit(url).path.rstrip("/")


def protected_resource_urls(server_url: str, header_url: str | None = None) -> list[str]:
    """Where to look for the protected-resource metadata of `server_url`."""
    base, path = origin(server_url), _path(server_url)
    urls = [header_url] if header_url else []
    if path:
        urls.append(f"{base}{PRM_WELL_KNOWN}{path}")
    urls.append(f"{base}{PRM_WELL_KNOWN}")
    return _unique(urls)


def authorization_server_urls(issuer: str) -> list[str]:
    """Where to look for the metadata of the authorization server `issuer`: with a path,
    OAuth path-inserted, OIDC path-inserted, OIDC path-appended; without, OAuth then OIDC."""
    base, path = origin(issuer), _path(issuer)
    if path:
        return [f"{base}{OAUTH_WELL_KNOWN}{path}", f"{base}{OIDC_WELL_KNOWN}{path}",
                f"{base}{path}{OIDC_WELL_KNOWN}"]
    return [f"{base}{OAUTH_WELL_KNOWN}", f"{base}{OIDC_WELL_KNOWN}"]


def legacy_metadata_url(server_url: str) -> str:
    """2025-03-26: the authorization base URL is the MCP server's URL without its path."""
    return f"{origin(server_url)}{OAUTH_WELL_KNOWN}"


def legacy_metadata(server_url: str) -> AuthorizationServerMetadata:
    """2025-03-26: the default endpoints when the server publishes no metadata (PKCE S256
    assumed: that revision requires it of every server)."""
    base = origin(server_url)
    return AuthorizationServerMetadata(
        issuer=base, authorization_endpoint=f"{base}/authorize",
        token_endpoint=f"{base}/token", registration_endpoint=f"{base}/register",
        code_challenge_methods_supported=["S256"])


def _unique(urls: list[str]) -> list[str]:
    return list(dict.fromkeys(urls))
