"""The client side of one connection: ids, pending requests, timeouts, cancellation, and
dispatch of what the server sends.

Era-neutral: `Client` decides what goes into params (`_meta`, MRTR rounds) and what a
server→client request means; the session only moves JSON-RPC.

Invariants:
- Every request gets a fresh integer id; an answer resolves at most one pending request,
  and an answer for an id nobody waits for is logged and dropped.
- A request ends in exactly one way: a result, an `McpError` from the server's error
  response, a `RequestTimeout`, a transport failure, or the caller's cancellation. In the
  last two non-answer cases the server is told: the transport abandons the request's
  stream (per-request transports in the modern era) and/or `notifications/cancelled` is sent.
- When the connection closes, every pending request fails at once with the close reason.
- A message from the server that does not decode is logged and skipped, never fatal.
- What the server sends on its own is worked on in bounded amounts (`InboundLimits`): at
  most `requests` of its requests are answered at once (the next ones are refused with an
  error at once), and at most `notifications` notification handlers and progress callbacks
  run at once (the next notifications are dropped and counted). A server that floods the
  client costs it a bounded number of tasks and bytes, whatever the transport.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import math
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup

from mcpkit.client.origin import current_origin, request_origin
from mcpkit.errors import InvalidArgument, InvalidState, Timeout
from mcpkit.protocol import errors, jsonrpc
from mcpkit.protocol.jsonrpc import RequestId
from mcpkit.transports.client.base import (
    ClientTransport,
    ConnectionClosed,
    ExchangeTransport,
    Outgoing,
    TransportError,
)

log = logging.getLogger(__name__)

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None] | None]
"""`(progress, total, message)`; may be a plain function or a coroutine function."""
RequestHandler = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""Answers a server→client request: `(method, params) -> result`; raises McpError to refuse."""
NotificationHandler = Callable[[str, dict[str, Any]], Awaitable[None]]
"""Handles a notification from the server: `(method, params)`."""

MAX_LOGGED_GARBAGE = 200
"""Bytes of an undecodable message quoted in the log."""
ABANDON_GRACE_S = 2.0
"""After cancelling by notification, how long a request's own stream is still read."""
MAX_SERVER_REQUESTS = 64
"""Server→client requests (sampling, elicitation, roots, ping) answered at once."""
MAX_NOTIFICATION_HANDLERS = 1024
"""Notification handlers and progress callbacks running at once."""
MAX_QUEUED_REFUSAL_BYTES = 1024 * 1024
"""Error replies to server requests waiting to be sent, in bytes."""
BUSY = -32000
"""The JSON-RPC error code (implementation-defined range) of a server request refused
because the client is already answering `InboundLimits.requests` of them."""


class RequestTimeout(Timeout):
    """A request got no answer in time (the server was told to cancel it)."""

    def __init__(self, method: str, seconds: float, *, hard: bool) -> None:
        kind = "maximum time" if hard else "timeout"
        super().__init__(f"{method}: no answer within the {kind} of {seconds:g} s")
        self.method = method
        self.seconds = seconds


@dataclass(slots=True)
class Timeouts:
    """How long a request may take.

    `timeout` is the idle limit: it restarts whenever progress arrives for the request when
    `reset_on_progress` is set. `maximum` bounds the request regardless of progress.
    None means no limit of that kind.
    """

    timeout: float | None = 60.0
    maximum: float | None = 600.0
    reset_on_progress: bool = True

    def overridden(self, timeout: Any = "default", maximum: Any = "default") -> Timeouts:
        """These limits with `timeout` and/or `maximum` replaced ("default": kept)."""
        if timeout == "default" and maximum == "default":
            return self  # the common case: no new object per request
        return Timeouts(self.timeout if timeout == "default" else timeout,
                        self.maximum if maximum == "default" else maximum,
                        self.reset_on_progress)


DEFAULT_TIMEOUTS = Timeouts()


