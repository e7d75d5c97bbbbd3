"""The machine grants' token-request forms, and the token exchange that yields an ID-JAG.

    client_credentials_form   `grant_type=client_credentials` (RFC 6749 §4.4, OAuth 2.1 §4.2)
    jwt_bearer_form           `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` with an
                              `assertion` (RFC 7523 §2.1): a workload's own JWT (workload
                              identity federation, SEP-1933) or an ID-JAG (enterprise-managed
                              authorization, SEP-990)
    id_jag_exchange_form      the RFC 8693 token exchange at the enterprise IdP: an ID token
                              in, an Identity Assertion JWT Authorization Grant (ID-JAG) out;
                              its `audience` is the MCP authorization server's issuer and its
                              `resource` the MCP server (draft-ietf-oauth-identity-assertion-
                              authz-grant §4.3)
    parse_id_jag_response     that exchange's answer, checked: `issued_token_type` must be
                              the ID-JAG type
    access_token_exchange_form  the RFC 8693 exchange of a user's access token at their
                              identity provider for an access token for one `resource` (the
                              hub's token exchange with upstreams that trust its provider)
    parse_exchanged_access_token  that exchange's answer as a `TokenSet`: `issued_token_type`
                              must be the access-token type, `token_type` Bearer

Every builder returns `SecretFields` (names shown, values hidden) to merge with the client
authentication's fields (`forms.merge_fields`). Client authentication is not in here: it is
`client_auth`'s, and the same for every grant.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.forms import SecretFields
from mcpkit.auth.tokens import TokenSet, parse_token_response
from mcpkit.errors import InvalidArgument, PeerError

__all__ = [
    "ACCESS_TOKEN_TYPE",
    "CLIENT_CREDENTIALS_GRANT",
    "DEFAULT_MAX_ASSERTION_CHARS",
    "DEFAULT_MAX_TOKEN_RESPONSE_BYTES",
    "ID_JAG_TOKEN_TYPE",
    "ID_TOKEN_TYPE",
    "JWT_BEARER_GRANT",
    "TOKEN_EXCHANGE_GRANT",
    "IdJag",
    "InvalidTokenExchangeResponse",
    "access_token_exchange_form",
    "client_credentials_form",
    "id_jag_exchange_form",
    "jwt_bearer_form",
    "parse_exchanged_access_token",
    "parse_id_jag_response",
]

CLIENT_CREDENTIALS_GRANT = "client_credentials"
JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"

DEFAULT_MAX_ASSERTION_CHARS = 16384
"""The longest JWT (assertion, ID token, ID-JAG) sent or accepted."""

DEFAULT_MAX_TOKEN_RESPONSE_BYTES = 65536
"""The largest token-exchange response body read."""

# RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E )
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
_URI_CHARS = re.compile(r"[\x21-\x7e]+")
# A JWS compact serialization: three base64url segments (the signature may not be empty
# here: every JWT these grants carry is signed).
_COMPACT_JWT = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


class InvalidTokenExchangeResponse(PeerError):
    """The IdP's token-exchange answer is not what RFC 8693 and the ID-JAG profile say: not a
    JSON object, over the size limit, no token, or a token of another type."""


@dataclass(frozen=True)
class IdJag:
    """An Identity Assertion JWT Authorization Grant, from the IdP's token exchange; the
    token itself is kept out of repr()."""

    assertion: str = field(repr=False)
    expires_in: int | None = None


def client_credentials_form(*, scope: Sequence[str] = (),
                            resource: str | None = None) -> SecretFields:
    """The client-credentials grant's fields (the client authenticates beside them)."""
    return _with_scope_and_resource(SecretFields(grant_type=CLIENT_CREDENTIALS_GRANT),
                                    scope, resource)


def jwt_bearer_form(assertion: str, *, scope: Sequence[str] = (),
                    resource: str | None = None) -> SecretFields:
    """The jwt-bearer grant's fields (RFC 7523 §2.1) for `assertion`, a signed JWT."""
    form = SecretFields(grant_type=JWT_BEARER_GRANT,
                        assertion=_checked_jwt(assertion, "jwt-bearer assertion",
                                               InvalidArgument))
    return _with_scope_and_resource(form, scope, resource)


def id_jag_exchange_form(id_token: str, *, audience: str, resource: str,
                         scope: Sequence[str] = (),
                         client_id: str | None = None) -> SecretFields:
    """The RFC 8693 token-exchange fields that ask the IdP for an ID-JAG: the user's ID token
    as the subject, the MCP authorization server's issuer as `audience`, the MCP server as
    `resource`. `client_id` names the client at the IdP when it authenticates with none."""
    if not _URI_CHARS.fullmatch(audience):
        raise InvalidArgument("an ID-JAG request needs the authorization server's issuer (a "
                              "URI of visible ASCII characters) as its audience")
    form = SecretFields(
        grant_type=TOKEN_EXCHANGE_GRANT,
        requested_token_type=ID_JAG_TOKEN_TYPE,
        audience=audience,
        subject_token=_checked_jwt(id_token, "ID token", InvalidArgument),
        subject_token_type=ID_TOKEN_TYPE,
    )
    if client_id is not None:
        if not client_id or not client_id.isprintable():
            raise InvalidArgument("the client id at the IdP must be non-empty printable text")
        form["client_id"] = client_id
    return _with_scope_and_resource(form, scope, resource)


