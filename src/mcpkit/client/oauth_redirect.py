"""How the authorization request reaches the user and the redirect comes back.

A `Redirect` is an async callable: given the authorization URL, it returns the final redirect
URL (with `code`, `state` and maybe `iss`). `follow_location` is the non-interactive one for
an authorization server that redirects at once (test servers, the conformance mock); the
interactive one is `mcpkit.client.oauth_loopback.LoopbackRedirect` (a `ListeningRedirect`:
its listener is bound before the authorization URL is built, so the URL names the exact
redirect URI it listens on).

The loopback redirect URIs live here (not in oauth_loopback) so that OAuth knows them
without loading the listener: `CALLBACK_PORTS` is the small fixed range a Client ID Metadata
Document lists exactly and dynamic client registration registers whole."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from mcpkit.auth.errors import AuthorizationError
from mcpkit.client.oauth_http import OAuthHttp

Redirect = Callable[[str], Awaitable[str]]

LOOPBACK_HOST = "127.0.0.1"
"""The loopback listener's address (RFC 8252 §7.3: an IP literal, not `localhost`)."""

CALLBACK_PATH = "/callback"

CALLBACK_PORTS: tuple[int, ...] = (33418, 33419, 33420)
"""The loopback ports mcpkit tries in order; `--callback-port` (`port=`) overrides them."""


def loopback_uri(port: int) -> str:
    """The loopback redirect URI on `port`."""
    return f"http://{LOOPBACK_HOST}:{port}{CALLBACK_PATH}"


DEFAULT_REDIRECT_URIS: tuple[str, ...] = tuple(loopback_uri(port) for port in CALLBACK_PORTS)
"""Every redirect URI of the default range: what DCR registers and the metadata document
lists (a redirect URI outside it is "custom")."""


class BoundRedirect(Protocol):
    """A redirect whose listener is ready at `redirect_uri`."""

    redirect_uri: str

    async def __call__(self, authorization_url: str) -> str: ...


@runtime_checkable
class ListeningRedirect(Protocol):
    """A `Redirect` that must listen before the authorization URL is built: OAuth registers
    its `redirect_uris` and builds the URL inside `listen()` with the bound one."""

    redirect_uris: list[str]

    def listen(self) -> AbstractAsyncContextManager[BoundRedirect]: ...

    async def __call__(self, authorization_url: str) -> str: ...


async def follow_location(authorization_url: str) -> str:
    """GET the authorization URL without following redirects; its `Location` is the
    redirect back to the client."""
    reply = await OAuthHttp().get(authorization_url)
    location = next((v for k, v in reply.headers.items() if k.lower() == "location"), None)
    if reply.status not in (301, 302, 303, 307, 308) or not location:
        raise AuthorizationError(
            f"the authorization endpoint answered HTTP {reply.status} with no redirect")
    return location
