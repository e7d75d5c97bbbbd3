"""Persistent token stores (mcpkit.client.token_store): the keyring backend through a real
Secret Service (gnome-keyring on a private D-Bus bus, tests/client/keyring_service.py), the
0600 file backend (modes, atomic replace under SIGKILL, hostile files), keys that never mix,
and no secret in the index, a repr or a log."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.client.keyring_service import SecretService, secret_service

from mcpkit.auth.metadata import AuthorizationServerMetadata, resource_matches
from mcpkit.auth.tokens import ClientRegistration, TokenKey, TokenSet
from mcpkit.client.token_records import StoredGrant, TokenStoreError, grant_name
from mcpkit.client.token_store import (
    DIRECTORY_ENV,
    PersistentTokenStore,
    default_directory,
    open_token_store,
)
from mcpkit.errors import InvalidArgument

pytestmark = pytest.mark.anyio

RESOURCE = "https://mcp.example/mcp"
ISSUER = "https://as.example"
KEY = TokenKey(RESOURCE, ISSUER, "client-1")
SECRETS = ("access-SECRET-1", "refresh-SECRET-1", "client-SECRET-1")
METADATA = AuthorizationServerMetadata(
    issuer=ISSUER, authorization_endpoint=f"{ISSUER}/authorize",
    token_endpoint=f"{ISSUER}/token", code_challenge_methods_supported=["S256"])


def a_grant(key: TokenKey = KEY, access: str = SECRETS[0],
            refresh: str | None = SECRETS[1]) -> StoredGrant:
    return StoredGrant(key, TokenSet(access, refresh_token=refresh, expires_at=1e10,
                                     scope="mcp:read"),
                       ("mcp:read",), METADATA,
                       ClientRegistration(key.client_id, SECRETS[2], "client_secret_basic",
                                          "dcr"))


async def exercise(store: PersistentTokenStore) -> None:
    """put/get/delete, grants, forget and registrations: the store's whole contract."""
    other = TokenKey("https://other.example/mcp", ISSUER, "client-1")
    await store.put_grant(a_grant())
    await store.put(other, TokenSet("other-access"))
    assert await store.get(KEY) == a_grant().tokens
    kept = await store.get_grant(KEY)
    assert kept is not None and kept.token_endpoint == f"{ISSUER}/token"
    assert kept.client is not None and kept.client.client_secret == SECRETS[2]
    assert [g.resource for g in await store.grants()] == [RESOURCE, other.resource]
    assert [g.key for g in await store.grants(f"{RESOURCE}/sub")] == [KEY]  # covered
    # put() of new tokens keeps the grant's metadata and client (a refresh)
    await store.put(KEY, TokenSet("access-2", refresh_token="refresh-2"))
    kept = await store.get_grant(KEY)
    assert kept is not None and kept.tokens.refresh_token == "refresh-2"
    assert kept.metadata == METADATA and kept.scopes == ("mcp:read",)
    registration = ClientRegistration("client-1", SECRETS[2], "client_secret_basic", "dcr")
    await store.registrations.put(ISSUER, "http://127.0.0.1:1/cb", registration)
    assert await store.registrations.get(ISSUER, "http://127.0.0.1:1/cb") == registration
    assert await store.registrations.get(ISSUER, "http://127.0.0.1:2/cb") is None
    assert await store.forget(RESOURCE) == 1
    assert await store.get(KEY) is None
    assert await store.get(other) == TokenSet("other-access")
    # logout keeps the registration: the next login reuses the client
    assert await store.registrations.get(ISSUER, "http://127.0.0.1:1/cb") == registration
    await store.delete(other)
    await store.registrations.delete(ISSUER, "http://127.0.0.1:1/cb")
    assert await store.grants() == []
    assert await store.registrations.get(ISSUER, "http://127.0.0.1:1/cb") is None


def assert_no_secret_in(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_file():
            text = path.read_bytes()
            for secret in SECRETS:
                assert secret.encode() not in text, f"{secret} in {path}"


# --- the keyring backend, for real ---------------------------------------------------------


@pytest.fixture
def keyring_service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SecretService]:
    with secret_service(tmp_path / "keyring") as service:
        for name, value in service.env.items():
            monkeypatch.setenv(name, value)
        yield service


