"""The hub's access-token signing key is replaced by age (hub/oauth/keys.py), on SQLite and
PostgreSQL: a key older than `oauth_key_max_age_s` is replaced at the next re-read of the keys;
replicas that rotate at the same moment leave one new key (the unique generation); a token
signed with the old key keeps verifying - and the old key stays in the JWKS - until every token
it signed has expired (lifetime + leeway), then the key is retired. Time is a clock the tests
move (the store's and the tokens' both); the replicas are real hub apps over HTTP on 127.0.0.1.
The migration numbers the keys an older database already holds."""

from __future__ import annotations

import argparse
import json
import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
import sqlalchemy as sa
from joserfc.jwk import ECKey
from tests.hub.hub_helpers import call, database_for, mcp_status, seed_admin
from tests.hub.router.support import hub_replicas

from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.db import migrate as migrations
from mcpkit.hub.db.engine import make_engine
from mcpkit.hub.db.models import UTCDateTime
from mcpkit.hub.oauth.keys import LEEWAY_S, AccessTokens, add_signing_key, rotate_signing_key
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Store

pytestmark = pytest.mark.anyio

DAY_S = 24 * 3600.0
MAX_AGE_S = 30 * DAY_S
TTL_S = 300.0
KEY_CHECK_S = 0.001
"""The tokens re-read their keys whenever asked (their wall clock is the test's; the re-read
interval is real time, so a short pause is enough)."""


