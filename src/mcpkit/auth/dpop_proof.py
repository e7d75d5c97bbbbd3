"""DPoP proofs at a resource server (RFC 9449 §4.3, §7): is this proof, sent with this access
token on this request, made by the key the token is bound to, for this method and URL, now?

    DPoPPolicy          algorithms, the `iat` window, size bounds (named defaults, settable)
    VerifiedProof       what a good proof leaves for the stateful checks: `jti`, `iat`,
                        `nonce`, the key's thumbprint
    check_presentation  the scheme against the token: a DPoP-bound token as `Bearer` is refused
                        (§7.2, no downgrade); `DPoP` needs a bound token and a proof (§7.1)
    check_proof         the proof itself (§4.3 steps 1-11 but the replay and nonce state)
    check_token_request_proof   the same for a token request (§5): no access token to match
    check_nonce         the proof's nonce against the ones the server accepts (§9)

A token presented wrongly is an InvalidToken (error="invalid_token"); a bad proof an
InvalidDPoPProof (error="invalid_dpop_proof", RFC 9449 §7.1). No IO and no state: the `jti`
replay cache and the server's nonces are kept by the server
(`mcpkit.server.authorization`). Signatures, key import and RFC 7638 thumbprints: joserfc."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from joserfc import jws
from joserfc.jwk import JWKRegistry

from mcpkit.auth.compact_jws import DECODE_ERRORS, untrusted_compact
from mcpkit.auth.dpop import access_token_hash, normalize_htu
from mcpkit.auth.resource import (
    AuthInfo,
    DPoPNonceRequired,
    InvalidDPoPProof,
    InvalidToken,
    TokenRequest,
)
from mcpkit.errors import InvalidArgument

__all__ = [
    "DEFAULT_DPOP_ALGORITHMS",
    "DEFAULT_MAX_JTI_CHARS",
    "DEFAULT_MAX_PROOF_CHARS",
    "DEFAULT_PROOF_LEEWAY_S",
    "DEFAULT_PROOF_MAX_AGE_S",
    "DPoPPolicy",
    "VerifiedProof",
    "check_nonce",
    "check_presentation",
    "check_proof",
    "check_token_request_proof",
]

DEFAULT_DPOP_ALGORITHMS = ("ES256", "ES384", "ES512", "PS256", "PS384", "PS512",
                           "RS256", "RS384", "RS512", "EdDSA")
"""Asymmetric algorithms a proof may use (§4.3: never `none`, never a MAC)."""

DEFAULT_PROOF_MAX_AGE_S = 60.0
"""A proof's `iat` may be this old; the replay cache keeps a `jti` this long (plus leeway)."""

DEFAULT_PROOF_LEEWAY_S = 5.0
"""Clock skew: a proof's `iat` may be this far in the future, or this much past the max age."""

DEFAULT_MAX_PROOF_CHARS = 8192
"""The longest `DPoP` header read (an RSA-4096 proof is about 1.5 KB)."""

DEFAULT_MAX_JTI_CHARS = 256
"""The longest `jti` taken (RFC 9449 suggests 96 random bits; this bounds the replay cache)."""

_PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
# The key types a public signing JWK may have (`oct` is a shared secret: never).
_KEY_TYPES = frozenset({"EC", "RSA", "OKP"})


@dataclass(frozen=True, slots=True)
class DPoPPolicy:
    algorithms: Collection[str] = DEFAULT_DPOP_ALGORITHMS
    max_age_s: float = DEFAULT_PROOF_MAX_AGE_S
    leeway_s: float = DEFAULT_PROOF_LEEWAY_S
    max_proof_chars: int = DEFAULT_MAX_PROOF_CHARS
    max_jti_chars: int = DEFAULT_MAX_JTI_CHARS

    @property
    def replay_window_s(self) -> float:
        """How long a `jti` must be remembered: as long as its proof could still pass."""
        return self.max_age_s + 2 * self.leeway_s


@dataclass(frozen=True, slots=True)
class VerifiedProof:
    jti: str
    iat: float
    nonce: str | None
    jkt: str
    """The RFC 7638 thumbprint of the key that signed the proof."""


def check_presentation(request: TokenRequest, info: AuthInfo) -> bool:
    """Whether the request must carry a valid proof (True for `DPoP`). A DPoP-bound token sent
    as `Bearer` is refused (RFC 9449 §7.2: no downgrade to a bearer token), and `DPoP` with an
    unbound token or without a proof is refused (§7.1). A `DPoP` header beside an unbound
    `Bearer` token is ignored: the token is a bearer token, which RFC 6750 governs."""
    if request.scheme == "Bearer":
        if info.jkt is not None:
            raise InvalidToken("a DPoP-bound access token must be sent with the DPoP scheme "
                               "and a proof, not as a Bearer token")
        return False
    if info.jkt is None:
        raise InvalidToken("the access token is not DPoP-bound; send it as a Bearer token")
    if not request.dpop_proof:
        raise InvalidDPoPProof("a DPoP-bound access token needs a DPoP proof header")
    return True


def check_proof(proof: str, request: TokenRequest, *, policy: DPoPPolicy, now: float,
                expected_jkt: str) -> VerifiedProof:
    """RFC 9449 §4.3 for a resource request: one well-formed JWT, `typ: dpop+jwt`, an allowed
    asymmetric `alg`, a public `jwk` whose signature holds, `htm` = the method, `htu` = the
    request URL (both normalized, no query or fragment), `iat` within the window, a `jti`,
    `ath` = the token's hash, and the key's thumbprint = the token's `cnf.jkt`."""
    claims, verified = _signed_claims(proof, request.method, request.url, policy, now)
    if claims.get("ath") != _token_hash(request.token):
        raise InvalidDPoPProof("the DPoP proof is for another access token (ath)")
    if verified.jkt != expected_jkt:
        raise InvalidDPoPProof("the DPoP proof is signed by a key the access token is not "
                               "bound to (cnf.jkt)")
    return verified


