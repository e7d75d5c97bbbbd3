"""`TokenHook`: authorization for callers who bring their own tokens.

    async def my_token(stale: str | None) -> str:
        return await vault.fetch("mcp-token", renew=stale is not None)

    async with Client(url, auth=TokenHook(my_token)) as client: …

The callable (sync or async) is asked for a token before the first request and whenever the
server refuses the one it gave (a 401): then `stale` is the refused token, so the caller can
renew it. The request is sent again only when the new token differs from the refused one
(at most `max_attempts` times per request); a 403, or the same token again, reaches the caller
as the server's answer. Tokens are sent as `Authorization: Bearer`; none is logged or shown in
a repr."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping

import anyio

from mcpkit.errors import InvalidArgument

TokenSource = Callable[[str | None], str | Awaitable[str]]
MAX_ATTEMPTS = 1
"""Default: renewals one request may ask for after a 401."""
MAX_TOKEN_CHARS = 16 * 1024
"""Bound on a token the callable returns (a header line must stay sendable)."""
_UNSENDABLE = re.compile(r"[\x00-\x1f\x7f]")


class TokenHook:
    """An `HttpAuth` (mcpkit.auth.provider) over a caller's token callable."""

    def __init__(self, source: TokenSource, *, max_attempts: int = MAX_ATTEMPTS) -> None:
        if max_attempts < 1:
            raise InvalidArgument(f"max_attempts must be at least 1, not {max_attempts}")
        self.source = source
        self.max_attempts = max_attempts
        self._token: str | None = None
        self._lock = anyio.Lock()

    def __repr__(self) -> str:
        return f"TokenHook(source={self.source!r}, token={'***' if self._token else None})"

    async def headers(self, url: str, method: str = "POST") -> Mapping[str, str]:
        if self._token is None:
            async with self._lock:
                if self._token is None:
                    self._token = await self._ask(None)
        return {"Authorization": f"Bearer {self._token}"}

    async def challenge(self, url: str, status: int, headers: Mapping[str, str]) -> bool:
        if status != 401:
            return False
        refused = self._token
        async with self._lock:
            if self._token != refused:
                return True  # another request renewed it while this one waited
            fresh = await self._ask(refused)
            if fresh == refused:
                return False
            self._token = fresh
            return True

    async def _ask(self, stale: str | None) -> str:
        answer = self.source(stale)
        token = await answer if inspect.isawaitable(answer) else answer
        if not isinstance(token, str) or not token:
            raise InvalidArgument("the token callable must return a non-empty str, "
                                  f"not {type(token).__name__}")
        if len(token) > MAX_TOKEN_CHARS or _UNSENDABLE.search(token):
            raise InvalidArgument(f"the token callable returned a token that cannot be sent "
                                  f"(over {MAX_TOKEN_CHARS} characters or a control character)")
        return token
