"""mcpkit.hub.store on a real SQLite file and a real PostgreSQL database: users, tokens,
owner-scoped upstreams (isolation, unique names, optimistic versions), catalogs (atomic
replace), the audit log, error translation, and a SQLite database surviving SIGKILL."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import text

from mcpkit.hub.crypto import CredentialError, SecretBox, generate_key
from mcpkit.hub.db.models import AuditEvent
from mcpkit.hub.store import (
    UNSET,
    AuditEntry,
    Conflict,
    Invalid,
    NotFound,
    Store,
    StoreError,
    StoreUnavailable,
    UpstreamChanges,
    UpstreamSpec,
)
from mcpkit.hub.store import catalog as catalog_module

pytestmark = pytest.mark.anyio


def http(name: str = "github", **fields: Any) -> UpstreamSpec:
    return UpstreamSpec(name=name, transport="http", url="https://mcp.example.com/mcp", **fields)


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


async def raw(store: Store, sql: str, **params: Any) -> list[Any]:
    assert store.engine is not None
    async with store.engine.connect() as connection:
        return list((await connection.execute(text(sql), params)).all())


# --- users ----------------------------------------------------------------------------------


async def test_users_create_get_list_disable(store: Store) -> None:
    alice = await store.users.create("alice")
    root = await store.users.create("root", is_admin=True)
    assert (alice.is_admin, root.is_admin, alice.disabled) == (False, True, False)
    assert alice.created_at.tzinfo is not None
    assert await store.users.get(alice.id) == alice
    assert await store.users.get_by_name("root") == root
    with pytest.raises(Conflict) as conflict:
        await store.users.create("alice")
    assert conflict.value.field == "name"
    disabled = await store.users.set_disabled(alice.id)
    assert disabled.disabled and (await store.users.get(alice.id)).disabled
    assert (await store.users.set_admin(alice.id)).is_admin
    with pytest.raises(NotFound):
        await store.users.get(999)
    with pytest.raises(NotFound):
        await store.users.get_by_name("nobody")
    with pytest.raises(NotFound):
        await store.users.set_disabled(999)


@pytest.mark.parametrize("name", ["", "Alice", "-x", "a b", "a" * 64, "é", "a/b", "alice\n"])
async def test_user_names_are_slugs(sqlite_store: Store, name: str) -> None:
    with pytest.raises(Invalid) as invalid:
        await sqlite_store.users.create(name)
    assert invalid.value.field == "name"


async def test_users_list_in_pages(store: Store) -> None:
    names = [f"user-{i:02d}" for i in range(7)]
    for name in reversed(names):
        await store.users.create(name)
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = await store.users.list(limit=3, cursor=cursor)
        seen += [user.name for user in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == names
    with pytest.raises(Invalid) as invalid:
        await store.users.list(cursor="%%%")
    assert invalid.value.field == "cursor"
    with pytest.raises(Invalid):
        await store.users.list(limit=0)


# --- tokens ---------------------------------------------------------------------------------


async def test_a_token_verifies_to_its_user_and_is_stored_hashed(store: Store) -> None:
    alice = await store.users.create("alice")
    new = await store.tokens.create(alice.id, name="laptop")
    assert new.secret.startswith("mcphub_") and new.secret not in repr(new)
    assert await store.tokens.verify(new.secret) == alice
    rows = await raw(store, "SELECT token_hash, prefix FROM api_tokens")
    assert rows[0][0] != new.secret and len(rows[0][0]) == 64
    assert new.secret.startswith(rows[0][1])
    assert all(new.secret not in str(value) for row in rows for value in row)
    listed = await store.tokens.list(alice.id)
    assert [t.name for t in listed] == ["laptop"]
    assert listed[0].last_used_at is not None


async def test_unknown_malformed_or_foreign_secrets_do_not_verify(store: Store) -> None:
    alice = await store.users.create("alice")
    new = await store.tokens.create(alice.id)
    for secret in ("", "mcphub_", new.secret[:-1], new.secret + "x", "Bearer " + new.secret,
                   new.secret.upper(), "x" * 10_000, "mcphub_" + "a" * 1000):
        assert await store.tokens.verify(secret) is None


async def test_revoked_expired_and_disabled_tokens_do_not_verify(
    database_url: str, box: SecretBox
) -> None:
    clock = Clock()
    async with await Store.open(database_url, box, clock=clock) as store:
        alice = await store.users.create("alice")
        bob = await store.users.create("bob")
        revoked = await store.tokens.create(alice.id, name="revoked")
        expiring = await store.tokens.create(
            alice.id, name="expiring", expires_at=clock.now + timedelta(days=1)
        )
        bobs = await store.tokens.create(bob.id)
        assert (await store.tokens.revoke(revoked.record.id)).revoked_at == clock.now
        assert await store.tokens.verify(revoked.secret) is None
        assert await store.tokens.verify(expiring.secret) == alice
        clock.advance(days=1)
        assert await store.tokens.verify(expiring.secret) is None
        await store.users.set_disabled(bob.id)
        assert await store.tokens.verify(bobs.secret) is None
        await store.users.set_disabled(bob.id, False)
        assert (await store.tokens.verify(bobs.secret)) is not None
        with pytest.raises(Invalid) as invalid:
            await store.tokens.create(alice.id, expires_at=clock.now - timedelta(seconds=1))
        assert invalid.value.field == "expires_at"
        with pytest.raises(NotFound):
            await store.tokens.create(12345)


async def test_revoking_twice_keeps_the_first_time_and_is_scoped(
    database_url: str, box: SecretBox
) -> None:
    clock = Clock()
    async with await Store.open(database_url, box, clock=clock) as store:
        alice = await store.users.create("alice")
        bob = await store.users.create("bob")
        token = await store.tokens.create(alice.id)
        with pytest.raises(NotFound):  # bob cannot revoke alice's token
            await store.tokens.revoke(token.record.id, user_id=bob.id)
        assert await store.tokens.verify(token.secret) == alice
        first = await store.tokens.revoke(token.record.id, user_id=alice.id)
        clock.advance(hours=1)
        again = await store.tokens.revoke(token.record.id)
        assert first.revoked_at == again.revoked_at
        with pytest.raises(NotFound):
            await store.tokens.revoke(999)


async def test_last_used_is_written_at_most_once_a_minute(
    database_url: str, box: SecretBox
) -> None:
    clock = Clock()
    async with await Store.open(database_url, box, clock=clock) as store:
        alice = await store.users.create("alice")
        token = await store.tokens.create(alice.id)
        start = clock.now
        await store.tokens.verify(token.secret)
        clock.advance(seconds=30)
        await store.tokens.verify(token.secret)
        assert (await store.tokens.list(alice.id))[0].last_used_at == start
        clock.advance(seconds=31)
        await store.tokens.verify(token.secret)
        assert (await store.tokens.list(alice.id))[0].last_used_at == clock.now


# --- upstreams ------------------------------------------------------------------------------


async def test_create_and_read_an_upstream(store: Store) -> None:
    alice = await store.users.create("alice")
    created = await store.upstreams.create(
        alice.id,
        http(
            headers={"X-Api-Key": "key-1"},
            bearer="bearer-1",
            disabled_tools=["drop", "drop", "rm"],
            enabled_tools=["read"],
            call_timeout_s=5,
        ),
    )
    assert created.version == 1 and created.health_status == "unknown"
    assert created.has_headers and created.has_bearer
    assert created.disabled_tools == ("drop", "rm")
    assert created.call_timeout_s == 5.0 and created.connect_timeout_s == 10.0
    assert created.tool_allowed("read") and not created.tool_allowed("rm")
    assert not created.tool_allowed("other")
    assert await store.upstreams.get(alice.id, created.id) == created
    assert await store.upstreams.get_by_name(alice.id, "github") == created
    credentials = await store.upstreams.credentials(alice.id, created.id)
    assert credentials.headers == {"X-Api-Key": "key-1"} and credentials.bearer == "bearer-1"
    assert "key-1" not in repr(credentials) and "bearer-1" not in repr(credentials)


async def test_credentials_are_sealed_at_rest(store: Store, box: SecretBox) -> None:
    alice = await store.users.create("alice")
    up = await store.upstreams.create(
        alice.id, http(headers={"X-Api-Key": "plain-header-value"}, bearer="plain-bearer")
    )
    row = (await raw(store, "SELECT * FROM upstreams"))[0]
    dumped = repr(tuple(row))
    assert "plain-header-value" not in dumped and "plain-bearer" not in dumped
    sealed = (await raw(store, "SELECT bearer_encrypted FROM upstreams"))[0][0]
    assert box.open(sealed) == "plain-bearer"
    async with await Store.open(store_url(store), SecretBox([generate_key()])) as other_key:
        with pytest.raises(CredentialError):
            await other_key.upstreams.credentials(alice.id, up.id)
        assert (await other_key.upstreams.get(alice.id, up.id)).has_bearer  # still listed


def store_url(store: Store) -> str:
    assert store.engine is not None
    return store.engine.url.render_as_string(hide_password=False)


async def test_a_store_without_a_key_refuses_credentials(database_url: str) -> None:
    async with await Store.open(database_url) as store:
        alice = await store.users.create("alice")
        up = await store.upstreams.create(alice.id, http())  # none to seal: fine
        assert (await store.upstreams.credentials(alice.id, up.id)).bearer is None
        with pytest.raises(CredentialError, match="no secret key"):
            await store.upstreams.create(alice.id, http("other", bearer="x"))


BAD_SPECS: list[tuple[dict[str, Any], str]] = [
    ({"name": "Bad Name"}, "name"),
    ({"transport": "grpc"}, "transport"),
    ({"transport": "stdio", "url": None, "command": ["srv"]}, "transport"),
    ({"url": None}, "url"),
    ({"url": "ftp://example.com/x"}, "url"),
    ({"url": "ws://example.com/x"}, "url"),
    ({"url": "https://"}, "url"),
    ({"url": "https://user:pw@example.com/mcp"}, "url"),
    ({"url": "https://example.com/a b"}, "url"),
    ({"url": "https://example.com:99999/"}, "url"),
    ({"url": "https://example.com/" + "a" * 3000}, "url"),
    ({"command": ["x"]}, "command"),
    ({"headers": {"Bad Name": "v"}}, "headers"),
    ({"headers": {"X-A": "v\r\nInjected: 1"}}, "headers.X-A"),
    ({"headers": {"Host": "evil"}}, "headers.Host"),
    ({"headers": {"Mcp-Session-Id": "s"}}, "headers.Mcp-Session-Id"),
    ({"headers": {"X-A": "1", "x-a": "2"}}, "headers.x-a"),
    ({"headers": {"X-A": 1}}, "headers.X-A"),
    ({"headers": ["X-A"]}, "headers"),
    ({"bearer": ""}, "bearer"),
    ({"bearer": "a b"}, "bearer"),
    ({"enabled": "yes"}, "enabled"),
    ({"enabled_tools": "read"}, "enabled_tools"),
    ({"disabled_tools": [""]}, "disabled_tools[0]"),
    ({"disabled_tools": None}, "disabled_tools"),
    ({"connect_timeout_s": 0}, "connect_timeout_s"),
    ({"call_timeout_s": float("nan")}, "call_timeout_s"),
    ({"call_timeout_s": 10_000}, "call_timeout_s"),
    ({"call_timeout_s": True}, "call_timeout_s"),
]


@pytest.mark.parametrize(("fields", "field"), BAD_SPECS, ids=[f for _, f in BAD_SPECS])
async def test_bad_input_is_invalid_with_the_field(
    sqlite_store: Store, fields: dict[str, Any], field: str
) -> None:
    store = sqlite_store
    alice = await store.users.create("alice")
    spec = dataclasses.replace(http(), **fields)
    with pytest.raises(Invalid) as invalid:
        await store.upstreams.create(alice.id, spec)
    assert invalid.value.field == field
    assert (await store.upstreams.list(alice.id)).items == ()


async def test_stdio_upstreams_only_when_the_operator_allows(
    database_url: str, box: SecretBox
) -> None:
    spec = UpstreamSpec(name="local", transport="stdio", command=["python", "-m", "srv"])
    async with await Store.open(database_url, box, allow_stdio=True) as store:
        alice = await store.users.create("alice")
        created = await store.upstreams.create(alice.id, spec)
        assert created.command == ("python", "-m", "srv") and created.url is None
        for bad, field in (
            ({"command": None}, "command"),
            ({"command": []}, "command"),
            ({"command": "python srv"}, "command"),
            ({"command": ["a\0b"]}, "command[0]"),
            ({"url": "https://x.example"}, "url"),
        ):
            with pytest.raises(Invalid) as invalid:
                await store.upstreams.create(alice.id, dataclasses.replace(spec, **bad))
            assert invalid.value.field == field


async def test_names_are_unique_per_user_not_across_users(store: Store) -> None:
    alice = await store.users.create("alice")
    bob = await store.users.create("bob")
    first = await store.upstreams.create(alice.id, http())
    with pytest.raises(Conflict) as conflict:
        await store.upstreams.create(alice.id, http())
    assert conflict.value.field == "name"
    other = await store.upstreams.create(bob.id, http())  # the same name for another user
    assert other.id != first.id
    second = await store.upstreams.create(alice.id, http("gitlab"))
    with pytest.raises(Conflict):  # renaming onto a taken name
        await store.upstreams.update(alice.id, second.id, UpstreamChanges(name="github"))
    assert (await store.upstreams.get(alice.id, second.id)).name == "gitlab"
    with pytest.raises(NotFound):
        await store.upstreams.create(4242, http())


async def test_user_b_can_never_reach_user_a_upstreams(store: Store) -> None:
    alice = await store.users.create("alice")
    bob = await store.users.create("bob")
    up = await store.upstreams.create(alice.id, http(bearer="alice-secret"))
    await store.catalog.replace(alice.id, up.id, tools=[{"name": "t"}])
    before = await store.upstreams.get(alice.id, up.id)
    attempts = [
        store.upstreams.get(bob.id, up.id),
        store.upstreams.get_by_name(bob.id, "github"),
        store.upstreams.update(bob.id, up.id, UpstreamChanges(enabled=False)),
        store.upstreams.update(bob.id, up.id, UpstreamChanges(), expected_version=1),
        store.upstreams.delete(bob.id, up.id),
        store.upstreams.credentials(bob.id, up.id),
        store.upstreams.set_health(bob.id, up.id, "unhealthy", error="x"),
        store.catalog.get(bob.id, up.id),
        store.catalog.replace(bob.id, up.id, tools=[]),
    ]
    for attempt in attempts:
        with pytest.raises(NotFound):
            await attempt
    assert (await store.upstreams.list(bob.id)).items == ()
    assert await store.upstreams.all(bob.id) == ()
    assert await store.catalog.all(bob.id, enabled_only=False) == ()
    assert await store.upstreams.get(alice.id, up.id) == before
    assert len((await store.catalog.get(alice.id, up.id)).tools) == 1
    for guess in ("", "x" * 37, up.id.upper(), up.id + " ", "' OR 1=1 --"):
        with pytest.raises(NotFound):
            await store.upstreams.get(alice.id, guess)


async def test_optimistic_versions(store: Store) -> None:
    alice = await store.users.create("alice")
    up = await store.upstreams.create(alice.id, http())
    changed = await store.upstreams.update(
        alice.id, up.id, UpstreamChanges(enabled=False), expected_version=1
    )
    assert changed.version == 2 and not changed.enabled and changed.updated_at >= up.updated_at
    with pytest.raises(Conflict) as conflict:
        await store.upstreams.update(
            alice.id, up.id, UpstreamChanges(enabled=True), expected_version=1
        )
    assert conflict.value.field == "version"
    assert not (await store.upstreams.get(alice.id, up.id)).enabled
    with pytest.raises(Conflict):
        await store.upstreams.delete(alice.id, up.id, expected_version=1)
    await store.upstreams.delete(alice.id, up.id, expected_version=2)
    with pytest.raises(NotFound):
        await store.upstreams.get(alice.id, up.id)
    with pytest.raises(NotFound):
        await store.upstreams.delete(alice.id, up.id)


async def test_concurrent_updates_apply_one_after_the_other(store: Store) -> None:
    alice = await store.users.create("alice")
    up = await store.upstreams.create(alice.id, http())
    results: list[int] = []

    async def bump(i: int) -> None:
        record = await store.upstreams.update(
            alice.id, up.id, UpstreamChanges(call_timeout_s=float(i + 1))
        )
        results.append(record.version)

    async with anyio.create_task_group() as group:
        for i in range(12):
            group.start_soon(bump, i)
    assert sorted(results) == list(range(2, 14))
    assert (await store.upstreams.get(alice.id, up.id)).version == 13


async def test_concurrent_creates_all_land(store: Store) -> None:
    alice = await store.users.create("alice")
    async with anyio.create_task_group() as group:
        for i in range(20):
            group.start_soon(store.upstreams.create, alice.id, http(f"up-{i:02d}"))
    assert len((await store.upstreams.list(alice.id, limit=100)).items) == 20


async def test_partial_updates_keep_clear_or_replace_credentials(store: Store) -> None:
    alice = await store.users.create("alice")
    up = await store.upstreams.create(alice.id, http(headers={"X-A": "1"}, bearer="b1"))
    sealed_before = await raw(store, "SELECT headers_encrypted, bearer_encrypted FROM upstreams")
    await store.upstreams.update(alice.id, up.id, UpstreamChanges(enabled=False))
    assert await raw(store, "SELECT headers_encrypted, bearer_encrypted FROM upstreams") == (
        sealed_before  # kept as sealed, never re-encrypted
    )
    await store.upstreams.update(alice.id, up.id, UpstreamChanges(bearer="b2"))
    credentials = await store.upstreams.credentials(alice.id, up.id)
    assert (credentials.headers, credentials.bearer) == ({"X-A": "1"}, "b2")
    cleared = await store.upstreams.update(alice.id, up.id, UpstreamChanges(headers=None))
    assert not cleared.has_headers and cleared.has_bearer
    credentials = await store.upstreams.credentials(alice.id, up.id)
    assert (credentials.headers, credentials.bearer) == ({}, "b2")
    assert UpstreamChanges().bearer is UNSET


async def test_changing_the_transport_swaps_the_endpoint(database_url: str, box: SecretBox) -> None:
    async with await Store.open(database_url, box, allow_stdio=True) as store:
        alice = await store.users.create("alice")
        up = await store.upstreams.create(alice.id, http())
        local = await store.upstreams.update(
            alice.id, up.id, UpstreamChanges(transport="stdio", command=["srv", "--stdio"])
        )
        assert (local.url, local.command) == (None, ("srv", "--stdio"))
        with pytest.raises(Invalid) as invalid:  # back to http without a URL
            await store.upstreams.update(alice.id, up.id, UpstreamChanges(transport="http"))
        assert invalid.value.field == "url"
        back = await store.upstreams.update(
            alice.id, up.id, UpstreamChanges(transport="ws", url="wss://x.example/mcp")
        )
        assert (back.url, back.command, back.version) == ("wss://x.example/mcp", None, 3)


async def test_listing_is_paged_stably_by_name(store: Store) -> None:
    alice = await store.users.create("alice")
    bob = await store.users.create("bob")
    names = [f"srv-{i:02d}" for i in range(8)]
    for name in reversed(names):
        await store.upstreams.create(alice.id, http(name, enabled=name != "srv-03"))
    await store.upstreams.create(bob.id, http("srv-00b"))
    first = await store.upstreams.list(alice.id, limit=3)
    await store.upstreams.create(alice.id, http("srv-00a"))  # lands before the cursor
    seen = [u.name for u in first.items]
    cursor = first.next_cursor
    while cursor is not None:
        page = await store.upstreams.list(alice.id, limit=3, cursor=cursor)
        seen += [u.name for u in page.items]
        cursor = page.next_cursor
    assert seen == names
    enabled = await store.upstreams.list(alice.id, limit=100, enabled=True)
    assert "srv-03" not in [u.name for u in enabled.items] and len(enabled.items) == 8
    every = await store.upstreams.all(alice.id, enabled_only=True)
    assert [u.name for u in every] == [u.name for u in enabled.items]
    with pytest.raises(Invalid):
        await store.upstreams.list(alice.id, limit=501)


async def test_health_does_not_bump_the_version(database_url: str, box: SecretBox) -> None:
    clock = Clock()
    async with await Store.open(database_url, box, clock=clock) as store:
        alice = await store.users.create("alice")
        bob = await store.users.create("bob")
        a1 = await store.upstreams.create(alice.id, http("a1"))
        a2 = await store.upstreams.create(alice.id, http("a2"))
        b1 = await store.upstreams.create(bob.id, http("b1"))
        off = await store.upstreams.create(bob.id, http("off", enabled=False))
        due = await store.upstreams.due_for_health_check(checked_before=clock.now)
        assert {u.id for u in due} == {a1.id, a2.id, b1.id}
        assert {u.user_id for u in due} == {alice.id, bob.id}
        await store.upstreams.set_health(alice.id, a1.id, "unhealthy", error="boom " * 1000)
        record = await store.upstreams.get(alice.id, a1.id)
        assert record.health_status == "unhealthy" and record.version == 1
        assert record.last_checked_at == clock.now
        assert record.last_error is not None and len(record.last_error) == 2000
        clock.advance(minutes=1)
        await store.upstreams.set_health(alice.id, a1.id, "healthy")
        assert (await store.upstreams.get(alice.id, a1.id)).last_error is None
        due = await store.upstreams.due_for_health_check(checked_before=clock.now, limit=2)
        assert [u.id for u in due] == sorted([a2.id, b1.id])  # never checked come first
        with pytest.raises(Invalid):
            await store.upstreams.set_health(alice.id, a1.id, "sick")  # type: ignore[arg-type]
        assert off.id not in {u.id for u in due}


# --- catalog --------------------------------------------------------------------------------


async def test_catalog_replace_and_read(store: Store) -> None:
    alice = await store.users.create("alice")
    up = await store.upstreams.create(alice.id, http())
    empty = await store.catalog.get(alice.id, up.id)
    assert empty.tools == () and empty.updated_at is None
    tools = [
        {"name": "b", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
        {"name": "a", "description": "ünïcode", "_meta": {"k": [1, 2.5, None]}},
        {"name": "b", "description": "a repeat keeps the first"},
    ]
    await store.catalog.replace(
        alice.id,
        up.id,
        tools=tools,
        prompts=[{"name": "review", "arguments": [{"name": "code"}]}],
        resources=[{"uri": "file:///a", "name": "a"}],
        resource_templates=[{"uriTemplate": "docs://{topic}", "name": "docs"}],
    )
    catalog = await store.catalog.get(alice.id, up.id)
    assert catalog.tools == (tools[0], tools[1])
    assert catalog.prompts[0]["name"] == "review"
    assert catalog.resources == ({"uri": "file:///a", "name": "a"},)
    assert catalog.resource_templates[0]["uriTemplate"] == "docs://{topic}"
    assert (await store.upstreams.get(alice.id, up.id)).tool_count == 2
    await store.catalog.replace(alice.id, up.id, prompts=[])  # tools untouched
    catalog = await store.catalog.get(alice.id, up.id)
    assert len(catalog.tools) == 2 and catalog.prompts == () and len(catalog.resources) == 1
    assert (await store.upstreams.get(alice.id, up.id)).version == 1


async def test_catalog_replace_is_all_or_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = await store.users.create("alice")
    up = await store.upstreams.create(alice.id, http())
    await store.catalog.replace(alice.id, up.id, tools=[{"name": "old"}], prompts=[{"name": "p"}])
    before = await store.catalog.get(alice.id, up.id)
    real = catalog_module._write_list
    calls = 0

    async def failing(*args: Any) -> None:
        nonlocal calls
        calls += 1
        await real(*args)
        if calls == 2:  # tools written, prompts written, then the process "fails"
            raise RuntimeError("crash in the middle")

    monkeypatch.setattr(catalog_module, "_write_list", failing)
    with pytest.raises(RuntimeError):
        await store.catalog.replace(
            alice.id, up.id, tools=[{"name": "n1"}, {"name": "n2"}], prompts=[], resources=[]
        )
    monkeypatch.setattr(catalog_module, "_write_list", real)
    assert await store.catalog.get(alice.id, up.id) == before
    assert (await store.upstreams.get(alice.id, up.id)).tool_count == 1
    with pytest.raises(Invalid) as invalid:  # a bad entry: nothing written either
        await store.catalog.replace(alice.id, up.id, tools=[{"name": "ok"}, {"nome": "x"}])
    assert invalid.value.field == "tools[1].name"
    with pytest.raises(Invalid):
        await store.catalog.replace(alice.id, up.id, tools=[{"name": "x", "v": {1, 2}}])
    with pytest.raises(Invalid):
        await store.catalog.replace(alice.id, up.id, tools=[{"name": "x", "v": float("inf")}])
    assert await store.catalog.get(alice.id, up.id) == before


async def test_readers_never_see_half_a_catalog(store: Store) -> None:
    alice = await store.users.create("alice")
    up = await store.upstreams.create(alice.id, http())
    sizes = {3, 7}
    torn: list[int] = []

    async def writer() -> None:
        for i in range(20):
            n = 3 if i % 2 else 7
            await store.catalog.replace(
                alice.id, up.id, tools=[{"name": f"t{j}", "n": n} for j in range(n)]
            )

    async def reader() -> None:
        for _ in range(40):
            tools = (await store.catalog.get(alice.id, up.id)).tools
            if tools and (len(tools) not in sizes or {t["n"] for t in tools} != {len(tools)}):
                torn.append(len(tools))

    await store.catalog.replace(alice.id, up.id, tools=[{"name": "t", "n": 1}] * 1)
    sizes.add(1)
    async with anyio.create_task_group() as group:
        group.start_soon(writer)
        group.start_soon(reader)
        group.start_soon(reader)
    assert torn == []


async def test_deleting_an_upstream_removes_its_catalog(store: Store) -> None:
    alice = await store.users.create("alice")
    up = await store.upstreams.create(alice.id, http())
    keep = await store.upstreams.create(alice.id, http("keep"))
    for upstream in (up, keep):
        await store.catalog.replace(
            alice.id, upstream.id, tools=[{"name": "t"}], prompts=[{"name": "p"}],
            resources=[{"uri": "u:1"}], resource_templates=[{"uriTemplate": "u:{x}"}],
        )
    await store.upstreams.delete(alice.id, up.id)
    for table in ("upstream_tools", "upstream_prompts", "upstream_resources",
                  "upstream_resource_templates"):
        rows = await raw(store, f"SELECT upstream_id FROM {table}")
        assert rows == [(keep.id,)]


async def test_all_catalogs_of_a_user(store: Store) -> None:
    alice = await store.users.create("alice")
    bob = await store.users.create("bob")
    one = await store.upstreams.create(alice.id, http("one"))
    two = await store.upstreams.create(alice.id, http("two", enabled=False))
    theirs = await store.upstreams.create(bob.id, http("one"))
    await store.catalog.replace(alice.id, one.id, tools=[{"name": "a1"}, {"name": "a2"}])
    await store.catalog.replace(alice.id, two.id, tools=[{"name": "b"}])
    await store.catalog.replace(bob.id, theirs.id, tools=[{"name": "secret-tool"}])
    enabled = await store.catalog.all(alice.id)
    assert [(u.name, [t["name"] for t in c.tools]) for u, c in enabled] == [("one", ["a1", "a2"])]
    every = await store.catalog.all(alice.id, enabled_only=False)
    assert [u.name for u, _ in every] == ["one", "two"]
    assert every[1][1].tools == ({"name": "b"},)


# --- audit ----------------------------------------------------------------------------------


async def test_the_audit_log_records_calls_newest_first(store: Store) -> None:
    alice = await store.users.create("alice")
    bob = await store.users.create("bob")
    up = await store.upstreams.create(alice.id, http())
    at = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    entries = [
        AuditEntry(alice.id, up.id, "github", "search", 1.25, "ok", at=at),
        AuditEntry(alice.id, up.id, "github", "push", 30_000.0, "timeout", error="x" * 5000),
        AuditEntry(alice.id, None, "gone", "t", 0.0, "denied"),
        AuditEntry(bob.id, None, "other", "t", 2, "error", error="boom"),
    ]
    await store.audit.record_many(entries[:3])
    await store.audit.record(entries[3])
    await store.audit.record_many([])
    recent = await store.audit.recent(alice.id)
    assert [r.outcome for r in recent] == ["denied", "timeout", "ok"]
    assert recent[1].error is not None and len(recent[1].error) == 2000
    assert recent[2].duration_ms == 1.25 and recent[2].at == at  # to the microsecond, in UTC
    assert recent[2].upstream_id == up.id and recent[2].tool == "search"
    assert recent[0].upstream_id is None and recent[0].error is None
    older = await store.audit.recent(alice.id, before_id=recent[0].id, limit=1)
    assert [r.outcome for r in older] == ["timeout"]
    assert [r.tool for r in await store.audit.recent(bob.id)] == ["t"]
    with pytest.raises(Invalid) as invalid:
        await store.audit.record(
            AuditEntry(alice.id, None, "x", "t", 1, "weird")  # type: ignore[arg-type]
        )
    assert invalid.value.field == "outcome"
    with pytest.raises(Invalid):
        await store.audit.record(AuditEntry(alice.id, None, "x", "t", -1, "ok"))


def test_the_audit_log_has_no_place_for_arguments() -> None:
    fields = {f.name for f in dataclasses.fields(AuditEntry)}
    assert fields == {"user_id", "upstream_id", "upstream_name", "tool", "duration_ms",
                      "outcome", "error", "at"}
    columns = set(AuditEvent.__table__.columns.keys())
    assert columns == fields | {"id"}
    with pytest.raises(TypeError):
        AuditEntry(1, None, "u", "t", 1.0, "ok", arguments={"password": "x"})  # type: ignore[call-arg]


# --- errors ---------------------------------------------------------------------------------


async def test_naive_times_are_refused(sqlite_store: Store) -> None:
    store = sqlite_store
    alice = await store.users.create("alice")
    up = await store.upstreams.create(alice.id, http())
    naive = datetime(2040, 1, 1)
    with pytest.raises(Invalid) as invalid:
        await store.tokens.create(alice.id, expires_at=naive)
    assert invalid.value.field == "expires_at"
    with pytest.raises(Invalid) as invalid:
        await store.upstreams.set_health(alice.id, up.id, "healthy", checked_at=naive)
    assert invalid.value.field == "checked_at"
    with pytest.raises(Invalid) as invalid:
        await store.audit.record(AuditEntry(alice.id, up.id, "github", "t", 1, "ok", at=naive))
    assert invalid.value.field == "at"


async def test_a_cancelled_caller_s_transaction_still_runs_to_its_end(store: Store) -> None:
    """Cancellation waits for the transaction in flight: the write lands, and nothing is left
    behind (SQLAlchemy invalidating a connection cancelled midway left, with aiosqlite, a
    task that never finished and a worker thread per cancellation)."""
    alice = await store.users.create("alice")
    up = await store.upstreams.create(alice.id, http())
    with anyio.CancelScope() as scope:
        scope.cancel()  # cancelled before the write even begins
        await store.upstreams.set_health(alice.id, up.id, "unhealthy", error="first")
    assert (await store.upstreams.get(alice.id, up.id)).last_error == "first"

    threads_before = _sqlite_worker_threads()
    chance = random.Random(6)
    for round_ in range(150):
        with anyio.move_on_after(chance.random() * 0.004):  # at any point of the write
            await store.upstreams.set_health(alice.id, up.id, "unhealthy", error=f"r{round_}")
    await store.upstreams.set_health(alice.id, up.id, "healthy")
    record = await store.upstreams.get(alice.id, up.id)
    assert record.health_status == "healthy" and record.last_error is None
    await anyio.sleep(0.1)  # a leftover close would still be running now
    current = asyncio.current_task()
    leftovers = [task for task in asyncio.all_tasks()
                 if task is not current and "_call_in_runner_task" not in repr(task)]
    assert leftovers == []
    assert _sqlite_worker_threads() <= threads_before + 1  # at most one more pooled connection


def _sqlite_worker_threads() -> int:
    return sum("_connection_worker_thread" in thread.name for thread in threading.enumerate())


async def test_an_unreachable_database_is_store_unavailable(anyio_backend: Any) -> None:
    from mcpkit.hub.db.engine import make_engine, session_factory
    from mcpkit.testing.services import free_port

    engine = make_engine(f"postgresql+asyncpg://nobody@127.0.0.1:{free_port()}/none")
    store = Store(session_factory(engine))
    try:
        with pytest.raises(StoreUnavailable):
            await store.users.get_by_name("alice")
        with pytest.raises(StoreUnavailable):
            await store.upstreams.create(1, http())
    finally:
        await engine.dispose()
    with pytest.raises(StoreUnavailable):
        await Store.open(f"postgresql://nobody@127.0.0.1:{free_port()}/none")
    with pytest.raises(Invalid) as invalid:
        await Store.open("mysql://x/y")
    assert invalid.value.field == "database_url"
    assert issubclass(StoreUnavailable, StoreError) and issubclass(Conflict, StoreError)


# --- crash safety ---------------------------------------------------------------------------

WRITER = """
import sys, anyio
from mcpkit.hub.store import Store, UpstreamSpec

