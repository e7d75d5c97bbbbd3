"""Sign-in with an external OpenID Connect provider: the hub as a confidential OIDC client
(authorization code flow, OpenID Connect Core 1.0 §3.1).

    oidc = OidcSignIn(settings, client_secret)
    pending = oidc.new_pending(resume="/oauth/authorize?...")    # state, nonce, PKCE verifier
    url = await oidc.authorization_url(pending)                  # to the provider
    login = await oidc.finish(callback_params, pending)          # OidcLogin(subject, claims,
                                                                 #   tokens), or OidcRefused

The provider's metadata comes from `<issuer>/.well-known/openid-configuration` (its `issuer`
must equal the configured one exactly), fetched once and kept; its signing keys through the
resource server's `JwksCache` (fetched, cached, rotated, bounded in bytes and keys). Authlib
builds the authorization URL (state, nonce, PKCE S256), the token request and the client
authentication (client_secret_basic, else client_secret_post, as the provider advertises);
joserfc verifies the ID token's signature and its claims (iss, aud, exp, iat, nonce, sub; azp
when there are several audiences). Every exchange has `oidc_timeout_s`, every document read
`oidc_max_document_bytes`, no redirect is followed, and only asymmetric ID-token signatures are
accepted (an HMAC keyed with the client secret is refused: the secret is not a signing key).

`OidcRefused` messages are for the sign-in page: they name the check that failed, never a
code, token, secret or claim value the provider sent.
"""

from __future__ import annotations

import hmac
import logging
import re
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec

from mcpkit.auth.access_token import DEFAULT_ACCESS_TOKEN_ALGORITHMS, DEFAULT_LEEWAY_S
from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.metadata import Strings, Url, decode_document
from mcpkit.auth.resource import InvalidToken, VerifierUnavailable
from mcpkit.errors import PeerError
from mcpkit.hub.db.models import NAME_LENGTH, OIDC_SUBJECT_LENGTH
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store.oidc import IdpTokens

log = logging.getLogger(__name__)

OIDC_WELL_KNOWN = "/.well-known/openid-configuration"
PENDING_TTL_S = 600.0
"""How long a sign-in may stay at the provider before its callback is refused."""
MAX_TOKEN_CHARS = 16 * 1024
"""The longest ID, access or refresh token taken from the provider."""
MAX_NAME_HINT_CHARS = 256
"""The longest preferred_username or email read as a hint for a new user's name."""
NAME_STEM_CHARS = 40
"""A derived user name is cut to this, leaving room for a suffix when it is taken."""
STATE_CHARS = 43
"""Length of the random state, nonce and PKCE verifier (256 bits in url-safe base64)."""
ID_TOKEN_ALGORITHMS = DEFAULT_ACCESS_TOKEN_ALGORITHMS
"""Asymmetric signatures only (never `none`, never HS256 keyed with the client secret)."""


class OidcRefused(PeerError):
    """A sign-in through the provider cannot complete; the message is safe for the page."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class ProviderMetadata(msgspec.Struct, frozen=True):
    """What the hub reads of the provider's OpenID Connect Discovery document."""

    issuer: Url
    authorization_endpoint: Url
    token_endpoint: Url
    jwks_uri: Url
    token_endpoint_auth_methods_supported: Strings | None = None
    code_challenge_methods_supported: Strings | None = None
    id_token_signing_alg_values_supported: Strings | None = None
    authorization_response_iss_parameter_supported: bool = False


BoundedToken = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TOKEN_CHARS)]


class _TokenResponse(msgspec.Struct):
    id_token: BoundedToken
    token_type: Annotated[str, msgspec.Meta(max_length=32)]
    access_token: BoundedToken | None = None
    refresh_token: BoundedToken | None = None
    expires_in: int | float | None = None
    scope: Annotated[str, msgspec.Meta(max_length=2048)] | None = None


