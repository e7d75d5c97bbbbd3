"""`UpstreamPool`: this replica's open connections to upstreams, one `Client` per upstream.

    client = await pool.client(upstream)        # connects on first use, then reuses
    pool.drop(upstream_id)                      # after a failure: the next use reconnects

A connection belongs to one upstream record *version*: editing the upstream (URL, headers,
credentials) makes the next use connect anew and closes the old client. Connections idle
for `idle_s` are closed by `sweep()`; `close()` closes all (shutdown).

Every client is `upstream_client.upstream_client`'s, the one the catalog fetch uses too: the
upstream's own stored headers and bearer - never the caller's token - `GuardedResolver`, so
DNS is checked again at each connect, and sampling, elicitation and log messages relayed
(`relay.py`) to the caller whose request is in flight. What only the pool adds is what it
does with the upstream's notifications: list_changed goes to `on_list_changed(upstream)`,
coalesced (`Coalesced`: one round per `LIST_CHANGED_SPACING_S`, however many arrive).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from mcpkit.client import Client
from mcpkit.errors import InvalidState
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Credentials, Store, UpstreamRecord
from mcpkit.hub.upstream_client import UpstreamEvents, upstream_client

log = logging.getLogger(__name__)

LIST_CHANGED_SPACING_S = 1.0
"""One upstream's list_changed notifications start at most one round of catalog refreshes
this often: a burst - or a hostile endless stream - of them costs one round in flight and
one to follow, not one refresh each (refreshes share slots with every user's)."""
ListChanged = Callable[[UpstreamRecord, str], Awaitable[None]]
"""(upstream, kind) after an upstream said its list of `kind` changed."""
ResourceUpdated = Callable[[UpstreamRecord, str], Awaitable[None]]
CredentialSource = Callable[[UpstreamRecord], Awaitable[Credentials]]
"""(upstream) -> what a connection to it presents (the router's: the stored credentials with
the owner's OAuth login attached, hub/upstream_auth.connection_credentials)."""


@dataclass(slots=True)
class _Entry:
    version: int
    client: Client
    last_used: float


class UpstreamPool:
    def __init__(
        self,
        store: Store,
        settings: HubSettings,
        *,
        on_list_changed: ListChanged | None = None,
        on_resource_updated: ResourceUpdated | None = None,
        idle_s: float = 300.0,
        list_changed_spacing_s: float = LIST_CHANGED_SPACING_S,
        credentials: CredentialSource | None = None,
    ) -> None:
        self._store = store
        self._credentials = credentials
        self._settings = settings
        self._on_list_changed = on_list_changed
        self._on_resource_updated = on_resource_updated
        self._idle_s = idle_s
        self._list_changed_spacing_s = list_changed_spacing_s
        self._entries: dict[str, _Entry] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self._closed = False

    async def client(self, upstream: UpstreamRecord) -> Client:
        """The open client of `upstream` (connecting it, bounded by its connect timeout)."""
        entry = self._entries.get(upstream.id)
        if _usable(entry, upstream):
            assert entry is not None
            entry.last_used = time.monotonic()
            return entry.client
        async with self._locks.setdefault(upstream.id, anyio.Lock()):
            entry = self._entries.get(upstream.id)
            if _usable(entry, upstream):  # another task connected it while this one waited
                assert entry is not None
                return entry.client
            if entry is not None:
                self._entries.pop(upstream.id, None)
                await _close_quietly(entry.client)
            if self._closed:
                raise InvalidState("the hub is shutting down")
            client = await self._connect(upstream)
            self._entries[upstream.id] = _Entry(upstream.version, client, time.monotonic())
            return client

    async def _connect(self, upstream: UpstreamRecord) -> Client:
        if self._credentials is not None:
            credentials = await self._credentials(upstream)
        else:
            credentials = await self._store.upstreams.credentials(upstream.user_id, upstream.id)

        async def one_list_changed(kind: str) -> None:
            if self._on_list_changed is not None:
                await self._on_list_changed(upstream, kind)

        list_changed = Coalesced(one_list_changed, self._list_changed_spacing_s)

        async def resource_updated(uri: str) -> None:
            if self._on_resource_updated is not None:
                await self._on_resource_updated(upstream, uri)

        client = upstream_client(
            upstream, credentials, self._settings,
            events=UpstreamEvents(on_list_changed=list_changed,
                                  on_resource_updated=resource_updated),
        )
        await client.connect()
        try:
            # Modern upstreams send list changes only on a listen stream; on a legacy one
            # this is a no-op (its session carries them).
            await client.listen()
        except Exception as error:
            log.info("upstream %s offers no list-change stream: %s", upstream.name, error)
        log.info("connected to upstream %s (%s) of user %s", upstream.name, upstream.id,
                 upstream.user_id)
        return client

    async def drop(self, upstream_id: str) -> None:
        """Close the upstream's client (it failed): the next use connects again."""
        entry = self._entries.pop(upstream_id, None)
        if entry is not None:
            await _close_quietly(entry.client)

    async def sweep(self) -> None:
        """Close the clients nobody used for `idle_s`."""
        now = time.monotonic()
        for upstream_id, entry in list(self._entries.items()):
            if now - entry.last_used > self._idle_s:
                await self.drop(upstream_id)

    async def close(self) -> None:
        self._closed = True
        entries, self._entries = list(self._entries.values()), {}
        async with anyio.create_task_group() as tg:
            for entry in entries:
                tg.start_soon(_close_quietly, entry.client)

    def __len__(self) -> int:
        return len(self._entries)


class Coalesced:
    """`run(kind)` for a stream of calls, at most one round at a time and one round per
    `spacing_s`: calls that come while a round runs (or during the pause after it) are
    gathered into the next round, each kind once."""

    def __init__(self, run: Callable[[str], Awaitable[None]], spacing_s: float) -> None:
        self._run = run
        self._spacing_s = spacing_s
        self._pending: set[str] = set()
        self._busy = False

    async def __call__(self, kind: str) -> None:
        self._pending.add(kind)
        if self._busy:
            return  # the caller running the rounds takes it
        self._busy = True
        try:
            while self._pending:
                kinds = sorted(self._pending)
                self._pending.clear()
                for each in kinds:
                    try:
                        await self._run(each)
                    except Exception:  # one failed round must not stop the next ones
                        log.exception("handling an upstream's %s list change failed", each)
                await anyio.sleep(self._spacing_s)
        finally:
            self._busy = False


def _usable(entry: _Entry | None, upstream: UpstreamRecord) -> bool:
    """An open client of the upstream's current record version."""
    return (entry is not None and entry.version == upstream.version
            and entry.client.closed_reason is None)


async def _close_quietly(client: Client) -> None:
    with anyio.move_on_after(5.0, shield=True):
        try:
            await client.close()
        except Exception as error:  # a broken upstream must not break the caller's cleanup
            log.debug("closing an upstream client failed: %s", error)
