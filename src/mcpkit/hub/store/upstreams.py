"""Upstreams: the MCP servers a user registers. Isolation is structural: every function takes
the owner's user id and every query filters on it - there is no way to fetch an upstream by its
id alone, and another user's upstream is simply "not found".

The `version` column is an optimistic lock over the user's configuration: `update` and `delete`
with `expected_version` succeed only if nobody changed the upstream since that version was read.
The row is locked from that check to the write (`SELECT … FOR UPDATE` on PostgreSQL, the write
transaction on SQLite), so the check holds across replicas. Health checks and catalog
refreshes do not bump it: they are not the user's edits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, cast, get_args

from sqlalchemy import Select, delete, exc, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from mcpkit.hub.crypto import CredentialError, SecretBox
from mcpkit.hub.db.models import UPSTREAM_ID_LENGTH, Upstream
from mcpkit.hub.store import validation as check
from mcpkit.hub.store._db import Database, is_unique_violation
from mcpkit.hub.store._paging import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, encode_cursor
from mcpkit.hub.store.errors import Conflict, NotFound
from mcpkit.hub.store.records import (
    UNSET,
    AuthMode,
    Credentials,
    HealthStatus,
    Page,
    Purpose,
    Transport,
    UpstreamChanges,
    UpstreamRecord,
    UpstreamSpec,
)


def upstream_record(row: Upstream) -> UpstreamRecord:
    return UpstreamRecord(
        id=row.id,
        user_id=row.user_id,
        name=row.name,
        transport=cast(Transport, row.transport),
        url=row.url,
        command=None if row.command is None else tuple(row.command),
        has_headers=row.headers_encrypted is not None,
        has_bearer=row.bearer_encrypted is not None,
        enabled=row.enabled,
        enabled_tools=None if row.enabled_tools is None else tuple(row.enabled_tools),
        disabled_tools=tuple(row.disabled_tools),
        connect_timeout_s=row.connect_timeout_s,
        call_timeout_s=row.call_timeout_s,
        health_status=cast(HealthStatus, row.health_status),
        last_error=row.last_error,
        last_checked_at=row.last_checked_at,
        tool_count=row.tool_count,
        catalog_updated_at=row.catalog_updated_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
        version=row.version,
        auth_mode=cast(AuthMode, row.auth_mode),
        has_catalog_headers=row.catalog_headers_encrypted is not None,
        has_catalog_bearer=row.catalog_bearer_encrypted is not None,
    )


def owned(user_id: int, upstream_id: str) -> Select[Upstream]:
    """The one way to select an upstream: by its owner and its id."""
    return select(Upstream).where(Upstream.user_id == user_id, Upstream.id == upstream_id)


def plausible_id(upstream_id: object) -> bool:
    return isinstance(upstream_id, str) and 0 < len(upstream_id) <= UPSTREAM_ID_LENGTH


async def require_owned(
    session: AsyncSession, user_id: int, upstream_id: str, *, lock: bool = False
) -> Upstream:
    """The user's upstream `upstream_id`, or NotFound (for a missing and a foreign one alike).

    `lock` holds the row until the transaction ends (FOR UPDATE; SQLite's write lock already
    covers the whole database)."""
    if not plausible_id(upstream_id):
        raise NotFound("upstream", upstream_id)
    query = owned(user_id, upstream_id)
    row = await session.scalar(query.with_for_update() if lock else query)
    if row is None:
        raise NotFound("upstream", upstream_id)
    return row


class Upstreams:
    def __init__(
        self,
        db: Database,
        box: SecretBox | None,
        clock: Callable[[], datetime],
        *,
        allow_stdio: bool = False,
    ) -> None:
        self._db = db
        self._box = box
        self._clock = clock
        self.allow_stdio = allow_stdio

    # --- reading -------------------------------------------------------------------------

    async def get(self, user_id: int, upstream_id: str) -> UpstreamRecord:
        async with self._db.read() as session:
            return upstream_record(await require_owned(session, user_id, upstream_id))

    async def get_by_name(self, user_id: int, name: str) -> UpstreamRecord:
        async with self._db.read() as session:
            row = await session.scalar(
                select(Upstream).where(Upstream.user_id == user_id, Upstream.name == name)
            )
            if row is None:
                raise NotFound("upstream", name)
            return upstream_record(row)

    async def list(
        self,
        user_id: int,
        *,
        limit: int = DEFAULT_LIMIT,
        cursor: str | None = None,
        enabled: bool | None = None,
    ) -> Page[UpstreamRecord]:
        """The user's upstreams by name, `limit` at a time (`enabled` filters when given)."""
        limit = check.limit(limit, MAX_LIMIT)
        after = decode_cursor(cursor)
        query = select(Upstream).where(Upstream.user_id == user_id)
        if enabled is not None:
            query = query.where(Upstream.enabled == enabled)
        if after is not None:
            query = query.where(Upstream.name > after)
        async with self._db.read() as session:
            rows = (await session.scalars(query.order_by(Upstream.name).limit(limit + 1))).all()
        items = tuple(upstream_record(row) for row in rows[:limit])
        return Page(items, encode_cursor(items[-1].name) if len(rows) > limit else None)

    async def all(self, user_id: int, *, enabled_only: bool = False) -> tuple[UpstreamRecord, ...]:
        """Every upstream of the user, by name (for the router: the user's whole catalog)."""
        query = select(Upstream).where(Upstream.user_id == user_id)
        if enabled_only:
            query = query.where(Upstream.enabled.is_(True))
        async with self._db.read() as session:
            rows = await session.scalars(query.order_by(Upstream.name))
            return tuple(upstream_record(row) for row in rows)

    async def every_users(
        self, *, limit: int = DEFAULT_LIMIT, cursor: str | None = None,
        health_status: HealthStatus | None = None,
    ) -> Page[UpstreamRecord]:
        """Upstreams of every user (the operators' health view), by id, `limit` at a time;
        `health_status` filters when given. Keyset on the primary key."""
        limit = check.limit(limit, MAX_LIMIT)
        after = decode_cursor(cursor)
        query = select(Upstream)
        if health_status is not None:
            query = query.where(Upstream.health_status == check.health_status(health_status))
        if after is not None:
            query = query.where(Upstream.id > after)
        async with self._db.read() as session:
            rows = (await session.scalars(query.order_by(Upstream.id).limit(limit + 1))).all()
        items = tuple(upstream_record(row) for row in rows[:limit])
        return Page(items, encode_cursor(items[-1].id) if len(rows) > limit else None)

    async def due_for_health_check(
        self, *, checked_before: datetime, limit: int = 100
    ) -> tuple[UpstreamRecord, ...]:
        """Enabled upstreams of any user, never checked or last checked before
        `checked_before`, oldest first: the health checker's work list. Each record carries its
        `user_id`, which `set_health` and the catalog functions then take."""
        limit = check.limit(limit, MAX_LIMIT)
        query = (
            select(Upstream)
            .where(Upstream.enabled.is_(True))
            .where(
                (Upstream.last_checked_at.is_(None)) | (Upstream.last_checked_at < checked_before)
            )
            .order_by(Upstream.last_checked_at.is_not(None), Upstream.last_checked_at, Upstream.id)
            .limit(limit)
        )
        async with self._db.read() as session:
            rows = await session.scalars(query)
            return tuple(upstream_record(row) for row in rows)

    async def count(self) -> int:
        """How many upstreams all users have registered: the start-up summary's figure."""
        async with self._db.read() as session:
            return int(await session.scalar(select(func.count()).select_from(Upstream)) or 0)

    async def health_counts(self) -> dict[HealthStatus, int]:
        """How many enabled upstreams of any user are in each health status (every status
        present, 0 when none): the hub's `upstreams{health}` gauge. One grouped count."""
        query = (
            select(Upstream.health_status, func.count())
            .where(Upstream.enabled.is_(True))
            .group_by(Upstream.health_status)
        )
        counts: dict[HealthStatus, int] = dict.fromkeys(get_args(HealthStatus), 0)
        async with self._db.read() as session:
            for status, count in (await session.execute(query)).all():
                counts[cast(HealthStatus, status)] = int(count)
        return counts

    async def credentials(
        self, user_id: int, upstream_id: str, *, purpose: Purpose = "call"
    ) -> Credentials:
        """The upstream's headers and bearer, decrypted (for connecting to it, never for display).

        For `purpose="catalog"` (catalog fetches, health checks) its catalog headers and bearer
        when either is set - both replace the call credentials, nothing is mixed - else the
        call credentials. `CredentialError` if they cannot be opened with the configured keys."""
        async with self._db.read() as session:
            row = await require_owned(session, user_id, upstream_id)
            sealed = (row.headers_encrypted, row.bearer_encrypted)
            if purpose == "catalog" and (row.catalog_headers_encrypted is not None
                                         or row.catalog_bearer_encrypted is not None):
                sealed = (row.catalog_headers_encrypted, row.catalog_bearer_encrypted)
        return self._opened(*sealed)

    def _opened(self, sealed_headers: str | None, sealed_bearer: str | None) -> Credentials:
        if sealed_headers is None and sealed_bearer is None:
            return Credentials()
        box = self._require_box()
        return Credentials(
            headers={} if sealed_headers is None else box.open_mapping(sealed_headers),
            bearer=None if sealed_bearer is None else box.open_text(sealed_bearer),
        )

    # --- writing -------------------------------------------------------------------------

    async def create(
        self, user_id: int, spec: UpstreamSpec, *, max_per_user: int | None = None
    ) -> UpstreamRecord:
        """Register an upstream for the user; `Conflict("name")` if the user has one so named,
        `Conflict("upstreams")` if they already have `max_per_user` (counted in the writing
        transaction: concurrent creates can pass it by at most their number on PostgreSQL)."""
        values = self._checked({f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)})
        now = self._clock()
        row = Upstream(user_id=user_id, created_at=now, updated_at=now, version=1, **values)
        async with self._db.write() as session:
            if max_per_user is not None:
                await _check_room(session, user_id, max_per_user)
            session.add(row)
            try:
                await session.flush()
            except exc.IntegrityError as error:
                raise self._integrity(error, user_id, spec.name) from error
            return upstream_record(row)

    async def update(
        self,
        user_id: int,
        upstream_id: str,
        changes: UpstreamChanges,
        *,
        expected_version: int | None = None,
    ) -> UpstreamRecord:
        """Apply `changes` (UNSET fields are kept) and bump `version`.

        With `expected_version`, `Conflict("version")` unless the upstream is still at it. The
        row is locked from the read to the write (`FOR UPDATE` on PostgreSQL, the write lock on
        SQLite), so concurrent updates apply one after the other."""
        async with self._db.write() as session:
            row = await require_owned(session, user_id, upstream_id, lock=True)
            _check_version(row.version, expected_version)
            values = self._checked(self._merged(row, changes))
            for key, value in values.items():
                setattr(row, key, value)
            row.updated_at = self._clock()
            row.version += 1
            try:
                await session.flush()
            except exc.IntegrityError as error:
                raise self._integrity(error, user_id, values["name"]) from error
            return upstream_record(row)

    async def delete(
        self, user_id: int, upstream_id: str, *, expected_version: int | None = None
    ) -> None:
        """Remove the upstream and its catalog; `Conflict("version")` as for `update`."""
        async with self._db.write() as session:
            row = await require_owned(session, user_id, upstream_id, lock=True)
            _check_version(row.version, expected_version)
            await session.execute(
                delete(Upstream)
                .where(Upstream.user_id == user_id, Upstream.id == upstream_id)
                .execution_options(synchronize_session=False)
            )

    async def set_health(
        self,
        user_id: int,
        upstream_id: str,
        status: HealthStatus,
        *,
        error: str | None = None,
        checked_at: datetime | None = None,
    ) -> None:
        """Record a health check (`error` is kept as `last_error`, cut to a bounded length)."""
        values: dict[str, Any] = {
            "health_status": check.health_status(status),
            "last_error": check.error_text(error),
            "last_checked_at": check.aware(checked_at or self._clock(), "checked_at"),
        }
        async with self._db.write() as session:
            result = await session.execute(
                update(Upstream)
                .where(Upstream.user_id == user_id, Upstream.id == upstream_id)
                .values(**values)
                .returning(Upstream.id)
            )
            if result.scalar_one_or_none() is None:
                raise NotFound("upstream", upstream_id)

    # --- helpers -------------------------------------------------------------------------

    def _checked(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Column values for a complete configuration; `Invalid` on the first bad field.

        The credentials (`headers`, `bearer`, `catalog_headers`, `catalog_bearer`) are plain
        text to seal, None, or a `_Kept` sealed value."""
        transport = check.transport(fields["transport"], allow_stdio=self.allow_stdio)
        url, command = check.endpoint(transport, fields["url"], fields["command"])
        return {
            "name": check.name(fields["name"]),
            "transport": transport,
            "url": url,
            "command": command,
            "headers_encrypted": self._sealed(fields["headers"], check.headers),
            "bearer_encrypted": self._sealed(fields["bearer"], check.bearer),
            "catalog_headers_encrypted": self._sealed(
                fields["catalog_headers"], lambda value: check.headers(value, "catalog_headers")),
            "catalog_bearer_encrypted": self._sealed(
                fields["catalog_bearer"], lambda value: check.bearer(value, "catalog_bearer")),
            "enabled": check.flag(fields["enabled"], "enabled"),
            "enabled_tools": check.tool_names(
                fields["enabled_tools"], "enabled_tools", nullable=True
            ),
            "disabled_tools": check.tool_names(
                fields["disabled_tools"], "disabled_tools", nullable=False
            ),
            "connect_timeout_s": check.timeout(fields["connect_timeout_s"], "connect_timeout_s"),
            "call_timeout_s": check.timeout(fields["call_timeout_s"], "call_timeout_s"),
            "auth_mode": check.auth_mode(fields["auth_mode"]),
        }

    def _merged(self, row: Upstream, changes: UpstreamChanges) -> dict[str, Any]:
        """The row's configuration with `changes` applied. Credentials that are kept stay sealed
        as they are, so an update never decrypts them."""
        fields: dict[str, Any] = {
            "name": row.name,
            "transport": row.transport,
            "url": row.url,
            "command": row.command,
            "headers": _kept(row.headers_encrypted),
            "bearer": _kept(row.bearer_encrypted),
            "catalog_headers": _kept(row.catalog_headers_encrypted),
            "catalog_bearer": _kept(row.catalog_bearer_encrypted),
            "enabled": row.enabled,
            "enabled_tools": row.enabled_tools,
            "disabled_tools": row.disabled_tools,
            "connect_timeout_s": row.connect_timeout_s,
            "call_timeout_s": row.call_timeout_s,
            "auth_mode": row.auth_mode,
        }
        for key in fields:
            value = getattr(changes, key)
            if value is not UNSET:
                fields[key] = value
        if fields["transport"] != row.transport:
            # a new transport drops the old kind of endpoint unless the change gives one
            if fields["transport"] == "stdio" and changes.url is UNSET:
                fields["url"] = None
            if fields["transport"] != "stdio" and changes.command is UNSET:
                fields["command"] = None
        return fields

    def _sealed(self, value: object, checker: Callable[[object], object]) -> str | None:
        if isinstance(value, _Kept):
            return value.sealed
        plain = checker(value)
        if plain is None:
            return None
        assert isinstance(plain, str | dict)
        return self._require_box().seal(plain)

    def _require_box(self) -> SecretBox:
        if self._box is None:
            raise CredentialError(
                "no secret key is configured for upstream credentials (MCPKIT_HUB_SECRET_KEY)"
            )
        return self._box

    def _integrity(self, error: exc.IntegrityError, user_id: int, name: str) -> Exception:
        if is_unique_violation(error):
            return Conflict("name", f"an upstream named {name!r} exists")
        return NotFound("user", user_id)


@dataclasses.dataclass(frozen=True, slots=True)
class _Kept:
    """A stored (sealed) credential that an update keeps as it is."""

    sealed: str


def _kept(sealed: str | None) -> _Kept | None:
    return None if sealed is None else _Kept(sealed)


async def _check_room(session: AsyncSession, user_id: int, max_per_user: int) -> None:
    held = await session.scalar(
        select(func.count()).select_from(Upstream).where(Upstream.user_id == user_id))
    if (held or 0) >= max_per_user:
        raise Conflict("upstreams", f"you have {held} upstreams, the most a user may have "
                       f"({max_per_user}); remove one first")


def _check_version(current: int, expected: int | None) -> None:
    if expected is not None and expected != current:
        raise Conflict(
            "version", f"the upstream is at version {current}, not {expected}: read it again"
        )