def parse_id_jag_response(body: bytes, *,
                          max_bytes: int = DEFAULT_MAX_TOKEN_RESPONSE_BYTES) -> IdJag:
    """The ID-JAG from the IdP's successful (200) token-exchange answer. RFC 8693 §2.2.1:
    the token is in `access_token` and `issued_token_type` says what it is, which must be
    the ID-JAG type; `token_type` is `N_A` (the ID-JAG is not an access token)."""
    document = _exchange_answer(body, max_bytes, ID_JAG_TOKEN_TYPE, "an ID-JAG")
    token_type = document.get("token_type")
    if not isinstance(token_type, str) or token_type.lower() != "n_a":
        raise InvalidTokenExchangeResponse("an ID-JAG token-exchange response must have "
                                           "token_type N_A")
    token = document.get("access_token")
    if not isinstance(token, str):
        raise InvalidTokenExchangeResponse("the token-exchange response has no access_token")
    expires_in = document.get("expires_in")
    if expires_in is not None and (type(expires_in) is not int or expires_in < 0):
        raise InvalidTokenExchangeResponse("the token-exchange expires_in is not a "
                                           "non-negative integer")
    return IdJag(_checked_jwt(token, "ID-JAG", InvalidTokenExchangeResponse), expires_in)


def access_token_exchange_form(subject_token: str, *, resource: str,
                               scope: Sequence[str] = ()) -> SecretFields:
    """The RFC 8693 token-exchange fields that trade a user's access token (opaque or a JWT:
    the identity provider that issued it reads it) for an access token for `resource`."""
    if not 0 < len(subject_token) <= DEFAULT_MAX_ASSERTION_CHARS or \
            not _URI_CHARS.fullmatch(subject_token):
        raise InvalidArgument(f"a subject token must be 1 to {DEFAULT_MAX_ASSERTION_CHARS} "
                              "visible ASCII characters")
    form = SecretFields(
        grant_type=TOKEN_EXCHANGE_GRANT,
        requested_token_type=ACCESS_TOKEN_TYPE,
        subject_token=subject_token,
        subject_token_type=ACCESS_TOKEN_TYPE,
    )
    return _with_scope_and_resource(form, scope, resource)


def parse_exchanged_access_token(body: bytes, *,
                                 max_bytes: int = DEFAULT_MAX_TOKEN_RESPONSE_BYTES,
                                 now: float | None = None) -> TokenSet:
    """The access token from a successful (200) RFC 8693 answer to
    `access_token_exchange_form`: §2.2.1 requires `issued_token_type`, which must be the
    access-token type; the rest is a token response (RFC 6749 §5.1, `token_type` Bearer). A
    refresh token in the answer is dropped: an exchange is repeated, never refreshed."""
    document = _exchange_answer(body, max_bytes, ACCESS_TOKEN_TYPE, "an access token")
    token = document.get("access_token")
    if not isinstance(token, str) or not 0 < len(token) <= DEFAULT_MAX_ASSERTION_CHARS or \
            not _URI_CHARS.fullmatch(token):
        raise InvalidTokenExchangeResponse(
            f"the token-exchange response's access_token is not 1 to "
            f"{DEFAULT_MAX_ASSERTION_CHARS} visible ASCII characters")
    try:
        tokens = parse_token_response(body, max_bytes=max_bytes, now=now)
    except AuthorizationError as error:
        raise InvalidTokenExchangeResponse(str(error)) from None
    return dataclasses.replace(tokens, refresh_token=None)


def _exchange_answer(body: bytes, max_bytes: int, issued_type: str,
                     what: str) -> dict[str, Any]:
    """A token-exchange answer as a JSON object, within `max_bytes`, whose
    `issued_token_type` (RFC 8693 §2.2.1: required) is `issued_type`."""
    if len(body) > max_bytes:
        raise InvalidTokenExchangeResponse(
            f"the token-exchange response is {len(body)} bytes, over the limit of {max_bytes}")
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise InvalidTokenExchangeResponse("the token-exchange response is not JSON") from None
    if not isinstance(document, dict):
        raise InvalidTokenExchangeResponse("the token-exchange response is not a JSON object")
    issued = document.get("issued_token_type")
    if issued != issued_type:
        shown = issued if isinstance(issued, str) and len(issued) <= 200 and \
            issued.isprintable() else type(issued).__name__
        raise InvalidTokenExchangeResponse(
            f"the token exchange issued {shown!r}, not {what} ({issued_type})")
    return document


def _with_scope_and_resource(form: SecretFields, scope: Sequence[str],
                             resource: str | None) -> SecretFields:
    if isinstance(scope, str):
        raise InvalidArgument("scope is a sequence of scope tokens, not one string")
    if scope:
        for token in scope:
            if not _SCOPE_TOKEN.fullmatch(token):
                raise InvalidArgument(f"{token!r} is not a scope token (RFC 6749 §3.3)")
        form["scope"] = " ".join(dict.fromkeys(scope))  # RFC 6749: order-free, no repeats
    if resource is not None:
        form["resource"] = _checked_resource(resource)
    return form


def _checked_resource(resource: str) -> str:
    """RFC 8707 §2: an absolute URI without a fragment; sent exactly as given (the MCP
    conformance mock compares it byte for byte with the protected-resource metadata)."""
    if not _URI_CHARS.fullmatch(resource):
        raise InvalidArgument("a resource indicator must be a URI of visible ASCII characters")
    try:
        parts = urlsplit(resource)
    except ValueError:
        raise InvalidArgument("a resource indicator that does not parse as a URI") from None
    if not parts.scheme or not parts.netloc or "#" in resource:
        raise InvalidArgument("a resource indicator must be an absolute URI without a "
                              "fragment (RFC 8707)")
    return resource


def _checked_jwt(value: str, what: str,
                 error: type[InvalidArgument] | type[InvalidTokenExchangeResponse]) -> str:
    if len(value) > DEFAULT_MAX_ASSERTION_CHARS:
        raise error(f"the {what} is over {DEFAULT_MAX_ASSERTION_CHARS} characters")
    if not _COMPACT_JWT.fullmatch(value):
        raise error(f"the {what} is not a compact signed JWT")
    return value
