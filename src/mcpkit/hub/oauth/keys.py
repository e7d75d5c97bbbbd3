"""The hub's access tokens: RFC 9068 JWTs for its `/mcp` resource, signed with a key the hub
generates once and keeps in the database, sealed with the hub's secret key (crypto.py), so
every replica signs and verifies with the same one.

    AccessTokens(store, box, settings)   issue_with(key, user_id=, client_id=, scope=,
                                                    family_id=) -> jwt
                                         await user(token) -> UserRecord | None  (the gate)
                                         jwks() -> the public key set (/oauth/jwks)

Verification is local (no HTTP): the pure RFC 9068 checks of mcpkit.auth.access_token (typ,
signature, iss exactly, aud = the hub's /mcp URL, exp with a small leeway), then the user
must exist and be enabled (read at most every `USER_TTL_S` per user), and the login the
token belongs to - its refresh family, the `sid` claim - must not be revoked: read at most
every `settings.oauth_revocation_check_s` (10 s) per login, so a revocation (RFC 7009) or a
detected refresh-token reuse ends the login's live access tokens within that time at every
replica, not when they expire.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from joserfc import jwt
from joserfc.jwk import ECKey

from mcpkit.auth.access_token import (
    AccessTokenPolicy,
    access_token_info,
    unverified_header,
    verified_claims,
)
from mcpkit.auth.resource import InvalidToken
from mcpkit.hub.crypto import SecretBox, hash_token
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import NotFound, Store, UserRecord

ALGORITHM = "ES256"
USER_TTL_S = 10.0
"""How long a verified token's user is trusted to be enabled without reading the database
(as the API-token cache: a disabled user stops within this time)."""
MAX_CACHED_USERS = 10_000
MAX_CACHED_LOGINS = 10_000
"""Logins (refresh families) whose revocation state is remembered. Full: starts over."""
MAX_CACHED_TOKENS = 10_000
"""Verified access tokens remembered (by sha256, until their `exp`), so a client's calls
cost one signature check per token, not one per call. Full: the cache starts over."""


class AccessTokens:
    def __init__(self, store: Store, box: SecretBox, settings: HubSettings) -> None:
        self._store = store
        self._box = box
        self.issuer = settings.issuer
        self.resource = settings.mcp_url
        self._ttl_s = settings.oauth_access_token_ttl_s
        self._key: ECKey | None = None
        self._users: dict[int, tuple[float, UserRecord]] = {}
        self._revocation_check_s = settings.oauth_revocation_check_s
        self._logins: dict[str, tuple[float, bool]] = {}  # sid -> (read at, revoked)
        self._verified: dict[str, tuple[float, int, str]] = {}  # sha256 -> (exp, user, sid)
        self.policy = AccessTokenPolicy(issuer=self.issuer, audience=self.resource,
                                        algorithms=(ALGORITHM,), leeway_s=30.0)

    async def key(self) -> ECKey:
        if self._key is None:
            _kid, sealed = await self._store.oauth.signing_key(self._new_key)
            self._key = ECKey.import_key(json.loads(self._box.open_text(sealed)))
        return self._key

    def _new_key(self) -> tuple[str, str]:
        kid = secrets.token_urlsafe(12)
        key = ECKey.generate_key("P-256", parameters={"kid": kid, "alg": ALGORITHM,
                                                      "use": "sig"})
        return kid, self._box.seal(json.dumps(key.as_dict(private=True)))

    def issue_with(self, key: ECKey, *, user_id: int, client_id: str, scope: str,
                   family_id: str, now: float | None = None) -> str:
        """A signed access token (synchronous: Authlib's token generator calls it)."""
        issued = int(now if now is not None else time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer, "sub": str(user_id), "aud": self.resource,
            "client_id": client_id, "iat": issued, "exp": issued + int(self._ttl_s),
            "jti": secrets.token_urlsafe(16), "sid": family_id,
        }
        if scope:
            claims["scope"] = scope
        header = {"alg": ALGORITHM, "typ": "at+jwt", "kid": key.kid}
        return jwt.encode(header, claims, key)

    async def jwks(self) -> dict[str, Any]:
        key = await self.key()
        return {"keys": [key.as_dict(private=False)]}

    async def user(self, token: str) -> UserRecord | None:
        """The enabled user a valid access token of the hub names, else None."""
        digest = hash_token(token)
        known = self._verified.get(digest)
        if known is not None and time.time() < known[0]:
            return await self._live_user(known[1], known[2])
        try:
            header = unverified_header(token, self.policy)
            key = await self.key()
            if header.get("kid") != key.kid:
                raise InvalidToken("the access token was signed with an unknown key")
            info = access_token_info(header, verified_claims(token, key, header), self.policy,
                                     time.time())
            user_id = int(info.subject)
            family_id = info.claims.get("sid")
            if not isinstance(family_id, str) or not family_id:
                raise InvalidToken("the access token names no login (sid)")
        except (InvalidToken, ValueError):
            return None
        if info.expires_at is not None:
            if len(self._verified) >= MAX_CACHED_TOKENS:
                self._verified.clear()
            self._verified[digest] = (info.expires_at, user_id, family_id)
        return await self._live_user(user_id, family_id)

    async def _live_user(self, user_id: int, family_id: str) -> UserRecord | None:
        if await self._login_revoked(family_id):
            return None
        return await self._enabled_user(user_id)

    async def _login_revoked(self, family_id: str) -> bool:
        now = time.monotonic()
        cached = self._logins.get(family_id)
        if cached is not None and now - cached[0] < self._revocation_check_s:
            return cached[1]
        revoked = await self._store.oauth.family_revoked(family_id)
        if len(self._logins) >= MAX_CACHED_LOGINS:
            self._logins.clear()
        self._logins[family_id] = (now, revoked)
        return revoked

    async def _enabled_user(self, user_id: int) -> UserRecord | None:
        now = time.monotonic()
        cached = self._users.get(user_id)
        if cached is not None and now - cached[0] < USER_TTL_S:
            user = cached[1]
        else:
            try:
                user = await self._store.users.get(user_id)
            except NotFound:
                self._users.pop(user_id, None)
                return None
            if len(self._users) >= MAX_CACHED_USERS:
                self._users.clear()
            self._users[user_id] = (now, user)
        return None if user.disabled else user
