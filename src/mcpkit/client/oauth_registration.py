"""Who the client is at an authorization server, in the spec's order of preference:

    1. configured credentials (`OAuth(client_id=…, client_secret=…)`)
    2. a Client ID Metadata Document URL, when the AS advertises
       `client_id_metadata_document_supported`, accepts `none` at its token endpoint, and the
       redirect URIs are mcpkit's loopback range (the document lists exactly those)
    3. dynamic client registration (RFC 7591), `application_type: native`, kept in the
       registration store keyed by (issuer, redirect URI) and reused
    4. otherwise AuthorizationNotConfigured saying what to configure
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec

from mcpkit.auth.errors import AuthorizationError, AuthorizationNotConfigured
from mcpkit.auth.metadata import AuthorizationServerMetadata
from mcpkit.auth.tokens import ClientRegistration
from mcpkit.client.oauth_http import OAuthHttp

SECRET_METHODS = ("client_secret_basic", "client_secret_post")
"""Token endpoint auth methods with a client secret, in mcpkit's order of preference."""


class RegistrationStore(Protocol):
    async def get(self, issuer: str, redirect_uri: str) -> ClientRegistration | None: ...
    async def put(self, issuer: str, redirect_uri: str, reg: ClientRegistration) -> None: ...
    async def delete(self, issuer: str, redirect_uri: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Identity:
    """What the user configured about the client's identity."""

    client_id: str | None
    client_secret: str | None
    client_issuer: str | None
    """The issuer the configured credentials belong to (None: the first one they meet)."""
    metadata_url: str | None
    redirect_uris: tuple[str, ...]
    """Every redirect URI the client may use (a loopback range): what DCR registers."""
    custom_redirect: bool
    """A redirect URI outside mcpkit's loopback range: the metadata document lists only
    that range, so it cannot be used."""
    client_name: str


class _DcrReply(msgspec.Struct):
    client_id: str
    client_secret: str | None = None
    token_endpoint_auth_method: str | None = None


def secret_method(supported: Sequence[str], has_secret: bool) -> str:
    """The token endpoint auth method to use: a secret one the AS supports when there is a
    secret, else `none`."""
    if has_secret:
        for method in SECRET_METHODS:
            if method in supported:
                return method
    if "none" in supported or not has_secret:
        return "none"
    raise AuthorizationError(
        f"the authorization server supports none of the token endpoint auth methods mcpkit "
        f"can use here ({', '.join(supported)})")


def configured(identity: Identity,
               metadata: AuthorizationServerMetadata) -> ClientRegistration | None:
    if identity.client_id is None:
        return None
    if identity.client_issuer not in (None, metadata.issuer):
        return None  # credentials of another authorization server: never reused here
    method = secret_method(metadata.auth_methods(), identity.client_secret is not None)
    return ClientRegistration(identity.client_id, identity.client_secret, method, "configured")


def metadata_document(identity: Identity,
                      metadata: AuthorizationServerMetadata) -> ClientRegistration | None:
    if (identity.metadata_url and metadata.client_id_metadata_document_supported
            and "none" in metadata.auth_methods() and not identity.custom_redirect):
        return ClientRegistration(identity.metadata_url, None, "none", "cimd")
    return None


async def register(http: OAuthHttp, identity: Identity,
                   metadata: AuthorizationServerMetadata) -> ClientRegistration:
    """RFC 7591 registration of a native client at the AS's registration endpoint.

    No `scope` is registered: an AS may check it against its own scope list, which a
    resource's scopes (RFC 8707) need not be in, and may then hold the client to it, which
    would refuse a later step-up's scopes (oidc-provider does both)."""
    endpoint = metadata.registration_endpoint
    if endpoint is None:
        raise AuthorizationNotConfigured(
            f"the authorization server {metadata.issuer!r} offers no dynamic client "
            "registration and no Client ID Metadata Document is usable: configure a client "
            "id (OAuth(client_id=…, client_secret=…)) registered there for the redirect URIs "
            f"{' '.join(identity.redirect_uris)!r}")
    supported = metadata.auth_methods()
    method = "none" if "none" in supported else secret_method(supported, True)
    request = {
        "client_name": identity.client_name,
        "redirect_uris": list(identity.redirect_uris),
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
        "application_type": "native",
    }
    reply = await http.post_json(endpoint, request)
    if not reply.ok:
        code = reply.oauth_error()
        raise AuthorizationError(
            f"client registration at {endpoint} was refused (HTTP {reply.status}"
            + (f", {code}" if code else "") + ")")
    try:
        doc = msgspec.json.decode(reply.body, type=_DcrReply)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise AuthorizationError(
            f"the registration response from {endpoint} is invalid: {type(exc).__name__}"
        ) from None
    used = doc.token_endpoint_auth_method or (method if doc.client_secret else "none")
    return ClientRegistration(doc.client_id, doc.client_secret, used, "dcr")
