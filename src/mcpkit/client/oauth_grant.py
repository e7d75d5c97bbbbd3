"""The authorization-code grant with PKCE (RFC 6749 §4.1, RFC 7636), the RFC 8707 `resource`
in both requests, the RFC 9207 `iss` check, and the refresh-token grant (RFC 6749 §6).

Authlib builds the requests (PKCE challenge, authorization URL, token request body, client
authentication); this module decides what goes in them and checks what comes back."""

from __future__ import annotations

import hmac
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

from authlib.common.security import generate_token
from authlib.oauth2.auth import ClientAuth
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri, prepare_token_request
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.metadata import AuthorizationServerMetadata
from mcpkit.auth.scopes import OFFLINE_ACCESS
from mcpkit.auth.tokens import ClientRegistration, TokenSet, parse_token_response
from mcpkit.client.oauth_dpop import DPoP
from mcpkit.client.oauth_http import OAuthHttp

VERIFIER_CHARS = 64
"""PKCE code verifier length (RFC 7636 allows 43..128)."""


class InvalidClient(AuthorizationError):
    """The token endpoint answered `invalid_client`: the registration is no longer valid."""


class InvalidGrant(AuthorizationError):
    """The token endpoint answered `invalid_grant`: the code or refresh token is dead (expired,
    revoked, or already used). The only refresh failure that drops a stored refresh token."""


@dataclass(frozen=True, slots=True, repr=False)
class Request:
    """One authorization request: its URL and what the redirect must be checked against."""

    url: str
    state: str
    verifier: str

    def __repr__(self) -> str:
        return "Request(url=…, state='***', verifier='***')"


def authorization_request(metadata: AuthorizationServerMetadata, client: ClientRegistration,
                          redirect_uri: str, resource: str,
                          scopes: Sequence[str]) -> Request:
    """The authorization URL (PKCE S256, state, RFC 8707 resource). Asking for
    `offline_access` adds `prompt=consent`: OpenID Connect Core §11 has a provider drop
    offline_access (so issue no refresh token) without it, and RFC 6749 §3.1 has a plain OAuth
    server ignore the parameter."""
    verifier = generate_token(VERIFIER_CHARS)
    state = generate_token(32)
    extra = {"prompt": "consent"} if OFFLINE_ACCESS in scopes else {}
    url = prepare_grant_uri(
        metadata.authorization_endpoint, client.client_id, "code",
        redirect_uri=redirect_uri, scope=" ".join(scopes) if scopes else None, state=state,
        code_challenge=create_s256_code_challenge(verifier), code_challenge_method="S256",
        resource=resource, **extra)
    return Request(url, state, verifier)


def code_from_redirect(redirect_url: str, request: Request,
                       metadata: AuthorizationServerMetadata) -> str:
    """The authorization code in the redirect, after checking `state` and `iss` (RFC 9207:
    required when the AS advertises it, compared by exact string whenever present)."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(redirect_url).query,
                                  keep_blank_values=True)
    if any(len(values) > 1 for values in query.values()):
        raise AuthorizationError("the authorization response repeats a parameter")
    params = {name: values[0] for name, values in query.items()}
    if not hmac.compare_digest(params.get("state", ""), request.state):
        raise AuthorizationError("the authorization response's state does not match the "
                                 "request's (a forged or stale redirect)")
    iss = params.get("iss")
    if iss is None and metadata.authorization_response_iss_parameter_supported:
        raise AuthorizationError(
            "the authorization response has no iss parameter though the authorization "
            "server advertises authorization_response_iss_parameter_supported (RFC 9207)")
    if iss is not None and iss != metadata.issuer:
        raise AuthorizationError(
            f"the authorization response's iss {iss!r} is not the issuer "
            f"{metadata.issuer!r} (RFC 9207: a mix-up attack?)")
    if "error" in params:
        error = params["error"][:64]
        raise AuthorizationError(f"the authorization server refused the request: {error!r}")
    code = params.get("code")
    if not code:
        raise AuthorizationError("the authorization response has no code")
    return code


async def exchange_code(http: OAuthHttp, metadata: AuthorizationServerMetadata,
                        client: ClientRegistration, code: str, request: Request,
                        redirect_uri: str, resource: str, dpop: DPoP | None = None) -> TokenSet:
    body = prepare_token_request("authorization_code", code=code, redirect_uri=redirect_uri,
                                 code_verifier=request.verifier, resource=resource)
    return await _token_request(http, metadata, client, body, None, dpop)


async def refresh(http: OAuthHttp, metadata: AuthorizationServerMetadata,
                  client: ClientRegistration, tokens: TokenSet, resource: str,
                  dpop: DPoP | None = None) -> TokenSet:
    assert tokens.refresh_token is not None
    body = prepare_token_request("refresh_token", refresh_token=tokens.refresh_token,
                                 resource=resource)
    return await _token_request(http, metadata, client, body, tokens.refresh_token, dpop)


class UnsupportedTokenType(AuthorizationError):
    """RFC 7009 §2.2.1: the server does not revoke tokens of this type (e.g. self-contained
    JWT access tokens, which expire on their own)."""


async def revoke(http: OAuthHttp, metadata: AuthorizationServerMetadata,
                 client: ClientRegistration, token: str, hint: str) -> None:
    """RFC 7009: ask the authorization server to revoke `token` (`hint`: refresh_token or
    access_token), authenticated as the client is at the token endpoint. AuthorizationError
    when it has no revocation endpoint or refuses (an unknown token is a 200 by §2.2)."""
    endpoint = metadata.revocation_endpoint
    if endpoint is None:
        raise AuthorizationError(f"{metadata.issuer} has no revocation endpoint")
    auth = ClientAuth(client.client_id, client.client_secret, client.auth_method)
    body = urllib.parse.urlencode({"token": token, "token_type_hint": hint})
    _, headers, body = auth.prepare("POST", endpoint, {}, body)
    reply = await http.post_form(endpoint, body, headers)
    if not reply.ok:
        code = reply.oauth_error()
        if code == "unsupported_token_type":
            raise UnsupportedTokenType(f"{metadata.issuer} does not revoke {hint}s")
        raise AuthorizationError(f"the revocation endpoint {endpoint} refused (HTTP "
                                 f"{reply.status}{', ' + code if code else ''})")


async def _token_request(http: OAuthHttp, metadata: AuthorizationServerMetadata,
                         client: ClientRegistration, body: str,
                         previous_refresh: str | None, dpop: DPoP | None) -> TokenSet:
    """POST a token request (with a DPoP proof and the nonce retry when `dpop` is given:
    a DPoP-bound token comes back)."""
    endpoint = metadata.token_endpoint
    auth = ClientAuth(client.client_id, client.client_secret, client.auth_method)
    _, headers, body = auth.prepare("POST", endpoint, {}, body)
    if dpop is not None:
        reply = await dpop.post_token(http, endpoint, body, headers)
    else:
        reply = await http.post_form(endpoint, body, headers)
    if not reply.ok:
        code = reply.oauth_error()
        what = f"the token endpoint {endpoint} refused (HTTP {reply.status}"
        what += f", {code})" if code else ")"
        kind = {"invalid_client": InvalidClient, "invalid_grant": InvalidGrant}.get(
            code or "", AuthorizationError)
        raise kind(what)
    return parse_token_response(reply.body, max_bytes=http.max_bytes,
                                previous_refresh=previous_refresh, dpop=dpop is not None)