class Clock:
    """Wall time that starts now and that the test moves forward."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).timestamp()

    def __call__(self) -> float:
        return self.now

    def utc(self) -> datetime:
        return datetime.fromtimestamp(self.now, UTC)

    async def advance(self, seconds: float) -> None:
        self.now += seconds
        await anyio.sleep(2 * KEY_CHECK_S)  # past the re-read interval


def settings_for(database_url: str) -> HubSettings:
    return HubSettings(database_url=database_url, oauth_access_token_ttl_s=TTL_S,
                       oauth_signing_key_check_s=KEY_CHECK_S, oauth_key_max_age_s=MAX_AGE_S)


def opened(box: SecretBox, sealed: str) -> ECKey:
    return ECKey.import_key(json.loads(box.open_text(sealed)))


def signed_with(key: ECKey, tokens: AccessTokens, user_id: int, issued: float) -> str:
    """A token the hub would have signed with `key` at `issued` (a fresh jti and login)."""
    return tokens.issue_with(key, user_id=user_id, client_id="c", scope="mcp",
                             family_id=secrets.token_hex(16), now=issued)


async def kids(tokens: AccessTokens) -> set[str]:
    return {key["kid"] for key in (await tokens.jwks())["keys"]}


# --- one replica, a moved clock --------------------------------------------------------------


async def test_a_key_older_than_the_max_age_is_replaced_and_retired_after_its_tokens(
        database_url: str, box: SecretBox) -> None:
    clock = Clock()
    store = await Store.open(database_url, box, clock=clock.utc)
    try:
        tokens = AccessTokens(store, box, settings_for(database_url), clock=clock)
        user = await store.users.create("alice")
        first = await tokens.key()
        await clock.advance(MAX_AGE_S - 60)
        assert (await tokens.key()).kid == first.kid  # not due yet
        late = signed_with(first, tokens, user.id, clock())  # signed just before it is due
        assert await tokens.user(late) is not None

        await clock.advance(120)  # the key is past its age: the next re-read replaces it
        second = await tokens.key()
        assert second.kid != first.kid
        records = await store.oauth.signing_keys()
        assert [(r.kid, r.generation) for r in records] == [(second.kid, 2), (first.kid, 1)]
        assert await kids(tokens) == {first.kid, second.kid}
        assert await tokens.user(late) is not None  # its tokens still verify
        # the last token the old key can sign: by a replica that has not re-read yet
        last = signed_with(first, tokens, user.id, clock())
        assert await tokens.user(last) is not None

        # the old key verifies until that token has expired (lifetime + leeway) ...
        await clock.advance(TTL_S + LEEWAY_S - 5)
        assert await tokens.user(last) is not None
        assert await kids(tokens) == {first.kid, second.kid}
        # ... after which it is retired: gone from the JWKS, and even a token it signed
        # that has not expired is refused
        await clock.advance(5 + KEY_CHECK_S + 1)
        assert await tokens.user(last) is None
        assert await kids(tokens) == {second.kid}
        assert await tokens.user(signed_with(first, tokens, user.id, clock())) is None
        assert await tokens.user(signed_with(second, tokens, user.id, clock())) is not None
        assert [r.kid for r in await store.oauth.signing_keys()] == [second.kid]
    finally:
        await store.close()


async def test_a_manual_rotation_adds_the_next_generation(database_url: str,
                                                          box: SecretBox) -> None:
    async with await Store.open(database_url, box) as store:
        settings = settings_for(database_url)
        first, _ = await rotate_signing_key(store, box, settings)  # a database without keys
        second, retired = await rotate_signing_key(store, box, settings)
        assert retired == []
        records = await store.oauth.signing_keys()
        assert [(r.kid, r.generation) for r in records] == [(second, 2), (first, 1)]
        # a replica that read generation 1 and adds "the next" after another did: refused
        assert await add_signing_key(store, box, after=records[1]) is None
        assert len(await store.oauth.signing_keys()) == 2


# --- replicas rotating at once ---------------------------------------------------------------


async def test_replicas_rotating_at_once_leave_one_new_key(database_url: str,
                                                           box: SecretBox) -> None:
    """Four replicas (a store and an engine each) find the key due at the same moment."""
    due = datetime.now(UTC) - timedelta(seconds=MAX_AGE_S + 60)
    async with await Store.open(database_url, box, clock=lambda: due) as old:
        first = await add_signing_key(old, box, after=None)
    stores = [await Store.open(database_url, box) for _ in range(4)]
    try:
        replicas = [AccessTokens(store, box, settings_for(database_url)) for store in stores]
        signing: dict[int, str] = {}

        async def read(index: int) -> None:
            signing[index] = (await replicas[index].key()).kid

        async with anyio.create_task_group() as group:
            for index in range(len(replicas)):
                group.start_soon(read, index)
        records = await stores[0].oauth.signing_keys()
        assert [r.generation for r in records] == [2, 1] and records[1].kid == first
        assert set(signing.values()) == {records[0].kid}  # every replica signs with it
    finally:
        for store in stores:
            await store.close()


@pytest.fixture(params=["sqlite", "postgres"])
def shared_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return database_for(request, request.param, tmp_path)


def test_two_hubs_on_one_database_rotate_a_due_key_once(shared_database: str) -> None:
    """Two hub apps (replicas) on one database, whose key is past its age: asked for their
    JWKS at the same moment, each re-reads, both try to rotate, one new key results; both
    publish both keys, and /mcp at each accepts a token signed by either."""
    box = SecretBox([generate_key()])
    seed_admin(shared_database, box)
    due = datetime.now(UTC) - timedelta(seconds=MAX_AGE_S + 60)

    async def seed() -> tuple[str, int]:
        async with await Store.open(shared_database, box, clock=lambda: due) as old:
            kid = await add_signing_key(old, box, after=None)
            user = await old.users.create("carol")
        assert kid is not None
        return kid, user.id

    first, user_id = anyio.run(seed)
    with hub_replicas(box, database_url=shared_database,
                      oauth_key_max_age_s=MAX_AGE_S) as (one, two):
        public = one  # the replicas' public URL
        async def check() -> None:
            published: dict[str, set[str]] = {}

            async def jwks(url: str) -> None:
                reply = await call("GET", url + "/oauth/jwks")
                published[url] = {key["kid"] for key in reply.body["keys"]}

            async with anyio.create_task_group() as group:
                for url in (one, two):
                    group.start_soon(jwks, url)
            async with await Store.open(shared_database, box) as store:
                records = await store.oauth.signing_keys()
                tokens = AccessTokens(store, box, HubSettings(
                    database_url=shared_database, public_url=public))
                keys = [opened(box, r.private_jwk_sealed) for r in records]
            assert [r.generation for r in records] == [2, 1] and records[1].kid == first
            assert published == {one: {first, records[0].kid}, two: {first, records[0].kid}}
            now = datetime.now(UTC).timestamp()
            for url in (one, two):
                for key in keys:
                    token = signed_with(key, tokens, user_id, now)
                    assert await mcp_status(url, token) == 200, (url, key.kid)
                assert await mcp_status(url, "x" + signed_with(keys[0], tokens, user_id,
                                                               now)) == 401

        anyio.run(check)


# --- the migration ---------------------------------------------------------------------------


async def test_the_migration_numbers_existing_keys_oldest_first(database_url: str) -> None:
    engine = make_engine(database_url)
    keys = sa.table("oauth_signing_keys", sa.column("kid", sa.String()),
                    sa.column("private_jwk_sealed", sa.Text()),
                    sa.column("created_at", UTCDateTime()))
    now = datetime.now(UTC)
    try:
        await migrations.upgrade(engine, "0003")
        async with engine.begin() as connection:
            for kid, days_ago in (("newer", 1), ("oldest", 9), ("middle", 5)):
                await connection.execute(keys.insert().values(
                    kid=kid, private_jwk_sealed="sealed", created_at=now - timedelta(days_ago)))
        await migrations.upgrade(engine)
        async with engine.connect() as connection:
            rows = await connection.execute(sa.text(
                "SELECT kid, generation FROM oauth_signing_keys ORDER BY generation"))
            assert [tuple(row) for row in rows] == [("oldest", 1), ("middle", 2), ("newer", 3)]
        assert await migrations.schema_differences(engine) == []
    finally:
        await engine.dispose()


def test_the_max_age_is_a_setting_bounded_below() -> None:
    from mcpkit.hub.serve import add_serve_command
    from mcpkit.hub.settings import SettingsError

    read = HubSettings.from_env({"MCPKIT_HUB_OAUTH_KEY_MAX_AGE_S": "86400"})
    assert read.oauth_key_max_age_s == 86400
    parser = argparse.ArgumentParser()
    add_serve_command(parser.add_subparsers())
    args = parser.parse_args(["serve", "--oauth-key-max-age", "7200"])
    assert HubSettings.from_args(args, environ={}).oauth_key_max_age_s == 7200
    assert HubSettings().oauth_key_max_age_s == MAX_AGE_S
    with pytest.raises(SettingsError, match="oauth_key_max_age_s"):
        HubSettings(oauth_key_max_age_s=0.0)
    with pytest.raises(SettingsError, match="at least oauth_access_token_ttl_s"):
        HubSettings(oauth_key_max_age_s=100.0, oauth_access_token_ttl_s=300.0)
