"""The store of users' upstream logins (store/upstream_logins.py), on SQLite and PostgreSQL:
isolation by construction (every combination of user and upstream tried), sealing at rest,
cascades with the upstream and the user, single-use pending logins, the per-user bound."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from sqlalchemy import select, text

from mcpkit.hub.db.models import UpstreamLogin, UpstreamLoginState
from mcpkit.hub.store import NotFound, Store, UpstreamRecord, UpstreamSpec

pytestmark = pytest.mark.anyio
SECRET = "refresh-token-of-ada-0123456789"


async def owner_and_upstream(store: Store, name: str) -> UpstreamRecord:
    user = await store.users.create(name)
    return await store.upstreams.create(user.id, UpstreamSpec(
        name="who", transport="http", url="https://mcp.example.com/mcp", auth_mode="oauth"))


async def test_a_login_is_read_and_written_only_by_its_owner_for_their_upstream(
        store: Store) -> None:
    ada, bob = await owner_and_upstream(store, "ada"), await owner_and_upstream(store, "bob")
    assert ada.auth_mode == "oauth"
    await store.upstream_logins.put(ada.user_id, ada.id, f'{{"token": "{SECRET}"}}')
    for user, upstream in itertools.product((ada.user_id, bob.user_id), (ada.id, bob.id)):
        mine = (user, upstream) == (ada.user_id, ada.id)
        found = await store.upstream_logins.get(user, upstream)
        assert (found is not None and SECRET in found) is mine, (user, upstream)
        assert await store.upstream_logins.has(user, upstream) is mine
        if user != (ada.user_id if upstream == ada.id else bob.user_id):
            with pytest.raises(NotFound):  # never written for an upstream not the user's
                await store.upstream_logins.put(user, upstream, "stolen")
            assert await store.upstream_logins.delete(user, upstream) is False
    assert await store.upstream_logins.get(bob.user_id, bob.id) is None
    kept = await store.upstream_logins.get(ada.user_id, ada.id)
    assert kept is not None and SECRET in kept


async def test_logins_are_sealed_at_rest_and_go_with_the_upstream_or_the_user(
        store: Store) -> None:
    ada, bob = await owner_and_upstream(store, "ada"), await owner_and_upstream(store, "bob")
    for upstream in (ada, bob):
        await store.upstream_logins.put(upstream.user_id, upstream.id, SECRET)
    assert store.engine is not None
    async with store.engine.connect() as connection:
        sealed = (await connection.execute(select(UpstreamLogin.grant_sealed))).scalars().all()
    assert len(sealed) == 2 and not any(SECRET in value for value in sealed)
    await store.upstreams.delete(ada.user_id, ada.id)
    assert await store.upstream_logins.get(ada.user_id, ada.id) is None
    async with store.engine.begin() as connection:
        await connection.execute(text("DELETE FROM users WHERE id = :id"), {"id": bob.user_id})
    async with store.engine.connect() as connection:
        left = (await connection.execute(select(UpstreamLogin.user_id))).scalars().all()
    assert left == []


async def test_a_pending_login_is_taken_once_and_bound_to_its_starter(store: Store) -> None:
    ada, bob = await owner_and_upstream(store, "ada"), await owner_and_upstream(store, "bob")
    later = store.upstream_logins.now() + timedelta(minutes=10)
    with pytest.raises(NotFound):  # nobody starts a login for another user's upstream
        await store.upstream_logins.save_pending("h-bob", bob.user_id, ada.id, "x", later)
    await store.upstream_logins.save_pending("h-ada", ada.user_id, ada.id, "verifier", later)
    taken = await store.upstream_logins.take_pending("h-ada")
    assert taken is not None and (taken.user_id, taken.upstream_id) == (ada.user_id, ada.id)
    assert taken.data == "verifier"
    assert await store.upstream_logins.take_pending("h-ada") is None


async def test_pending_logins_are_bounded_per_user_and_expired_ones_purged(
        store: Store) -> None:
    ada = await owner_and_upstream(store, "ada")
    logins = store.upstream_logins
    now = logins.now()
    await logins.save_pending("old", ada.user_id, ada.id, "x", now - timedelta(seconds=1))
    for n in range(logins.max_pending_per_user + 5):
        await logins.save_pending(f"h{n}", ada.user_id, ada.id, "x",
                                  now + timedelta(seconds=600 + n))
    assert store.engine is not None
    async with store.engine.connect() as connection:
        left = set((await connection.execute(select(UpstreamLoginState.state_hash)))
                   .scalars().all())
    newest = {f"h{n}" for n in range(5, logins.max_pending_per_user + 5)}
    assert left == newest  # the expired one and the five oldest went
