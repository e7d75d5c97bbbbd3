"""The upstream tokens a hub process got by token exchange (hub/upstream_token_exchange.py),
in memory only:

    cache = ExchangedTokens(max_bytes)
    cache.put((user_id, upstream_id, url), tokens)     # TokenSet from the provider
    cache.get(key)                                      # the TokenSet while usable, else None
    cache.drop(key, access_token)                       # the upstream refused it

Keyed by owner AND upstream (and the upstream's URL: a new URL is another resource), so a
token is only ever handed to connections of the user it was exchanged for. Bounded in bytes
(each token's text plus ENTRY_OVERHEAD_BYTES; the least recently used go first); a token is
given up EXPIRY_MARGIN_S before it expires (at half its life if that is shorter).
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass

from mcpkit.auth.tokens import TokenSet
from mcpkit.errors import InvalidArgument

DEFAULT_CACHE_BYTES = 4 * 1024 * 1024
"""The exchanged tokens one hub process keeps, in bytes (token text plus ENTRY_OVERHEAD_BYTES
each); past it the least recently used go (and are exchanged again when needed)."""
ENTRY_OVERHEAD_BYTES = 256
"""What one cached token costs beside its text (key, times, dictionary slot), counted."""
EXPIRY_MARGIN_S = 30.0
"""A cached token is given up this long before it expires (or at half its life if shorter),
so no request leaves with a token about to die on the way."""
UNSTATED_LIFETIME_S = 300.0
"""How long a token is reused when the provider's answer gives no `expires_in`."""

CacheKey = tuple[int, str, str]
"""(owner's user id, upstream id, upstream URL): a changed URL is another resource."""


@dataclass(frozen=True, slots=True)
class _Entry:
    tokens: TokenSet
    usable_until: float
    size: int


class ExchangedTokens:
    """The exchanged upstream tokens of this process, by (owner, upstream, URL): bounded in
    bytes (least recently used out first), each given up before it expires."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if max_bytes < 1:
            raise InvalidArgument("the token-exchange cache needs a positive byte budget")
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: collections.OrderedDict[CacheKey, _Entry] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: CacheKey, now: float | None = None) -> TokenSet | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if (time.time() if now is None else now) >= entry.usable_until:
            self.drop(key)
            return None
        self._entries.move_to_end(key)
        return entry.tokens

    def put(self, key: CacheKey, tokens: TokenSet, now: float | None = None) -> None:
        now = time.time() if now is None else now
        expires_at = tokens.expires_at if tokens.expires_at is not None else \
            now + UNSTATED_LIFETIME_S
        life = expires_at - now
        usable_until = expires_at - min(EXPIRY_MARGIN_S, life / 2)
        self.drop(key)
        size = len(tokens.access_token) + ENTRY_OVERHEAD_BYTES
        if usable_until <= now or size > self.max_bytes:
            return  # used for this connection only
        while self._entries and self.bytes + size > self.max_bytes:
            _, oldest = self._entries.popitem(last=False)
            self.bytes -= oldest.size
        self._entries[key] = _Entry(tokens, usable_until, size)
        self.bytes += size

    def drop(self, key: CacheKey, access_token: str | None = None) -> None:
        """Forget `key`'s token (only if it is still `access_token`, when given)."""
        entry = self._entries.get(key)
        if entry is None or (access_token is not None and
                             entry.tokens.access_token != access_token):
            return
        del self._entries[key]
        self.bytes -= entry.size


__all__ = ["DEFAULT_CACHE_BYTES", "CacheKey", "ExchangedTokens"]
