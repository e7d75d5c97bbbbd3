"""The resource server's few HTTP exchanges with its authorization server (metadata, JWKS,
introspection), on aiohttp, loaded only when one is made.

Every URL must be HTTPS, or HTTP on loopback (`mcpkit.auth.discovery.check_endpoint_url`);
redirects are never followed; each exchange has a total timeout and a bound on the body it
reads. Failures become `VerifierUnavailable` naming the URL only (never a request body: an
introspection request carries the token and the client secret)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mcpkit.auth.discovery import check_endpoint_url
from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.metadata import MAX_DOCUMENT_BYTES
from mcpkit.auth.resource import VerifierUnavailable
from mcpkit.auth.tokens import oauth_error_code

DEFAULT_FETCH_TIMEOUT_S = 10.0
"""Bound on each exchange with the authorization server (connect + whole response)."""


@dataclass(frozen=True, slots=True)
class Fetched:
    status: int
    body: bytes

    def oauth_error(self) -> str | None:
        """The `error` code of an OAuth error body, when it has a safe one."""
        return oauth_error_code(self.body)


@dataclass(frozen=True, slots=True)
class AuthServerHttp:
    timeout_s: float = DEFAULT_FETCH_TIMEOUT_S
    max_bytes: int = MAX_DOCUMENT_BYTES

    async def get(self, url: str, *, max_bytes: int | None = None) -> Fetched:
        return await self._send("GET", url, None, {}, max_bytes or self.max_bytes)

    async def post_form(self, url: str, form: Mapping[str, str],
                        headers: Mapping[str, str]) -> Fetched:
        from urllib.parse import urlencode
        return await self._send(
            "POST", url, urlencode(form).encode("ascii"),
            {"Content-Type": "application/x-www-form-urlencoded", **headers}, self.max_bytes)

    async def _send(self, method: str, url: str, data: bytes | None,
                    headers: Mapping[str, str], max_bytes: int) -> Fetched:
        import aiohttp  # loaded only by a server that verifies tokens this way

        try:
            check_endpoint_url(url)
        except AuthorizationError as exc:
            raise VerifierUnavailable(str(exc)) from None
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as http, http.request(
                    method, url, data=data, allow_redirects=False,
                    headers={"Accept": "application/json", **headers}) as reply:
                too_large = VerifierUnavailable(
                    f"the answer from {url} is over the {max_bytes}-byte limit")
                declared = reply.content_length
                if declared is not None and declared > max_bytes:
                    raise too_large
                body = bytearray()
                async for chunk in reply.content.iter_any():
                    body += chunk
                    if len(body) > max_bytes:
                        raise too_large
                return Fetched(reply.status, bytes(body))
        except VerifierUnavailable:  # (a TransportError, so an OSError: not re-wrapped)
            raise
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise VerifierUnavailable(f"{method} {url} failed: {type(exc).__name__}") from None

