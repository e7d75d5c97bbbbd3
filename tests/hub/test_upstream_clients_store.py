"""The hub's kept registrations at upstreams' authorization servers
(store/upstream_clients.py), on SQLite and PostgreSQL: one per (issuer, redirect URI),
sealed at rest, expiring by age, forgotten on demand, and bounded (least recently used
dropped first)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from mcpkit.hub.crypto import SecretBox
from mcpkit.hub.db.models import UpstreamOAuthClient, utcnow
from mcpkit.hub.store import Store
from mcpkit.hub.store.upstream_clients import MAX_CLIENTS

pytestmark = pytest.mark.anyio
CALLBACK = "https://hub.example/oauth/upstream/callback"
SECRET = "client-secret-0123456789"
WEEK = timedelta(days=7)


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def clocked(database_url: str, box: SecretBox, anyio_backend: Any
                  ) -> AsyncIterator[tuple[Store, Clock]]:
    clock = Clock()
    async with await Store.open(database_url, box, clock=clock) as opened:
        yield opened, clock


async def test_a_registration_is_kept_per_issuer_and_redirect_uri_and_sealed(
        clocked: tuple[Store, Clock]) -> None:
    store, _ = clocked
    clients = store.upstream_clients
    assert clients.max_clients == MAX_CLIENTS
    assert await clients.get("https://as.example", CALLBACK, max_age=WEEK) is None
    await clients.put("https://as.example", CALLBACK, f'{{"secret": "{SECRET}"}}')
    kept = await clients.get("https://as.example", CALLBACK, max_age=WEEK)
    assert kept is not None and SECRET in kept
    for issuer, redirect in (("https://as.example", CALLBACK + "x"),
                             ("https://other.example", CALLBACK),
                             ("https://as.example/", CALLBACK)):
        assert await clients.get(issuer, redirect, max_age=WEEK) is None, (issuer, redirect)
    await clients.put("https://as.example", CALLBACK, "replaced")
    assert await clients.get("https://as.example", CALLBACK, max_age=WEEK) == "replaced"
    assert store.engine is not None
    async with store.engine.connect() as connection:
        rows = (await connection.execute(select(UpstreamOAuthClient.registration_sealed))
                ).scalars().all()
    assert len(rows) == 1 and "replaced" not in rows[0] and SECRET not in rows[0]


async def test_an_old_registration_is_dropped_and_a_refused_one_forgotten(
        clocked: tuple[Store, Clock]) -> None:
    store, clock = clocked
    clients = store.upstream_clients
    await clients.put("https://as.example", CALLBACK, "r1")
    clock.now += WEEK + timedelta(seconds=1)
    assert await clients.get("https://as.example", CALLBACK, max_age=WEEK) is None
    assert await clients.count() == 0  # deleted, not only hidden
    await clients.put("https://as.example", CALLBACK, "r2")
    assert await clients.forget("https://as.example", CALLBACK) is True
    assert await clients.forget("https://as.example", CALLBACK) is False
    assert await clients.get("https://as.example", CALLBACK, max_age=WEEK) is None


async def test_the_least_recently_used_go_first_past_the_bound(
        clocked: tuple[Store, Clock]) -> None:
    store, clock = clocked
    clients = store.upstream_clients
    clients.max_clients = 3  # settable (a constructor argument too)
    for number in range(3):
        await clients.put(f"https://as{number}.example", CALLBACK, f"r{number}")
        clock.now += timedelta(seconds=1)
    assert await clients.get("https://as0.example", CALLBACK, max_age=WEEK) == "r0"  # used
    clock.now += timedelta(seconds=1)
    await clients.put("https://as3.example", CALLBACK, "r3")
    assert await clients.count() == 3
    assert await clients.get("https://as1.example", CALLBACK, max_age=WEEK) is None  # LRU
    for number in (0, 2, 3):
        assert await clients.get(f"https://as{number}.example", CALLBACK,
                                 max_age=WEEK) == f"r{number}"
    for number in range(4, 10):  # a frozen clock (ties): the new one is kept all the same
        await clients.put(f"https://as{number}.example", CALLBACK, f"r{number}")
        assert await clients.get(f"https://as{number}.example", CALLBACK,
                                 max_age=WEEK) == f"r{number}"
        assert await clients.count() == 3
