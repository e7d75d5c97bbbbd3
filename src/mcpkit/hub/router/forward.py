"""Forwarding one request to an upstream and its answer back, as untouched as possible.

    result = await forward(pool, route.upstream, ctx, "tools/call", params)

What is passed through: the params (with the upstream's own name for the tool or prompt),
the caller's non-protocol `_meta`, the result and the upstream's JSON-RPC errors (code,
message, data). What the hub does on the way:
- progress: the caller's progress token gets the upstream's progress;
- cancellation: cancelling the caller's request cancels the upstream's (the client tells
  the upstream);
- questions (sampling, elicitation): `relay.py`; an upstream that answers the modern way
  (`input_required`) has its `inputRequests` passed to a modern caller as they are, with its
  `requestState` sealed inside the hub's (bound to this caller and request); a legacy caller
  is asked each question directly and the hub retries the upstream itself;
- the result loses the upstream's protocol bookkeeping (`resultType`, cache hints, its
  `_meta` server identity): the engine adds the hub's own.

A failure to reach the upstream raises `UpstreamDown` with the reason, and an upstream that
wants authorization the hub lacks (a 401, the owner's login missing or dead) raises
`UpstreamNeedsAuth`, whose reason names the login action (`hub/needs_auth.py`); the caller
decides (a tool call answers `isError: true`, a read a JSON-RPC error).
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from typing import Any

import anyio

from mcpkit.client import Client, ClientError, ConnectionClosed, ServerError, TransportError
from mcpkit.client.origin import request_origin
from mcpkit.errors import PeerError
from mcpkit.hub import needs_auth
from mcpkit.hub.router.pool import UpstreamPool
from mcpkit.hub.router.relay import CallerRelay
from mcpkit.hub.store import UpstreamRecord
from mcpkit.hub.upstream_client import UpstreamUnavailable, reason
from mcpkit.protocol import errors
from mcpkit.protocol.versions import Era
from mcpkit.server import inputs
from mcpkit.server.context import Context

log = logging.getLogger(__name__)

PROTOCOL_META = "io.modelcontextprotocol/"
MAX_INPUT_ROUNDS = 10
MAX_INPUT_REQUESTS = 32
"""Questions one `input_required` result of an upstream may ask at once: more is refused
(a legacy caller would be asked them all concurrently)."""
_BOOKKEEPING = ("resultType", "ttlMs", "cacheScope")
_MODERN_ONLY = ("inputResponses", "requestState")


class UpstreamDown(PeerError):
    """The upstream could not be reached (or the connection broke); `str()` says why."""


async def forward(
    pool: UpstreamPool,
    upstream: UpstreamRecord,
    ctx: Context,
    method: str,
    params: dict[str, Any],
    *,
    tool: dict[str, Any] | None = None,
    max_input_requests: int = MAX_INPUT_REQUESTS,
) -> dict[str, Any]:
    """Send `method` with `params` (already renamed for the upstream) for the caller `ctx`.
    `tool`: the called tool's object from the stored catalog, whose `x-mcp-header`
    arguments the upstream's client must mirror into headers (it listed nothing itself)."""
    relay = CallerRelay(ctx, upstream.name)
    body = _outgoing(params, ctx)
    state = ctx.state if isinstance(ctx.state, dict) else None
    if state is not None and isinstance(state.get("upstream_state"), str):
        body["requestState"] = state["upstream_state"]  # a modern caller's retry
    for _round in range(MAX_INPUT_ROUNDS):
        result = await _send(pool, upstream, relay, method, body, tool)
        if relay.needed:  # a legacy upstream asked a modern caller something
            raise inputs._InputRequired(dict(relay.needed))
        if result.get("resultType") != "input_required":
            return clean(result)
        body = await _next_round(ctx, body, result, upstream.name, max_input_requests)
    raise errors.internal_error(
        f"upstream {upstream.name} still wants input after {MAX_INPUT_ROUNDS} rounds")


async def _send(
    pool: UpstreamPool,
    upstream: UpstreamRecord,
    relay: CallerRelay,
    method: str,
    body: dict[str, Any],
    tool: dict[str, Any] | None = None,
) -> dict[str, Any]:
    try:
        client = await pool.client(upstream)
        if tool is not None:
            client.know_tool(tool)
        if relay.ctx.progress_token is None and client.can_exchange:
            # A modern upstream asks its questions in an `input_required` result, and
            # without progress to relay nothing else needs the full request machinery.
            with request_origin(relay):  # its log messages still reach the caller
                result = await client.exchange(method, body)
        else:
            result = await _request(client, relay, method, body)
    except ServerError as error:  # the upstream's own JSON-RPC error: passed through
        raise errors.McpError(error.code, error.message, error.data) from None
    except Exception as error:
        await _failed(pool, upstream, error)
        raise
    if not isinstance(result, dict):
        raise errors.internal_error(f"upstream {upstream.name} answered {method} with a "
                                    "result that is not an object")
    return result


