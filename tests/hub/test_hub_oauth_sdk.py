"""The official Python SDK's OAuth client (`mcp` 2.3.0, a dev dependency: an independent
implementation) logs in to the hub - discovery from /mcp's 401, DCR, PKCE, the hub's sign-in
and consent pages (answered over HTTP by oauth_login.py), RFC 9207 iss - and lists the
user's upstream tools through the hub."""

from __future__ import annotations

import urllib.parse

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from tests.hub.oauth_login import HubLogin
from tests.hub.test_hub_oauth import REDIRECT, OAuthHub, oauth_hub, user_with_password  # noqa: F401


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def test_the_official_sdk_logs_in_to_the_hub(oauth_hub: OAuthHub) -> None:  # noqa: F811
    _, name, password = anyio.run(user_with_password, oauth_hub)
    login = HubLogin(name, password, redirect_uri=REDIRECT)
    came_back: list[str] = []

    async def redirect(authorization_url: str) -> None:
        came_back.append(await login(authorization_url))

    async def callback() -> AuthorizationCodeResult:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(came_back[-1]).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0],
                                       iss=query["iss"][0])

    async def run() -> list[str]:
        storage = MemoryStorage()
        provider = OAuthClientProvider(
            server_url=oauth_hub.url + "/mcp",
            client_metadata=OAuthClientMetadata(
                redirect_uris=[REDIRECT], client_name="python-sdk",
                token_endpoint_auth_method="none",
                grant_types=["authorization_code", "refresh_token"]),
            storage=storage, redirect_handler=redirect, callback_handler=callback)
        async with httpx2.AsyncClient(auth=provider, timeout=30.0) as http, \
                streamable_http_client(oauth_hub.url + "/mcp", http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                listed = await session.list_tools()
        assert storage.tokens is not None and storage.tokens.refresh_token
        return sorted(tool.name for tool in listed.tools)

    names = anyio.run(run)
    assert names and all(name.startswith("oauthup__") for name in names)
    assert login.pages == ["login", "consent"]