@dataclass(slots=True, frozen=True)
class InboundLimits:
    """How much of what a server sends on its own the client works on at once.

    `requests`: server→client requests being answered; one more is refused at once with a
    JSON-RPC error (code `BUSY`). The refusals wait in a queue of `refusal_bytes`, sent by
    one task; past that (a server that sends requests and does not read the answers) a
    request is dropped (logged, counted in `ClientSession.dropped_requests`). `notifications`:
    notification handlers and progress callbacks running; one more notification is dropped
    (logged, counted in `ClientSession.dropped_notifications`). Timeouts still see
    progress that was dropped this way: only the callback is skipped.
    """

    requests: int = MAX_SERVER_REQUESTS
    notifications: int = MAX_NOTIFICATION_HANDLERS
    refusal_bytes: int = MAX_QUEUED_REFUSAL_BYTES

    def __post_init__(self) -> None:
        if min(self.requests, self.notifications, self.refusal_bytes) < 1:
            raise InvalidArgument("InboundLimits: every limit must be at least 1")


@dataclass(slots=True, eq=False)
class _Pending:
    method: str
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: BaseException | None = None
    progress_token: RequestId | None = None
    on_progress: ProgressCallback | None = None
    last_activity: float = 0.0
    started: float = 0.0
    limits: Timeouts = field(default_factory=lambda: Timeouts())
    origin: object | None = None  # see client/origin.py

    def deadline(self) -> float:
        """When this request times out, as things stand (progress may move it later)."""
        idle = self.limits.timeout
        hard = self.limits.maximum
        return min(self.last_activity + idle if idle is not None else math.inf,
                   self.started + hard if hard is not None else math.inf)

    def timeout_error(self, now: float) -> RequestTimeout:
        hard = self.limits.maximum
        if hard is not None and now >= self.started + hard:
            return RequestTimeout(self.method, hard, hard=True)
        return RequestTimeout(self.method, self.limits.timeout or 0.0, hard=False)

    def settle(self, result: Any = None, error: BaseException | None = None) -> None:
        if self.done.is_set():
            return
        self.result, self.error = result, error
        self.done.set()


@dataclass(slots=True, eq=False)
class _Exchanging:
    """A request in `exchange`: its origin, its notification handlers still running, and
    its deadline (the watchdog cancels its task once it passed)."""

    origin: object | None
    task: asyncio.Task[Any] | None = None
    deadline: float = math.inf
    expired: bool = False
    handlers: int = 0
    _idle: anyio.Event | None = None

    def expire(self) -> None:
        """Called by the watchdog: cancel the waiting task (once); `exchange` turns that
        cancellation into `RequestTimeout`."""
        if not self.expired and self.task is not None:
            self.expired = True
            self.task.cancel()

    def handler_done(self) -> None:
        self.handlers -= 1
        if self.handlers == 0 and self._idle is not None:
            self._idle.set()

    async def settled(self) -> None:
        if self.handlers:
            self._idle = anyio.Event()
            await self._idle.wait()


