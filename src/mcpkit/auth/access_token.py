"""RFC 9068 JWT access tokens at a resource server: the header read before the key is known,
the signature (joserfc), and the claims a resource must check before it trusts the token.

    AccessTokenPolicy   whose tokens are accepted: issuer, audience(s), clock leeway, algorithms
    unverified_header   the JOSE header (for its `kid` and `alg`), bounded, not yet trusted
    verified_claims     the header and payload once the signature holds under one key
    access_token_info   the claim checks (RFC 9068 §4) → AuthInfo, or InvalidToken

No IO. Every refusal is an `InvalidToken` whose description names the check that failed and
never quotes the token or a claim the caller chose (a claim's value may be attacker text)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from joserfc import jwt
from joserfc.jwk import ECKey, OKPKey, RSAKey

from mcpkit.auth.compact_jws import DECODE_ERRORS, untrusted_header
from mcpkit.auth.dpop import DEFAULT_MAX_ACCESS_TOKEN_CHARS
from mcpkit.auth.resource import AuthInfo, InvalidToken

__all__ = [
    "ACCESS_TOKEN_TYPES",
    "DEFAULT_ACCESS_TOKEN_ALGORITHMS",
    "DEFAULT_LEEWAY_S",
    "AccessTokenPolicy",
    "access_token_info",
    "unverified_header",
    "verified_claims",
]

DEFAULT_LEEWAY_S = 60.0
"""Clock skew allowed on `exp`, `nbf` and `iat` (a token 59 s past `exp` still passes)."""

DEFAULT_ACCESS_TOKEN_ALGORITHMS = ("ES256", "ES384", "ES512", "RS256", "RS384", "RS512",
                                   "PS256", "PS384", "PS512", "EdDSA")
"""Asymmetric signatures only: a resource server never shares a MAC key with its AS, and
`none` is never accepted (RFC 9068 §4, RFC 8725 §3.1)."""

ACCESS_TOKEN_TYPES = ("at+jwt", "application/at+jwt")
"""RFC 9068 §2.1 `typ` values (a media type: compared case-insensitively)."""

PublicKey = ECKey | RSAKey | OKPKey


@dataclass(frozen=True, slots=True)
class AccessTokenPolicy:
    """Which JWT access tokens this resource accepts."""

    issuer: str
    """The authorization server's issuer identifier; `iss` must equal it exactly."""
    audience: str | Collection[str]
    """This resource's identifier(s) (its URL, RFC 8707); `aud` must name one of them."""
    leeway_s: float = DEFAULT_LEEWAY_S
    algorithms: Collection[str] = DEFAULT_ACCESS_TOKEN_ALGORITHMS
    allow_plain_jwt: bool = False
    """Also accept `typ: JWT` or no `typ` (for providers that do not type their access
    tokens; RFC 9068 requires at+jwt, which keeps an ID token from passing as one)."""
    max_token_chars: int = DEFAULT_MAX_ACCESS_TOKEN_CHARS

    def audiences(self) -> frozenset[str]:
        return frozenset([self.audience] if isinstance(self.audience, str) else self.audience)


def unverified_header(token: str, policy: AccessTokenPolicy) -> dict[str, Any]:
    """The token's JOSE header, to choose the key by `kid`: bounded in size, a compact JWS
    (three parts), an allowed `alg`, an access-token `typ`. Not yet trusted."""
    header = untrusted_header(token, max_chars=policy.max_token_chars, what="the access token")
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in policy.algorithms:
        raise InvalidToken("the access token's signing algorithm is not accepted")
    _check_type(header.get("typ"), policy)
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise InvalidToken("the access token's kid is not a string")
    return header


def _check_type(typ: object, policy: AccessTokenPolicy) -> None:
    if isinstance(typ, str) and typ.lower() in ACCESS_TOKEN_TYPES:
        return
    if policy.allow_plain_jwt and (typ is None or (isinstance(typ, str)
                                                   and typ.lower() in ("jwt", "application/jwt"))):
        return
    raise InvalidToken("the token is not a JWT access token (typ must be at+jwt, RFC 9068)")


