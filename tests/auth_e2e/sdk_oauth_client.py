"""The official Python SDK's OAuth client (`mcp`, a dev dependency) against a protected MCP
server, as a process of its own (so nothing of mcpkit's client is in it):

    python -m tests.auth_e2e.sdk_oauth_client --url URL --tool NAME [--arguments JSON]
        [--era legacy|modern] [--user ada]

`mcp.client.auth.OAuthClientProvider` does the whole flow by itself: the 401, the RFC 9728
and RFC 8414 discovery, dynamic registration, PKCE with the resource indicator, the code
exchange. Its redirect handler walks the provider's login and consent pages over plain HTTP
(tests/auth_e2e/logins.py's FormLogin); its callback handler hands the redirect's code, state
and iss back. Then it lists the tools and calls one, and prints one JSON line:

    {"protocol_version": …, "tools": [names], "is_error": bool, "text": the call's first text,
     "pages": ["login", "consent"], "audience": the access token's aud (read, not verified),
     "scope": the granted scope}

Exits 1 with the error on stderr when anything fails. Bounded: the whole run has LIMIT_S."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import urllib.parse
from typing import Any

import anyio
from mcp import Client as SdkClient
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl
from tests.auth_e2e.logins import FormLogin

LIMIT_S = 60.0
REDIRECT_URI = "http://127.0.0.1:1/sdk-callback"
"""Nothing listens there: FormLogin stops at the redirect and returns its URL."""


class MemoryStorage(TokenStorage):
    """The SDK's TokenStorage, kept in this process only."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class PagesLogin:
    """The SDK's redirect and callback handlers, over FormLogin: the redirect handler walks
    the pages and keeps the URL the provider sends the browser back to; the callback handler
    reads code, state and iss from it."""

    def __init__(self, user: str) -> None:
        self.form = FormLogin(user=user, redirect_uri=REDIRECT_URI)
        self.returned: str | None = None

    async def redirect(self, authorization_url: str) -> None:
        self.returned = await self.form(authorization_url)

    async def callback(self) -> AuthorizationCodeResult:
        assert self.returned is not None, "the callback came before the redirect"
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.returned).query))
        if "error" in query:
            raise RuntimeError(f"the authorization server refused: {query['error']}")
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"),
                                       iss=query.get("iss"))


def jwt_claims(token: str) -> dict[str, Any]:
    """A JWT's payload, unverified (the server verified it; this only reports it)."""
    payload = token.split(".")[1]
    padded = payload + "=" * (-len(payload) % 4)
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(padded))
    return decoded


async def run(url: str, tool: str, arguments: dict[str, Any], era: str, user: str
              ) -> dict[str, Any]:
    login, storage = PagesLogin(user), MemoryStorage()
    oauth = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="mcp python sdk (mcpkit e2e)", redirect_uris=[AnyUrl(REDIRECT_URI)],
            grant_types=["authorization_code", "refresh_token"], response_types=["code"],
            token_endpoint_auth_method="none"),
        storage=storage, redirect_handler=login.redirect, callback_handler=login.callback)
    async with create_mcp_http_client(auth=oauth) as http:
        transport = streamable_http_client(url, http_client=http)
        async with SdkClient(transport, **era_options(era)) as client:
            tools = await client.list_tools()
            result = await client.call_tool(tool, arguments)
            version = client.protocol_version
    text = next((getattr(c, "text", None) for c in result.content
                 if getattr(c, "text", None) is not None), None)
    assert storage.tokens is not None
    return {"protocol_version": version, "tools": sorted(t.name for t in tools.tools),
            "is_error": bool(result.is_error), "text": text, "pages": login.form.pages,
            "audience": jwt_claims(storage.tokens.access_token).get("aud"),
            "scope": storage.tokens.scope}


def era_options(era: str) -> dict[str, Any]:
    """The SDK's high-level Client probes `server/discover` (the modern era) first; `legacy`
    forces the initialize handshake (2025-11-25)."""
    return {"mode": "legacy" if era == "legacy" else "auto"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--tool", required=True)
    parser.add_argument("--arguments", default="{}", type=json.loads)
    parser.add_argument("--era", choices=("legacy", "modern"), default="modern")
    parser.add_argument("--user", default="ada")
    args = parser.parse_args()

    async def bounded() -> dict[str, Any]:
        with anyio.fail_after(LIMIT_S):
            return await run(args.url, args.tool, args.arguments, args.era, args.user)

    try:
        report = asyncio.run(bounded())
    except Exception as exc:  # the test reads stderr: say what failed, then exit 1
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
