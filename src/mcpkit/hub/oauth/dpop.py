"""DPoP (RFC 9449) at the hub: proofs at its token endpoint, which bind the tokens it issues,
and the replay cache that every proof - there and at /mcp - goes through.

    HubDPoP(settings, redis)   .token_request_key(proofs, url) -> jkt | None   (token endpoint)
                               .guard: DPoPGuard                               (/mcp gate)
    RedisReplayCache           the replay cache replicas share (`--redis-url`)
    ReplayCheckUnavailable     Redis did not answer the replay check: 503, never a pass

The checks themselves are mcpkit's pure ones (`mcpkit.auth.dpop_proof`: signature by the
proof's public jwk, typ, alg, htm, htu, iat freshness, jti, and at /mcp ath and cnf.jkt, all
through joserfc) and the resource server's `DPoPGuard`; nothing here parses or signs JOSE.
Server nonces (RFC 9449 §8-9) are not asked for: the `jti` replay cache and the `iat` window
(60 s and 5 s of skew) are what stop a replay.

The replay cache is shared when the hub has Redis: a proof seen by one replica is refused by
every other (keys `mcpkit:hub:dpop:jti:<sha256>`, each expiring when its proof could no
longer pass the `iat` check anyway). It is bounded: at most `oauth_dpop_replay_entries` new
proofs are remembered per replay window (a counter per window, `mcpkit:hub:dpop:count:<n>`,
in the same Lua script), so Redis holds at most about twice that many keys; past the bound a
proof is refused (`ReplayCacheFull`, 401: "retry shortly") rather than let through unchecked.

Fail mode: closed. A Redis that does not answer the replay check (its 1 s command timeout,
shared.py) makes the request fail with 503 and Retry-After, instead of skipping the check as
the rate limiter does (which fails open): a skipped replay check is exactly the hole DPoP
exists to close - a captured proof and token would be accepted again - while a refused
request costs the client one retry. Without Redis the cache is this process's
(`MemoryReplayCache`, bounded in bytes), which is right for one replica only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mcpkit.auth.dpop_proof import DPoPPolicy, check_token_request_proof
from mcpkit.auth.resource import InvalidDPoPProof
from mcpkit.errors import TransportError
from mcpkit.hub.settings import DEFAULT_DPOP_REPLAY_ENTRIES
from mcpkit.server.authorization.dpop import (
    ENTRY_BYTES,
    DPoPGuard,
    MemoryReplayCache,
    ReplayCache,
    ReplayCacheFull,
    check_replay,
)

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from mcpkit.hub.settings import HubSettings

log = logging.getLogger(__name__)

DPOP_ALGORITHMS = ("ES256", "ES384", "ES512", "PS256", "PS384", "PS512", "RS256", "RS384",
                   "RS512", "EdDSA")
"""The proof algorithms the hub accepts (and advertises as dpop_signing_alg_values_supported):
asymmetric ones only (RFC 9449 §4.3: never `none`, never a MAC)."""
DEFAULT_REPLAY_ENTRIES = DEFAULT_DPOP_REPLAY_ENTRIES
"""Proofs remembered per replay window (`settings.oauth_dpop_replay_entries`): in memory about
20 MB at ENTRY_BYTES each; in Redis about 10 MB."""
REPLAY_PREFIX = "mcpkit:hub:dpop:jti:"
COUNT_PREFIX = "mcpkit:hub:dpop:count:"

# KEYS[1] the proof's key, KEYS[2] this window's counter; ARGV: the proof's ttl (ms), the
# counter's ttl (ms), the bound. 0: seen before; -1: the window's bound is reached; 1: new.
_FIRST_USE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local count = redis.call('INCR', KEYS[2])
if count == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
if count > tonumber(ARGV[3]) then return -1 end
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
return 1
"""


class ReplayCheckUnavailable(TransportError):
    """The shared replay cache (Redis) did not answer: the proof is neither accepted nor
    called a replay; the caller answers 503 with Retry-After."""


class RedisReplayCache:
    """`ReplayCache` over Redis: one atomic script per proof (see the module docstring)."""

    def __init__(self, redis: Redis, *, max_entries: int = DEFAULT_REPLAY_ENTRIES,
                 window_s: float = DPoPPolicy().replay_window_s) -> None:
        self._redis = redis
        self._max_entries = max_entries
        self._window_s = window_s
        self._script = redis.register_script(_FIRST_USE)

    async def first_use(self, key: bytes, expires_at: float) -> bool:
        now = time.time()
        ttl_ms = max(1, int((expires_at - now) * 1000))
        window = int(now // self._window_s)
        try:
            answer = await self._script(
                keys=[REPLAY_PREFIX + key.hex(), f"{COUNT_PREFIX}{window}"],
                args=[ttl_ms, int(2 * self._window_s * 1000), self._max_entries])
        except Exception as error:  # redis-py's errors, timeouts, a dropped connection
            log.warning("the DPoP replay check could not reach Redis: %s",
                        type(error).__name__)
            raise ReplayCheckUnavailable("the DPoP replay check is unavailable; retry "
                                         "shortly") from None
        if int(answer) == -1:
            raise ReplayCacheFull("too many recent DPoP proofs to check this one for replay; "
                                  "retry shortly")
        return int(answer) == 1


class HubDPoP:
    """The hub's DPoP checks, with one replay cache for the token endpoint and /mcp."""

    def __init__(self, replay_cache: ReplayCache, policy: DPoPPolicy | None = None) -> None:
        self.policy = policy or DPoPPolicy(algorithms=DPOP_ALGORITHMS)
        self.replay_cache = replay_cache
        self.guard = DPoPGuard(self.policy, replay_cache=replay_cache)

    @classmethod
    def for_hub(cls, settings: HubSettings, redis: Redis | None) -> HubDPoP:
        entries = settings.oauth_dpop_replay_entries
        cache: ReplayCache = (MemoryReplayCache(entries * ENTRY_BYTES) if redis is None
                              else RedisReplayCache(redis, max_entries=entries))
        return cls(cache)

    async def token_request_key(self, proofs: Sequence[str], url: str) -> str | None:
        """The thumbprint of the key a token request proved (RFC 9449 §5), None without a
        proof. InvalidDPoPProof for several proofs, a bad one or a replayed one;
        ReplayCheckUnavailable when the shared cache does not answer."""
        if not proofs:
            return None
        if len(proofs) > 1:
            raise InvalidDPoPProof("the request has more than one DPoP header")
        proof = check_token_request_proof(proofs[0].strip(" \t"), "POST", url,
                                          policy=self.policy, now=time.time())
        await check_replay(self.replay_cache, proof, self.policy)
        return proof.jkt