def check_token_request_proof(proof: str, method: str, url: str, *, policy: DPoPPolicy,
                              now: float) -> VerifiedProof:
    """RFC 9449 §4.3 for a token request (§5): the checks of `check_proof` but those that
    need an access token (`ath`, `cnf.jkt`); the proof's key is what the issued tokens are
    then bound to (`VerifiedProof.jkt`)."""
    return _signed_claims(proof, method, url, policy, now)[1]


def _signed_claims(proof: str, method: str, url: str, policy: DPoPPolicy, now: float
                   ) -> tuple[dict[str, Any], VerifiedProof]:
    """The proof's claims once its header, signature, `htm`, `htu`, `iat`, `jti` and `nonce`
    hold, and what the stateful checks need of it. The proof is parsed once: the object
    whose header was checked is the one whose signature is verified."""
    signed = untrusted_compact(proof, max_chars=policy.max_proof_chars, what="the DPoP proof",
                               refusal=InvalidDPoPProof)
    header = _checked_header(signed.protected, policy)
    try:
        key, thumbprint = _public_key(json.dumps(header["jwk"], sort_keys=True))
        verified = jws.validate_compact(signed, key, registry=_registry(header["alg"]))
    except DECODE_ERRORS:
        verified = False
    if not verified:
        raise InvalidDPoPProof("the DPoP proof's signature does not verify with its jwk")
    try:
        claims = json.loads(signed.payload)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        claims = None
    if not isinstance(claims, dict):
        raise InvalidDPoPProof("the DPoP proof's payload is not a JSON object")
    if claims.get("htm") != method:
        raise InvalidDPoPProof("the DPoP proof is for another HTTP method (htm)")
    _check_htu(claims.get("htu"), url)
    iat = _check_iat(claims.get("iat"), policy, now)
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti or len(jti) > policy.max_jti_chars:
        raise InvalidDPoPProof(f"the DPoP proof needs a jti of 1 to {policy.max_jti_chars} "
                               "characters")
    nonce = claims.get("nonce")
    if nonce is not None and not isinstance(nonce, str):
        raise InvalidDPoPProof("the DPoP proof's nonce is not a string")
    return claims, VerifiedProof(jti=jti, iat=iat, nonce=nonce, jkt=thumbprint)


DPOP_KEY_CACHE_ENTRIES = 256
"""Imported proof keys kept (a client sends the same key with every proof; importing it and
computing its thumbprint is half the cost of a check). Each entry is at most one proof's jwk,
so the cache stays under DPOP_KEY_CACHE_ENTRIES x DEFAULT_MAX_PROOF_CHARS."""


@functools.lru_cache(maxsize=DPOP_KEY_CACHE_ENTRIES)
def _public_key(jwk_json: str) -> tuple[Any, str]:
    """The key a proof's `jwk` (as canonical JSON) describes, and its RFC 7638 thumbprint."""
    key = JWKRegistry.import_key(json.loads(jwk_json))
    return key, key.thumbprint()


@functools.lru_cache(maxsize=len(DEFAULT_DPOP_ALGORITHMS))
def _registry(algorithm: str) -> jws.JWSRegistry:
    """joserfc's registry admitting `algorithm` alone (the header's, which the policy accepts:
    `_checked_header`), built once per algorithm rather than on every proof. It holds no
    per-proof state; the cache has one entry per algorithm a policy can list."""
    return jws.JWSRegistry(algorithms=[algorithm])


def _token_hash(token: str) -> str:
    try:
        return access_token_hash(token)
    except InvalidArgument:
        raise InvalidToken("the access token is not visible ASCII of a bounded size") from None


def _checked_header(header: dict[str, Any], policy: DPoPPolicy) -> dict[str, Any]:
    if header.get("typ") != "dpop+jwt":
        raise InvalidDPoPProof("the DPoP proof's typ is not dpop+jwt")
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in policy.algorithms:
        raise InvalidDPoPProof("the DPoP proof's algorithm is not accepted")
    jwk = header.get("jwk")
    if not isinstance(jwk, dict) or jwk.get("kty") not in _KEY_TYPES:
        raise InvalidDPoPProof("the DPoP proof's header has no public jwk")
    if _PRIVATE_MEMBERS & jwk.keys():
        raise InvalidDPoPProof("the DPoP proof's jwk holds private key material")
    return header


def _check_htu(htu: object, url: str) -> None:
    if not isinstance(htu, str):
        raise InvalidDPoPProof("the DPoP proof has no htu")
    try:
        same = normalize_htu(htu) == normalize_htu(url)
    except InvalidArgument:
        same = False
    if not same:
        raise InvalidDPoPProof("the DPoP proof is for another URL (htu)")


def _check_iat(iat: object, policy: DPoPPolicy, now: float) -> float:
    if isinstance(iat, bool) or not isinstance(iat, (int, float)) or not math.isfinite(iat):
        raise InvalidDPoPProof("the DPoP proof has no iat")
    if iat > now + policy.leeway_s:
        raise InvalidDPoPProof("the DPoP proof was issued in the future (iat)")
    if iat < now - policy.max_age_s - policy.leeway_s:
        raise InvalidDPoPProof("the DPoP proof is too old (iat)")
    return float(iat)


def check_nonce(proof: VerifiedProof, accepted: Collection[str], current: str) -> None:
    """When the server requires nonces: the proof must carry one it accepts (the current or
    the previous); otherwise DPoPNonceRequired with the current one (RFC 9449 §9)."""
    if proof.nonce is None or proof.nonce not in accepted:
        raise DPoPNonceRequired(current)