async def test_keyring_store_through_a_real_secret_service(
        keyring_service: SecretService, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    store = open_token_store("keyring", directory=tmp_path / "store",
                             keyring_backend=keyring_service.backend())
    assert store.kind == "keyring" and "SecretService" in store.location
    await store.put_grant(a_grant())
    # it is in the Secret Service, not in the directory: the index holds names only
    backend = keyring_service.backend()
    names = msgspec.json.decode((tmp_path / "store" / "keyring-index.json").read_bytes())
    [name] = names["names"]
    assert SECRETS[1] in backend.get_password("mcpkit-oauth", name)
    assert_no_secret_in(tmp_path / "store")
    await store.delete(KEY)
    await exercise(store)
    assert_no_secret_in(tmp_path / "store")
    for secret in SECRETS:
        assert secret not in caplog.text and secret not in repr(store)


async def test_auto_chooses_the_keyring_and_another_process_reads_it(
        keyring_service: SecretService, tmp_path: Path) -> None:
    """A fresh process, `auto`, with the bus in its environment: keyring's own detection picks
    the Secret Service, and it reads what this process stored (a restart keeps the login)."""
    directory = tmp_path / "store"
    store = open_token_store("keyring", directory=directory,
                             keyring_backend=keyring_service.backend())
    await store.put_grant(a_grant())
    script = (
        "import anyio, sys; from pathlib import Path\n"
        "from mcpkit.client.token_store import open_token_store\n"
        "s = open_token_store('auto', directory=Path(sys.argv[1]))\n"
        "[g] = anyio.run(s.grants)\n"
        "print(s.kind, g.resource, g.tokens.refresh_token == sys.argv[2])\n")
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [sys.executable, "-c", script, str(directory), SECRETS[1]], check=False,
            env={**os.environ, **keyring_service.env})
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == ["keyring", RESOURCE, "True"]


async def test_auto_falls_back_to_the_file_without_a_keyring(tmp_path: Path) -> None:
    from keyring.backends import fail

    store = open_token_store("auto", directory=tmp_path, keyring_backend=fail.Keyring())
    assert store.kind == "file" and store.location == str(tmp_path / "tokens.json")
    with pytest.raises(TokenStoreError, match="no usable keyring"):
        open_token_store("keyring", directory=tmp_path, keyring_backend=fail.Keyring())


# --- the file backend ----------------------------------------------------------------------


