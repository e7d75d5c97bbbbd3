"""OAuth with a persistent token store, against the real test AS and protected MCP server
(tests/client/oauth_server.py) on 127.0.0.1, in real processes where it matters: a restart
keeps the login (no new authorization, no new registration, no discovery to refresh), eight
processes that find one expired token refresh it once and all use the result, a refresh that
fails with a 5xx keeps the refresh token and `invalid_grant` drops it, and no secret reaches a
log or a repr."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import anyio
import msgspec
import pytest
from tests.client import oauth_server
from tests.client.keyring_service import secret_service
from tests.client.oauth_server import AuthServer
from tests.procs import released_together

from mcpkit import Client
from mcpkit.auth.errors import AuthorizationError, AuthorizationFailed
from mcpkit.client.oauth import OAuth
from mcpkit.client.oauth_redirect import follow_location
from mcpkit.client.token_records import StoredGrant
from mcpkit.client.token_store import PersistentTokenStore, open_token_store

pytestmark = pytest.mark.anyio

ERA = "2025-11-25"
PROCESSES = 8
WORKER_TIMEOUT_S = 60.0
"""Liveness bound of the worker processes (each normally takes about a second)."""


@pytest.fixture
def server() -> Iterator[AuthServer]:
    with oauth_server.running() as auth:
        yield auth


@pytest.fixture
def store(tmp_path: Path) -> PersistentTokenStore:
    return open_token_store("file", directory=tmp_path / "store")


async def refuse(url: str) -> str:
    raise AuthorizationError("this test allows no new authorization")


async def call_read(server: AuthServer, oauth: OAuth) -> str:
    async with Client(server.resource, era=ERA, auth=oauth) as client:
        result = await client.call_tool("read", {})
    return result.content[0].text  # type: ignore[union-attr,no-any-return]


async def login(server: AuthServer, store: PersistentTokenStore) -> StoredGrant:
    assert await call_read(server, OAuth(redirect=follow_location, store=store)) == "read ok"
    [grant] = await store.grants()
    return grant


async def expire(server: AuthServer, store: PersistentTokenStore, grant: StoredGrant) -> None:
    """The stored access token is past its expiry, for the client and the resource alike."""
    server.access[grant.tokens.access_token].expires_at = 0
    await store.put(grant.key, dataclasses.replace(grant.tokens, expires_at=time.time() - 60))


async def worker(server: AuthServer, directory: Path, *flags: str,
                 env: dict[str, str] | None = None) -> dict[str, object]:
    with anyio.fail_after(WORKER_TIMEOUT_S):
        done = await anyio.run_process(
            [sys.executable, "-m", "tests.client.oauth_store_worker", server.resource,
             str(directory), *flags], check=False, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    report: dict[str, object] = msgspec.json.decode(done.stdout.splitlines()[-1])
    return report


def assert_no_secrets(server: AuthServer, *texts: str) -> None:
    assert server.secrets_seen
    for text in texts:
        for secret in server.secrets_seen:
            assert secret not in text


@pytest.mark.parametrize("kind", ["file", "keyring"])
async def test_a_restart_keeps_the_login(server: AuthServer, tmp_path: Path, kind: str) -> None:
    """Three processes in turn, on the file store or a real Secret Service (gnome-keyring on
    a private bus): the first logs in; the next ones resume that login."""
    with ExitStack() as stack:
        env = stack.enter_context(secret_service(tmp_path / "keyring")).env if (
            kind == "keyring") else {}
        flags = ["--keyring"] if kind == "keyring" else []
        await restart_keeps_the_login(server, tmp_path / "store", flags, env)


async def restart_keeps_the_login(server: AuthServer, directory: Path, flags: list[str],
                                  env: dict[str, str]) -> None:
    first = await worker(server, directory, "--login", *flags, env=env)
    assert first["text"] == "read ok"
    assert len(server.authorize_requests) == 1 and server.registrations == 1
    # a new process: the stored access token, no authorization, no registration
    second = await worker(server, directory, *flags, env=env)
    assert second == first
    assert len(server.authorize_requests) == 1 and server.registrations == 1
    # expired meanwhile: the next process refreshes from what the store kept - no 401, no
    # discovery (the token endpoint and the client's credentials are in the store)
    await expire_in_a_process(server, directory, flags, env)
    discovered = server.metadata_requests
    third = await worker(server, directory, *flags, env=env)
    assert third["text"] == "read ok" and third["token"] != first["token"]
    assert server.refreshes == 1 and server.metadata_requests == discovered
    assert len(server.authorize_requests) == 1 and server.registrations == 1


async def test_a_restart_keeps_a_dpop_bound_login(server: AuthServer, tmp_path: Path) -> None:
    """DPoP-bound tokens (RFC 9449) are useless without their key: the store keeps the key
    with them, so a new process (with a new key of its own) presents and refreshes them with
    the stored one - the resource and the AS check the proofs' key."""
    directory = tmp_path / "store"
    first = await worker(server, directory, "--login", "--dpop")
    [grant] = await open_token_store("file", directory=directory).grants()
    assert grant.tokens.token_type == "DPoP" and grant.dpop_key is not None
    assert "PRIVATE KEY" not in repr(grant)
    second = await worker(server, directory, "--dpop")
    assert second == first and len(server.authorize_requests) == 1
    await expire_in_a_process(server, directory, [], {})
    third = await worker(server, directory, "--dpop")  # the bound refresh token too
    assert third["token"] != first["token"] and server.refreshes == 1
    assert len(server.authorize_requests) == 1