async def _request(client: Client, relay: CallerRelay, method: str, body: dict[str, Any]
                   ) -> Any:
    """The full way: progress and log messages relayed, a legacy upstream's questions asked."""
    ctx = relay.ctx
    if client.era is not Era.MODERN:  # the modern retry's fields mean nothing there
        body = {k: v for k, v in body.items() if k not in _MODERN_ONLY}
    # Only a modern caller's question stops the call (relay.py): a legacy caller is
    # asked while the call waits, so its calls need no scope (one less per call).
    scope = relay.scope = anyio.CancelScope() if ctx.modern else None
    with scope or nullcontext(), request_origin(relay):
        result = await client.request(
            method, body, answer_inputs=False,
            on_progress=relay.progress if ctx.progress_token is not None else None,
        )
    if scope is not None and scope.cancelled_caught:  # a modern caller must answer
        return {}
    return result


async def _failed(pool: UpstreamPool, upstream: UpstreamRecord, error: Exception) -> None:
    """Reaching the upstream failed with `error`: raise `UpstreamNeedsAuth` or
    `UpstreamDown` (the pooled connection dropped) when it is one of those, else return."""
    refused = needs_auth.refusal(upstream, error,
                                 sent_credentials=upstream.has_headers or upstream.has_bearer)
    if refused is not None:
        await pool.drop(upstream.id)
        raise refused from error
    if isinstance(error, UpstreamUnavailable | OSError | TimeoutError | ConnectionError) or (
            _is_transport_failure(error)):
        await pool.drop(upstream.id)
        raise UpstreamDown(f"{upstream.name}: {reason(error)}") from error


def _is_transport_failure(error: Exception) -> bool:
    return isinstance(error, TransportError | ConnectionClosed | ClientError)


async def _next_round(
    ctx: Context, body: dict[str, Any], result: dict[str, Any], upstream_name: str,
    max_input_requests: int,
) -> dict[str, Any]:
    """After the upstream's `input_required`: a modern caller gets the questions (raises
    `_InputRequired`, with the upstream's state kept in the hub's); a legacy caller is asked
    here and the upstream retried with the answers. More than `max_input_requests` questions
    at once: an error."""
    asked = result.get("inputRequests")
    upstream_state = result.get("requestState")
    if not isinstance(asked, dict):
        asked = {}
    if len(asked) > max_input_requests:
        raise errors.internal_error(
            f"upstream {upstream_name} asked {len(asked)} questions at once; the hub relays "
            f"at most {max_input_requests}")
    if ctx.modern:
        ctx.state = {"upstream_state": upstream_state} if isinstance(upstream_state, str) else {}
        raise inputs._InputRequired(asked)
    questions = {
        key: (str(item.get("method")), item.get("params") or {})
        for key, item in asked.items() if isinstance(item, dict)
    }
    retry = {k: v for k, v in body.items() if k not in ("inputResponses", "requestState")}
    retry["inputResponses"] = await ctx.ask_many(questions) if questions else {}
    if isinstance(upstream_state, str):
        retry["requestState"] = upstream_state
    return retry


def _outgoing(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The params for the upstream: the caller's, less the protocol's `_meta` keys (the
    client adds its own) and its progress token (the client makes one for the upstream)."""
    body = dict(params)
    caller_meta = body.pop("_meta", None)
    body.pop("requestState", None)
    if isinstance(caller_meta, dict):
        kept = {
            key: value for key, value in caller_meta.items()
            if not key.startswith(PROTOCOL_META) and key != "progressToken"
        }
        if kept:
            body["_meta"] = kept
    return body


def clean(result: dict[str, Any]) -> dict[str, Any]:
    """The upstream's result without its protocol bookkeeping (the hub adds its own)."""
    cleaned = {key: value for key, value in result.items() if key not in _BOOKKEEPING}
    result_meta = cleaned.get("_meta")
    if isinstance(result_meta, dict):
        kept = {k: v for k, v in result_meta.items() if not k.startswith(PROTOCOL_META)}
        if kept:
            cleaned["_meta"] = kept
        else:
            del cleaned["_meta"]
    return cleaned