async def test_file_store_contract_and_modes(tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    directory = tmp_path / "deep" / "store"
    store = open_token_store("file", directory=directory)
    await store.put_grant(a_grant())
    assert (directory.stat().st_mode & 0o777) == 0o700
    assert (directory / "tokens.json").stat().st_mode & 0o777 == 0o600
    await exercise(store)
    assert (directory / "tokens.json").stat().st_mode & 0o777 == 0o600
    for secret in SECRETS:
        assert secret not in caplog.text and secret not in repr(store)
    assert SECRETS[1] not in repr(a_grant()) and SECRETS[2] not in repr(a_grant())
    summary = a_grant().summary()
    assert summary["issuer"] == ISSUER and summary["refresh_token"] is True
    assert not any(secret in str(summary) for secret in SECRETS)
    assert msgspec.json.encode(summary)  # plain JSON for `auth status --json`


async def test_loose_permissions_are_refused(tmp_path: Path) -> None:
    directory = tmp_path / "store"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    with pytest.raises(TokenStoreError, match="open to other users"):
        open_token_store("file", directory=directory)
    directory.chmod(0o700)
    store = open_token_store("file", directory=directory)
    await store.put_grant(a_grant())
    (directory / "tokens.json").chmod(0o644)
    with pytest.raises(TokenStoreError, match="readable by other users"):
        await store.get(KEY)


@pytest.mark.parametrize("content", [
    b"\x00\xff garbage", b"[1, 2, 3]", b'{"version": 99, "records": {}}',
    b'{"version": 1, "records": []}', b'{"version": 1, "records": {"grant-x": 7}',
])
async def test_a_corrupt_file_is_a_clear_error_and_is_never_overwritten(
        tmp_path: Path, content: bytes) -> None:
    store = open_token_store("file", directory=tmp_path)
    path = tmp_path / "tokens.json"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(TokenStoreError, match=r"tokens\.json"):
        await store.grants()
    with pytest.raises(TokenStoreError, match=r"tokens\.json"):
        await store.put_grant(a_grant())
    assert path.read_bytes() == content  # the (maybe recoverable) file is left as it was


async def test_a_bad_record_is_skipped_and_a_symlink_refused(tmp_path: Path) -> None:
    store = open_token_store("file", directory=tmp_path)
    await store.put_grant(a_grant())
    path = tmp_path / "tokens.json"
    doc = msgspec.json.decode(path.read_bytes())
    doc["records"]["grant-bad"] = {"resource": 1}
    path.write_bytes(msgspec.json.encode(doc))
    assert [g.key for g in await store.grants()] == [KEY]  # the good one still shows
    target = tmp_path / "elsewhere.json"
    path.rename(target)
    path.symlink_to(target)
    with pytest.raises(TokenStoreError, match=r"tokens\.json"):
        await store.grants()


async def test_a_record_filed_under_another_keys_name_is_not_that_key(tmp_path: Path) -> None:
    store = open_token_store("file", directory=tmp_path)
    other = TokenKey("https://evil.example/mcp", ISSUER, "client-1")
    await store.put_grant(a_grant(other))
    path = tmp_path / "tokens.json"
    doc = msgspec.json.decode(path.read_bytes())
    [(_name, record)] = doc["records"].items()
    doc["records"] = {grant_name(KEY): record}
    path.write_bytes(msgspec.json.encode(doc))
    assert await store.get(KEY) is None


WRITER = """
import sys, anyio
from pathlib import Path
from mcpkit.auth.tokens import TokenKey, TokenSet
from mcpkit.client.token_store import open_token_store
store = open_token_store('file', directory=Path(sys.argv[1]))
async def main():
    print('ready', flush=True)
    for i in range(100000):   # killed long before; bounded anyway
        key = TokenKey(f'https://r{i % 7}.example/mcp', 'https://as', 'c')
        await store.put(key, TokenSet('a' * 20000 + str(i), refresh_token=f'r{i}'))
anyio.run(main)
"""


def test_a_writer_killed_mid_write_never_leaves_a_half_file(tmp_path: Path) -> None:
    """SIGKILL a process that rewrites the file with big records as fast as it can, five
    times at varied moments: each time the file is a whole document of the store."""
    for round_ in range(5):
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
            time.sleep(0.05 + 0.07 * round_)
        finally:
            os.kill(writer.pid, signal.SIGKILL)
            writer.wait(timeout=10)
            writer.stdout.close()  # type: ignore[union-attr]
        store = open_token_store("file", directory=tmp_path)
        grants = anyio.run(store.grants)
        assert all(g.tokens.access_token.startswith("a" * 20000) for g in grants)
    assert grants, "the writer never wrote: the test proved nothing"
    assert (tmp_path / "tokens.json").stat().st_mode & 0o777 == 0o600
    # the next write removes the temp files a killed writer left (they may hold tokens)
    anyio.run(store.put, KEY, TokenSet("after"))
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]


def test_the_directory_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_directory({DIRECTORY_ENV: str(tmp_path)}) == tmp_path
    assert default_directory({"XDG_STATE_HOME": "/x/state", "HOME": "/h"}) == Path(
        "/x/state/mcpkit/oauth")
    assert default_directory({"XDG_STATE_HOME": "relative", "HOME": "/h"}) == Path(
        "/h/.local/state/mcpkit/oauth")
    monkeypatch.setenv(DIRECTORY_ENV, str(tmp_path / "env"))
    assert open_token_store("file").location == str(tmp_path / "env" / "tokens.json")
    with pytest.raises(InvalidArgument, match="keyring, file"):
        open_token_store("vault")
    with pytest.raises(InvalidArgument, match="lock_timeout_s"):
        open_token_store("file", lock_timeout_s=0)


