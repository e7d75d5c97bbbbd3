"""The Streamable HTTP client transport (both eras), on aiohttp - except `exchange`, a
modern request answered in the caller's task, which POSTs with the lean client of h1.py.

Each request is one POST run by a background task in the session's task group; its answer
(a JSON body, or an SSE stream carrying progress, server requests and finally the response)
is delivered through `Inbound`. Closing that POST's connection (`abandon`) is the modern
era's cancellation. A legacy SSE stream that ends before the response is resumed with GET +
`Last-Event-ID` after the server's `retry`, kept between `min_retry_s` and `MAX_BACKOFF_S`
(a server cannot make the client reconnect in a tight loop, nor wait out its timeout).
Notifications and responses are POSTed and
waited for (2xx, usually 202).

Legacy sessions: the `Mcp-Session-Id` of any response is kept and sent on every later
request; `open_standalone_stream` attaches the session's GET stream; `close` DELETEs the
session.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import anyio
import msgspec
from aiohttp.abc import AbstractResolver
from anyio.abc import TaskGroup, TaskStatus
from multidict import CIMultiDict

from mcpkit.auth.provider import HttpAuth
from mcpkit.errors import InvalidArgument
from mcpkit.protocol import jsonrpc, sse, versions
from mcpkit.protocol.jsonrpc import RequestId
from mcpkit.transports.client._aiohttp import (
    DEFAULT_MAX_MESSAGE_BYTES,
    EVENT_STREAM,
    JSON,
    NETWORK_ERRORS,
    MessageTooLarge,
    ResponseLike,
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
from mcpkit.transports.client.authorized import AUTH_STATUSES, authorized, fresh_headers
from mcpkit.transports.client.base import (
    ExchangeTransport,
    HttpStatusError,
    Inbound,
    Outgoing,
    SessionExpired,
    TransportError,
)
from mcpkit.transports.client.h1 import H1Client

log = logging.getLogger(__name__)

T = TypeVar("T")

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
DELETE_TIMEOUT_S = 2.0
MAX_BACKOFF_S = 30.0
"""The longest wait before reconnecting a stream, whatever the server's `retry` says."""
MIN_RETRY_S = 0.25
"""The shortest wait before reconnecting a stream, whatever the server's `retry` says: a
server that ends every stream at once with `retry: 0` and a new event id costs each pending
request at most 4 reconnects a second (unclamped: thousands)."""


class _Probe(msgspec.Struct):
    """Just enough of a JSON-RPC message to tell whether it answers a request."""

    id: Any = None
    method: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_probe_one = msgspec.json.Decoder(_Probe)
_probe_batch = msgspec.json.Decoder(list[_Probe])


def answers(data: bytes, request_id: RequestId, *, errors_only: bool = False) -> bool:
    """Whether `data` (a message or a batch) holds the response (or, with `errors_only`, the
    error response) to `request_id`. Never raises."""
    try:
        probes = _probe_batch.decode(data) if jsonrpc.is_batch(data) else [_probe_one.decode(data)]
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return False
    for probe in probes:
        if probe.method is not msgspec.UNSET:
            continue
        # 1 and "1" (and True) are different ids.
        if type(probe.id) is not type(request_id) or probe.id != request_id:
            continue
        if probe.error is not msgspec.UNSET or (
            not errors_only and probe.result is not msgspec.UNSET
        ):
            return True
    return False


@dataclass(slots=True)
class _StreamState:
    """Where one SSE stream (a request's, or the standalone one) stands, for resumption."""

    request_id: RequestId | None
    """The request whose response ends the stream; None for the standalone stream."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """The message's own headers, sent again when the stream is resumed."""
    last_event_id: str | None = None
    retry_s: float | None = None
    answered: bool = False
    progressed: bool = False
    """Whether the current connection brought a new event id or a message."""
    keep_answer: bool = False
    """`exchange`: keep the response in `answer` instead of delivering it to the session."""
    answer: bytes | None = None