def verified_claims(token: str, key: PublicKey, header: Mapping[str, Any]
                    ) -> dict[str, Any]:
    """The payload, once the signature holds under `key` with the header's algorithm (which
    `unverified_header` already held to the policy)."""
    try:
        decoded = jwt.decode(token, key, algorithms=[str(header["alg"])])
    except DECODE_ERRORS:
        raise InvalidToken("the access token's signature does not verify") from None
    claims = decoded.claims
    if not isinstance(claims, dict):
        raise InvalidToken("the access token's payload is not a JSON object")
    return claims


def access_token_info(header: Mapping[str, Any], claims: Mapping[str, Any],
                      policy: AccessTokenPolicy, now: float) -> AuthInfo:
    """RFC 9068 §4 on a signature-verified token: `typ`, `iss` exactly, `aud` naming this
    resource (RFC 8707: a token for another resource is refused, so it cannot be passed
    through), `exp` / `nbf` / `iat` within the leeway, then who the caller is."""
    _check_type(header.get("typ"), policy)
    if claims.get("iss") != policy.issuer:
        raise InvalidToken("the access token was issued by another authorization server")
    check_audience(claims.get("aud"), policy.audiences())
    expires_at = check_times(claims, policy.leeway_s, now, exp_required=True)
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise InvalidToken("the access token has no sub claim")
    return AuthInfo(subject=subject, client_id=client_id_of(claims),
                    scopes=scopes_of(claims), claims=dict(claims), expires_at=expires_at,
                    jkt=jkt_of(claims))


def check_audience(aud: object, audiences: frozenset[str]) -> None:
    """`aud` (a string or a list of strings) must name one of this resource's identifiers."""
    named = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else None
    if named is None or not all(isinstance(one, str) for one in named):
        raise InvalidToken("the access token has no audience (aud) naming this resource")
    if audiences.isdisjoint(named):
        raise InvalidToken("the access token is for another resource (aud does not name "
                           "this one)")


def check_times(claims: Mapping[str, Any], leeway_s: float, now: float, *,
                exp_required: bool) -> float | None:
    """`exp` (required for JWTs), `nbf` and `iat` as NumericDates, within `leeway_s` of
    `now`; the expiry, if any."""
    exp = _numeric_date(claims, "exp")
    if exp is None and exp_required:
        raise InvalidToken("the access token has no expiry (exp)")
    if exp is not None and now > exp + leeway_s:
        raise InvalidToken("the access token has expired")
    nbf = _numeric_date(claims, "nbf")
    if nbf is not None and now < nbf - leeway_s:
        raise InvalidToken("the access token is not valid yet (nbf)")
    iat = _numeric_date(claims, "iat")
    if iat is not None and now < iat - leeway_s:
        raise InvalidToken("the access token was issued in the future (iat)")
    return exp


def _numeric_date(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            value):
        raise InvalidToken(f"the access token's {name} is not a number of seconds")
    return float(value)


def scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """`scope` (space-separated, RFC 9068 §2.2.3 / RFC 8693 §4.2), else `scp` (a list, as
    some providers send)."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return frozenset(scope.split())
    if scope is not None:
        raise InvalidToken("the access token's scope is not a string")
    scp = claims.get("scp")
    if scp is None:
        return frozenset()
    if isinstance(scp, str):
        return frozenset(scp.split())
    if isinstance(scp, list) and all(isinstance(one, str) for one in scp):
        return frozenset(scp)
    raise InvalidToken("the access token's scp is not a list of strings")


def client_id_of(claims: Mapping[str, Any]) -> str | None:
    """`client_id` (RFC 9068 §2.2), else `azp` (OpenID Connect's authorized party)."""
    for name in ("client_id", "azp"):
        value = claims.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def jkt_of(claims: Mapping[str, Any]) -> str | None:
    """The DPoP binding: `cnf.jkt` (RFC 9449 §6), or None for an unbound token."""
    cnf = claims.get("cnf")
    if cnf is None:
        return None
    if not isinstance(cnf, dict):
        raise InvalidToken("the access token's cnf claim is not an object")
    jkt = cnf.get("jkt")
    if jkt is None:
        if cnf:  # bound some other way (mTLS `x5t#S256`, RFC 8705): cannot be honoured here
            raise InvalidToken("the access token is bound by a confirmation method this "
                               "resource does not support")
        return None
    if not isinstance(jkt, str) or not jkt:
        raise InvalidToken("the access token's cnf.jkt is not a thumbprint string")
    return jkt