class ClientSession:
    """Requests and answers over one transport (not reusable after close)."""

    def __init__(
        self,
        transport: ClientTransport,
        *,
        on_request: RequestHandler,
        on_notification: NotificationHandler,
        limits: InboundLimits | None = None,
    ) -> None:
        self.transport = transport
        self.limits = limits or InboundLimits()
        self._answering = 0
        """Server requests being answered (tasks of `_answer`)."""
        self._refusals: collections.deque[tuple[bytes, str]] = collections.deque()
        """Error replies to server requests waiting for `_send_refusals`, and what each
        answers."""
        self._refusal_bytes = 0
        self._sending_refusals = False
        self._handling = 0
        """Notification handlers and progress callbacks running."""
        self.dropped_notifications = 0
        """Notifications (and progress callbacks) skipped because `limits.notifications`
        handlers were running."""
        self.dropped_requests = 0
        """Server requests neither answered nor refused (even refusals were backlogged)."""
        self._on_request = on_request
        self._on_notification = on_notification
        self._ids = itertools.count(1)
        self._progress_tokens = itertools.count(1)
        self._pending: dict[RequestId, _Pending] = {}
        self._by_token: dict[RequestId, _Pending] = {}
        self._inbound: dict[RequestId, anyio.CancelScope] = {}
        self._exchanging: dict[RequestId, _Exchanging] = {}
        """The requests in `exchange` (they have no pending entry)."""
        self._tg: TaskGroup | None = None
        self._closed: BaseException | None = None
        self.ended = anyio.Event()
        """Set once the connection is closed (by either side); `closed_reason` says why."""
        self._watchdog_wake = anyio.Event()
        self._watchdog_target = math.inf
        self._watchdog_running = False
        self.cancel_by_notification = not transport.per_request_streams
        """Whether cancelling sends `notifications/cancelled` (set by the client per era)."""
        self._exchanger = transport if isinstance(transport, ExchangeTransport) else None
        """The transport, when it declares the `exchange` ability (checked once, here)."""

    # --- lifecycle -------------------------------------------------------------------------

    async def open(self, task_group: TaskGroup) -> None:
        self._tg = task_group
        await self.transport.open(self, task_group)

    @property
    def closed_reason(self) -> BaseException | None:
        return self._closed

    # --- sending ---------------------------------------------------------------------------

    def next_progress_token(self) -> str:
        return f"p{next(self._progress_tokens)}"

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeouts: Timeouts | None = None,
        on_progress: ProgressCallback | None = None,
        headers: Mapping[str, str] | None = None,
        cancel_remote: bool = True,
    ) -> Any:
        """Send a request and wait for its result (decoded JSON).

        If `params._meta.progressToken` is set, progress for it resets the idle timeout
        and is passed to `on_progress`. `cancel_remote=False` gives up on a request
        without telling the server (the era probe: a legacy server must not see a
        cancellation before `initialize`).
        """
        if self._closed is not None:
            raise self._closed
        request_id = next(self._ids)
        now = anyio.current_time()
        pending = _Pending(method, on_progress=on_progress, last_activity=now, started=now,
                           limits=timeouts or DEFAULT_TIMEOUTS, origin=current_origin())
        token = _progress_token(params)
        if token is not None:
            pending.progress_token = token
            self._by_token[token] = pending
        self._pending[request_id] = pending
        self._watch(pending)
        data = jsonrpc.encode_request(request_id, method, params if params is not None else {})
        try:
            await self.transport.send(Outgoing(data, method, request_id, headers or {}))
            await pending.done.wait()
            if isinstance(pending.error, RequestTimeout):
                raise pending.error
        except BaseException as exc:
            if not pending.done.is_set() or isinstance(exc, RequestTimeout):
                with anyio.CancelScope(shield=True):
                    if cancel_remote:
                        await self._cancel_remote(request_id, method, _reason(exc))
                    else:
                        await self._quietly(self.transport.abandon(request_id))
            raise
        finally:
            self._pending.pop(request_id, None)
            if token is not None:
                self._by_token.pop(token, None)
            if not self._pending and self._watchdog_running:
                self._watchdog_wake.set()  # nothing left to watch: let it end
        if pending.error is not None:
            raise pending.error
        return pending.result

    @property
    def can_exchange(self) -> bool:
        """Whether `exchange` works here (the transport answers a request in the caller's
        task: Streamable HTTP)."""
        return self._exchanger is not None

    async def exchange(
        self,
        method: str,
        params: dict[str, Any],
        *,
        timeouts: Timeouts | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """`request` for a caller that waits for one answer and wants nothing else of it (no
        progress, no server requests tied to it): sent and answered in the calling task,
        with no pending entry or task. The time limits become one deadline (nothing can
        reset the idle one), kept by the session's watchdog, which cancels the calling task
        when it passes (asyncio only, as the transports that can exchange are); cancelling
        or timing out closes the request's POST, which is how the modern era cancels. Only
        where `can_exchange`."""
        if self._closed is not None:
            raise self._closed
        exchanger = self._exchanger
        if exchanger is None:
            raise TransportError(
                f"{self.transport.describe()} cannot exchange in the caller's task")
        request_id = next(self._ids)
        data = jsonrpc.encode_request(request_id, method, params)
        limits = timeouts or DEFAULT_TIMEOUTS
        seconds = min(limits.timeout or math.inf, limits.maximum or math.inf)
        exchanging = self._exchanging[request_id] = _Exchanging(current_origin())
        if seconds != math.inf:
            # The time limit is the watchdog's, not a timer of its own: a timer per call
            # (a cancel scope's deadline) cost more CPU than the rest of the exchange.
            exchanging.task = asyncio.current_task()
            exchanging.deadline = anyio.current_time() + seconds
            self._watch_until(exchanging.deadline)
        try:
            answer = await exchanger.exchange(Outgoing(data, method, request_id, headers or {}))
            # The notifications its stream carried are handled before it ends (as
            # `request`'s are, their tasks having started before its waiter resumes).
            await exchanging.settled()
        except asyncio.CancelledError:
            task = exchanging.task
            if exchanging.expired and task is not None and task.uncancel() == 0:
                # only the watchdog's cancellation: a timeout, not the caller's
                hard = limits.maximum is not None and seconds == limits.maximum
                raise RequestTimeout(method, seconds, hard=hard) from None
            raise
        finally:
            del self._exchanging[request_id]
        return _answer_of(method, answer)

    async def notify(
        self, method: str, params: dict[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if self._closed is not None:
            raise self._closed
        data = jsonrpc.encode_notification(method, params if params is not None else {})
        await self.transport.send(Outgoing(data, method, None, headers or {}))

    # --- timeouts: one watchdog for all requests ---------------------------------------------

    def _watch(self, pending: _Pending) -> None:
        self._watch_until(pending.deadline())

    def _watch_until(self, deadline: float) -> None:
        """Make sure the watchdog wakes by `deadline`. Deadlines of later requests are
        usually later, so this rarely wakes it."""
        if deadline == math.inf:
            return
        if not self._watchdog_running:
            self._watchdog_running = True
            self._watchdog_target = deadline
            self._spawn(self._watchdog)
        elif deadline < self._watchdog_target:
            self._watchdog_target = deadline
            self._watchdog_wake.set()

    async def _watchdog(self) -> None:
        """Fail requests whose deadline passed with `RequestTimeout` (their waiter then
        cancels them on the server) and cancel such exchanges. One task instead of a timer
        per request; it runs only while some request has a deadline. A finished exchange
        does not wake it (that would cost every call a task switch): it finds out at its
        next target and stops then."""
        while True:
            self._watchdog_wake = anyio.Event()
            now = anyio.current_time()
            target = math.inf
            if self._answering:
                self._not_idle(now)
            for pending in list(self._pending.values()):
                if pending.done.is_set():
                    continue
                deadline = pending.deadline()
                if deadline <= now:
                    pending.settle(error=pending.timeout_error(now))
                else:
                    target = min(target, deadline)
            for exchanging in list(self._exchanging.values()):
                if exchanging.deadline <= now:
                    exchanging.expire()
                else:
                    target = min(target, exchanging.deadline)
            self._watchdog_target = target
            if target == math.inf:
                self._watchdog_running = False
                return
            else:
                with anyio.move_on_after(target - now):
                    await self._watchdog_wake.wait()

    async def _cancel_remote(self, request_id: RequestId, method: str, reason: str) -> None:
        """Tell the server a request is abandoned (bounded; never raises)."""
        if method == "initialize":  # the spec forbids cancelling initialize
            await self._quietly(self.transport.abandon(request_id))
            return
        if self.cancel_by_notification and self._closed is None:
            data = jsonrpc.encode_notification(
                "notifications/cancelled", {"requestId": request_id, "reason": reason}
            )
            with anyio.move_on_after(2.0):
                await self._quietly(
                    self.transport.send(Outgoing(data, "notifications/cancelled"))
                )
            if self.transport.per_request_streams and self._tg is not None:
                # Legacy HTTP: keep reading the request's stream a little longer; the
                # server may still send what it owes there, such as the cancellation of
                # a sampling request it made for this call.
                self._spawn(self._abandon_later, request_id)
                return
        await self._quietly(self.transport.abandon(request_id))

    async def _abandon_later(self, request_id: RequestId) -> None:
        await anyio.sleep(ABANDON_GRACE_S)
        await self._quietly(self.transport.abandon(request_id))

    @staticmethod
    async def _quietly(step: Awaitable[None]) -> None:
        try:
            with anyio.move_on_after(2.0):
                await step
        except Exception as exc:  # best effort: the request has already failed locally
            log.debug("cancelling a request failed: %r", exc)

    # --- Inbound (called by the transport) ---------------------------------------------------

    def receive(self, data: bytes, related: RequestId | None = None) -> None:
        if jsonrpc.is_batch(data):
            try:
                items = jsonrpc.decode_batch(data)
            except jsonrpc.DecodeFailure as failure:
                self._undecodable(data, failure)
                return
            for item in items:
                if isinstance(item, jsonrpc.DecodeFailure):
                    self._undecodable(data, item)
                else:
                    self._dispatch(item, related)
            return
        try:
            message = jsonrpc.decode_message(data)
        except jsonrpc.DecodeFailure as failure:
            self._undecodable(data, failure)
            return
        self._dispatch(message, related)

    def request_failed(self, request_id: RequestId, error: Exception) -> None:
        pending = self._pending.get(request_id)
        if pending is not None:
            pending.settle(error=error)

    def closed(self, error: Exception | None) -> None:
        if self._closed is not None:
            return
        self._closed = error or ConnectionClosed(
            f"the connection to {self.transport.describe()} closed"
        )
        for pending in list(self._pending.values()):
            pending.settle(error=self._closed)
        for scope in list(self._inbound.values()):
            scope.cancel()
        self.ended.set()

    # --- dispatch --------------------------------------------------------------------------

    def _undecodable(self, data: bytes, failure: jsonrpc.DecodeFailure) -> None:
        """A message from the server that did not decode: an answer to one of our requests
        fails that request at once; a request of the server's is answered with the error;
        anything else is logged and skipped."""
        self._skip(data, failure)
        pending = (self._pending.get(failure.id)
                   if failure.response and failure.id is not None else None)
        if pending is not None:
            pending.settle(error=errors.ProtocolError(
                failure.error.code, f"undecodable answer to {pending.method}: "
                f"{failure.error.message}"))
        elif (failure.answerable and not failure.response and failure.id is not None
              and self._closed is None):
            self._refuse(jsonrpc.encode_error(failure.id, failure.error), "an undecodable request")

    def _refuse(self, reply: bytes, what: str) -> None:
        """Queue an error reply for `_send_refusals`, unless `limits.refusal_bytes` of them
        already wait (then the request is dropped)."""
        if self._refusal_bytes + len(reply) > self.limits.refusal_bytes:
            self.dropped_requests += 1
            if self.dropped_requests == 1 or self.dropped_requests % 1000 == 0:
                log.warning("%s is flooding this client with requests it does not read the "
                            "answers to; %d dropped so far", self.transport.describe(),
                            self.dropped_requests)
            return
        self._refusals.append((reply, what))
        self._refusal_bytes += len(reply)
        if not self._sending_refusals:
            self._sending_refusals = True
            self._spawn(self._send_refusals)

    async def _send_refusals(self) -> None:
        """Send the queued error replies, one at a time (one task however many there are)."""
        try:
            while self._refusals and self._closed is None:
                reply, what = self._refusals[0]
                try:
                    with anyio.move_on_after(30.0):
                        await self.transport.send(Outgoing(reply))
                except TransportError as exc:
                    # the transport is failing: the rest would fail the same way
                    log.warning("could not answer %s of the server (%d more refusals "
                                "dropped): %s", what, len(self._refusals) - 1, exc)
                    self._refusals.clear()
                    self._refusal_bytes = 0
                    return
                self._refusals.popleft()
                self._refusal_bytes -= len(reply)
        finally:
            self._sending_refusals = False

    @staticmethod
    def _skip(data: bytes, failure: jsonrpc.DecodeFailure) -> None:
        snippet = bytes(data[:MAX_LOGGED_GARBAGE]).decode("utf-8", "replace")
        log.warning("skipping a message from the server that is not JSON-RPC (%s): %r",
                    failure.error.message, snippet)

    def _dispatch(self, message: jsonrpc.Message, related: RequestId | None = None) -> None:
        if isinstance(message, jsonrpc.Response | jsonrpc.ErrorResponse):
            self._resolve(message)
        elif isinstance(message, jsonrpc.Request):
            self._take_request(message, related)
        else:
            self._notification(message, related)

    def _take_request(self, request: jsonrpc.Request, related: RequestId | None) -> None:
        """Answer a server request, or refuse it at once when `limits.requests` are being
        answered (a sampling or elicitation handler may wait on a person for minutes)."""
        if self._answering < self.limits.requests:
            self._answering += 1
            self._spawn(self._answer, request, self._origin_of(related))
            return
        if self._closed is None:
            busy = errors.ProtocolError(
                BUSY, f"the client is already answering {self.limits.requests} requests "
                f"from this server; {request.method} refused")
            self._refuse(jsonrpc.encode_error(request.id, busy), request.method)

    def _admit_handler(self, method: str) -> bool:
        """Whether a handler for one more notification may start (`limits.notifications`)."""
        if self._handling < self.limits.notifications:
            self._handling += 1
            return True
        self.dropped_notifications += 1
        if self.dropped_notifications == 1 or self.dropped_notifications % 10000 == 0:
            log.warning("%s sends notifications faster than this client handles them: "
                        "%d dropped so far (latest: %s)", self.transport.describe(),
                        self.dropped_notifications, method)
        return False

    def _handler_done(self) -> None:
        self._handling -= 1

    def _resolve(self, message: jsonrpc.Response | jsonrpc.ErrorResponse) -> None:
        pending = self._pending.get(message.id) if message.id is not None else None
        if pending is None and message.id is None and len(self._pending) == 1:
            # An error with a null id answers a request whose id the server could not
            # read; with one request in flight, it can only be that one (typically a
            # legacy server refusing the era probe before `initialize`).
            pending = next(iter(self._pending.values()))
        if pending is None:
            log.debug("dropping an answer for unknown request id %r", message.id)
            return
        if isinstance(message, jsonrpc.Response):
            try:
                pending.settle(result=jsonrpc.decode_value(message.result))
            except Exception as exc:
                pending.settle(error=errors.ProtocolError(
                    errors.PARSE_ERROR, f"undecodable result for {pending.method}: {exc}"))
        else:
            pending.settle(error=_server_error(message))

    def _notification(self, message: jsonrpc.Notification, related: RequestId | None = None
                      ) -> None:
        params = _params_of(message.params)
        if message.method == "notifications/progress":
            self._progress(params)
            return
        if message.method == "notifications/cancelled":
            request_id = params.get("requestId")
            scope = self._inbound.get(request_id) if jsonrpc.is_request_id(request_id) else None
            if scope is not None:
                scope.cancel()
            # Modern servers also cancel listen streams this way: the client handles that.
        if not self._admit_handler(message.method):
            return
        exchanging = self._exchanging.get(related) if related is not None else None
        if exchanging is not None:
            exchanging.handlers += 1
            self._spawn(self._notify_for_exchange, exchanging, message.method, params)
            return
        self._spawn(self._notify_handler, message.method, params, self._origin_of(related))

    async def _notify_for_exchange(self, exchanging: _Exchanging, method: str,
                                   params: dict[str, Any]) -> None:
        try:
            await self._notify_handler(method, params, exchanging.origin)
        finally:
            exchanging.handler_done()

    def _progress(self, params: dict[str, Any]) -> None:
        token = params.get("progressToken")
        pending = self._by_token.get(token) if isinstance(token, str | int) else None
        if pending is None:
            return
        if pending.limits.reset_on_progress:
            pending.last_activity = anyio.current_time()
        if pending.on_progress is not None and self._admit_handler("notifications/progress"):
            progress = params.get("progress")
            total = params.get("total")
            self._spawn(
                self._call_progress, pending.on_progress,
                float(progress) if isinstance(progress, int | float) else 0.0,
                float(total) if isinstance(total, int | float) else None,
                params.get("message") if isinstance(params.get("message"), str) else None,
            )

    async def _call_progress(self, callback: ProgressCallback, progress: float,
                             total: float | None, message: str | None) -> None:
        try:
            await _call_progress(callback, progress, total, message)
        finally:
            self._handler_done()

    async def _notify_handler(self, method: str, params: dict[str, Any],
                              origin: object | None = None) -> None:
        """Run the client's handler for one notification (admitted by `_admit_handler`)."""
        try:
            with request_origin(origin):
                await self._on_notification(method, params)
        except Exception:
            log.exception("the handler for %s failed", method)
        finally:
            self._handler_done()

    def _origin_of(self, related: RequestId | None) -> object | None:
        """The origin a server request inherits (client/origin.py): that of the request
        whose stream carried it, else of the only request in flight that has one."""
        if related is not None:
            pending = self._pending.get(related)
            if pending is not None:
                return pending.origin
            if related in self._exchanging:
                return self._exchanging[related].origin
        origins = {id(p.origin): p.origin for p in self._pending.values() if p.origin is not None}
        return next(iter(origins.values())) if len(origins) == 1 else None

    async def _answer(self, request: jsonrpc.Request, origin: object | None = None) -> None:
        """Answer one server request (admitted by `_take_request`; counted until its answer
        is sent, so a server that does not read its answers cannot pile them up)."""
        try:
            reply = await self._reply_to(request, origin)
            if reply is None or self._closed is not None:
                return  # cancelled by the server: no answer (spec), or nobody to answer
            try:
                with anyio.move_on_after(30.0):
                    await self.transport.send(Outgoing(reply))
            except TransportError as exc:
                log.warning("could not answer the server's %s: %s", request.method, exc)
        finally:
            self._answering -= 1
            self._not_idle(anyio.current_time())

    def _not_idle(self, now: float) -> None:
        """While the client answers the server (a person may be filling a form), the
        requests in flight are waiting on the client, not idle: their idle clocks restart
        (as progress restarts them; `maximum` still bounds them)."""
        for pending in self._pending.values():
            if pending.limits.reset_on_progress:
                pending.last_activity = now

    async def _reply_to(self, request: jsonrpc.Request, origin: object | None
                        ) -> bytes | None:
        """The encoded answer to a server request; None if the server cancelled it."""
        params = _params_of(request.params)
        reply: bytes | None = None
        with anyio.CancelScope() as scope, request_origin(origin):
            self._inbound[request.id] = scope
            try:
                result = await self._on_request(request.method, params)
                reply = jsonrpc.encode_result(request.id, result)
            except errors.McpError as exc:
                reply = jsonrpc.encode_error(request.id, exc)
            except Exception:
                log.exception("answering the server's %s failed", request.method)
                reply = jsonrpc.encode_error(
                    request.id, errors.internal_error(f"the client failed to answer "
                                                      f"{request.method}"))
            finally:
                self._inbound.pop(request.id, None)
        return reply

    def _spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        if self._tg is None:
            raise InvalidState("ClientSession is not open")
        self._tg.start_soon(fn, *args)


async def _call_progress(
    callback: ProgressCallback, progress: float, total: float | None, message: str | None
) -> None:
    try:
        outcome = callback(progress, total, message)
        if outcome is not None:
            await outcome
    except Exception:
        log.exception("a progress callback failed")


def _progress_token(params: Mapping[str, Any] | None) -> RequestId | None:
    meta = (params or {}).get("_meta")
    if isinstance(meta, dict):
        token = meta.get("progressToken")
        if isinstance(token, str) or (isinstance(token, int) and not isinstance(token, bool)):
            return token
    return None


def _params_of(params: jsonrpc.Params | None) -> dict[str, Any]:
    # The codec decoded the params and checked they are an object (`jsonrpc.decode_message`).
    return params if params is not None else {}


def _answer_of(method: str, data: bytes) -> Any:
    """The result in a response message, or its error raised as `ServerError`."""
    try:
        message = jsonrpc.decode_message(data)
    except jsonrpc.DecodeFailure as failure:
        raise errors.ProtocolError(errors.PARSE_ERROR, f"undecodable answer to {method}: "
                                   f"{failure.error.message}") from None
    if isinstance(message, jsonrpc.ErrorResponse):
        raise _server_error(message)
    if not isinstance(message, jsonrpc.Response):
        raise errors.ProtocolError(errors.INVALID_REQUEST, f"the answer to {method} is not a "
                                   "response")
    try:
        return jsonrpc.decode_value(message.result)
    except Exception as exc:
        raise errors.ProtocolError(errors.PARSE_ERROR,
                                   f"undecodable result for {method}: {exc}") from exc


def _server_error(message: jsonrpc.ErrorResponse) -> errors.McpError:
    return ServerError(message.code, message.message or "(no message)", message.data)


class ServerError(errors.McpError):
    """The server answered a request with a JSON-RPC error."""

    def __str__(self) -> str:
        return f"{self.message} (code {self.code})"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RequestTimeout):
        return str(exc)
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return "cancelled by the client"
    return f"client gave up: {type(exc).__name__}"
