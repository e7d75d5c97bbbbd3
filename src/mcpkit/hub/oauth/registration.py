"""Dynamic client registration (RFC 7591) for the hub's authorization server: the checks of a
client's metadata, and what the hub answers. Public clients only (no secrets are issued);
redirect URIs are https, or http on a loopback address (RFC 8252 §7.3).

    client_from_metadata(document, client_id) -> ClientRecord    or RegistrationRefused
    registration_response(record, issued_at)   -> the RFC 7591 §3.2.1 body
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from typing import Any

from mcpkit.errors import InvalidArgument
from mcpkit.hub.store.oauth import ClientRecord

MAX_REGISTRATION_BYTES = 16 * 1024
"""The largest registration request the hub reads (413 past it)."""
MAX_REDIRECT_URIS = 10
MAX_URI_CHARS = 2000
MAX_CLIENT_NAME_CHARS = 200
APPLICATION_TYPES = ("native", "web")
GRANT_TYPES = ("authorization_code", "refresh_token")


class RegistrationRefused(InvalidArgument):
    """RFC 7591 §3.2.2: `error` is invalid_redirect_uri or invalid_client_metadata."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


def is_loopback_redirect(uri: str) -> bool:
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme != "http" or parts.hostname is None:
        return False
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


def _metadata_error(description: str) -> RegistrationRefused:
    return RegistrationRefused("invalid_client_metadata", description)


def _redirect_uri(value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_URI_CHARS:
        raise RegistrationRefused("invalid_redirect_uri",
                                  f"a redirect URI is a string of 1 to {MAX_URI_CHARS} characters")
    try:
        parts = urllib.parse.urlsplit(value)
    except ValueError:
        raise RegistrationRefused("invalid_redirect_uri", "a redirect URI is not a URL") from None
    if parts.fragment or "#" in value:
        raise RegistrationRefused("invalid_redirect_uri", "a redirect URI has no fragment")
    if not (parts.scheme == "https" and parts.hostname) and not is_loopback_redirect(value):
        raise RegistrationRefused("invalid_redirect_uri", "a redirect URI must be https, or "
                                  "http on a loopback address (127.0.0.1, [::1])")
    return value


def client_from_metadata(document: Any, client_id: str) -> ClientRecord:
    if not isinstance(document, dict):
        raise _metadata_error("the registration request must be a JSON object")
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not uris:
        raise RegistrationRefused("invalid_redirect_uri", "redirect_uris is required: a "
                                  "non-empty list")
    if len(uris) > MAX_REDIRECT_URIS:
        raise RegistrationRefused("invalid_redirect_uri",
                                  f"at most {MAX_REDIRECT_URIS} redirect URIs")
    redirect_uris = tuple(dict.fromkeys(_redirect_uri(uri) for uri in uris))
    method = document.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise _metadata_error("the hub registers public clients only: "
                              "token_endpoint_auth_method must be none (PKCE protects the code)")
    application_type = document.get("application_type", "native")
    if application_type not in APPLICATION_TYPES:
        raise _metadata_error("application_type must be native or web")
    grant_types = document.get("grant_types", ["authorization_code", "refresh_token"])
    if (not isinstance(grant_types, list) or not grant_types
            or not all(isinstance(g, str) and g in GRANT_TYPES for g in grant_types)
            or "authorization_code" not in grant_types):
        raise _metadata_error("grant_types: authorization_code, and refresh_token if wanted")
    response_types = document.get("response_types", ["code"])
    if response_types != ["code"]:
        raise _metadata_error("response_types must be [\"code\"]")
    name = document.get("client_name")
    if name is not None and (not isinstance(name, str) or len(name) > MAX_CLIENT_NAME_CHARS):
        raise _metadata_error(f"client_name is a string of at most {MAX_CLIENT_NAME_CHARS} "
                              "characters")
    return ClientRecord(client_id=client_id, client_name=name or None,
                        redirect_uris=redirect_uris, application_type=application_type,
                        grant_types=tuple(dict.fromkeys(grant_types)),
                        token_endpoint_auth_method="none")


def registration_response(record: ClientRecord, issued_at: int) -> dict[str, Any]:
    body: dict[str, Any] = {
        "client_id": record.client_id,
        "client_id_issued_at": issued_at,
        "redirect_uris": list(record.redirect_uris),
        "grant_types": list(record.grant_types),
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": record.application_type,
    }
    if record.client_name:
        body["client_name"] = record.client_name
    return body