@dataclass(frozen=True, slots=True, repr=False)
class PendingSignIn:
    """One sign-in at the provider, kept in the browser's sealed cookie (any replica opens
    it): what the callback must match, and the authorization request to resume."""

    state: str
    nonce: str
    verifier: str
    resume: str
    """The hub's /oauth/authorize path and query, where the browser goes back once in."""
    expires: float

    def __repr__(self) -> str:
        return "PendingSignIn(state='***', nonce='***', verifier='***')"

    def fields(self) -> dict[str, str]:
        return {"state": self.state, "nonce": self.nonce, "verifier": self.verifier,
                "resume": self.resume, "expires": repr(self.expires)}

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> PendingSignIn:
        return cls(fields["state"], fields["nonce"], fields["verifier"], fields["resume"],
                   float(fields["expires"]))


@dataclass(frozen=True, slots=True, repr=False)
class OidcLogin:
    issuer: str
    subject: str
    claims: dict[str, Any]
    tokens: IdpTokens

    def __repr__(self) -> str:
        return f"OidcLogin(issuer={self.issuer!r}, subject=…)"


class OidcSignIn:
    """The hub's client at one OpenID Connect provider."""

    def __init__(self, settings: HubSettings, client_secret: str, *,
                 callback_url: str) -> None:
        from mcpkit.client.oauth_http import OAuthHttp
        from mcpkit.server.authorization.fetch import AuthServerHttp

        assert settings.oidc_issuer is not None and settings.oidc_client_id is not None
        self.issuer = settings.oidc_issuer
        self.client_id = settings.oidc_client_id
        self._secret = client_secret
        self.callback_url = callback_url
        self.scopes = settings.oidc_scopes
        self.name = settings.oidc_provider_name or (
            urllib.parse.urlsplit(self.issuer).hostname or self.issuer)
        self._max_bytes = settings.oidc_max_document_bytes
        self._http = OAuthHttp(timeout_s=settings.oidc_timeout_s,
                               max_bytes=settings.oidc_max_document_bytes)
        self._key_http = AuthServerHttp(timeout_s=settings.oidc_timeout_s,
                                        max_bytes=settings.oidc_max_document_bytes)
        self._metadata: ProviderMetadata | None = None
        self._jwks: Any = None  # a JwksCache once the metadata named the jwks_uri

    def __repr__(self) -> str:
        return f"OidcSignIn(issuer={self.issuer!r}, client_id={self.client_id!r})"

    # --- the way out -----------------------------------------------------------------------

    def new_pending(self, resume: str) -> PendingSignIn:
        from authlib.common.security import generate_token

        return PendingSignIn(generate_token(STATE_CHARS), generate_token(STATE_CHARS),
                             generate_token(STATE_CHARS), resume, time.time() + PENDING_TTL_S)

    async def authorization_url(self, pending: PendingSignIn) -> str:
        from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
        from authlib.oauth2.rfc7636 import create_s256_code_challenge

        metadata = await self.metadata()
        return str(prepare_grant_uri(
            metadata.authorization_endpoint, self.client_id, "code",
            redirect_uri=self.callback_url, scope=self.scopes, state=pending.state,
            nonce=pending.nonce, code_challenge=create_s256_code_challenge(pending.verifier),
            code_challenge_method="S256"))

    # --- the way back ----------------------------------------------------------------------

    async def finish(self, params: Mapping[str, str], pending: PendingSignIn) -> OidcLogin:
        """The signed-in identity from the provider's redirect back: state (bound to this
        browser's cookie), iss (RFC 9207), the code exchanged, the ID token verified."""
        if pending.expires < time.time():
            raise OidcRefused("the sign-in at the provider took too long: start again")
        if not hmac.compare_digest(params.get("state", ""), pending.state):
            raise OidcRefused("the provider's answer does not belong to this browser's "
                              "sign-in (state mismatch): start again", 403)
        metadata = await self.metadata()
        iss = params.get("iss")
        if iss is None and metadata.authorization_response_iss_parameter_supported:
            raise OidcRefused("the provider's answer has no iss parameter though it "
                              "advertises one (RFC 9207)")
        if iss is not None and iss != self.issuer:
            raise OidcRefused("the provider's answer names another issuer (RFC 9207)")
        if "error" in params:
            error = re.sub(r"[^a-z_]", "", params["error"][:64])
            raise OidcRefused(f"the provider refused the sign-in ({error or 'error'})", 403)
        code = params.get("code")
        if not code or len(code) > MAX_TOKEN_CHARS:
            raise OidcRefused("the provider's answer has no usable code")
        response = await self._exchange(metadata, code, pending)
        claims = await self._id_token_claims(response.id_token, pending.nonce)
        expires_at = None if response.expires_in is None else \
            time.time() + float(response.expires_in)
        tokens = IdpTokens(response.id_token, response.access_token, response.refresh_token,
                           expires_at, response.scope)
        return OidcLogin(self.issuer, str(claims["sub"]), claims, tokens)

    async def _exchange(self, metadata: ProviderMetadata, code: str,
                        pending: PendingSignIn) -> _TokenResponse:
        from authlib.oauth2.auth import ClientAuth
        from authlib.oauth2.rfc6749.parameters import prepare_token_request

        body = prepare_token_request("authorization_code", code=code,
                                     redirect_uri=self.callback_url,
                                     code_verifier=pending.verifier)
        auth = ClientAuth(self.client_id, self._secret, self._auth_method(metadata))
        _, headers, body = auth.prepare("POST", metadata.token_endpoint, {}, body)
        try:
            reply = await self._http.post_form(metadata.token_endpoint, body, headers)
        except AuthorizationError as error:
            raise OidcRefused(f"the provider's token endpoint: {error}", 502) from None
        if not reply.ok:
            code_name = reply.oauth_error()
            raise OidcRefused(f"the provider refused the code (HTTP {reply.status}"
                              f"{', ' + code_name if code_name else ''})", 502)
        response = decode_document(reply.body, _TokenResponse, "the provider's token response",
                                   self._max_bytes, error=OidcRefused)
        if response.token_type.lower() not in ("bearer", "dpop"):
            raise OidcRefused("the provider's token response has an unknown token_type", 502)
        return response

    def _auth_method(self, metadata: ProviderMetadata) -> str:
        offered = metadata.token_endpoint_auth_methods_supported or ["client_secret_basic"]
        for method in ("client_secret_basic", "client_secret_post"):
            if method in offered:
                return method
        raise OidcRefused("the provider offers neither client_secret_basic nor "
                          "client_secret_post at its token endpoint", 502)

    async def _id_token_claims(self, id_token: str, nonce: str) -> dict[str, Any]:
        header = _header(id_token)
        keys = await self._keys_for(header)
        claims = _verified(id_token, keys, str(header["alg"]))
        _check_claims(claims, self.issuer, self.client_id, nonce)
        return claims

    async def _keys_for(self, header: Mapping[str, Any]) -> list[Any]:
        metadata = await self.metadata()
        if self._jwks is None:
            from mcpkit.server.authorization.jwks import JwksCache

            self._jwks = JwksCache(metadata.jwks_uri, http=self._key_http,
                                   max_bytes=self._max_bytes)
        kid = header.get("kid")
        try:
            keys: list[Any] = await self._jwks.keys_for(
                kid if isinstance(kid, str) else None, str(header["alg"]))
        except InvalidToken:
            raise OidcRefused("the provider's ID token is signed by a key it does not "
                              "publish", 502) from None
        except VerifierUnavailable as error:
            raise OidcRefused(f"the provider's keys: {error.description}", 502) from None
        return keys

    # --- discovery -------------------------------------------------------------------------

    async def metadata(self) -> ProviderMetadata:
        """The provider's discovery document (fetched once; a failure is retried at the next
        sign-in, each attempt bounded by the timeout)."""
        if self._metadata is None:
            self._metadata = await self._discover()
        return self._metadata

    async def _discover(self) -> ProviderMetadata:
        url = self.issuer.rstrip("/") + OIDC_WELL_KNOWN
        try:
            reply = await self._http.get(url)
        except AuthorizationError as error:
            raise OidcRefused(f"the provider's metadata: {error}", 502) from None
        if reply.status != 200:
            raise OidcRefused(f"the provider's metadata at {url} answered HTTP {reply.status}",
                              502)
        metadata = decode_document(reply.body, ProviderMetadata, "the provider's metadata",
                                   self._max_bytes, error=OidcRefused)
        if metadata.issuer != self.issuer:
            raise OidcRefused("the provider's metadata names another issuer than the one "
                              "configured (--oidc-issuer)", 502)
        if "S256" not in (metadata.code_challenge_methods_supported or ["S256"]):
            raise OidcRefused("the provider does not support PKCE S256", 502)
        return metadata


