"""`HttpAuth`: the contract between an HTTP client transport and whatever authorizes it.

The transport asks for headers before each request and hands every 401/403 it receives to
`challenge`; when that returns True the transport sends the request again (at most
`max_attempts` challenges per request). `headers` is asked once per request sent (a retry
asks again), with the request's method and URL: a DPoP proof (RFC 9449) is made for exactly
one request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable


@runtime_checkable
class HttpAuth(Protocol):
    max_attempts: int
    """How many challenges one request may answer before its 401/403 reaches the caller."""

    async def headers(self, url: str, method: str = "POST") -> Mapping[str, str]:
        """The headers (`Authorization`, and `DPoP` for a DPoP-bound token) for one `method`
        request to `url`; may refresh a token."""
        ...

    async def challenge(self, url: str, status: int, headers: Mapping[str, str]) -> bool:
        """React to a 401/403 from `url` (its response headers given): True when the
        request should be sent again with fresh `headers()`."""
        ...
