"""Relaying an upstream's questions and messages to the caller whose call caused them.

Each forwarded request runs with a `CallerRelay` as its request origin
(`mcpkit.client.origin`), so when the upstream asks something mid-call - sampling,
elicitation - or logs, the pooled upstream client finds that relay and the question goes to
the right caller, never to another one sharing the connection:

- a legacy caller is asked directly (a server→client request on its session);
- a modern caller cannot be asked mid-request: the relay records the question, the call is
  stopped and answered with `input_required`. The caller answers and retries; the hub calls
  the upstream again and, when the upstream asks the same question, answers it from the
  retry (questions are keyed by a hash of their method and params). That is the 2026-07-28
  model - a request is re-run with the answers - applied to an upstream that asks the old
  way, so a tool that asks a question runs again from the start on retry.

Questions a relay cannot place (an upstream asking outside any call, the caller lacking the
capability) are refused to the upstream with an error, never guessed.

Log and progress messages are passed on as they come, while at most
`DEFAULT_MAX_RELAY_BACKLOG_BYTES` of them wait for the caller to read: an upstream may
send faster than a caller reads (or a caller may stop reading), and the hub must not hold
the difference. Past it new messages are dropped and counted, and once the caller has caught
up it is told how many it missed (a warning log message).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgspec

from mcpkit.client.origin import current_origin
from mcpkit.protocol import errors, types
from mcpkit.server import inputs
from mcpkit.server.context import Context

log = logging.getLogger(__name__)

DEFAULT_MAX_RELAY_BACKLOG_BYTES = 4 * 1024 * 1024
"""Bytes of upstream log and progress messages one forwarded call may have waiting for its
caller to read them (see the module docstring)."""
SAMPLING = "sampling/createMessage"
ELICITATION = "elicitation/create"


class CallerRelay:
    """The caller side of one forwarded request (its `Context`)."""

    def __init__(self, ctx: Context, upstream_name: str,
                 max_backlog_bytes: int = DEFAULT_MAX_RELAY_BACKLOG_BYTES) -> None:
        self.ctx = ctx
        self.upstream_name = upstream_name
        self.max_backlog_bytes = max_backlog_bytes
        self.backlog = 0
        """Bytes of messages being passed on to the caller right now."""
        self.dropped = 0
        """Messages dropped since the caller was last told."""
        self.needed: dict[str, dict[str, Any]] = {}
        """Modern caller: the questions still to answer, by key (see the module docstring)."""
        self.scope: anyio.CancelScope | None = None
        """The forwarded request's scope: cancelled once a modern caller must be asked."""

    async def ask(self, method: str, params: dict[str, Any]) -> Any:
        """The caller's answer to the upstream's `method` request."""
        key = question_key(method, params)
        if not self.ctx.modern:
            return await self.ctx.ask(method, params, key=key)
        try:
            return await self.ctx.ask(method, params, key=key)
        except inputs._InputRequired as need:
            self.needed.update(need.requests)
            if self.scope is not None:
                self.scope.cancel()  # the upstream call ends here; the caller retries
            raise errors.McpError(
                errors.INTERNAL_ERROR, "the caller's answer comes with a retry of the call"
            ) from None

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        data = msgspec.to_builtins(params)
        level, logger = str(data.get("level", "info")), data.get("logger") or self.upstream_name
        await self.pass_on(len(msgspec.json.encode(data.get("data"))),
                           lambda: self.ctx.log(level, data.get("data"), logger))

    async def progress(self, value: float, total: float | None, message: str | None) -> None:
        await self.pass_on(64 + len(message or ""),
                           lambda: self.ctx.report_progress(value, total, message))

    async def pass_on(self, size: int, send: Callable[[], Awaitable[None]]) -> None:
        """Send one log or progress message to the caller unless the backlog is full (one
        message passes alone, whatever its size); then, if some were dropped, say so."""
        if self.backlog and self.backlog + size > self.max_backlog_bytes:
            self.dropped += 1
            return
        self.backlog += size
        try:
            await send()
        finally:
            self.backlog -= size
        if self.dropped and not self.backlog:
            dropped, self.dropped = self.dropped, 0
            log.info("caller too slow for %s: %d messages dropped", self.upstream_name, dropped)
            await self.ctx.log("warning", f"the hub dropped {dropped} log or progress "
                               f"messages of {self.upstream_name}: they came faster than they "
                               "were read", self.upstream_name)


def question_key(method: str, params: dict[str, Any]) -> str:
    """A stable name for one upstream question: the same question gets the same key on the
    retry, so its answer is found again."""
    canonical = json.dumps([method, params], sort_keys=True, separators=(",", ":"))
    return "hub-" + hashlib.sha256(canonical.encode()).hexdigest()[:16]


def current_relay() -> CallerRelay | None:
    origin = current_origin()
    return origin if isinstance(origin, CallerRelay) else None


async def relay_sampling(request: types.CreateMessageRequestParams) -> dict[str, Any]:
    return dict(await _relay(SAMPLING, msgspec.to_builtins(request)))


async def relay_elicitation(request: types.ElicitRequestParams) -> dict[str, Any]:
    return dict(await _relay(ELICITATION, msgspec.to_builtins(request)))


async def relay_log(params: types.LoggingMessageNotificationParams) -> None:
    relay = current_relay()
    if relay is not None:
        await relay.log(params)


async def _relay(method: str, params: dict[str, Any]) -> Any:
    relay = current_relay()
    if relay is None:
        raise errors.McpError(
            errors.INVALID_REQUEST,
            f"the hub relays {method} only during a call it forwarded, and cannot tell which "
            "call this one belongs to")
    answer = await relay.ask(method, params)
    if not isinstance(answer, dict):
        raise errors.internal_error(f"the caller's answer to {method} is not an object")
    return answer