EXPIRE = """
import sys, time, dataclasses, anyio
from pathlib import Path
from mcpkit.client.token_store import open_token_store
store = open_token_store(sys.argv[2], directory=Path(sys.argv[1]))
async def main():
    [grant] = await store.grants()
    await store.put(grant.key, dataclasses.replace(grant.tokens, expires_at=time.time() - 60))
    print(grant.tokens.access_token)
anyio.run(main)
"""


async def expire_in_a_process(server: AuthServer, directory: Path, flags: list[str],
                              env: dict[str, str]) -> None:
    """`expire`, from a process that has the store's environment (the keyring's bus)."""
    kind = "keyring" if "--keyring" in flags else "file"
    with anyio.fail_after(WORKER_TIMEOUT_S):
        done = await anyio.run_process([sys.executable, "-c", EXPIRE, str(directory), kind],
                                       check=False, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    server.access[done.stdout.decode().strip()].expires_at = 0


async def test_eight_processes_refresh_one_expired_token_once(
        server: AuthServer, store: PersistentTokenStore, tmp_path: Path) -> None:
    grant = await login(server, store)
    await expire(server, store, grant)
    server.refresh_delay_s = 0.3  # the others reach the lock while the first refreshes
    command = [sys.executable, "-m", "tests.client.oauth_store_worker", server.resource,
               str(tmp_path / "store"), "--wait"]
    reports = await released_together(command, PROCESSES, WORKER_TIMEOUT_S)
    assert len(reports) == PROCESSES and all(r["text"] == "read ok" for r in reports)
    assert server.refreshes == 1 and server.reuse_detected == 0
    assert len({r["token"] for r in reports}) == 1  # all use the one refreshed token
    assert len(server.authorize_requests) == 1


async def test_two_clients_in_one_process_refresh_once(
        server: AuthServer, store: PersistentTokenStore) -> None:
    grant = await login(server, store)
    await expire(server, store, grant)
    server.refresh_delay_s = 0.2
    async with anyio.create_task_group() as group:
        for _ in range(2):
            group.start_soon(call_read, server, OAuth(redirect=refuse, store=store))
    assert server.refreshes == 1 and server.reuse_detected == 0


async def test_a_refresh_failing_with_500_keeps_the_refresh_token(
        server: AuthServer, store: PersistentTokenStore,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    grant = await login(server, store)
    await expire(server, store, grant)
    server.refresh_failures = [500, 503]  # before the request, then on its 401
    with pytest.raises(AuthorizationFailed):
        await call_read(server, OAuth(redirect=refuse, store=store))
    kept = await store.get(grant.key)
    assert kept is not None and kept.refresh_token == grant.tokens.refresh_token
    # the server is back: the kept refresh token logs the next process in
    assert await call_read(server, OAuth(redirect=refuse, store=store)) == "read ok"
    assert server.refreshes == 1 and len(server.authorize_requests) == 1
    assert_no_secrets(server, caplog.text, repr(store), repr(await store.grants()))


async def test_invalid_grant_drops_the_stored_login(
        server: AuthServer, store: PersistentTokenStore,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    grant = await login(server, store)
    await expire(server, store, grant)
    server.refresh.clear()  # revoked at the AS: the refresh answers invalid_grant
    with pytest.raises(AuthorizationFailed):
        await call_read(server, OAuth(redirect=refuse, store=store))
    assert await store.get(grant.key) is None
    assert await store.registrations.get(grant.issuer, OAuth().redirect_uri) is not None
    # logging in again reuses the stored registration
    await login(server, store)
    assert server.registrations == 1 and len(server.authorize_requests) == 2
    assert_no_secrets(server, caplog.text, repr(store), repr(await store.grants()))


async def test_a_logout_is_not_undone_by_a_running_client(
        server: AuthServer, store: PersistentTokenStore) -> None:
    """A process still holding the tokens does not refresh (and so re-store) a login that
    `forget` removed: its next refresh finds no entry, and it must authorize anew."""
    oauth = OAuth(redirect=follow_location, store=store)
    async with Client(server.resource, era=ERA, auth=oauth) as client:
        await client.call_tool("read", {})
        [grant] = await store.grants()
        await expire(server, store, grant)
        assert await store.forget(server.resource) == 1
        oauth.redirect = refuse
        with pytest.raises(AuthorizationFailed):
            await client.call_tool("read", {})
    assert await store.grants() == [] and server.refreshes == 0
    assert oauth.tokens is not None and oauth.tokens.refresh_token is None


def test_which_stored_login_is_resumed() -> None:
    """pick_stored: refreshable, covering the URL, fitting the configured client and scopes;
    the most specific resource first; a configured secret wins over the stored one."""
    from mcpkit.auth.metadata import AuthorizationServerMetadata
    from mcpkit.auth.tokens import ClientRegistration, TokenKey, TokenSet
    from mcpkit.client.oauth_resume import Configured, pick_stored

    def grant(resource: str, client_id: str = "c1", issuer: str = "https://as",
              scopes: tuple[str, ...] = ("read",), source: str = "dcr",
              metadata_issuer: str | None = None) -> StoredGrant:
        metadata = AuthorizationServerMetadata(
            issuer=metadata_issuer or issuer, authorization_endpoint="https://as/a",
            token_endpoint="https://as/t")
        return StoredGrant(TokenKey(resource, issuer, client_id), TokenSet("at"), scopes,
                           metadata, ClientRegistration(client_id, "stored", "none", source))

    nobody = Configured(None, None, None)
    root, mcp = grant("https://s.example"), grant("https://s.example/mcp")
    url = "https://s.example/mcp"
    assert pick_stored([root, mcp], url, None, nobody) is mcp
    assert pick_stored([root], url, None, nobody) is root
    assert pick_stored([grant("https://other.example")], url, None, nobody) is None
    assert pick_stored([mcp], url, ["read", "write"], nobody) is None  # a scope not granted
    assert pick_stored([mcp], url, None, Configured("c2", None, None)) is None
    assert pick_stored([mcp], url, None, Configured(None, None, "https://as2")) is None
    bare = StoredGrant(TokenKey(url, "https://as", "c1"), TokenSet("at"))
    assert pick_stored([bare], url, None, nobody) is None  # nothing to refresh with
    lying = grant(url, metadata_issuer="https://evil")
    assert pick_stored([lying], url, None, nobody) is None
    dpop_bound = dataclasses.replace(mcp, tokens=TokenSet("at", token_type="DPoP"))
    assert pick_stored([dpop_bound], url, None, nobody, dpop=True) is None  # no key kept
    dpop_bound = dataclasses.replace(dpop_bound, dpop_key="(pem)")
    assert pick_stored([dpop_bound], url, None, nobody) is None  # DPoP is off
    assert pick_stored([dpop_bound], url, None, nobody, dpop=True) is dpop_bound
    configured = grant(url, source="configured")
    chosen = pick_stored([configured], url, None, Configured("c1", "rotated", None))
    assert chosen is not None and chosen.client is not None
    assert chosen.client.client_secret == "rotated"
