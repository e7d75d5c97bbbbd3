"""How the protected test server checks an access token: an RFC 9068 JWT of one issuer for
one resource (signature by the issuer's JWKS, `typ` at+jwt, `iss`, `aud`, `exp`), presented

    as a bearer token (RFC 6750)   `Authorization: Bearer …`, and the token has no `cnf`
    DPoP-bound (RFC 9449 §7)       `Authorization: DPoP …` and a `DPoP` proof signed by the key
                                   the token's `cnf.jkt` names, for this method and URL, fresh,
                                   with `ath` = the token's hash, its `jti` never seen before

Signatures, key import and the RFC 7638 thumbprint come from joserfc."""

from __future__ import annotations

import base64
import hashlib
import json
import time
import urllib.request
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, KeySet

DPOP_MAX_AGE_S = 60
"""A proof's `iat` may be this far from now, either way."""
MAX_REMEMBERED_JTIS = 10_000
"""Proof ids kept to refuse a replay (the oldest are forgotten first)."""
ACCESS_TOKEN_TYPES = ("at+jwt", "application/at+jwt")


@dataclass(frozen=True)
class Presented:
    """What one request presents: its method, its URL (no query), and two headers."""

    method: str
    url: str
    authorization: str
    dpop: str | None = None


def fetch_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as reply:
        doc: dict[str, Any] = json.loads(reply.read())
        return doc


def token_hash(token: str) -> str:
    """`ath`: base64url (no padding) of the token's SHA-256."""
    digest = hashlib.sha256(token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class TokenCheck:
    """Accepts the issuer's JWT access tokens for `resource`; `scopes()` says which."""

    def __init__(self, issuer: str, resource: str) -> None:
        metadata = fetch_json(f"{issuer}/.well-known/oauth-authorization-server")
        self.keys = KeySet.import_key_set(fetch_json(metadata["jwks_uri"]))
        self.claims = jwt.JWTClaimsRegistry(
            iss={"essential": True, "value": issuer},
            aud={"essential": True, "value": resource},
            exp={"essential": True})
        self._seen_jtis: OrderedDict[str, None] = OrderedDict()

    def scopes(self, presented: Presented) -> set[str] | None:
        """The token's scopes, or None when it is missing, forged, expired, not ours, or
        presented the wrong way (a DPoP-bound token as a bearer token, a bad proof)."""
        scheme, _, token = presented.authorization.partition(" ")
        claims = self._access_claims(token) if token else None
        if claims is None:
            return None
        cnf = claims.get("cnf")
        if scheme.lower() == "bearer" and cnf is None:
            pass
        elif (scheme.lower() == "dpop" and isinstance(cnf, dict)
              and self._proof_holds(presented, token, str(cnf.get("jkt")))):
            pass
        else:
            return None
        return set(str(claims.get("scope", "")).split())

    def _access_claims(self, token: str) -> dict[str, Any] | None:
        try:
            decoded = jwt.decode(token, self.keys, algorithms=["ES256", "RS256"])
            self.claims.validate(decoded.claims)
        except (JoseError, ValueError):
            return None
        if str(decoded.header.get("typ", "")).lower() not in ACCESS_TOKEN_TYPES:
            return None
        return decoded.claims

    def _proof_holds(self, presented: Presented, token: str, jkt: str) -> bool:
        if not presented.dpop:
            return False
        try:
            header = jws.extract_compact(presented.dpop.encode("ascii")).protected
            if header.get("typ") != "dpop+jwt" or "d" in header.get("jwk", {}):
                return False
            key = ECKey.import_key(header["jwk"])
            if key.thumbprint() != jkt:
                return False
            claims = jwt.decode(presented.dpop, key, algorithms=["ES256"]).claims
        except (JoseError, ValueError, KeyError, TypeError, UnicodeError):
            return False
        fresh = abs(time.time() - float(claims.get("iat", 0))) <= DPOP_MAX_AGE_S
        return (claims.get("htm") == presented.method and claims.get("htu") == presented.url
                and fresh and claims.get("ath") == token_hash(token)
                and self._first_use(str(claims.get("jti", ""))))

    def _first_use(self, jti: str) -> bool:
        if not jti or jti in self._seen_jtis:
            return False
        self._seen_jtis[jti] = None
        if len(self._seen_jtis) > MAX_REMEMBERED_JTIS:
            self._seen_jtis.popitem(last=False)
        return True
