"""Identities at an OpenID Connect provider: which (issuer, subject) is which hub user, and
that identity's latest provider tokens, sealed with the hub's key.

    sign_in(issuer, subject, names=..., tokens=..., allow_signup=...)
                      the user the identity maps to (its tokens replaced), or, the first time
                      and only when sign-up is allowed, a new user named by the first free
                      of `names` (a taken name gets a numeric suffix): a new identity is never
                      attached to an existing user because a name matches
    link(issuer, subject, user_id)   an admin maps a subject to an existing user
                      (`mcpkit hub user link-oidc NAME --subject SUB`)
    subject_token(user_id, issuer)   the user's latest provider tokens (for RFC 8693 token
                      exchange with upstreams that trust the same provider)
    refreshed(user_id, issuer, tokens)   those tokens replaced by refreshed ones

The identity is the pair (issuer, subject), unique in the table: names and e-mail addresses
are only hints for a new user's name (a provider may reassign them). Two replicas signing the
same new subject in at once both try to insert; one wins, the other's transaction conflicts
and `sign_in` runs again and finds the winner's row (at most `SIGN_IN_ATTEMPTS`).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from mcpkit.hub.crypto import CredentialError, SecretBox
from mcpkit.hub.db.models import (
    NAME_LENGTH,
    OIDC_ISSUER_LENGTH,
    OIDC_SUBJECT_LENGTH,
    OidcIdentity,
    User,
)
from mcpkit.hub.store import validation as check
from mcpkit.hub.store._db import Database
from mcpkit.hub.store.errors import Conflict, Invalid, NotFound
from mcpkit.hub.store.records import UserRecord
from mcpkit.hub.store.users import user_record

SIGN_IN_ATTEMPTS = 3
"""Tries of a first sign-in that raced another replica's (or a name taken meanwhile)."""
NUMBERED_NAMES = 9
"""A taken name is tried with the suffixes -2 .. -9, then with a random one."""
DEFAULT_NAME = "user"


@dataclass(frozen=True, slots=True, repr=False)
class IdpTokens:
    """What the provider's token endpoint returned at the identity's latest sign-in."""

    id_token: str
    access_token: str | None = None
    refresh_token: str | None = None
    expires_at: float | None = None
    """Wall-clock time the access token expires; None: not said."""
    scope: str | None = None

    def __repr__(self) -> str:
        return f"IdpTokens(id_token='***', access_token='***', expires_at={self.expires_at!r})"

    def sealed(self, box: SecretBox) -> str:
        fields = {"id_token": self.id_token, "access_token": self.access_token,
                  "refresh_token": self.refresh_token, "scope": self.scope,
                  "expires_at": None if self.expires_at is None else repr(self.expires_at)}
        return box.seal({name: value for name, value in fields.items() if value is not None})

    @classmethod
    def opened(cls, box: SecretBox, sealed: str) -> IdpTokens:
        fields = box.open_mapping(sealed)
        expires = fields.get("expires_at")
        return cls(fields["id_token"], fields.get("access_token"), fields.get("refresh_token"),
                   float(expires) if expires is not None else None, fields.get("scope"))


@dataclass(frozen=True, slots=True)
class SignedIn:
    user: UserRecord
    created: bool
    """A new hub user was made for this first sign-in."""