class StreamableHttpTransport(ExchangeTransport):
    """A client's connection to one Streamable HTTP endpoint."""

    kind = "http"
    per_request_streams = True
    read_timeout_s: float = 30.0
    """How long a notification or response POST may wait for its status after connecting."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        bearer_token: str | None = None,
        connect_timeout: float = 10.0,
        resolver: AbstractResolver | None = None,
        max_reconnects: int = 5,
        default_retry_s: float = 1.0,
        min_retry_s: float = MIN_RETRY_S,
        session: aiohttp.ClientSession | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        auth: HttpAuth | None = None,
    ) -> None:
        self.url = url
        self.auth = auth
        """Asked for an `Authorization` header before each POST; answers its 401/403s."""
        self._auth_headers: Mapping[str, str] = {}
        self.connect_timeout = connect_timeout
        self.resolver = resolver
        self.max_reconnects = max_reconnects
        self.default_retry_s = default_retry_s
        self.min_retry_s = min_retry_s
        self.max_message_bytes = max_message_bytes
        self.protocol_version: str | None = None
        self.session_id: str | None = None
        self._user_headers = common_headers(headers, bearer_token)
        self._http = session
        self._owns_http = session is None
        self._h1: H1Client | None = None
        """The lean client `exchange` POSTs with (h1.py), unless a session was given."""
        self._inbound: Inbound | None = None
        self._tg: TaskGroup | None = None
        self._requests: dict[RequestId, anyio.CancelScope] = {}
        self._standalone: anyio.CancelScope | None = None
        self._standalone_lock = anyio.Lock()
        self._closed = False
        # Requests stream for as long as the server takes (the session bounds them through
        # `abandon`); notifications wait for their status at most connect + read.
        self._stream_timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout)
        self._short_timeout = aiohttp.ClientTimeout(
            total=connect_timeout + self.read_timeout_s, sock_connect=connect_timeout
        )

    # --- the ClientTransport protocol --------------------------------------------------------

    async def open(self, inbound: Inbound, task_group: TaskGroup) -> None:
        """Get ready; nothing is sent until the first message."""
        if self._closed:
            raise TransportError(f"the transport to {self.url} is closed")
        self._inbound = inbound
        self._tg = task_group
        if self._http is None:
            self._http = new_session(self.connect_timeout, self.resolver)
        if self._owns_http and self._h1 is None:
            self._h1 = H1Client(self.url, connect_timeout=self.connect_timeout,
                                resolver=self.resolver)

    async def send(self, message: Outgoing) -> None:
        http, _, tg = self._ready()
        if message.request_id is not None:
            # The scope is registered before the task starts (so `abandon` finds it at
            # once); `start_soon` saves the extra loop pass `start` would cost per request.
            scope = anyio.CancelScope()
            self._requests[message.request_id] = scope
            tg.start_soon(self._request_task, message, scope)
        else:
            await self._post_and_wait(http, message)

    async def exchange(self, message: Outgoing) -> bytes:
        """POST a request and return its response message, all in the calling task.

        The cheap way for a caller that waits for one answer anyway (the hub forwarding a
        call): no task, no cancel scope, no pending entry in the session. Other messages on
        the request's stream (notifications) still go to the session. Failures raise what
        `send` would report (`TransportError`, `SessionExpired`, `HttpStatusError`);
        cancelling the caller closes the POST, which is the modern era's cancellation.
        """
        request_id = message.request_id
        if request_id is None:
            raise InvalidArgument("exchange needs a request")
        state = _StreamState(request_id, message.headers, keep_answer=True)
        await self._exchange(message, request_id, state, self._h1)
        if state.answer is None:  # answered inside a batch: delivered, not kept
            raise TransportError(f"{self.url} answered request {request_id!r} in a batch")
        return state.answer

    async def abandon(self, request_id: RequestId) -> None:
        scope = self._requests.pop(request_id, None)
        if scope is not None:
            scope.cancel()  # the task's aiohttp response is closed: the server sees it go

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for scope in self._requests.values():
            scope.cancel()
        self._requests.clear()
        self._stop_standalone()
        http = self._http
        # Shielded (close may run in a cancelled task) and bounded.
        with anyio.CancelScope(shield=True), anyio.move_on_after(DELETE_TIMEOUT_S + 1.0):
            if http is not None and not http.closed and self.session_id is not None:
                with anyio.move_on_after(DELETE_TIMEOUT_S):
                    await self._delete(http, self.session_id)
            if http is not None and self._owns_http:
                await http.close()
            if self._h1 is not None:
                await self._h1.close()

    def describe(self) -> str:
        return self.url

    # --- legacy sessions ---------------------------------------------------------------------

    def reset_session(self) -> None:
        """Forget the session id and stop the standalone stream (the session is gone)."""
        self.session_id = None
        self._stop_standalone()

    async def open_standalone_stream(self) -> bool:
        """Attach the legacy session's GET stream (server-initiated messages). False when the
        server offers none (405, or another refusal); the reason is logged at debug."""
        _, _, tg = self._ready()
        async with self._standalone_lock:  # one GET stream, even for concurrent callers
            if self._standalone is not None:
                return True
            opened: bool = await tg.start(self._standalone_task)
            return opened

    # --- headers -----------------------------------------------------------------------------

    def _headers(self, accept: str, extra: Mapping[str, str] | None = None) -> CIMultiDict[str]:
        out: CIMultiDict[str] = CIMultiDict()
        out["Accept"] = accept
        version = self.protocol_version
        if version is not None and versions.has_protocol_version_header(version):
            out[VERSION_HEADER] = version
        if self.session_id is not None:
            out[SESSION_HEADER] = self.session_id
        out.update(self._user_headers)
        out.update(self._auth_headers)
        if extra:
            out.update(extra)
        return out

    def _post_headers(self, message: Outgoing) -> CIMultiDict[str]:
        out = self._headers(f"{JSON}, {EVENT_STREAM}", message.headers)
        out["Content-Type"] = JSON
        return out

    def _capture_session(self, resp: ResponseLike) -> None:
        session_id = resp.headers.get(SESSION_HEADER)
        if session_id:
            self.session_id = session_id

    def _ready(self) -> tuple[aiohttp.ClientSession, Inbound, TaskGroup]:
        if self._closed:
            raise TransportError(f"the transport to {self.url} is closed")
        if self._http is None or self._inbound is None or self._tg is None:
            raise TransportError(f"the transport to {self.url} is not open")
        return self._http, self._inbound, self._tg

    # --- notifications and responses ---------------------------------------------------------

    async def _post_and_wait(self, http: aiohttp.ClientSession, message: Outgoing) -> None:
        await self._authorized(lambda: self._post_and_wait_once(http, message))

    async def _post_and_wait_once(self, http: aiohttp.ClientSession, message: Outgoing) -> None:
        headers = self._post_headers(message)
        sent_session = SESSION_HEADER in headers
        try:
            async with http.post(
                self.url, data=message.data, headers=headers, allow_redirects=False,
                timeout=self._short_timeout,
            ) as resp:
                self._capture_session(resp)
                status = resp.status
                ok = 200 <= status < 300
                body = b""
                if not ok or resp.content_type == JSON:
                    body = await read_body(resp, self.max_message_bytes, truncate=not ok)
                hdrs = response_headers(resp)
        except NETWORK_ERRORS as exc:
            if is_own(exc):
                raise
            raise network_error(
                f"POST of {message.method or 'a response'} to", self.url, exc
            ) from exc
        if ok:
            if body.strip() and self._inbound is not None:
                self._inbound.receive(body)  # a 200 with messages in it
            return
        if status == 404 and sent_session:
            raise SessionExpired(status, body, hdrs, url=self.url)
        raise HttpStatusError(status, body, hdrs, url=self.url)

    # --- requests ----------------------------------------------------------------------------

    async def _request_task(self, message: Outgoing, scope: anyio.CancelScope) -> None:
        request_id = message.request_id
        assert request_id is not None
        with scope:
            error: TransportError | None = None
            try:
                await self._exchange(message, request_id)
            except TransportError as exc:
                error = exc
            except Exception as exc:  # a bug here must fail one request, not the session
                log.exception("Streamable HTTP request %r failed unexpectedly", request_id)
                error = TransportError(f"request {request_id!r} to {self.url} failed: {exc!r}")
            finally:
                if self._requests.get(request_id) is scope:
                    del self._requests[request_id]
            # Only reached when not abandoned: an abandoned request reports nothing.
            if error is not None and self._inbound is not None:
                self._inbound.request_failed(request_id, error)

    async def _exchange(self, message: Outgoing, request_id: RequestId,
                        state: _StreamState | None = None,
                        h1: H1Client | None = None) -> None:
        await self._authorized(lambda: self._exchange_once(message, request_id, state, h1))

    async def _authorized(self, attempt: Callable[[], Awaitable[None]]) -> None:
        await authorized(self.auth, self.url, attempt, self._use_auth_headers)

    def _use_auth_headers(self, headers: Mapping[str, str]) -> None:
        self._auth_headers = headers

    async def _exchange_once(self, message: Outgoing, request_id: RequestId,
                             state: _StreamState | None, h1: H1Client | None) -> None:
        """POST the request (with `h1`, the lean client, when given) and deliver its
        answer; a `TransportError` when it cannot."""
        http, _, _ = self._ready()
        headers = self._post_headers(message)
        if state is None:
            state = _StreamState(request_id, message.headers)
        sent_session = SESSION_HEADER in headers
        try:
            if h1 is not None:
                await self._post_h1(h1, message, headers, state, sent_session)
            else:
                async with http.post(
                    self.url, data=message.data, headers=headers, allow_redirects=False,
                    timeout=self._stream_timeout,
                ) as resp:
                    self._capture_session(resp)
                    await _closing_on_error(resp, self._first_answer(resp, state, sent_session))
        except NETWORK_ERRORS as exc:
            if is_own(exc):
                raise
            raise network_error(f"POST of request {request_id!r} ({message.method}) to",
                                self.url, exc) from exc
        if not state.answered:
            await self._resume(state)

    async def _post_h1(self, h1: H1Client, message: Outgoing, headers: CIMultiDict[str],
                       state: _StreamState, sent_session: bool) -> None:
        """The POST over the lean client: the same answers as aiohttp's, a fraction of the
        CPU. Its connection goes back to the pool only once the answer was read to its end."""
        resp = await h1.post(message.data, headers.items())
        self._capture_session(resp)
        await _closing_on_error(resp, self._first_answer(resp, state, sent_session))
        resp.release()

    async def _first_answer(
        self, resp: ResponseLike, state: _StreamState, sent_session: bool
    ) -> None:
        """Deliver the response's answer, or raise the `TransportError` it amounts to (the
        response released first: see `_refused`)."""
        request_id = state.request_id
        assert request_id is not None
        status = resp.status
        if not 200 <= status < 300:
            body = await read_body(resp, self.max_message_bytes, truncate=True)
            if status == 404 and sent_session:
                raise _refused(resp, SessionExpired(status, body, response_headers(resp),
                                                    url=self.url))
            if self.auth is not None and status in AUTH_STATUSES:
                # For the auth, even with a JSON-RPC error in the body: it may authorize.
                raise _refused(resp, HttpStatusError(status, body, response_headers(resp),
                                                     url=self.url))
            if answers(body, request_id, errors_only=True):
                # A JSON-RPC error with an HTTP status (modern -32022, -32601…): the session
                # handles it like any error response.
                self._take(body, state)
                return
            raise _refused(resp, HttpStatusError(status, body, response_headers(resp),
                                                 url=self.url))
        if status == 202:
            raise _refused(resp, TransportError(
                f"{self.url} answered request {request_id!r} with 202 Accepted and no response"
            ))
        kind = resp.content_type
        if kind == JSON:
            body = await read_body(resp, self.max_message_bytes)
            self._take(body, state)
            if not state.answered:
                raise _refused(resp, TransportError(
                    f"the JSON body from {self.url} holds no response to request {request_id!r}"
                ))
            return
        if kind == EVENT_STREAM:
            await self._read_stream(resp, state)
            return
        raise _refused(resp, TransportError(
            f"{self.url} answered request {request_id!r} with an unexpected content type "
            f"{kind!r} (status {status})"
        ))

    async def _resume(self, state: _StreamState) -> None:
        """Resume a request's stream with GET + Last-Event-ID until the response arrives.

        Reconnects that bring nothing new count against `max_reconnects`; one that brings a
        new event id or a message resets the count (servers may close streams on purpose).
        """
        request_id = state.request_id
        failures = 0
        while True:
            if state.last_event_id is None:
                raise TransportError(
                    f"the response stream of request {request_id!r} from {self.url} ended "
                    "before the response, with no event id to resume from"
                )
            if failures >= self.max_reconnects:
                raise TransportError(
                    f"the response stream of request {request_id!r} from {self.url} ended "
                    f"before the response; gave up after {failures} reconnect(s)"
                )
            failures += 1
            await anyio.sleep(self._retry_delay(state))
            try:
                resp = await self._get_stream(state)
            except _Retryable as exc:
                log.debug("resuming request %r: %s", request_id, exc)
                continue
            except TransportError as exc:
                if isinstance(exc, SessionExpired):
                    raise
                raise TransportError(
                    f"could not resume the response stream of request {request_id!r}: {exc}"
                ) from exc
            await self._read_resumed(resp, state)
            if state.answered:
                return
            if state.progressed:
                failures = 0

    # --- SSE streams -------------------------------------------------------------------------

    async def _read_stream(self, resp: ResponseLike, state: _StreamState) -> None:
        """Deliver the stream's messages until it ends or carries the awaited response."""
        decoder = SseDecoder(self.max_message_bytes, self.url)
        state.progressed = False

        def on_event(event: sse.Event) -> bool:
            if event.id is not None and event.id != state.last_event_id:
                state.last_event_id = event.id
                state.progressed = True
            if event.retry_ms is not None:
                state.retry_s = event.retry_ms / 1000
            data = event_payload(event, self.max_message_bytes, self.url)
            if data is None:
                return False
            state.progressed = True
            self._take(data, state)
            return state.answered

        await read_events(resp, decoder, on_event)

    async def _read_resumed(self, resp: aiohttp.ClientResponse, state: _StreamState) -> None:
        async with resp:
            await _closing_on_error(resp, self._read_stream(resp, state))

    async def _get_stream(self, state: _StreamState) -> aiohttp.ClientResponse:
        """GET an SSE stream (a resumption from `state.last_event_id`, or the standalone
        stream). Raises `_Retryable` when the connection failed or the response headers did
        not come within connect + read timeouts, TransportError when the server refused."""
        http, _, _ = self._ready()
        headers = self._headers(EVENT_STREAM, state.headers)
        if self.auth is not None:  # this GET's own (a DPoP proof is per method and request)
            headers.update(await fresh_headers(self.auth, self.url, "GET"))
        if state.last_event_id is not None:
            headers["Last-Event-ID"] = state.last_event_id
        sent_session = SESSION_HEADER in headers
        try:
            with anyio.fail_after(self.connect_timeout + self.read_timeout_s):
                resp = await http.get(
                    self.url, headers=headers, allow_redirects=False,
                    timeout=self._stream_timeout,
                )
        except NETWORK_ERRORS as exc:
            raise _Retryable(str(network_error("GET", self.url, exc))) from exc
        try:
            self._capture_session(resp)
            if not 200 <= resp.status < 300:
                body = await read_body(resp, 64 * 1024, truncate=True)
                hdrs = response_headers(resp)
                if resp.status == 404 and sent_session:
                    raise SessionExpired(resp.status, body, hdrs, url=self.url)
                raise HttpStatusError(resp.status, body, hdrs, url=self.url)
            if resp.content_type != EVENT_STREAM:
                raise TransportError(
                    f"GET {self.url} answered with {resp.content_type!r}, not an SSE stream"
                )
        except BaseException:
            resp.close()
            raise
        return resp

    async def _standalone_task(
        self, *, task_status: TaskStatus[bool] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        state = _StreamState(None)
        with anyio.CancelScope() as scope:
            try:
                resp = await self._get_stream(state)
            except TransportError as exc:
                log.debug("no standalone SSE stream from %s: %s", self.url, exc)
                task_status.started(False)
                return
            self._standalone = scope
            task_status.started(True)
            try:
                await self._read_resumed(resp, state)
                await self._follow_standalone(state)
            except TransportError as exc:
                log.warning("the standalone SSE stream from %s failed: %s", self.url, exc)
            except Exception:  # a bug must end this stream, not the session's task group
                log.exception("the standalone SSE stream from %s failed", self.url)
            finally:
                if self._standalone is scope:
                    self._standalone = None

    async def _follow_standalone(self, state: _StreamState) -> None:
        """Reconnect the standalone stream whenever it ends, backing off while nothing new
        comes; stops on a refusal or after `max_reconnects` fruitless attempts."""
        failures = 0
        while failures < self.max_reconnects:
            delay = min(self._retry_delay(state) * 2**failures, MAX_BACKOFF_S)
            failures += 1
            await anyio.sleep(delay)
            try:
                resp = await self._get_stream(state)
            except _Retryable as exc:
                log.debug("standalone SSE stream: %s", exc)
                continue
            except TransportError as exc:
                log.debug("standalone SSE stream from %s not resumed: %s", self.url, exc)
                return
            await self._read_resumed(resp, state)
            if state.progressed:
                failures = 0
        log.debug("standalone SSE stream from %s: gave up reconnecting", self.url)

    def _stop_standalone(self) -> None:
        if self._standalone is not None:
            self._standalone.cancel()
            self._standalone = None

    def _retry_delay(self, state: _StreamState) -> float:
        """The server's `retry` (else our default), kept within [min_retry_s, MAX_BACKOFF_S]."""
        delay = self.default_retry_s if state.retry_s is None else state.retry_s
        return min(max(delay, self.min_retry_s), MAX_BACKOFF_S)

    def _take(self, data: bytes, state: _StreamState) -> None:
        """Deliver a message of `state`'s stream, noting whether it is the awaited answer
        (which `exchange` keeps for itself)."""
        request_id = state.request_id
        if request_id is not None and answers(data, request_id):
            state.answered = True
            if state.keep_answer and not jsonrpc.is_batch(data):
                state.answer = data
                return
        self._deliver(data, request_id)

    def _deliver(self, data: bytes, related: RequestId | None = None) -> None:
        if self._inbound is not None:
            self._inbound.receive(data, related)

    # --- DELETE ------------------------------------------------------------------------------

    async def _delete(self, http: aiohttp.ClientSession, session_id: str) -> None:
        headers = self._headers(JSON)
        headers[SESSION_HEADER] = session_id
        try:
            if self.auth is not None:
                headers.update(await fresh_headers(self.auth, self.url, "DELETE"))
        except TransportError as exc:
            log.debug("DELETE of session at %s without fresh authorization: %s", self.url, exc)
        try:
            async with http.delete(
                self.url, headers=headers, allow_redirects=False, timeout=self._short_timeout
            ) as resp:
                if not 200 <= resp.status < 300 and resp.status not in (404, 405):
                    log.debug("DELETE of session at %s answered %d", self.url, resp.status)
        except NETWORK_ERRORS as exc:
            log.debug("DELETE of session at %s failed: %s", self.url, exc)


class _Retryable(TransportError):
    """A GET that failed to connect: worth another attempt."""


def _refused(resp: ResponseLike, error: TransportError) -> TransportError:
    """`error`, with `resp` released first: a refusal is an answer read as far as it will
    be, so its connection goes back to the pool when the body was read whole (as after any
    answer) instead of being closed by `_closing_on_error` (as on a failure mid-read)."""
    resp.release()
    return error


async def _closing_on_error(resp: ResponseLike, work: Awaitable[T]) -> T:
    """Await `work`; on any exit but a normal one (cancellation included) close the
    connection rather than returning it to the pool half-read."""
    try:
        return await work
    except BaseException:
        resp.close()
        raise


__all__ = ["MessageTooLarge", "StreamableHttpTransport", "answers"]
