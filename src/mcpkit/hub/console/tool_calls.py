"""A tool call from the console's "Try a tool": through the hub's own /mcp, with the user's
/mcp access token, exactly as any MCP client calls it - the same gate, rate limits, tool
switches, audit and upstream credentials. The console holds no other way to reach a tool.

    url = own_mcp_url(request, settings)
    outcome = await call_tool(url, token, "alpha__slow", {"seconds": 2},
                              on_progress=report, timeout_s=300)   # Outcome

It is a real HTTP request to this process's own listening socket (loopback when the hub
listens on every address), by mcpkit's `Client` in the stateless era: an in-process ASGI
call (httpx's ASGITransport) holds the whole response until it ends, and progress must
reach the browser while the tool runs. Cancelling the caller (the browser went away)
closes the request, which the hub's /mcp takes as the call's cancellation.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from starlette.requests import Request

from mcpkit.client import Behaviour, Client, ServerError, Timeouts
from mcpkit.errors import InvalidState, McpkitError, Timeout
from mcpkit.hub.settings import HubSettings
from mcpkit.transports.client.base import HttpStatusError

IDLE_TIMEOUT_S = 60.0
"""A call with no answer and no progress for this long is given up (the whole call is bound
by settings.console_try_timeout_s)."""
LOOPBACK_FOR_BIND = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "localhost": "127.0.0.1",
                     "127.0.0.1": "127.0.0.1", "::": "::1", "::1": "::1"}
"""The address to reach a hub bound to these (`--host`): its loopback one."""

Progress = Callable[[float, float | None, str | None], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class Outcome:
    """The call's result (the wire form of a CallToolResult) or why there is none."""

    result: dict[str, Any] | None
    error: str | None
    seconds: float
    signed_out: bool = False
    """The hub refused the token (the login ended): sign in again."""


class NoOwnAddress(InvalidState):
    """The hub serves this request on no TCP socket the console can call /mcp through."""


def own_mcp_url(request: Request, settings: HubSettings) -> str:
    """The hub's /mcp at the socket serving `request`: loopback when the hub listens on
    every address (loopback names always pass /mcp's Host check)."""
    server = request.scope.get("server")
    if not server or server[1] is None:
        raise NoOwnAddress("the hub listens on no TCP port the console can reach /mcp by")
    host = LOOPBACK_FOR_BIND.get(settings.host, str(server[0]))
    authority = f"[{host}]" if ":" in host else host
    return f"http://{authority}:{int(server[1])}/mcp"


async def call_tool(url: str, token: str, name: str, arguments: Mapping[str, Any], *,
                    on_progress: Progress, timeout_s: float) -> Outcome:
    started = time.monotonic()
    client = Client(url, era="modern", bearer_token=token,
                    timeouts=Timeouts(timeout=IDLE_TIMEOUT_S, maximum=timeout_s),
                    # the user is shown the result as it came, whatever its outputSchema says
                    behaviour=Behaviour(validate_output=False))
    try:
        async with client:
            result = await client.call_tool(name, dict(arguments), on_progress=on_progress)
    except ServerError as refused:
        return Outcome(None, f"the hub's /mcp answered an error: {refused}", _since(started))
    except HttpStatusError as status:
        signed_out = status.status == 401
        why = "your sign-in ended: sign in again" if signed_out else \
            f"the hub's /mcp refused the call (HTTP {status.status})"
        return Outcome(None, why, _since(started), signed_out)
    except Timeout as late:
        return Outcome(None, f"no answer in time: {late}", _since(started))
    except McpkitError as failed:
        return Outcome(None, f"the call failed: {failed}", _since(started))
    wire: dict[str, Any] = msgspec.to_builtins(result)
    return Outcome(wire, None, _since(started))


def _since(started: float) -> float:
    return time.monotonic() - started
