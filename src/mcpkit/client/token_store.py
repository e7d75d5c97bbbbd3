"""Persistent OAuth token stores: a login that survives the process, shared by processes.

    store = open_token_store("auto")        # "keyring" | "file" | "auto"
    OAuth(redirect=…, store=store)          # a restart keeps the login

`auto` takes the OS keyring (the `keyring` package: Secret Service, macOS Keychain, Windows
Credential Locker) when a real one answers, else the file; `store.kind` and `store.location`
say which was chosen. The directory (the file, the keyring's name index, the lock files) is
`directory=`, else $MCPKIT_OAUTH_DIR, else $XDG_STATE_HOME/mcpkit/oauth, else
~/.local/state/mcpkit/oauth; it is created 0700 and the files in it are 0600.

A `PersistentTokenStore` is a `TokenStore` (get/put/delete by TokenKey: resource + issuer +
client id, so servers never mix), keeps whole grants (`put_grant`, `grants`: the tokens and
what refreshing them needs after a restart), forgets a resource's logins (`forget`, for
logout), and keeps DCR registrations (`store.registrations`, a RegistrationStore keyed by
issuer + redirect URI) so a second process or login reuses the client.

`refresh_lock(key)` is the lock every refresh of that key runs under: an in-process anyio
lock, then a lock file per key (filelock) for the other processes, waited for at most
`lock_timeout_s`. Whoever holds it reads the store again before refreshing
(mcpkit.client.shared_refresh)."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from mcpkit.auth.metadata import resource_matches
from mcpkit.auth.tokens import ClientRegistration, TokenKey, TokenSet
from mcpkit.client.private_files import (
    LOCK_TIMEOUT_S,
    LockTimeout,
    private_directory,
    store_lock,
)
from mcpkit.client.token_records import (
    StoredGrant,
    TokenStoreError,
    decode_grant,
    decode_registration,
    encode_grant,
    encode_registration,
    grant_name,
    is_grant_name,
    registration_name,
)
from mcpkit.client.token_vaults import KEYRING_SERVICE, FileVault, KeyringVault, Vault
from mcpkit.errors import InvalidArgument

__all__ = [
    "DIRECTORY_ENV",
    "LOCK_TIMEOUT_S",
    "LockTimeout",
    "PersistentTokenStore",
    "StoredGrant",
    "StoredRegistrations",
    "TokenStoreError",
    "default_directory",
    "open_token_store",
    "usable_keyring",
]

log = logging.getLogger(__name__)

DIRECTORY_ENV = "MCPKIT_OAUTH_DIR"
"""Environment variable naming the token store's directory (overrides the default)."""

KINDS = ("auto", "keyring", "file")

T = TypeVar("T")


