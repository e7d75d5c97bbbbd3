"""Sending an HTTP request under an `HttpAuth` (mcpkit.auth.provider): its headers before each
attempt, its handling of a 401/403, and a bounded number of attempts. Shared by the
Streamable HTTP and HTTP+SSE transports, and the WebSocket transport's handshake."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping

from mcpkit.auth.errors import AuthorizationFailed
from mcpkit.auth.provider import HttpAuth
from mcpkit.errors import McpkitError
from mcpkit.transports.client.base import HttpStatusError

AUTH_STATUSES = frozenset({401, 403})
"""HTTP statuses that mean "missing, expired or too weak credentials": what an `HttpAuth`
handles, and, for the era probe, not an era question (raised as they are)."""


async def authorized(auth: HttpAuth | None, url: str, attempt: Callable[[], Awaitable[None]],
                     use_headers: Callable[[Mapping[str, str]], None], *,
                     method: str = "POST", target: str | None = None) -> None:
    """Run `attempt` (one `method` request) with the auth's headers (handed to `use_headers`
    first; `attempt` must take them before it awaits anything, so concurrent requests never
    swap them); on a 401/403 that the auth handles (it authorized, refreshed, stepped up or
    took a DPoP nonce) run it again, at most `auth.max_attempts` times. `url` is the MCP
    server's (what the auth discovers from); `target` the URL the request goes to when it is
    another (the HTTP+SSE message endpoint). A failure to authorize is `AuthorizationFailed`
    (a TransportError, so it fails the request like any transport failure)."""
    if auth is None:
        await attempt()
        return
    for tries in range(auth.max_attempts + 1):
        use_headers(await fresh_headers(auth, target or url, method))
        try:
            await attempt()
            return
        except HttpStatusError as exc:
            if exc.status not in AUTH_STATUSES or tries == auth.max_attempts:
                raise
            try:
                again = await auth.challenge(url, exc.status, exc.headers)
            except McpkitError as failure:
                raise AuthorizationFailed(url, failure) from failure
            if not again:
                raise


async def fresh_headers(auth: HttpAuth, url: str, method: str) -> Mapping[str, str]:
    """The auth's headers for one request (a stream's GET, a session's DELETE), a failure
    being `AuthorizationFailed`. An `HttpAuth` written before `headers` took the method
    (`headers(self, url)`) is still asked the old way."""
    try:
        if _takes_method(type(auth)):
            return await auth.headers(url, method)
        return await auth.headers(url)
    except McpkitError as failure:
        raise AuthorizationFailed(url, failure) from failure


@functools.cache
def _takes_method(kind: type[HttpAuth]) -> bool:
    try:
        parameters = inspect.signature(kind.headers).parameters.values()
    except (AttributeError, TypeError, ValueError):
        return True
    return any(p.name == "method" or p.kind is inspect.Parameter.VAR_KEYWORD
               for p in parameters) or sum(
        p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                   inspect.Parameter.VAR_POSITIONAL) for p in parameters) > 2
