"""The console's calls to the hub: its REST API (/api/v1) with the user's access token as
Bearer, and the authorization server's token and revocation endpoints - in-process over ASGI
(httpx.ASGITransport on the running app), exactly the requests any other client sends. There
is no back door: the console holds no store or admin handle, only the user's tokens.

    async with hub_client(request) as client:
        reply = await api(client, session, "GET", UPSTREAMS)   # ApiReply(status, body)
        tokens = await token_request(client, {...})            # the token endpoint's JSON
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.requests import Request

from mcpkit.errors import PeerError
from mcpkit.hub.console.session import Session
from mcpkit.hub.oauth.server import CONSOLE_CLIENT_ID
from mcpkit.hub.oauth.service import REVOKE_PATH, TOKEN_PATH

UPSTREAMS = "/api/v1/users/mcp/upstreams"
ME = "/api/v1/users/me"
ADMIN = "/api/v1/admin"
CALL_TIMEOUT_S = 120.0
"""A console request's bound on one API call (a refresh reaches the upstream: its own
connect and call timeouts come first)."""


class HubRefused(PeerError):
    """The token endpoint refused a console's grant (a code or refresh token): sign in again."""


@dataclass(frozen=True, slots=True)
class ApiReply:
    status: int
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def error(self) -> dict[str, Any]:
        """The API's `{"error": {code, message, field?}}`, or a generic one."""
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            return dict(self.body["error"])
        return {"code": "error", "message": f"the hub answered {self.status}"}


@asynccontextmanager
async def hub_client(request: Request) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app serving `request`, in-process. The browser's address is the
    caller's (per-address budgets stay per browser)."""
    peer = request.client
    transport = httpx.ASGITransport(
        app=request.app, client=(peer.host, peer.port) if peer else ("127.0.0.1", 0))
    issuer = request.app.state.hub.settings.issuer
    async with httpx.AsyncClient(transport=transport, base_url=issuer,
                                 timeout=CALL_TIMEOUT_S) as client:
        yield client


async def api(client: httpx.AsyncClient, session: Session, method: str, path: str, *,
              json: Any = None, params: dict[str, str] | None = None) -> ApiReply:
    headers = {"Authorization": f"Bearer {session.access_token}"}
    response = await client.request(method, path, json=json, params=params, headers=headers)
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = None
    return ApiReply(response.status_code, body)


async def token_request(client: httpx.AsyncClient, form: dict[str, str]) -> dict[str, Any]:
    """The token endpoint's answer to the console's `form` (code or refresh grant), or
    HubRefused."""
    response = await client.post(TOKEN_PATH, data={**form, "client_id": CONSOLE_CLIENT_ID})
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code != 200 or not isinstance(body, dict) or \
            not isinstance(body.get("access_token"), str) or \
            not isinstance(body.get("refresh_token"), str):
        error = body.get("error") if isinstance(body, dict) else None
        raise HubRefused(f"the hub's token endpoint refused the grant ({error or 'no token'})")
    return body


async def revoke(client: httpx.AsyncClient, refresh_token: str) -> None:
    """End the login (RFC 7009: its whole refresh family, so its access tokens too)."""
    await client.post(REVOKE_PATH, data={"token": refresh_token,
                                         "token_type_hint": "refresh_token",
                                         "client_id": CONSOLE_CLIENT_ID})
