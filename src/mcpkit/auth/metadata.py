"""Metadata documents a client reads during discovery, decoded strictly and bounded.

    ProtectedResourceMetadata     RFC 9728 (`/.well-known/oauth-protected-resource…`)
    AuthorizationServerMetadata   RFC 8414 and OpenID Connect Discovery 1.0

Unknown members are allowed (both RFCs let documents grow); the members mcpkit uses must have
their declared types, and lists are bounded. `issuer` must match the expected issuer exactly
(RFC 8414 §3.3): a document for another issuer is refused."""

from __future__ import annotations

import urllib.parse
from typing import Annotated, TypeVar

import msgspec

from mcpkit.auth.errors import AuthorizationError
from mcpkit.errors import McpkitError

T = TypeVar("T")

MAX_DOCUMENT_BYTES = 64 * 1024
"""Default bound on a metadata or token document's size."""

MAX_LIST = 64
"""Bound on each list in a metadata document (scopes, servers, methods…)."""

Strings = Annotated[list[Annotated[str, msgspec.Meta(max_length=2048)]],
                    msgspec.Meta(max_length=MAX_LIST)]
Url = Annotated[str, msgspec.Meta(min_length=1, max_length=2048)]


class ProtectedResourceMetadata(msgspec.Struct, frozen=True):
    resource: Url
    authorization_servers: Strings = []
    scopes_supported: Strings | None = None
    bearer_methods_supported: Strings | None = None


class AuthorizationServerMetadata(msgspec.Struct, frozen=True):
    issuer: Url
    authorization_endpoint: Url
    token_endpoint: Url
    registration_endpoint: Url | None = None
    revocation_endpoint: Url | None = None
    scopes_supported: Strings | None = None
    response_types_supported: Strings = []
    grant_types_supported: Strings | None = None
    code_challenge_methods_supported: Strings | None = None
    token_endpoint_auth_methods_supported: Strings | None = None
    token_endpoint_auth_signing_alg_values_supported: Strings | None = None
    dpop_signing_alg_values_supported: Strings | None = None
    client_id_metadata_document_supported: bool = False
    authorization_response_iss_parameter_supported: bool = False

    def supports_s256(self) -> bool:
        return "S256" in (self.code_challenge_methods_supported or [])

    def auth_methods(self) -> list[str]:
        """Token endpoint auth methods; RFC 8414's default is client_secret_basic."""
        return list(self.token_endpoint_auth_methods_supported or ["client_secret_basic"])


def decode_document(body: bytes, kind: type[T], what: str,
                    max_bytes: int = MAX_DOCUMENT_BYTES, *,
                    error: type[McpkitError] = AuthorizationError) -> T:
    """Decode a JSON document strictly into `kind`: `error` (AuthorizationError for what a
    server sent) naming `what` and the field at fault - never the document's content, which
    may hold a secret - when it is too large or does not conform."""
    if len(body) > max_bytes:
        raise error(f"{what} is over the {max_bytes}-byte limit")
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError as exc:
        raise error(f"{what} is invalid: {exc}") from None
    except msgspec.DecodeError:
        raise error(f"{what} is not a JSON object") from None


def check_issuer(metadata: AuthorizationServerMetadata, expected: str) -> None:
    """RFC 8414 §3.3: the `issuer` must be identical to the one the metadata was looked up
    for (a plain string comparison: no normalization of case, port or trailing slash)."""
    if metadata.issuer != expected:
        raise AuthorizationError(
            f"authorization server metadata names issuer {metadata.issuer!r}, "
            f"not the expected {expected!r}")


def check_pkce(metadata: AuthorizationServerMetadata) -> None:
    """MCP requires PKCE S256; an AS that does not list it is refused."""
    if not metadata.supports_s256():
        raise AuthorizationError(
            f"the authorization server {metadata.issuer!r} does not advertise PKCE S256 "
            "(code_challenge_methods_supported); refusing to authorize without PKCE")


def resource_matches(resource: str, server_url: str) -> bool:
    """Whether a protected resource's `resource` covers the MCP server URL: same scheme, host
    and port, and the server's path within the resource's path (RFC 9728 §3.3, RFC 8707)."""
    res = urllib.parse.urlsplit(resource)
    srv = urllib.parse.urlsplit(server_url)
    if (res.scheme.lower(), res.netloc.lower()) != (srv.scheme.lower(), srv.netloc.lower()):
        return False
    if res.fragment:
        return False
    prefix = res.path.rstrip("/")
    path = srv.path.rstrip("/")
    return path == prefix or path.startswith(prefix + "/")


class IssuerKeysMetadata(msgspec.Struct, frozen=True):
    """What a resource server reads of its authorization server's metadata (RFC 8414 / OIDC
    Discovery): where the signing keys and the introspection endpoint are. The endpoints a
    client needs are not required here (an AS for machine clients may lack some)."""

    issuer: Url
    jwks_uri: Url | None = None
    introspection_endpoint: Url | None = None
    introspection_endpoint_auth_methods_supported: Strings | None = None