def default_directory(environ: dict[str, str] | None = None) -> Path:
    """$MCPKIT_OAUTH_DIR, else $XDG_STATE_HOME/mcpkit/oauth (absolute only, as the XDG spec
    says), else ~/.local/state/mcpkit/oauth: tokens are state, not configuration."""
    env = os.environ if environ is None else environ
    chosen = env.get(DIRECTORY_ENV, "")
    if chosen:
        return Path(chosen).expanduser()
    xdg = env.get("XDG_STATE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "mcpkit" / "oauth"
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".local" / "state" / "mcpkit" / "oauth"


def open_token_store(kind: str = "auto", *, directory: Path | None = None,
                     lock_timeout_s: float = LOCK_TIMEOUT_S,
                     keyring_backend: Any = None) -> PersistentTokenStore:
    """The token store of `kind` (see the module docstring). `keyring_backend`: a
    `keyring.backend.KeyringBackend` to use instead of the one `keyring` detects."""
    if kind not in KINDS:
        raise InvalidArgument(f"the token store kind must be one of {', '.join(KINDS)}, "
                              f"not {kind!r}")
    if lock_timeout_s <= 0:
        raise InvalidArgument(f"lock_timeout_s must be positive, not {lock_timeout_s}")
    where = directory if directory is not None else default_directory()
    private_directory(where)
    vault: Vault
    if kind == "file":
        vault = FileVault(where, lock_timeout_s=lock_timeout_s)
    else:
        backend, why_not = usable_keyring(keyring_backend)
        if backend is None:
            if kind == "keyring":
                raise TokenStoreError(f"no usable keyring: {why_not}; use the file store "
                                      "(store kind 'file') instead")
            log.info("no usable keyring (%s): keeping OAuth tokens in a file", why_not)
            vault = FileVault(where, lock_timeout_s=lock_timeout_s)
        else:
            vault = KeyringVault(backend, where, lock_timeout_s=lock_timeout_s)
    store = PersistentTokenStore(vault)
    log.debug("OAuth token store: %s at %s", store.kind, store.location)
    return store


def usable_keyring(backend: Any = None) -> tuple[Any, str]:
    """(the keyring backend, "") when it is a real keyring that answers a read, else
    (None, why not). keyring's fail/null backends, a chainer with nothing in it and the
    plaintext keyrings of keyrings.alt do not count."""
    import keyring
    from keyring.backends import chainer, fail, null

    try:
        chosen = backend if backend is not None else keyring.get_keyring()
    except Exception as exc:  # a broken keyring config: any error means "not usable"
        return None, f"the keyring package failed to load a backend ({type(exc).__name__})"
    name = f"{type(chosen).__module__}.{type(chosen).__name__}"
    if isinstance(chosen, (fail.Keyring, null.Keyring)):
        return None, f"the keyring package found no backend ({name})"
    if isinstance(chosen, chainer.ChainerBackend) and not chosen.backends:
        return None, "the keyring package found no backend (an empty chainer)"
    if type(chosen).__module__.startswith("keyrings.alt"):
        return None, f"{name} is a plaintext file keyring, not an OS keyring"
    try:  # a locked or half-started keyring fails here, not later in the middle of a login
        chosen.get_password(KEYRING_SERVICE, "probe")
    except Exception as exc:  # whatever the backend raises (D-Bus, OS errors) is "unusable"
        return None, f"{name} does not answer ({type(exc).__name__})"
    return chosen, ""


class PersistentTokenStore:
    """See the module docstring. Vault calls (file or keyring IO) run in a worker thread."""

    def __init__(self, vault: Vault) -> None:
        self._vault = vault
        self.registrations = StoredRegistrations(vault)
        self._key_locks: dict[TokenKey, anyio.Lock] = {}

    @property
    def kind(self) -> str:
        return self._vault.kind

    @property
    def location(self) -> str:
        return self._vault.location

    @property
    def lock_timeout_s(self) -> float:
        return self._vault.lock_timeout_s

    def __repr__(self) -> str:
        return f"PersistentTokenStore(kind={self.kind!r}, location={self.location!r})"

    async def _run(self, call: Callable[..., T], *args: Any) -> T:
        return await in_thread(call, *args)

    # --- TokenStore ------------------------------------------------------------------------

    async def get(self, key: TokenKey) -> TokenSet | None:
        grant = await self.get_grant(key)
        return grant.tokens if grant is not None else None

    async def put(self, key: TokenKey, tokens: TokenSet) -> None:
        """New tokens for `key`, keeping what else the stored grant says (metadata, client)."""
        kept = await self.get_grant(key)
        if kept is None:
            await self.put_grant(StoredGrant(key, tokens))
        else:
            await self.put_grant(dataclasses.replace(kept, tokens=tokens))

    async def delete(self, key: TokenKey) -> None:
        await self._run(self._vault.remove, grant_name(key))

    # --- grants ----------------------------------------------------------------------------

    async def get_grant(self, key: TokenKey) -> StoredGrant | None:
        grant = await self.get_grant_named(grant_name(key))
        # a record moved under another key's name (an edited file) is not that key's
        return grant if grant is not None and grant.key == key else None

    async def put_grant(self, grant: StoredGrant) -> None:
        await self._run(self._vault.write, grant_name(grant.key), encode_grant(grant))

    async def grants(self, resource: str | None = None) -> list[StoredGrant]:
        """Every kept grant, or those for `resource`: its own, and those whose resource
        covers it (a server URL under a protected resource's URL). A record that cannot be
        read is skipped with a warning (one bad entry does not hide the others)."""
        found = []
        for name in await self._run(self._vault.names):
            if not is_grant_name(name):
                continue
            try:
                grant = await self.get_grant_named(name)
            except TokenStoreError as exc:
                log.warning("skipping a stored grant that cannot be read: %s", exc)
                continue
            if grant is not None and (resource is None or _covers(grant.resource, resource)):
                found.append(grant)
        return sorted(found, key=lambda g: (g.resource, g.issuer, g.client_id))

    async def get_grant_named(self, name: str) -> StoredGrant | None:
        data = await self._run(self._vault.read, name)
        return decode_grant(data, f"the stored grant {name}") if data is not None else None

    async def forget(self, resource: str) -> int:
        """Logout: remove every grant `grants(resource)` lists; how many were removed.
        Registrations stay (a later login reuses the client)."""
        gone = await self.grants(resource)
        for grant in gone:
            async with self.refresh_lock(grant.key):  # not under a refresh that would re-store
                await self.delete(grant.key)
        return len(gone)

    # --- the refresh lock ------------------------------------------------------------------

    @asynccontextmanager
    async def refresh_lock(self, key: TokenKey) -> AsyncIterator[None]:
        """Held around one refresh of `key`: tasks of this process queue on an anyio lock,
        other processes on the key's lock file (LockTimeout after `lock_timeout_s`)."""
        lock = self._key_locks.setdefault(key, anyio.Lock())
        async with lock:
            path = self._vault.directory / "locks" / f"{grant_name(key)}.lock"
            await self._run(private_directory, path.parent)
            held = store_lock(path, self._vault.lock_timeout_s)
            await self._run(held.__enter__)
            try:
                yield
            finally:
                await self._run(held.__exit__, None, None, None)


async def in_thread(call: Callable[..., T], *args: Any) -> T:
    """Vault IO (files, keyring D-Bus calls) off the event loop."""
    return await anyio.to_thread.run_sync(call, *args)


def _covers(kept: str, asked: str) -> bool:
    return kept == asked or resource_matches(kept, asked)


class StoredRegistrations:
    """The store's RegistrationStore: client registrations by (issuer, redirect URI)."""

    def __init__(self, vault: Vault) -> None:
        self._vault = vault

    async def get(self, issuer: str, redirect_uri: str) -> ClientRegistration | None:
        name = registration_name(issuer, redirect_uri)
        data = await in_thread(self._vault.read, name)
        if data is None:
            return None
        try:
            kept_issuer, kept_uri, client = decode_registration(
                data, f"the stored registration {name}")
        except TokenStoreError as exc:
            log.warning("ignoring a stored registration that cannot be read: %s", exc)
            return None  # registering anew is safe; the bad entry is overwritten then
        return client if (kept_issuer, kept_uri) == (issuer, redirect_uri) else None

    async def put(self, issuer: str, redirect_uri: str, reg: ClientRegistration) -> None:
        await in_thread(self._vault.write, registration_name(issuer, redirect_uri),
                        encode_registration(issuer, redirect_uri, reg))

    async def delete(self, issuer: str, redirect_uri: str) -> None:
        await in_thread(self._vault.remove, registration_name(issuer, redirect_uri))
