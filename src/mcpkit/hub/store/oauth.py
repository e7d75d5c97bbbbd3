"""The authorization server's state, all in the shared database so any replica serves any
step of a login (hub/oauth/): DCR clients, authorization codes, consents, refresh-token
families and the signing key.

    clients     create, get, count, put (a client metadata document's, on each fetch)
    codes       save, take (single use: a second take revokes what the first one started)
    consents    granted(user, client, scope), record
    refresh     save, use (rotation: a used token presented again revokes its family; a
                DPoP-bound one only with a proof by its key), revoke_family_of
    signing keys list (newest generation first: it signs), add the next generation (one
                replica wins a race), age, retire (those superseded long enough);
                private JWKs sealed with the hub's key

Housekeeping: every code or refresh token saved first deletes up to `PURGE_BATCH` expired
codes and as many expired refresh tokens (`purge_expired`), so the tables hold about a
lifetime's worth of rows without a background task: each save adds one row and may remove
many. Rows other replicas are deleting are skipped (PostgreSQL `SKIP LOCKED`), so replicas
never wait on or deadlock over the same batch. A used code stays until it expires (its second
use is detected as replay until then); a refresh family's rows go when they expire, which is
after every access token of that login expired (access tokens live shorter; settings check).

Codes and refresh tokens are stored as sha256 of the secret (like API tokens): a database
dump holds nothing that can be presented. Taking a code and using a refresh token are one
conditional UPDATE each, so two replicas racing for the same one cannot both win.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from mcpkit.errors import PeerError
from mcpkit.hub.db.models import (
    OAuthClient,
    OAuthCode,
    OAuthConsent,
    OAuthRefreshToken,
    OAuthSigningKey,
)
from mcpkit.hub.store._db import Database
from mcpkit.hub.store.errors import Conflict

log = logging.getLogger(__name__)

PURGE_BATCH = 500
"""Expired codes, and expired refresh tokens, deleted at most per save (a bounded cost)."""


@dataclass(frozen=True, slots=True)
class ClientRecord:
    client_id: str
    client_name: str | None
    redirect_uris: tuple[str, ...]
    application_type: str
    grant_types: tuple[str, ...]
    token_endpoint_auth_method: str


@dataclass(frozen=True, slots=True)
class CodeRecord:
    client_id: str
    user_id: int
    redirect_uri: str
    scope: str
    resource: str
    code_challenge: str
    code_challenge_method: str
    family_id: str
    dpop_jkt: str | None = None
    """RFC 9449 §10: the DPoP key the token request must prove (None: any or none)."""


class RefreshKeyMismatch(PeerError):
    """A live refresh token bound to a DPoP key was presented without a proof by that key
    (RFC 9449 §5): refused, and not spent (its holder may still use it)."""


@dataclass(frozen=True, slots=True)
class RefreshRecord:
    family_id: str
    client_id: str
    user_id: int
    scope: str
    resource: str
    dpop_jkt: str | None = None
    """The thumbprint of the DPoP key the token is bound to (None: a bearer token)."""


def _client_columns(client: ClientRecord) -> dict[str, object]:
    return {"client_id": client.client_id, "client_name": client.client_name,
            "redirect_uris": list(client.redirect_uris),
            "application_type": client.application_type,
            "grant_types": list(client.grant_types),
            "token_endpoint_auth_method": client.token_endpoint_auth_method}


def _client(row: OAuthClient) -> ClientRecord:
    return ClientRecord(row.client_id, row.client_name, tuple(row.redirect_uris),
                        row.application_type, tuple(row.grant_types),
                        row.token_endpoint_auth_method)


class OAuthState:
    def __init__(self, db: Database, clock: Callable[[], datetime],
                 purge_batch: int = PURGE_BATCH) -> None:
        self._db = db
        self._clock = clock
        self._purge_batch = purge_batch

    # --- clients -------------------------------------------------------------------------

    async def create_client(self, client: ClientRecord) -> None:
        async with self._db.write() as session:
            session.add(OAuthClient(
                client_id=client.client_id, client_name=client.client_name,
                redirect_uris=list(client.redirect_uris),
                application_type=client.application_type,
                grant_types=list(client.grant_types),
                token_endpoint_auth_method=client.token_endpoint_auth_method,
                created_at=self._clock()))

    async def put_client(self, client: ClientRecord) -> None:
        """Store `client`, or replace the stored one of that id (a metadata document's client,
        fetched again). Two replicas storing the same new client at once: one insert wins,
        the other's is retried as an update."""
        for attempt in range(2):
            try:
                async with self._db.write() as session:
                    row = await session.get(OAuthClient, client.client_id)
                    if row is None:
                        session.add(OAuthClient(created_at=self._clock(),
                                                **_client_columns(client)))
                    else:
                        for name, value in _client_columns(client).items():
                            setattr(row, name, value)
                return
            except IntegrityError:
                if attempt:
                    raise

    async def get_client(self, client_id: str) -> ClientRecord | None:
        async with self._db.read() as session:
            row = await session.get(OAuthClient, client_id)
            return None if row is None else _client(row)

    async def count_clients(self) -> int:
        async with self._db.read() as session:
            return int(await session.scalar(select(func.count()).select_from(OAuthClient)) or 0)

    # --- codes ---------------------------------------------------------------------------

    async def save_code(self, code_hash: str, code: CodeRecord, expires_at: datetime) -> None:
        """Store a new code (after a bounded purge of expired rows)."""
        async with self._db.write() as session:
            await self._purge(session, self._clock())
            session.add(OAuthCode(
                code_hash=code_hash, client_id=code.client_id, user_id=code.user_id,
                redirect_uri=code.redirect_uri, scope=code.scope, resource=code.resource,
                code_challenge=code.code_challenge,
                code_challenge_method=code.code_challenge_method, family_id=code.family_id,
                dpop_jkt=code.dpop_jkt,
                expires_at=expires_at, used_at=None))

    async def take_code(self, code_hash: str, client_id: str) -> CodeRecord | None:
        """The code's grant, once: it is marked used in the same statement. A code used
        before revokes the refresh family it started (RFC 6749 §4.1.2: a replayed code is an
        attack on the first redemption); an expired or unknown one is None."""
        now = self._clock()
        async with self._db.write() as session:
            row = await session.scalar(
                update(OAuthCode)
                .where(OAuthCode.code_hash == code_hash, OAuthCode.client_id == client_id,
                       OAuthCode.used_at.is_(None), OAuthCode.expires_at > now)
                .values(used_at=now).returning(OAuthCode))
            if row is not None:
                return CodeRecord(row.client_id, row.user_id, row.redirect_uri, row.scope,
                                  row.resource, row.code_challenge, row.code_challenge_method,
                                  row.family_id, row.dpop_jkt)
            used = await session.scalar(select(OAuthCode.family_id).where(
                OAuthCode.code_hash == code_hash, OAuthCode.used_at.is_not(None)))
            if used is not None:
                log.warning("an authorization code was presented twice: its tokens are revoked")
                await self._revoke_family(session, used, now)
            return None

    # --- consents ------------------------------------------------------------------------

    async def consented(self, user_id: int, client_id: str, scope: Sequence[str]) -> bool:
        """Whether the user granted the client at least `scope` before."""
        async with self._db.read() as session:
            granted = await session.scalar(select(OAuthConsent.scope).where(
                OAuthConsent.user_id == user_id, OAuthConsent.client_id == client_id))
        return granted is not None and set(scope) <= set(granted.split())

    async def record_consent(self, user_id: int, client_id: str, scope: Sequence[str]) -> None:
        async with self._db.write() as session:
            row = await session.get(OAuthConsent, (user_id, client_id))
            if row is None:
                session.add(OAuthConsent(user_id=user_id, client_id=client_id,
                                         scope=" ".join(sorted(set(scope))),
                                         created_at=self._clock()))
            else:
                row.scope = " ".join(sorted(set(row.scope.split()) | set(scope)))

    # --- refresh tokens ------------------------------------------------------------------

    async def save_refresh(self, token_hash: str, grant: RefreshRecord,
                           expires_at: datetime) -> None:
        """Store a new refresh token (after a bounded purge of expired rows)."""
        async with self._db.write() as session:
            await self._purge(session, self._clock())
            session.add(OAuthRefreshToken(
                token_hash=token_hash, family_id=grant.family_id, client_id=grant.client_id,
                user_id=grant.user_id, scope=grant.scope, resource=grant.resource,
                dpop_jkt=grant.dpop_jkt, created_at=self._clock(), expires_at=expires_at,
                used_at=None, revoked_at=None))

    async def use_refresh(self, token_hash: str, client_id: str, jkt: str | None = None
                          ) -> RefreshRecord | None:
        """The grant of a live refresh token, marked used (rotation: the caller issues the
        next one in the same family). A used token presented again is reuse: the whole
        family is revoked (OAuth 2.1 §4.3.1), so neither the thief nor the client can go on.
        A token bound to a DPoP key is used only when `jkt` (the key the request proved) is
        that key; otherwise RefreshKeyMismatch, and the token stays unused."""
        now = self._clock()
        bound = OAuthRefreshToken.dpop_jkt
        key_matches = bound.is_(None) if jkt is None else or_(bound.is_(None), bound == jkt)
        async with self._db.write() as session:
            row = await session.scalar(
                update(OAuthRefreshToken)
                .where(OAuthRefreshToken.token_hash == token_hash,
                       OAuthRefreshToken.client_id == client_id,
                       OAuthRefreshToken.used_at.is_(None),
                       OAuthRefreshToken.revoked_at.is_(None),
                       OAuthRefreshToken.expires_at > now, key_matches)
                .values(used_at=now).returning(OAuthRefreshToken))
            if row is not None:
                return RefreshRecord(row.family_id, row.client_id, row.user_id, row.scope,
                                     row.resource, row.dpop_jkt)
            reused = await session.scalar(select(OAuthRefreshToken.family_id).where(
                OAuthRefreshToken.token_hash == token_hash,
                OAuthRefreshToken.used_at.is_not(None)))
            if reused is not None:
                log.warning("a rotated refresh token was presented again: its family is revoked")
                await self._revoke_family(session, reused, now)
                return None
            other_key = await session.scalar(select(func.count()).select_from(OAuthRefreshToken)
                                             .where(OAuthRefreshToken.token_hash == token_hash,
                                                    OAuthRefreshToken.client_id == client_id,
                                                    OAuthRefreshToken.revoked_at.is_(None),
                                                    OAuthRefreshToken.expires_at > now,
                                                    bound.is_not(None)))
            if other_key:
                raise RefreshKeyMismatch(
                    "the refresh token is bound to a DPoP key: refresh with a DPoP proof "
                    "signed by that key" if jkt is None else
                    "the refresh token is bound to another DPoP key than the proof's")
            return None

    async def revoke_family_of(self, token_hash: str, client_id: str) -> bool:
        """Revoke the family of a refresh token issued to `client_id` (RFC 7009)."""
        now = self._clock()
        async with self._db.write() as session:
            family = await session.scalar(select(OAuthRefreshToken.family_id).where(
                OAuthRefreshToken.token_hash == token_hash,
                OAuthRefreshToken.client_id == client_id))
            if family is None:
                return False
            await self._revoke_family(session, family, now)
            return True

    async def revoke_family(self, family_id: str, client_id: str) -> bool:
        """Revoke the login `family_id` if it was issued to `client_id` (an access token's
        revocation, RFC 7009: the token names its login)."""
        now = self._clock()
        async with self._db.write() as session:
            issued = await session.scalar(select(func.count()).select_from(OAuthRefreshToken)
                                          .where(OAuthRefreshToken.family_id == family_id,
                                                 OAuthRefreshToken.client_id == client_id))
            if not issued:
                return False
            await self._revoke_family(session, family_id, now)
            return True

    async def family_revoked(self, family_id: str) -> bool:
        async with self._db.read() as session:
            revoked = await session.scalar(select(func.count()).select_from(OAuthRefreshToken)
                                           .where(OAuthRefreshToken.family_id == family_id,
                                                  OAuthRefreshToken.revoked_at.is_not(None)))
        return bool(revoked)

    # --- housekeeping ----------------------------------------------------------------------

    async def purge_expired(self) -> None:
        """Delete up to a batch of expired codes and of expired refresh tokens."""
        async with self._db.write() as session:
            await self._purge(session, self._clock())

    async def count_expired(self) -> tuple[int, int]:
        """(expired codes, expired refresh tokens) still stored."""
        now = self._clock()
        async with self._db.read() as session:
            codes = await session.scalar(select(func.count()).select_from(OAuthCode)
                                         .where(OAuthCode.expires_at <= now))
            refresh = await session.scalar(select(func.count()).select_from(OAuthRefreshToken)
                                           .where(OAuthRefreshToken.expires_at <= now))
        return int(codes or 0), int(refresh or 0)

    async def _purge(self, session: AsyncSession, now: datetime) -> None:
        expired_codes = (select(OAuthCode.code_hash).where(OAuthCode.expires_at <= now)
                         .limit(self._purge_batch).with_for_update(skip_locked=True))
        await session.execute(delete(OAuthCode).where(OAuthCode.code_hash.in_(expired_codes)))
        expired_refresh = (select(OAuthRefreshToken.token_hash)
                           .where(OAuthRefreshToken.expires_at <= now)
                           .limit(self._purge_batch).with_for_update(skip_locked=True))
        await session.execute(delete(OAuthRefreshToken).where(
            OAuthRefreshToken.token_hash.in_(expired_refresh)))

    @staticmethod
    async def _revoke_family(session: AsyncSession, family_id: str, now: datetime) -> None:
        await session.execute(update(OAuthRefreshToken)
                              .where(OAuthRefreshToken.family_id == family_id,
                                     OAuthRefreshToken.revoked_at.is_(None))
                              .values(revoked_at=now))

    # --- the signing keys -----------------------------------------------------------------

    async def signing_keys(self) -> list[SigningKeyRecord]:
        """Every signing key, newest (highest generation) first: it signs, all of them
        verify."""
        async with self._db.read() as session:
            rows = await session.scalars(select(OAuthSigningKey).order_by(
                OAuthSigningKey.generation.desc()))
            return [SigningKeyRecord(row.kid, row.private_jwk_sealed, row.created_at,
                                     row.generation) for row in rows]

    async def add_signing_key(self, kid: str, sealed: str, generation: int) -> bool:
        """A new signing key as `generation` (the newest's + 1; 1 for the first), created
        now. False when that generation exists already: another replica rotated at the same
        moment (the unique generation lets one in), and its key is the new one."""
        try:
            async with self._db.write() as session:
                session.add(OAuthSigningKey(kid=kid, private_jwk_sealed=sealed,
                                            created_at=self._clock(), generation=generation))
        except Conflict:
            return False
        return True

    def age(self, key: SigningKeyRecord) -> timedelta:
        """How long ago `key` was made, by this store's clock (the one that stamped it)."""
        return self._clock() - _aware(key.created_at)

    async def retire_signing_keys(self, superseded_for: timedelta) -> list[str]:
        """Delete the keys a newer key superseded at least `superseded_for` ago (the kids).
        The newest key is never retired."""
        cutoff = self._clock() - superseded_for
        keys = await self.signing_keys()
        retired = [older.kid for newer, older in itertools.pairwise(keys)
                   if _aware(newer.created_at) <= cutoff]
        # keys are newest first: once one is superseded long enough, all older ones are too
        if retired:
            async with self._db.write() as session:
                await session.execute(delete(OAuthSigningKey)
                                      .where(OAuthSigningKey.kid.in_(retired)))
        return retired


@dataclass(frozen=True, slots=True)
class SigningKeyRecord:
    kid: str
    private_jwk_sealed: str
    created_at: datetime
    generation: int


def _aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; the hub stores UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
