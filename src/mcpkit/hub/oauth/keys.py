"""The hub's access tokens: RFC 9068 JWTs for its `/mcp` resource, signed with a key the hub
generates and keeps in the database, sealed with the hub's secret key (crypto.py), so every
replica signs and verifies with the same keys.

Rotation: a new key is added as the next generation; the newest key signs, every stored key
verifies (the JWKS lists them all). It happens by age - a replica re-reading the keys finds
the newest older than `settings.oauth_key_max_age_s` (30 days) and adds the next one - or
by hand (`mcpkit hub oauth rotate-key`, `rotate_signing_key`). Generations are unique in the
database, so replicas rotating at the same moment leave one new key: the others' inserts
fail and they take the winner's. A replica re-reads the keys every
`settings.oauth_signing_key_check_s` (60 s; and at once, at most every
`KEY_MISS_INTERVAL_S`, for a token with a kid it does not know), so a rotation reaches
every replica within that time. A key superseded for longer than `retire_after` (that
re-read + the access-token lifetime + the leeway: no token it signed can still be valid) is
deleted - at the next rotation or re-read - and tokens signed with it are refused.

    AccessTokens(store, box, settings)   issue_with(key, user_id=, client_id=, scope=,
                                                    family_id=, jkt=) -> jwt
                                         await bound_user(token) -> (UserRecord, jkt) | None
                                         await user(token) -> UserRecord | None  (the gate)
                                         jwks() -> the public key set (/oauth/jwks)

Two resources (RFC 8707), kept apart: the hub's /mcp (MCP clients) and its REST API /api/v1
(the web console). A token's `aud` is the one resource its login was granted for, and a
check names the resource it guards (`resource=`): a token is accepted only by the resource it
was minted for.

Verification is local (no HTTP): the pure RFC 9068 checks of mcpkit.auth.access_token (typ,
signature, iss exactly, aud = the resource checked for, exp with a small leeway), then the user
must exist and be enabled (read at most every `USER_TTL_S` per user), and the login the
token belongs to - its refresh family, the `sid` claim - must not be revoked: read at most
every `settings.oauth_revocation_check_s` (10 s) per login, so a revocation (RFC 7009) or a
detected refresh-token reuse ends the login's live access tokens within that time at every
replica, not when they expire.

A token issued on a DPoP proof carries `cnf.jkt` (RFC 9449 §6): `bound_user` hands the
thumbprint to the gate, which then requires the DPoP scheme and a proof by that key.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from joserfc import jwt
from joserfc.jwk import ECKey

from mcpkit.auth.access_token import (
    AccessTokenPolicy,
    access_token_info,
    unverified_header,
    verified_claims,
)
from mcpkit.auth.resource import AuthInfo, InvalidToken
from mcpkit.errors import InvalidArgument
from mcpkit.hub.crypto import SecretBox, hash_token
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import NotFound, Store, UserRecord
from mcpkit.hub.store.oauth import SigningKeyRecord

log = logging.getLogger(__name__)

ALGORITHM = "ES256"
LEEWAY_S = 30.0
"""Clock skew allowed on `exp` (and on retiring a key)."""
KEY_MISS_INTERVAL_S = 1.0
"""At most this often a token with an unknown kid makes a replica re-read the keys."""
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
    """`clock` is the wall time in seconds (tokens' iat/exp; tests move it, with the store's
    clock, which stamps and ages the keys)."""

    def __init__(self, store: Store, box: SecretBox, settings: HubSettings, *,
                 clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._box = box
        self._clock = clock
        self._key_max_age = timedelta(seconds=settings.oauth_key_max_age_s)
        self.issuer = settings.issuer
        self.resource = settings.mcp_url
        self.api_resource = settings.api_url
        self._ttl_s = settings.oauth_access_token_ttl_s
        self._key_check_s = settings.oauth_signing_key_check_s
        self._keys: dict[str, ECKey] = {}  # kid -> key, every stored one
        self._signing: ECKey | None = None  # the newest
        self._keys_read_at = -float("inf")
        self._users: dict[int, tuple[float, UserRecord]] = {}
        self._revocation_check_s = settings.oauth_revocation_check_s
        self._logins: dict[str, tuple[float, bool]] = {}  # sid -> (read at, revoked)
        # sha256 -> (exp, user, sid, cnf.jkt, aud)
        self._verified: dict[str, tuple[float, int, str, str | None, str]] = {}
        self.policies = {
            resource: AccessTokenPolicy(issuer=self.issuer, audience=resource,
                                        algorithms=(ALGORITHM,), leeway_s=LEEWAY_S)
            for resource in (self.resource, self.api_resource)}
        self.policy = self.policies[self.resource]

    @property
    def retire_after(self) -> timedelta:
        """How long a superseded key keeps verifying."""
        return retire_after(self._ttl_s, self._key_check_s)

    async def key(self) -> ECKey:
        """The key that signs now (the newest), re-read every `oauth_signing_key_check_s`."""
        if self._signing is None or time.monotonic() - self._keys_read_at >= self._key_check_s:
            await self._read_keys()
        assert self._signing is not None
        return self._signing

    async def _read_keys(self) -> None:
        self._keys_read_at = time.monotonic()
        await self._store.oauth.retire_signing_keys(self.retire_after)
        records = await self._store.oauth.signing_keys()
        if not records or self._store.oauth.age(records[0]) >= self._key_max_age:
            # the hub's first start, or the key is due: one replica adds the next one
            await self._rotate(records[0] if records else None)
            records = await self._store.oauth.signing_keys()
        self._keys = {record.kid: self._open(record.private_jwk_sealed) for record in records}
        self._signing = self._keys[records[0].kid]

    async def _rotate(self, newest: SigningKeyRecord | None) -> None:
        kid = await add_signing_key(self._store, self._box, after=newest)
        if kid is None:
            log.info("another replica added the access-token signing key first")
        elif newest is not None:
            log.info("access-token signing key %s is older than %s: new key %s", newest.kid,
                     self._key_max_age, kid)

    def _open(self, sealed: str) -> ECKey:
        return ECKey.import_key(json.loads(self._box.open_text(sealed)))

    async def _verifying_key(self, kid: object) -> ECKey:
        await self.key()
        if isinstance(kid, str) and kid not in self._keys and \
                time.monotonic() - self._keys_read_at >= KEY_MISS_INTERVAL_S:
            await self._read_keys()  # signed by a key another replica added since
        if not isinstance(kid, str) or kid not in self._keys:
            raise InvalidToken("the access token was signed with an unknown or retired key")
        return self._keys[kid]

    def issue_with(self, key: ECKey, *, user_id: int, client_id: str, scope: str,
                   family_id: str, jkt: str | None = None, now: float | None = None,
                   resource: str | None = None) -> str:
        """A signed access token (synchronous: Authlib's token generator calls it) for
        `resource` (default: /mcp), bound to the DPoP key whose thumbprint is `jkt` when one
        is given."""
        audience = resource or self.resource
        if audience not in self.policies:
            raise InvalidArgument(f"the hub issues no tokens for {audience!r}")
        issued = int(now if now is not None else self._clock())
        claims: dict[str, Any] = {
            "iss": self.issuer, "sub": str(user_id), "aud": audience,
            "client_id": client_id, "iat": issued, "exp": issued + int(self._ttl_s),
            "jti": secrets.token_urlsafe(16), "sid": family_id,
        }
        if scope:
            claims["scope"] = scope
        if jkt is not None:
            claims["cnf"] = {"jkt": jkt}
        header = {"alg": ALGORITHM, "typ": "at+jwt", "kid": key.kid}
        return jwt.encode(header, claims, key)

    async def jwks(self) -> dict[str, Any]:
        await self.key()
        return {"keys": [key.as_dict(private=False) for key in self._keys.values()]}

    async def user(self, token: str, *, resource: str | None = None) -> UserRecord | None:
        """The enabled user a valid access token of the hub for `resource` (default: /mcp)
        names, else None."""
        bound = await self.bound_user(token, resource=resource)
        return None if bound is None else bound[0]

    async def bound_user(self, token: str, *, resource: str | None = None
                         ) -> tuple[UserRecord, str | None] | None:
        """The enabled user a valid access token of the hub for `resource` (default: /mcp)
        names and the thumbprint of the DPoP key it is bound to (None for a bearer token),
        else None - also for a valid token minted for the hub's other resource."""
        audience = resource or self.resource
        digest = hash_token(token)
        known = self._verified.get(digest)
        if known is not None and self._clock() < known[0]:
            if known[4] != audience:
                return None
            user = await self._live_user(known[1], known[2])
            return None if user is None else (user, known[3])
        try:
            info, family_id = await self._checked(token, audience)
            user_id = int(info.subject)
        except (InvalidToken, ValueError):
            return None
        if info.expires_at is not None:
            if len(self._verified) >= MAX_CACHED_TOKENS:
                self._verified.clear()
            self._verified[digest] = (info.expires_at, user_id, family_id, info.jkt, audience)
        user = await self._live_user(user_id, family_id)
        return None if user is None else (user, info.jkt)

    async def login_of(self, token: str) -> tuple[str, str] | None:
        """(client id, login id) of a valid access token of the hub, else None: what a
        revocation of the access token (RFC 7009) ends. Either resource's token."""
        for resource in self.policies:
            try:
                info, family_id = await self._checked(token, resource)
            except InvalidToken:
                continue
            return (info.client_id, family_id) if info.client_id is not None else None
        return None

    async def _checked(self, token: str, resource: str) -> tuple[AuthInfo, str]:
        """A hub access token's checked claims (its `aud` must be `resource`) and the login
        (`sid`) it names, or InvalidToken."""
        policy = self.policies[resource]
        header = unverified_header(token, policy)
        key = await self._verifying_key(header.get("kid"))
        info = access_token_info(header, verified_claims(token, key, header), policy,
                                 self._clock())
        family_id = info.claims.get("sid")
        if not isinstance(family_id, str) or not family_id:
            raise InvalidToken("the access token names no login (sid)")
        return info, family_id

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

    def forget_user(self, user_id: int) -> None:
        """Read the user again on their next token: an admin changed them here (disabled or
        not an admin any more), which this replica applies at once (others within
        `USER_TTL_S`)."""
        self._users.pop(user_id, None)

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


def retire_after(access_token_ttl_s: float, key_check_s: float) -> timedelta:
    """How long a superseded key must keep verifying: a replica may sign with it until it
    re-reads the keys, and what it signed stays valid for the lifetime plus the leeway."""
    return timedelta(seconds=key_check_s + access_token_ttl_s + LEEWAY_S)


async def add_signing_key(store: Store, box: SecretBox, *,
                          after: SigningKeyRecord | None) -> str | None:
    """A new ES256 signing key, sealed, stored as the generation after `after` (None: the
    first); its kid, or None when another replica added that generation first."""
    kid = secrets.token_urlsafe(12)
    key = ECKey.generate_key("P-256", parameters={"kid": kid, "alg": ALGORITHM, "use": "sig"})
    generation = after.generation + 1 if after is not None else 1
    added = await store.oauth.add_signing_key(
        kid, box.seal(json.dumps(key.as_dict(private=True))), generation)
    return kid if added else None


async def rotate_signing_key(store: Store, box: SecretBox, settings: HubSettings
                             ) -> tuple[str, list[str]]:
    """`mcpkit hub oauth rotate-key`: a new key signs from now on (each replica takes it
    within `oauth_signing_key_check_s`); the keys superseded long enough are retired.
    (new kid, retired kids)"""
    keys = await store.oauth.signing_keys()
    kid = await add_signing_key(store, box, after=keys[0] if keys else None)
    if kid is None:  # a replica rotated (by age) at this very moment: its key is the new one
        kid = (await store.oauth.signing_keys())[0].kid
    retired = await store.oauth.retire_signing_keys(
        retire_after(settings.oauth_access_token_ttl_s, settings.oauth_signing_key_check_s))
    log.info("new access-token signing key %s; retired: %s", kid, ", ".join(retired) or "none")
    return kid, retired