class OidcIdentities:
    def __init__(self, db: Database, box: SecretBox | None, clock: Callable[[], datetime]
                 ) -> None:
        self._db = db
        self._box = box
        self._clock = clock

    async def sign_in(self, issuer: str, subject: str, *, names: Sequence[str],
                      tokens: IdpTokens, allow_signup: bool) -> SignedIn | None:
        """The user `(issuer, subject)` maps to, with `tokens` stored for it (not for a
        disabled user: nothing of theirs is refreshed). Unknown: a new user when
        `allow_signup`, else None."""
        _check_identity(issuer, subject)
        sealed = tokens.sealed(self._require_box())
        for attempt in range(SIGN_IN_ATTEMPTS):
            try:
                return await self._sign_in_once(issuer, subject, names, sealed, allow_signup)
            except Conflict:  # another replica made this identity, or took the name, first
                if attempt == SIGN_IN_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _sign_in_once(self, issuer: str, subject: str, names: Sequence[str],
                            sealed: str, allow_signup: bool) -> SignedIn | None:
        now = self._clock()
        async with self._db.write() as session:
            found = (await session.execute(
                select(OidcIdentity, User).join(User, User.id == OidcIdentity.user_id)
                .where(OidcIdentity.issuer == issuer, OidcIdentity.subject == subject))).first()
            if found is not None:
                identity, user = found
                if not user.disabled:
                    identity.tokens_sealed = sealed
                    identity.last_login_at = now
                return SignedIn(user_record(user), created=False)
            if not allow_signup:
                return None
            name = await self._free_name(session, names)
            user = User(name=name, is_admin=False, disabled=False, created_at=now)
            session.add(user)
            await session.flush()
            session.add(OidcIdentity(issuer=issuer, subject=subject, user_id=user.id,
                                     tokens_sealed=sealed, created_at=now, last_login_at=now))
            await session.flush()
            return SignedIn(user_record(user), created=True)

    @staticmethod
    async def _free_name(session: AsyncSession, names: Sequence[str]) -> str:
        """The first candidate not taken, trying each with -2 .. -9 after it; else the first
        with a random suffix (a collision there is a Conflict, and sign_in tries again)."""
        bases = [check.name(base) for base in names] or [DEFAULT_NAME]
        candidates: list[str] = []
        for base in bases:
            candidates.append(base)
            stem = base[:NAME_LENGTH - 3]
            candidates.extend(f"{stem}-{n}" for n in range(2, NUMBERED_NAMES + 1))
        taken = set(await session.scalars(select(User.name).where(User.name.in_(candidates))))
        for candidate in candidates:
            if candidate not in taken:
                return candidate
        return f"{bases[0][:NAME_LENGTH - 9]}-{secrets.token_hex(4)}"

    async def link(self, issuer: str, subject: str, user_id: int) -> None:
        """Map `(issuer, subject)` to the existing user `user_id` (an admin's decision);
        `Conflict` when the identity is mapped already, `NotFound` for an unknown user."""
        _check_identity(issuer, subject)
        async with self._db.write() as session:
            if await session.get(User, user_id) is None:
                raise NotFound("user", user_id)
            exists = await session.scalar(select(OidcIdentity.user_id).where(
                OidcIdentity.issuer == issuer, OidcIdentity.subject == subject))
            if exists is not None:
                raise Conflict("subject", "this provider subject is linked to a user already")
            session.add(OidcIdentity(issuer=issuer, subject=subject, user_id=user_id,
                                     tokens_sealed=None, created_at=self._clock(),
                                     last_login_at=None))

    async def user_of(self, issuer: str, subject: str) -> int | None:
        async with self._db.read() as session:
            found: int | None = await session.scalar(select(OidcIdentity.user_id).where(
                OidcIdentity.issuer == issuer, OidcIdentity.subject == subject))
            return found

    async def subject_token(self, user_id: int, issuer: str) -> IdpTokens | None:
        """The latest provider tokens of the user's identity at `issuer` (the most recently
        signed-in one, should an admin have linked several), or None. These are the subject
        tokens an RFC 8693 exchange presents for the user; `CredentialError` when the hub's
        key cannot open them."""
        async with self._db.read() as session:
            sealed = await session.scalar(
                select(OidcIdentity.tokens_sealed)
                .where(OidcIdentity.user_id == user_id, OidcIdentity.issuer == issuer,
                       OidcIdentity.tokens_sealed.is_not(None))
                .order_by(OidcIdentity.last_login_at.desc()).limit(1))
        if sealed is None:
            return None
        return IdpTokens.opened(self._require_box(), sealed)

    async def refreshed(self, user_id: int, issuer: str, tokens: IdpTokens) -> bool:
        """Replace the provider tokens `subject_token` returns (the same row) with `tokens`,
        refreshed by the hub (RFC 6749 §6; the sign-in time is kept). False when the user
        has no such identity (any more)."""
        sealed = tokens.sealed(self._require_box())
        async with self._db.write() as session:
            identity = await session.scalar(
                select(OidcIdentity)
                .where(OidcIdentity.user_id == user_id, OidcIdentity.issuer == issuer,
                       OidcIdentity.tokens_sealed.is_not(None))
                .order_by(OidcIdentity.last_login_at.desc()).limit(1))
            if identity is None:
                return False
            identity.tokens_sealed = sealed
            return True

    def _require_box(self) -> SecretBox:
        if self._box is None:
            raise CredentialError("the store has no secret key to seal provider tokens with")
        return self._box


def _check_identity(issuer: str, subject: str) -> None:
    if not issuer.startswith(("https://", "http://")) or len(issuer) > OIDC_ISSUER_LENGTH:
        raise Invalid("issuer", f"must be an http(s) URL of at most {OIDC_ISSUER_LENGTH} "
                      "characters")
    if not 0 < len(subject) <= OIDC_SUBJECT_LENGTH or not subject.isprintable():
        raise Invalid("subject", f"must be 1 to {OIDC_SUBJECT_LENGTH} printable characters")
