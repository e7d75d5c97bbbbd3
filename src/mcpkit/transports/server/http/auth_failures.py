"""`AuthFailures`: wrong bearer tokens are rate-limited per client address.

    failures = AuthFailures()                  # 20 at once, then 30 a minute, per address
    wait = failures.blocked(peer)              # before checking a token: None, or seconds
    if wait is not None: answer 429 with Retry-After: ceil(wait)
    if the token is wrong: failures.failed(peer)

Each address has a token bucket of `burst` failures that refills at `per_minute`; a wrong
token spends one. An address with none left is refused *before* its token is looked at -
a right one too: answering a right token differently would tell a guesser when it hit. A
right token from another address is not affected.

The table is the callers' to grow, so it is bounded: at most `max_addresses` entries,
least recently failed dropped first (and entries whose bucket is full again are as good as
absent). Per process: replicas each keep their own.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from mcpkit.protocol import errors

DEFAULT_AUTH_FAILURE_BURST = 20
DEFAULT_AUTH_FAILURES_PER_MINUTE = 30
DEFAULT_MAX_ADDRESSES = 10_000


class AuthFailures:
    def __init__(
        self,
        *,
        burst: int = DEFAULT_AUTH_FAILURE_BURST,
        per_minute: int = DEFAULT_AUTH_FAILURES_PER_MINUTE,
        max_addresses: int = DEFAULT_MAX_ADDRESSES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if min(burst, per_minute, max_addresses) < 1:
            raise errors.LocalError(
                errors.INVALID_PARAMS, "auth failure limits must be whole numbers above 0"
            )
        self.burst = float(burst)
        self.per_second = per_minute / 60.0
        self.max_addresses = max_addresses
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        """address -> (failures it may still make, when that was counted), least recently
        failed first."""

    def _tokens(self, address: str, now: float) -> float:
        state = self._buckets.get(address)
        if state is None:
            return self.burst
        tokens, at = state
        return min(self.burst, tokens + max(0.0, now - at) * self.per_second)

    def blocked(self, address: str) -> float | None:
        """None if `address` may try a token now; else the seconds until it may."""
        tokens = self._tokens(address, self._clock())
        if tokens >= 1.0:
            return None
        return (1.0 - tokens) / self.per_second

    def failed(self, address: str) -> None:
        """Count a wrong token from `address`."""
        now = self._clock()
        tokens = max(0.0, self._tokens(address, now) - 1.0)
        self._buckets[address] = (tokens, now)
        self._buckets.move_to_end(address)
        while len(self._buckets) > self.max_addresses:
            self._buckets.popitem(last=False)

    @property
    def tracked(self) -> int:
        """Addresses in the table now."""
        return len(self._buckets)
