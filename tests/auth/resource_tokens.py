"""Test helpers: an authorization server's signing keys and the JWT access tokens it mints
(joserfc signs; the tests then check mcpkit's verifiers accept or refuse them)."""

from __future__ import annotations

import time
from typing import Any

from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

ISSUER = "https://as.example"
RESOURCE = "https://mcp.example/mcp"


class Signer:
    """One signing key of an AS, with its `kid`."""

    def __init__(self, kid: str, kind: str = "EC") -> None:
        self.kid = kid
        self.key: ECKey | RSAKey = (ECKey.generate_key("P-256", private=True) if kind == "EC"
                                    else RSAKey.generate_key(2048, private=True))
        self.alg = "ES256" if kind == "EC" else "RS256"

    def public_jwk(self) -> dict[str, Any]:
        return {**self.key.as_dict(private=False), "kid": self.kid, "use": "sig",
                "alg": self.alg}

    def mint(self, claims: dict[str, Any] | None = None, *, header: dict[str, Any] | None = None,
             drop: tuple[str, ...] = ()) -> str:
        now = int(time.time())
        payload: dict[str, Any] = {"iss": ISSUER, "aud": RESOURCE, "sub": "alice",
                                   "client_id": "app", "iat": now, "exp": now + 300,
                                   "jti": f"t{now}", "scope": "mcp:read mcp:write"}
        payload.update(claims or {})
        for name in drop:
            payload.pop(name, None)
        head = {"alg": self.alg, "typ": "at+jwt", "kid": self.kid, **(header or {})}
        head = {k: v for k, v in head.items() if v is not None}
        return jwt.encode(head, payload, self.key, algorithms=[self.alg])


def jwks(*signers: Signer) -> dict[str, Any]:
    return {"keys": [signer.public_jwk() for signer in signers]}
