"""The hub's registry store: async repositories over SQLAlchemy, for the REST API and the router.

    store = await Store.open(database_url, box)     # engine + migrations; `await store.close()`
    store = Store(session_factory(engine), box)     # or over sessions you manage

    store.users      create, get, get_by_name, list (paged), set_disabled, set_admin,
                     set_password_hash, sign_in_record
    store.tokens     create (-> NewToken: the secret, once), verify(secret) -> user | None,
                     revoke, list
    store.upstreams  create, get, get_by_name, list (paged), all, update (optimistic version),
                     delete, credentials, set_health, due_for_health_check, health_counts
    store.catalog    replace (one transaction), get, all (the user's catalogs for the router)
    store.audit      record, record_many, recent
    store.oauth      the authorization server's clients, codes, consents, refresh families
    store.upstream_logins  users' OAuth logins to their upstreams (sealed), pending starts
    store.upstream_clients the hub's registrations at upstreams' authorization servers
    store.oidc       OpenID Connect identities -> users, their provider tokens (sealed)

Each call is its own transaction and returns frozen records (`records.py`), never ORM objects.
Every upstream and catalog function takes the owner's user id: another user's upstream is
`NotFound`, by id or by name. Errors are `NotFound`, `Conflict`, `Invalid(field, reason)` and
`StoreUnavailable`, all `StoreError`s (`errors.py`); nothing from SQLAlchemy escapes.

    errors.py      the exceptions
    records.py     the records and inputs (UpstreamSpec, UpstreamChanges/UNSET, AuditEntry)
    validation.py  field checks (names, URLs, headers, timeouts, ...)
    users.py, tokens.py, upstreams.py, catalog.py, audit.py   the repositories
    _db.py         transactions and error translation; _paging.py  keyset cursors
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from mcpkit.hub.crypto import SecretBox
from mcpkit.hub.db.engine import make_engine, session_factory
from mcpkit.hub.db.migrate import upgrade
from mcpkit.hub.db.models import utcnow
from mcpkit.hub.store._db import Database, describe
from mcpkit.hub.store.audit import AuditLog
from mcpkit.hub.store.catalog import Catalogs
from mcpkit.hub.store.errors import Conflict, Invalid, NotFound, StoreError, StoreUnavailable
from mcpkit.hub.store.oauth import OAuthState
from mcpkit.hub.store.oidc import OidcIdentities
from mcpkit.hub.store.records import (
    UNSET,
    AuditEntry,
    AuditRecord,
    Catalog,
    Credentials,
    HealthStatus,
    NewToken,
    Outcome,
    Page,
    TokenRecord,
    Transport,
    UpstreamChanges,
    UpstreamRecord,
    UpstreamSpec,
    UserRecord,
)
from mcpkit.hub.store.tokens import Tokens
from mcpkit.hub.store.upstream_clients import UpstreamClients
from mcpkit.hub.store.upstream_logins import UpstreamLogins
from mcpkit.hub.store.upstreams import Upstreams
from mcpkit.hub.store.users import Users

__all__ = [
    "UNSET",
    "AuditEntry",
    "AuditRecord",
    "Catalog",
    "Conflict",
    "Credentials",
    "HealthStatus",
    "Invalid",
    "NewToken",
    "NotFound",
    "Outcome",
    "Page",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "TokenRecord",
    "Transport",
    "UpstreamChanges",
    "UpstreamRecord",
    "UpstreamSpec",
    "UserRecord",
]


class Store:
    """The repositories over one database.

    `box` seals and opens upstream credentials (without it, creating an upstream with headers
    or a bearer raises `CredentialError`); `allow_stdio` is the operator's switch for stdio
    upstreams; `clock` gives the current UTC time (tests move it).
    """

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        box: SecretBox | None = None,
        *,
        allow_stdio: bool = False,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        db = Database(sessions)
        self.users = Users(db)
        self.tokens = Tokens(db, clock)
        self.upstreams = Upstreams(db, box, clock, allow_stdio=allow_stdio)
        self.catalog = Catalogs(db, clock)
        self.audit = AuditLog(db, clock)
        self.oauth = OAuthState(db, clock)
        self.upstream_logins = UpstreamLogins(db, box, clock)
        self.upstream_clients = UpstreamClients(db, box, clock)
        self.oidc = OidcIdentities(db, box, clock)
        self.engine: AsyncEngine | None = None  # set when the store owns its engine

    @classmethod
    async def open(
        cls,
        database_url: str | None = None,
        box: SecretBox | None = None,
        *,
        migrate: bool = True,
        allow_stdio: bool = False,
        clock: Callable[[], datetime] = utcnow,
    ) -> Store:
        """A store with an engine of its own for `database_url` (default: the hub's default),
        the schema migrated to head first unless `migrate=False`. Close it with `close()`.

        `Invalid("database_url")` for a URL the hub cannot use, `StoreUnavailable` when the
        database cannot be reached or migrated."""
        try:
            engine = make_engine(database_url)
        except ValueError as error:
            raise Invalid("database_url", str(error)) from None
        except OSError as error:  # the SQLite file or its directory cannot be made
            raise StoreUnavailable(f"cannot open the database: {describe(error)}") from error
        try:
            if migrate:
                await upgrade(engine)
        except (SQLAlchemyError, OSError) as error:
            await engine.dispose()
            raise StoreUnavailable(f"cannot open the database: {describe(error)}") from error
        except BaseException:
            await engine.dispose()
            raise
        store = cls(session_factory(engine), box, allow_stdio=allow_stdio, clock=clock)
        store.engine = engine
        return store

    async def close(self) -> None:
        """Dispose of the engine if `open()` made it (a store over given sessions: nothing)."""
        if self.engine is not None:
            await self.engine.dispose()
            self.engine = None

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()