# --- the ID token (OpenID Connect Core §3.1.3.7) ------------------------------------------


def _header(id_token: str) -> dict[str, Any]:
    from mcpkit.auth.compact_jws import untrusted_header

    try:
        header = untrusted_header(id_token, max_chars=MAX_TOKEN_CHARS, what="the ID token")
    except InvalidToken as error:
        raise OidcRefused(f"the provider's ID token: {error.description}", 502) from None
    if header.get("alg") not in ID_TOKEN_ALGORITHMS:
        raise OidcRefused("the provider's ID token is not signed with an accepted "
                          "asymmetric algorithm", 502)
    return header


def _verified(id_token: str, keys: list[Any], alg: str) -> dict[str, Any]:
    from joserfc import jwt

    from mcpkit.auth.compact_jws import DECODE_ERRORS

    for key in keys:
        try:
            claims = jwt.decode(id_token, key, algorithms=[alg]).claims
        except DECODE_ERRORS:
            continue
        if isinstance(claims, dict):
            return claims
    raise OidcRefused("the provider's ID token's signature does not verify", 502)


def _check_claims(claims: dict[str, Any], issuer: str, client_id: str, nonce: str) -> None:
    from joserfc.errors import JoseError
    from joserfc.jwt import JWTClaimsRegistry

    registry = JWTClaimsRegistry(
        leeway=int(DEFAULT_LEEWAY_S), iss={"essential": True, "value": issuer},
        aud={"essential": True, "value": client_id}, sub={"essential": True},
        exp={"essential": True}, iat={"essential": True},
        nonce={"essential": True, "value": nonce})
    try:
        registry.validate(claims)
    except JoseError as error:
        claim = getattr(error, "claim", None)
        what = f"its {claim} claim" if isinstance(claim, str) and claim.isidentifier() else \
            "a claim"
        raise OidcRefused(f"the provider's ID token is not valid for this sign-in ({what}: "
                          f"{error.error})", 403) from None
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    azp = claims.get("azp")
    if (len(audiences) > 1 or azp is not None) and azp != client_id:
        raise OidcRefused("the provider's ID token was issued to another client (azp)", 403)
    subject = claims["sub"]
    if not isinstance(subject, str) or not 0 < len(subject) <= OIDC_SUBJECT_LENGTH:
        raise OidcRefused("the provider's ID token has no usable sub claim", 502)


# --- a new user's name ---------------------------------------------------------------------


def user_name_hints(claims: Mapping[str, Any], subject: str) -> list[str]:
    """Candidate hub user names for a first sign-in: preferred_username, else the e-mail's
    local part, else the subject, each made a valid hub name (`^[a-z0-9][a-z0-9_-]*$`,
    lowercase, cut to NAME_STEM_CHARS). Hints only: the identity is (issuer, subject), and a
    taken name gets a suffix (store.oidc), never the existing user."""
    hints: list[str] = []
    preferred = claims.get("preferred_username")
    email = claims.get("email")
    sources = [preferred if isinstance(preferred, str) else None,
               email.split("@", 1)[0] if isinstance(email, str) and "@" in email else None,
               subject]
    for source in sources:
        if not source or len(source) > MAX_NAME_HINT_CHARS:
            continue
        name = _slug(source)
        if name and name not in hints:
            hints.append(name)
    return hints or ["user"]


def _slug(text: str) -> str:
    lowered = re.sub(r"[^a-z0-9_-]+", "-", text.lower())
    trimmed = lowered.lstrip("-_")[:min(NAME_STEM_CHARS, NAME_LENGTH)].rstrip("-_")
    return trimmed
