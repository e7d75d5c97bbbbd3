"""The HTTP exchanges of the OAuth flow (metadata, registration, token requests), on aiohttp.

Every response body is read up to a bound; redirects are never followed (a metadata or token
endpoint that redirects is refused); network failures become AuthorizationError naming the
URL only (never a request body: it may hold a code, verifier or secret)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import msgspec

from mcpkit.auth.discovery import check_endpoint_url
from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.metadata import MAX_DOCUMENT_BYTES
from mcpkit.auth.tokens import oauth_error_code
from mcpkit.netguard import GuardedResolver, host_problem
from mcpkit.transports.client._aiohttp import read_body
from mcpkit.transports.client.base import MessageTooLarge

HTTP_TIMEOUT_S = 30.0
"""Default bound on each OAuth HTTP exchange (connect + response)."""

FORM = "application/x-www-form-urlencoded"


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes
    headers: Mapping[str, str]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def oauth_error(self) -> str | None:
        """The `error` code of an OAuth error body, when it has a safe one."""
        return oauth_error_code(self.body)


@dataclass(frozen=True, slots=True)
class OAuthHttp:
    timeout_s: float = HTTP_TIMEOUT_S
    max_bytes: int = MAX_DOCUMENT_BYTES
    allow_private: bool | None = None
    """None: any host (a user's own client). False: the SSRF guard of a server acting on
    URLs someone else controls (the hub's upstream logins): loopback, private, link-local
    and metadata hosts are refused, as IP literals and as resolved names (mcpkit.netguard)."""

    async def get(self, url: str) -> Reply:
        return await self._send("GET", url, None, {"Accept": "application/json"})

    async def post_form(self, url: str, body: str, headers: Mapping[str, str]) -> Reply:
        return await self._send("POST", url, body.encode(),
                                {"Accept": "application/json", "Content-Type": FORM, **headers})

    async def post_json(self, url: str, doc: Mapping[str, Any]) -> Reply:
        return await self._send("POST", url, msgspec.json.encode(doc),
                                {"Accept": "application/json",
                                 "Content-Type": "application/json"})

    async def _send(self, method: str, url: str, data: bytes | None,
                    headers: Mapping[str, str]) -> Reply:
        check_endpoint_url(url)
        connector = None
        if self.allow_private is False:
            host = urlsplit(url).hostname or ""
            problem = host_problem(host)
            if problem is not None:
                raise AuthorizationError(f"refused to connect to {host}: {problem}")
            connector = aiohttp.TCPConnector(resolver=GuardedResolver())
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        try:
            async with aiohttp.ClientSession(timeout=timeout, connector=connector) as http, \
                    http.request(method, url, data=data, headers=dict(headers),
                                 allow_redirects=False) as resp:
                # the whole body (one read() may return only its first chunk), bounded
                body = await read_body(resp, self.max_bytes)
                return Reply(resp.status, body, dict(resp.headers))
        except MessageTooLarge:
            raise AuthorizationError(
                f"the response from {url} is over the {self.max_bytes}-byte limit") from None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise AuthorizationError(
                f"{method} {url} failed: {type(exc).__name__}") from None
