"""How the authorization request reaches the user and the redirect comes back.

A `Redirect` is an async callable: given the authorization URL, it returns the final redirect
URL (with `code`, `state` and maybe `iss`). Interactive handlers (loopback listener, browser,
paste) come with `mcpkit mcp login`; `follow_location` is the non-interactive one for an
authorization server that redirects at once (test servers, the conformance mock)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mcpkit.auth.errors import AuthorizationError
from mcpkit.client.oauth_http import OAuthHttp

Redirect = Callable[[str], Awaitable[str]]


async def follow_location(authorization_url: str) -> str:
    """GET the authorization URL without following redirects; its `Location` is the
    redirect back to the client."""
    reply = await OAuthHttp().get(authorization_url)
    location = next((v for k, v in reply.headers.items() if k.lower() == "location"), None)
    if reply.status not in (301, 302, 303, 307, 308) or not location:
        raise AuthorizationError(
            f"the authorization endpoint answered HTTP {reply.status} with no redirect")
    return location
