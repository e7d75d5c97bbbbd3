"""The HTTP+SSE client transport of protocol version 2024-11-05, on aiohttp.

`open` GETs the SSE stream and waits for its first `endpoint` event: the URI (same origin
only) to POST every client message to. Server messages arrive as `message` events on the
stream; the stream ending ends the connection (this transport has no resumption).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import NoReturn

import aiohttp
import anyio
from aiohttp.abc import AbstractResolver
from anyio.abc import TaskGroup, TaskStatus
from yarl import URL

from mcpkit.auth.provider import HttpAuth
from mcpkit.protocol import sse
from mcpkit.protocol.jsonrpc import RequestId
from mcpkit.transports.client._aiohttp import (
    DEFAULT_MAX_MESSAGE_BYTES,
    EVENT_STREAM,
    JSON,
    NETWORK_ERRORS,
    SseDecoder,
    common_headers,
    event_payload,
    is_own,
    network_error,
    new_session,
    read_body,
    read_events,
    response_headers,
)
from mcpkit.transports.client.authorized import authorized
from mcpkit.transports.client.base import (
    ConnectionClosed,
    HttpStatusError,
    Inbound,
    Outgoing,
    TransportError,
)

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 2.0


class LegacySseTransport:
    """A client's connection to a 2024-11-05 HTTP+SSE server."""

    kind = "sse"
    per_request_streams = False
    read_timeout_s: float = 30.0
    """How long a POST may wait for its status after connecting."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        bearer_token: str | None = None,
        connect_timeout: float = 10.0,
        resolver: AbstractResolver | None = None,
        endpoint_timeout: float = 10.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        auth: HttpAuth | None = None,
    ) -> None:
        self.url = url
        self.auth = auth
        """Asked for an `Authorization` header before the GET and each POST; answers their
        401/403s."""
        self._auth_headers: Mapping[str, str] = {}
        self.connect_timeout = connect_timeout
        self.resolver = resolver
        self.endpoint_timeout = endpoint_timeout
        self.max_message_bytes = max_message_bytes
        self.protocol_version: str | None = None
        self.endpoint: str | None = None
        """The URL messages are POSTed to, once the server named it."""
        self._headers = common_headers(headers, bearer_token)
        self._http: aiohttp.ClientSession | None = None
        self._reader: anyio.CancelScope | None = None
        self._closed = False
        self._post_timeout = aiohttp.ClientTimeout(
            total=connect_timeout + self.read_timeout_s, sock_connect=connect_timeout
        )

    async def open(self, inbound: Inbound, task_group: TaskGroup) -> None:
        """GET the stream and wait for the `endpoint` event; then read on in the background.
        Raises HttpStatusError for a refused GET, TransportError for anything else."""
        if self._closed or self._http is not None:
            raise TransportError(f"the transport to {self.url} is already open or closed")
        await authorized(self.auth, self.url, lambda: self._open_once(inbound, task_group),
                         self._use_auth_headers, method="GET")

    async def _open_once(self, inbound: Inbound, task_group: TaskGroup) -> None:
        self._http = http = new_session(self.connect_timeout, self.resolver)
        try:
            self._reader = await task_group.start(self._read_task, http, inbound)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await http.close()
            if self.auth is not None:
                self._http = None  # opened again once authorized
            raise

    def _use_auth_headers(self, headers: Mapping[str, str]) -> None:
        self._auth_headers = headers

    async def send(self, message: Outgoing) -> None:
        """POST one message to the endpoint; 2xx (usually 202) expected."""
        await authorized(self.auth, self.url, lambda: self._post(message),
                         self._use_auth_headers, target=self.endpoint)

    async def _post(self, message: Outgoing) -> None:
        http, endpoint = self._ready()
        headers = self._headers.copy()
        headers.update(self._auth_headers)
        headers["Content-Type"] = JSON
        try:
            async with http.post(
                endpoint, data=message.data, headers=headers, allow_redirects=False,
                timeout=self._post_timeout,
            ) as resp:
                if 200 <= resp.status < 300:
                    return
                body = await read_body(resp, 64 * 1024, truncate=True)
                raise HttpStatusError(resp.status, body, response_headers(resp), url=endpoint)
        except NETWORK_ERRORS as exc:
            if is_own(exc):
                raise
            raise network_error("POST to", endpoint, exc) from exc

    async def abandon(self, request_id: RequestId) -> None:
        """Nothing to close: answers share the one stream (the session sends
        `notifications/cancelled`)."""

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._reader is not None:
            self._reader.cancel()
        http = self._http
        if http is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT_S):
                await http.close()

    def describe(self) -> str:
        return self.url

    # --- internals ---------------------------------------------------------------------------

    def _ready(self) -> tuple[aiohttp.ClientSession, str]:
        if self._closed:
            raise TransportError(f"the transport to {self.url} is closed")
        if self._http is None or self.endpoint is None:
            raise TransportError(f"the transport to {self.url} is not open")
        return self._http, self.endpoint

    async def _read_task(
        self,
        http: aiohttp.ClientSession,
        inbound: Inbound,
        *,
        task_status: TaskStatus[anyio.CancelScope] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Open the stream, report (through `task_status`) once the endpoint is known, then
        deliver messages until the stream ends. Errors before that go to `open`'s caller."""
        with anyio.CancelScope() as scope:
            resp = await self._get(http)
            async with resp:
                try:
                    decoder = SseDecoder(self.max_message_bytes, self.url)
                    await self._await_endpoint(resp, decoder, inbound)
                    task_status.started(scope)
                    try:
                        await self._pump(resp, decoder, inbound)
                    except TransportError as ended:
                        error = ended
                except BaseException:
                    resp.close()
                    raise
            # Not reached when `close()` cancelled the reader: nothing to report then.
            inbound.closed(error)

    async def _get(self, http: aiohttp.ClientSession) -> aiohttp.ClientResponse:
        headers = self._headers.copy()
        headers.update(self._auth_headers)
        headers["Accept"] = EVENT_STREAM
        try:
            with anyio.fail_after(self.connect_timeout + self.endpoint_timeout):
                resp = await http.get(self.url, headers=headers, allow_redirects=False)
        except NETWORK_ERRORS as exc:
            raise network_error("GET", self.url, exc) from exc
        if resp.status != 200 or resp.content_type != EVENT_STREAM:
            try:
                body = await read_body(resp, 64 * 1024, truncate=True)
            except NETWORK_ERRORS:
                body = b""
            finally:
                resp.close()
            raise HttpStatusError(resp.status, body, response_headers(resp), url=self.url)
        return resp

    async def _await_endpoint(
        self, resp: aiohttp.ClientResponse, decoder: SseDecoder, inbound: Inbound
    ) -> None:
        """Read until the `endpoint` event and keep its URL; messages before it (none are
        expected) are delivered."""

        def on_event(event: sse.Event) -> bool:
            if event.event == "endpoint":
                self.endpoint = self._resolve_endpoint(event.data)
                return True
            data = event_payload(event, self.max_message_bytes, self.url)
            if data is not None:
                inbound.receive(data)
            return False

        with anyio.move_on_after(self.endpoint_timeout) as waited:
            await read_events(resp, decoder, on_event)
        if waited.cancelled_caught:
            raise TransportError(
                f"{self.url} sent no `endpoint` event within {self.endpoint_timeout} s"
            )
        if self.endpoint is None:
            raise TransportError(f"the SSE stream from {self.url} ended before its endpoint")

    def _resolve_endpoint(self, data: str) -> str:
        base = URL(self.url)
        try:
            endpoint = base.join(URL(data.strip()))
        except ValueError as exc:
            raise TransportError(f"{self.url} sent an invalid endpoint {data!r}") from exc
        if endpoint.origin() != base.origin():
            raise TransportError(
                f"{self.url} named an endpoint on another origin ({endpoint}); refused"
            )
        return str(endpoint)

    async def _pump(
        self, resp: aiohttp.ClientResponse, decoder: SseDecoder, inbound: Inbound
    ) -> NoReturn:
        """Deliver `message` events until the stream ends; then raise how it ended (what to
        close the session with)."""

        def on_event(event: sse.Event) -> bool:
            data = event_payload(event, self.max_message_bytes, self.url)
            if data is not None:
                inbound.receive(data)
            return False

        try:
            await read_events(resp, decoder, on_event)
        except TransportError:  # an oversized event: the stream cannot be trusted
            raise
        except Exception as exc:  # a bug must end this connection, not the session's tasks
            log.exception("reading the SSE stream from %s failed", self.url)
            raise TransportError(f"reading the SSE stream from {self.url} failed: {exc!r}"
                                 ) from exc
        raise ConnectionClosed(f"the SSE stream from {self.url} ended")


__all__ = ["LegacySseTransport"]
