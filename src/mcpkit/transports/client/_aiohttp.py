"""What the aiohttp-based client transports (Streamable HTTP, HTTP+SSE, WebSocket) share:
header building, bounded body reads, an SSE reader with size limits, error wrapping."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

import aiohttp
from aiohttp.abc import AbstractResolver
from multidict import CIMultiDict

from mcpkit.protocol import sse
from mcpkit.transports.client.base import MessageTooLarge as MessageTooLarge
from mcpkit.transports.client.base import TransportError
from mcpkit.transports.client.h1 import H1Error

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
JSON = "application/json"
EVENT_STREAM = "text/event-stream"

# The SSE parser is fed at most this much at a time, so its own buffer check (the pending
# bytes plus one chunk) can be set just above the message limit without false alarms.
_FEED_CHUNK = 64 * 1024

# aiohttp's exceptions for a connection that failed, broke or timed out. `OSError` takes in
# mcpkit's own `TransportError` (a `ConnectionError`) too: see `is_own`.
NETWORK_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, TimeoutError, OSError)


class BodyReader(Protocol):
    def iter_any(self) -> AsyncIterator[bytes]: ...


class ResponseLike(Protocol):
    """What the transports read of a response: aiohttp's `ClientResponse`, or the lean
    client's `H1Response` (h1.py)."""

    @property
    def status(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def content_type(self) -> str: ...
    @property
    def content_length(self) -> int | None: ...
    @property
    def url(self) -> Any: ...
    @property
    def content(self) -> BodyReader: ...
    def close(self) -> None: ...
    def release(self) -> Any: ...


def common_headers(
    user_headers: Mapping[str, str] | None, bearer_token: str | None
) -> CIMultiDict[str]:
    """The user's headers plus `Authorization`; later assignments replace, case-insensitively."""
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in (user_headers or {}).items():
        out[name] = value
    if bearer_token is not None:
        out["Authorization"] = f"Bearer {bearer_token}"
    return out


def new_session(connect_timeout: float, resolver: AbstractResolver | None = None, *,
                trace_configs: list[aiohttp.TraceConfig] | None = None,
                ) -> aiohttp.ClientSession:
    """A client session for one transport: no connection limit (each pending Streamable HTTP
    request holds a connection, and waiting for a pooled one must not look like a timeout),
    a bounded TCP connect, no proxy from the environment. A `resolver` (e.g.
    `netguard.GuardedResolver`) is asked at every connect, so nothing is cached past it."""
    connector = (aiohttp.TCPConnector(limit=0) if resolver is None else
                 aiohttp.TCPConnector(limit=0, resolver=resolver, use_dns_cache=False))
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout),
        trust_env=False,
        trace_configs=trace_configs,
    )


def is_own(exc: BaseException) -> bool:
    """Whether `exc`, caught as one of `NETWORK_ERRORS`, is already this layer's verdict
    (`MessageTooLarge`, `HttpStatusError`, `ConnectionClosed`…), which passes through as it
    is, rather than a failure of the network below (aiohttp's, the OS's, or the lean
    HTTP/1 client's `H1Error`), which `network_error` maps once, naming the action."""
    return isinstance(exc, TransportError) and not isinstance(exc, H1Error)


def network_error(action: str, url: str, exc: BaseException) -> TransportError:
    cause = str(exc) or type(exc).__name__
    if isinstance(exc, TimeoutError) and not str(exc):
        cause = "timed out"
    if isinstance(exc, aiohttp.ClientConnectorDNSError) and str(exc.os_error):
        cause = str(exc.os_error)  # the resolver's own reason (e.g. an SSRF refusal)
    error = TransportError(f"{action} {url} failed: {cause}")
    error.__cause__ = exc
    return error


def response_headers(resp: ResponseLike) -> dict[str, str]:
    return {name: value for name, value in resp.headers.items()}


async def read_body(resp: ResponseLike, limit: int, *, truncate: bool = False) -> bytes:
    """The whole body, at most `limit` bytes: over it, MessageTooLarge (or, with `truncate`,
    the first `limit` bytes — for error bodies, which are only shown)."""
    declared = resp.content_length
    if declared is not None and declared > limit and not truncate:
        raise MessageTooLarge(
            f"the response from {resp.url} declares {declared} bytes, over the {limit}-byte limit"
        )
    parts: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_any():
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            if truncate:
                return b"".join(parts)[:limit]
            raise MessageTooLarge(
                f"the response body from {resp.url} exceeds the {limit}-byte limit"
            )
    return b"".join(parts)


class SseDecoder:
    """An `EventParser` with a hard limit on each event's size (its data, and the bytes
    buffered while it is incomplete)."""

    def __init__(self, limit: int, source: str) -> None:
        self._parser = sse.EventParser(max_event_bytes=limit + _FEED_CHUNK)
        self._limit = limit
        self._source = source
        self._pending = 0  # bytes fed since an event last completed

    def feed(self, chunk: bytes) -> list[sse.Event]:
        events: list[sse.Event] = []
        for start in range(0, len(chunk), _FEED_CHUNK):
            part = chunk[start : start + _FEED_CHUNK]
            try:
                got = self._parser.feed(part)
            except ValueError:
                raise self._too_large() from None
            self._pending = 0 if got else self._pending + len(part)
            if self._pending > self._limit + _FEED_CHUNK:
                raise self._too_large()
            for event in got:
                if len(event.data) > self._limit:  # characters ≤ bytes: a cheap first check
                    raise self._too_large()
            events.extend(got)
        return events

    def _too_large(self) -> MessageTooLarge:
        return MessageTooLarge(
            f"an SSE event from {self._source} exceeds the {self._limit}-byte limit"
        )


async def read_events(
    resp: ResponseLike, decoder: SseDecoder, on_event: Callable[[sse.Event], bool]
) -> None:
    """Feed the events of an SSE response to `on_event` until it returns True or the stream
    ends. A broken connection ends the stream too (the caller decides whether to resume);
    MessageTooLarge propagates."""
    try:
        async for chunk in resp.content.iter_any():
            for event in decoder.feed(chunk):
                if on_event(event):
                    return
    except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, TimeoutError,
            OSError) as exc:
        if is_own(exc):  # an oversized event
            raise
        return


def event_payload(event: sse.Event, limit: int, source: str) -> bytes | None:
    """The message an SSE event carries (type `message`, non-empty data), checked against the
    byte limit; None for events without one (priming events, other types)."""
    if event.event != "message" or not event.data:
        return None
    data = event.data.encode()
    if len(data) > limit:
        raise MessageTooLarge(f"an SSE event from {source} exceeds the {limit}-byte limit")
    return data
