"""Settling what a `Client` speaks with its server: the era, the protocol version, and
what the server says of itself (its capabilities, identity, instructions).

    negotiation = Negotiation(live, pinned_era, pinned_version, target=…, connect=…,
                              open_transport=…, client_info=…)
    negotiation.sender = sender         # the `Sending` that carries its requests
    await negotiation.connect()         # probe / discover / initialize, as the era needs
    negotiation.era, negotiation.protocol_version, negotiation.server_capabilities, ...

A part that sits outside `Client` (as httpx's auth flows sit outside its client): it is
given what it needs - the client's live state (`mcpkit.client.live`), its target and
connect options, a way to open another transport, the sender - and never sees the Client;
the Client exposes the outcome as its own attributes.

- Pinned era: modern sends `server/discover` as an ordinary request; legacy sends
  `initialize`. Anything else is `IncompatibleServer`.
- Auto: the spec's probe-then-fall-back (`mcpkit.client.era`): `server/discover` with
  the short `probe_timeout`, then `initialize` if the answer was not modern. The outcome
  is cached per server; a cached "legacy" that fails is probed again.
- Legacy over Streamable HTTP: a 4xx to `initialize` means a server older than
  Streamable HTTP, which is tried over HTTP+SSE; a session the server forgot (404) is
  started again, once for all the requests that found out at the same time.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import anyio
import msgspec

from mcpkit.client import era as eras
from mcpkit.client.errors import IncompatibleServer
from mcpkit.client.live import LiveState
from mcpkit.client.responders import DeclaredCapabilities
from mcpkit.client.results import as_dict, implementation, str_or_none
from mcpkit.client.session import ProgressCallback, RequestTimeout, ServerError, Timeouts
from mcpkit.client.targets import ConnectOptions, make_url_transport, server_key
from mcpkit.errors import InvalidArgument
from mcpkit.protocol import errors, types
from mcpkit.protocol.versions import (
    LATEST_LEGACY_VERSION,
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    Era,
    era_of,
)
from mcpkit.transports.client.authorized import AUTH_STATUSES
from mcpkit.transports.client.base import (
    ClientTransport,
    HttpStatusError,
    SessionExpired,
    SessionTransport,
    TransportError,
)

log = logging.getLogger(__name__)

CACHED_KINDS = frozenset({"stdio", "http", "sse", "websocket"})
"""Transports whose server has a stable identity to cache its era under (not in-memory)."""
MODERN_ATTEMPTS = 3
"""`server/discover` attempts while the server names other versions it supports."""
ERA_CHOICES = ("auto", "modern", "legacy")


class Probe(enum.Enum):
    """What the era probe found."""

    MODERN = "modern"
    LEGACY = "legacy"  # an answer that is not modern
    SILENT = "silent"  # no answer within the probe timeout


OpenTransport = Callable[[ClientTransport], Awaitable[None]]
"""Opens a session over a transport, in place of the current one (the HTTP+SSE fallback)."""


class Sending(Protocol):
    """What negotiating needs of the way requests go out (`mcpkit.client.sending.Sender`):
    the capabilities declared, and the modern `_meta` and headers of `server/discover`."""

    @property
    def declared(self) -> DeclaredCapabilities: ...

    def with_meta(self, params: dict[str, Any],
                  on_progress: ProgressCallback | None) -> dict[str, Any]: ...

    def headers_for(self, method: str, params: dict[str, Any]) -> dict[str, str]: ...


def pinned(era: str, version: str | None = None) -> tuple[Era | None, str | None]:
    """`Client(era=…)` as (the era to speak or None for auto, the version to speak or
    None): "auto", "modern", "legacy" or a protocol version, which pins its era.
    `version` is the deprecated `Client(version=…)`, which must agree with `era`."""
    if era not in ERA_CHOICES:
        era, version = "auto", _checked_version(era, version)
    if version is None:
        return (None if era == "auto" else Era(era)), None
    of_version = era_of(version)
    if of_version is None:
        raise InvalidArgument(f"unknown protocol version {version!r} (era is 'auto', 'modern', "
                         f"'legacy' or a protocol version such as {LATEST_LEGACY_VERSION})")
    if era != "auto" and of_version.value != era:
        raise InvalidArgument(f"version {version} is not of the {era} era")
    return of_version, version


def _checked_version(era: str, version: str | None) -> str:
    if version is not None and version != era:
        raise InvalidArgument(f"era={era!r} and version={version!r} disagree")
    return era


class Negotiation:
    sender: Sending
    """How its requests go out: set once the sender is made, before `connect` (each needs
    the other: negotiating sends requests, and a request that finds a legacy session
    forgotten has a new one negotiated)."""

    def __init__(self, live: LiveState, era: Era | None, version: str | None, *,
                 target: object, connect: ConnectOptions, open_transport: OpenTransport,
                 client_info: Mapping[str, Any]) -> None:
        """`connect` is the client's own copy: the HTTP+SSE fallback sets its `kind`."""
        self._live = live
        self._target = target
        self._connect = connect
        self._open_transport = open_transport
        self._client_info = client_info
        self.pinned_era = era
        self.pinned_version = version
        self.era: Era | None = None
        self.protocol_version: str | None = None
        self.server_info: types.Implementation | None = None
        self.server_capabilities: dict[str, Any] = {}
        self.instructions: str | None = None
        self.supported_versions: list[str] = []
        self._legacy_hint: str | None = None
        self._renewing = anyio.Lock()
        self.generation = 0
        """Legacy sessions started after the first (one more per `renew`)."""

    async def connect(self) -> None:
        if self.pinned_era is Era.LEGACY:
            await self.start_legacy(pinned=True)
        elif self.pinned_era is Era.MODERN:
            await self.try_modern(pinned=True)
        else:
            await self.detect()

    async def detect(self) -> None:
        """The spec's probe-then-fall-back, with the outcome cached per server."""
        describe = self._live.describe
        kind = self._connect.kind
        key = (server_key(self._target, str(kind), self._connect)
               if kind in CACHED_KINDS else None)
        if key is not None and eras.cached_era(key) is Era.LEGACY:
            try:
                await self.start_legacy()
                return
            except ServerError as exc:  # the cached assumption failed: probe again
                log.info("%s no longer answers initialize (%s); probing its era",
                         describe(), exc)
                eras.forget_era(key)
        outcome = await self.try_modern(pinned=False)
        if outcome is not Probe.MODERN:
            try:
                await self.start_legacy()
            except ServerError:
                if outcome is not Probe.SILENT:
                    raise
                # The probe went unanswered, yet initialize is refused: a modern server
                # that was still starting (e.g. under npx). Ask again, patiently.
                log.info("%s refused initialize after a silent probe; probing again",
                         describe())
                await self.try_modern(pinned=True)
        if key is not None and self.era is not None:
            eras.remember_era(key, self.era)

    async def try_modern(self, *, pinned: bool) -> Probe:
        """Probe with `server/discover`; a modern server is set up on the way.

        Pinned: anything but a modern server raises `IncompatibleServer`.
        """
        version = self.pinned_version or MODERN_VERSIONS[0]
        last: BaseException | None = None
        for _ in range(MODERN_ATTEMPTS):
            try:
                result = await self._discover_at(version, pinned=pinned)
            except (ServerError, HttpStatusError, RequestTimeout) as exc:
                outcome = self._refused(exc, pinned)
                if isinstance(outcome, Probe):
                    return outcome
                version, last = outcome, exc
                continue
            self.adopt_discover(result, version)
            return Probe.MODERN
        raise IncompatibleServer(
            f"{self._live.describe()} kept refusing protocol version {version}: {last}"
        )

    def _refused(self, exc: ServerError | HttpStatusError | RequestTimeout,
                 pinned: bool) -> Probe | str:
        """What a refused `server/discover` means: the era it shows, or the version to try
        next; raises when it settles that the server is incompatible."""
        describe = self._live.describe
        if isinstance(exc, SessionExpired) or (pinned and isinstance(exc, RequestTimeout)):
            raise exc
        if isinstance(exc, HttpStatusError) and exc.status in AUTH_STATUSES:
            raise exc  # not an era question: the credentials are missing or wrong
        modern = eras.modern_error_of(exc)
        if modern is None:
            if pinned:
                raise IncompatibleServer(
                    f"{describe()} does not speak the modern protocol: {exc}") from exc
            log.debug("era probe of %s: legacy (%s)", describe(), exc)
            return Probe.SILENT if isinstance(exc, RequestTimeout) else Probe.LEGACY
        if modern.get("code") != errors.UNSUPPORTED_PROTOCOL_VERSION:
            raise IncompatibleServer(
                f"{describe()} refused server/discover: {modern.get('message')}") from exc
        offered = eras.supported_versions_of(modern)
        choice = eras.pick_modern_version(offered)
        legacy = [v for v in LEGACY_VERSIONS if v in offered]
        if choice is None and legacy and not pinned:
            self._legacy_hint = legacy[0]  # it only offers versions of the old era
            return Probe.LEGACY
        if choice is None:
            raise IncompatibleServer(
                f"{describe()} supports {offered}; "
                f"this client speaks {list(MODERN_VERSIONS) + list(LEGACY_VERSIONS)}"
            ) from exc
        return choice

    async def _discover_at(self, version: str, *, pinned: bool) -> dict[str, Any]:
        session = self._live.session
        self.era, self.protocol_version = Era.MODERN, version
        session.transport.protocol_version = version
        session.cancel_by_notification = not session.transport.per_request_streams
        params = self.sender.with_meta({}, None)
        # Probing an unknown server: silence means legacy, so wait only `probe_timeout`.
        # With the era pinned, discover is an ordinary request.
        probe = self._connect.probe_timeout
        limits = self._live.default_timeouts if pinned else Timeouts(probe, probe, False)
        result = await session.request(
            "server/discover", params, timeouts=limits,
            headers=self.sender.headers_for("server/discover", params), cancel_remote=False,
        )
        if not isinstance(result, dict):
            raise ServerError(errors.INVALID_REQUEST, "server/discover returned a non-object")
        return result

    def adopt_discover(self, result: dict[str, Any], version: str) -> None:
        supported = result.get("supportedVersions")
        self.supported_versions = [v for v in supported or [] if isinstance(v, str)]
        choice = eras.pick_modern_version(self.supported_versions or [version], version)
        if choice is None:
            raise IncompatibleServer(
                f"{self._live.describe()} supports {self.supported_versions}, none of "
                f"which this client speaks"
            )
        self.protocol_version = choice
        self._live.session.transport.protocol_version = choice
        self.server_capabilities = as_dict(result.get("capabilities"))
        self.instructions = str_or_none(result.get("instructions"))
        meta = as_dict(result.get("_meta"))
        info = meta.get("io.modelcontextprotocol/serverInfo") or result.get("serverInfo")
        self.server_info = implementation(info)

    def as_discover_result(self) -> types.DiscoverResult:
        """What `server/discover` would say, from what a legacy server said at
        `initialize`."""
        return types.DiscoverResult(
            cache_scope="private",
            capabilities=msgspec.convert(self.server_capabilities, types.ServerCapabilities),
            result_type="complete",
            supported_versions=list(self.supported_versions),
            ttl_ms=0,
            instructions=self.instructions if self.instructions is not None else msgspec.UNSET,
        )

    async def start_legacy(self, *, pinned: bool = False) -> None:
        live = self._live
        try:
            await self.initialize()
        except ServerError as exc:
            if not pinned:
                raise
            raise IncompatibleServer(
                f"{live.describe()} refused initialize ({exc}); it may speak only the "
                f"modern protocol: connect with era='auto' or era='modern'"
            ) from exc
        except HttpStatusError as exc:
            if self._connect.kind != "http" or exc.status not in (400, 404, 405) \
                    or not isinstance(self._target, str):
                raise
            # Spec (2025-03-26, backwards compatibility): a 4xx to the initialize POST
            # means the server predates Streamable HTTP: try the HTTP+SSE transport.
            log.info("%s refused initialize over Streamable HTTP (%s); trying HTTP+SSE",
                     live.describe(), exc.status)
            await live.session.transport.close()
            self._connect.kind = "sse"
            await self._open_transport(make_url_transport(self._target, "sse", self._connect))
            await self.initialize()

    async def initialize(self) -> None:
        live = self._live
        version = self.pinned_version or self._legacy_hint or LATEST_LEGACY_VERSION
        session = live.session
        self.era, self.protocol_version = Era.LEGACY, None
        session.transport.protocol_version = None
        session.cancel_by_notification = True
        params = {
            "protocolVersion": version,
            "capabilities": self.sender.declared.at(version),
            "clientInfo": self._client_info,
        }
        result = await session.request("initialize", params, timeouts=live.default_timeouts)
        negotiated = as_dict(result).get("protocolVersion")
        if negotiated not in LEGACY_VERSIONS:
            raise IncompatibleServer(
                f"{live.describe()} answered initialize with protocol version "
                f"{negotiated!r}; this client speaks {', '.join(LEGACY_VERSIONS)} in a session"
            )
        self._adopt_initialize(result, negotiated)
        await session.notify("notifications/initialized")
        if isinstance(session.transport, SessionTransport):
            try:
                await session.transport.open_standalone_stream()
            except TransportError as exc:
                log.info("no standalone stream from %s: %s", live.describe(), exc)
        if live.log_level is not None and "logging" in self.server_capabilities:
            # Straight on the session being set up: `renew` calls this holding the lock
            # that a request sent the usual way (`Sender.legacy`) would wait for.
            await session.request("logging/setLevel", {"level": live.log_level},
                                  timeouts=live.default_timeouts)

    def _adopt_initialize(self, result: dict[str, Any], negotiated: str) -> None:
        self.protocol_version = negotiated
        self._live.session.transport.protocol_version = negotiated
        self.server_capabilities = as_dict(result.get("capabilities"))
        self.server_info = implementation(result.get("serverInfo"))
        self.instructions = str_or_none(result.get("instructions"))
        self.supported_versions = [negotiated]

    async def settled(self) -> int:
        """The current legacy session's generation, once no new one is being started."""
        if self._renewing.locked():  # a new session is being set up: wait for it
            async with self._renewing:
                pass
        return self.generation

    async def renew(self, seen_generation: int, subscriptions: set[str]) -> None:
        """A legacy HTTP session was forgotten by the server (404): start a new one, once
        for all the requests that found out at the same time, and subscribe again."""
        live = self._live
        async with self._renewing:
            if self.generation != seen_generation:
                return  # another request already started the new session
            if isinstance(live.session.transport, SessionTransport):
                live.session.transport.reset_session()
            await self.initialize()
            self.generation += 1
            for uri in sorted(subscriptions):
                await live.session.request("resources/subscribe", {"uri": uri},
                                           timeouts=live.default_timeouts)