# --- keys never mix ------------------------------------------------------------------------

parts = st.sampled_from(["https://a.example", "https://a.example/mcp", "https://b.example",
                         "https://a.example/mcp/x", "http://127.0.0.1:1", "c1", "c2", "é"])


@settings(max_examples=10, deadline=None)
@given(st.dictionaries(st.tuples(parts, parts, parts), st.text(min_size=1, max_size=8),
                       max_size=8))
def test_entries_of_different_keys_never_mix(entries: dict[tuple[str, str, str], str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = open_token_store("file", directory=Path(tmp))

        async def check() -> None:
            for (resource, issuer, client_id), access in entries.items():
                await store.put(TokenKey(resource, issuer, client_id), TokenSet(access))
            for (resource, issuer, client_id), access in entries.items():
                assert await store.get(TokenKey(resource, issuer, client_id)) == TokenSet(access)
            assert len(await store.grants()) == len(entries)
            for resource in {k[0] for k in entries}:
                assert all(g.resource == resource or resource_matches(g.resource, resource)
                           for g in await store.grants(resource))
                assert {g.key for g in await store.grants(resource)} >= {
                    TokenKey(*k) for k in entries if k[0] == resource}

        anyio.run(check)


# --- the refresh lock ----------------------------------------------------------------------


async def test_the_refresh_lock_wait_is_bounded(tmp_path: Path) -> None:
    """Another holder of the key's lock file (here a second lock object: flock conflicts
    between open files, in one process as across processes) makes the wait end in a clear
    LockTimeout after lock_timeout_s; other keys are not held up."""
    import filelock

    from mcpkit.client.private_files import LockTimeout

    store = open_token_store("file", directory=tmp_path, lock_timeout_s=0.2)
    async with store.refresh_lock(KEY):
        pass  # creates the lock file
    [path] = (tmp_path / "locks").iterdir()
    other = filelock.FileLock(path, thread_local=False)
    other.acquire()
    try:
        with pytest.raises(LockTimeout, match=r"over 0\.2 s") as caught:
            async with store.refresh_lock(KEY):
                pytest.fail("the lock was taken while another holder had it")
        assert isinstance(caught.value, TimeoutError)
        async with store.refresh_lock(TokenKey(RESOURCE, ISSUER, "client-2")):
            pass
    finally:
        other.release()
    async with store.refresh_lock(KEY):
        pass


async def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The new content goes to a temp file that replaces the old one in one rename: a write
    that fails before the rename (here the rename itself, as on a full disk) leaves the old
    file whole and removes the temp file."""
    store = open_token_store("file", directory=tmp_path)
    await store.put_grant(a_grant())
    before = (tmp_path / "tokens.json").read_bytes()

    def failing_replace(src: str, dst: str) -> None:
        assert Path(src).read_bytes() != before and Path(src).stat().st_mode & 0o777 == 0o600
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(TokenStoreError, match="No space left"):
        await store.put(KEY, TokenSet("access-3"))
    monkeypatch.undo()
    assert (tmp_path / "tokens.json").read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["store.lock", "tokens.json"]  # no temp file


async def test_the_file_size_is_bounded_both_ways(tmp_path: Path) -> None:
    """An oversized file is refused when read (not loaded whole), and a write that would make
    the file too large to read back is refused before it is written."""
    from mcpkit.client.token_vaults import FileVault

    store = PersistentTokenStore(FileVault(tmp_path, max_bytes=4000))
    await store.put_grant(a_grant())
    before = (tmp_path / "tokens.json").read_bytes()
    with pytest.raises(TokenStoreError, match="4000-byte limit"):
        await store.put_grant(a_grant(TokenKey(RESOURCE, ISSUER, "client-2"), "x" * 4000))
    assert (tmp_path / "tokens.json").read_bytes() == before
    small = PersistentTokenStore(FileVault(tmp_path, max_bytes=100))
    with pytest.raises(TokenStoreError, match="100-byte limit"):
        await small.grants()