async def main():
    store = await Store.open(sys.argv[1])
    user = await store.users.create("alice")
    for i in range(100_000):
        spec = UpstreamSpec(name=f"up-{i:06d}", transport="http", url="https://x.example/mcp")
        await store.upstreams.create(user.id, spec)
        print(spec.name, flush=True)  # printed only once committed

anyio.run(main)
"""


def test_a_sqlite_hub_killed_mid_write_reopens_with_every_committed_row(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, f"sqlite+aiosqlite:///{path}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    committed: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 40
        while len(committed) < 150 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            committed.append(line.strip())
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(10)
        if proc.stdout:
            proc.stdout.close()
    assert len(committed) >= 150, "the writer did not get going"
    assert path.with_name("hub.db-wal").exists()  # killed with work still in the WAL
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
        stored = {row[0] for row in connection.execute("SELECT name FROM upstreams")}
    finally:
        connection.close()
    assert set(committed) <= stored
    assert len(stored) - len(committed) <= 1  # at most the one committed but not yet printed

    async def reopen() -> int:
        async with await Store.open(f"sqlite+aiosqlite:///{path}") as store:
            alice = await store.users.get_by_name("alice")
            await store.upstreams.create(alice.id, http("after-the-crash"))
            return len(await store.upstreams.all(alice.id))

    assert anyio.run(reopen) == len(stored) + 1
