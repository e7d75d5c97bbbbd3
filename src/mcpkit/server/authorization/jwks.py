"""The authorization server's signing keys (its JWKS), fetched, cached and rotated.

Invariants:
- keys are fetched at most once per `min_refetch_interval_s`, whatever the tokens say: a flood
  of tokens with random `kid`s costs the AS one fetch per interval, not one per token;
- concurrent callers that need a fetch share one (a lock; whoever waited re-reads the cache);
- a cached set is used until `ttl_s` passes, then refetched on the next verification; if the
  refetch fails the old keys stay in use (the AS being down does not reject good tokens) and
  the failure is logged, once per attempt;
- the document is bounded in bytes and in keys; private or symmetric keys are never taken."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import msgspec

from mcpkit.auth.access_token import PublicKey
from mcpkit.auth.resource import InvalidToken, VerifierUnavailable
from mcpkit.server.authorization.fetch import AuthServerHttp

log = logging.getLogger("mcpkit.server.authorization")

DEFAULT_JWKS_TTL_S = 300.0
"""How long a fetched JWKS is used before it is fetched again."""

DEFAULT_JWKS_REFETCH_INTERVAL_S = 30.0
"""At most one fetch per this many seconds, however many unknown `kid`s arrive."""

DEFAULT_MAX_JWKS_BYTES = 64 * 1024
"""The largest JWKS document read (a few dozen RSA keys fit)."""

DEFAULT_MAX_JWKS_KEYS = 32
"""The most keys taken from a JWKS; a document with more is refused."""

_PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})


class JwksCache:
    """The keys of one `jwks_uri`, by `kid`."""

    def __init__(self, jwks_uri: str, *, http: AuthServerHttp | None = None,
                 ttl_s: float = DEFAULT_JWKS_TTL_S,
                 min_refetch_interval_s: float = DEFAULT_JWKS_REFETCH_INTERVAL_S,
                 max_bytes: int = DEFAULT_MAX_JWKS_BYTES, max_keys: int = DEFAULT_MAX_JWKS_KEYS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.jwks_uri = jwks_uri
        self._http = http or AuthServerHttp()
        self._ttl_s = ttl_s
        self._min_interval_s = min_refetch_interval_s
        self._max_bytes = max_bytes
        self._max_keys = max_keys
        self._clock = clock
        self._keys: list[tuple[str | None, PublicKey]] = []
        self._fetched_at: float | None = None  # a successful fetch
        self._attempted_at: float | None = None  # any fetch, for the rate limit
        self._lock: Any = None  # an anyio.Lock, made in the event loop that first needs it
        self.fetches = 0
        """How many times the JWKS was requested (for tests and metrics)."""

    async def keys_for(self, kid: str | None, alg: str) -> list[PublicKey]:
        """The keys that may have signed a token with this `kid` (all keys usable for `alg`
        when it has none). Refetches when the set is stale, or when `kid` is unknown and the
        rate limit allows; InvalidToken when no key fits."""
        found = self._matching(kid, alg) if self._fresh() else []
        if not found:
            await self._refresh(kid, alg)
            found = self._matching(kid, alg)
        if not found:
            raise InvalidToken("the access token is signed by a key the authorization server "
                               "does not publish (unknown kid)")
        return found

    def _fresh(self) -> bool:
        return self._fetched_at is not None and self._clock() - self._fetched_at < self._ttl_s

    def _matching(self, kid: str | None, alg: str) -> list[PublicKey]:
        return [key for key_id, key in self._keys
                if (kid is None or key_id == kid) and _usable_for(key, alg)]

    async def _refresh(self, kid: str | None, alg: str) -> None:
        if self._lock is None:
            import anyio
            self._lock = anyio.Lock()
        async with self._lock:
            # Someone else may have fetched while this caller waited: use theirs.
            if self._fresh() and self._matching(kid, alg):
                return
            now = self._clock()
            if self._attempted_at is not None and now - self._attempted_at < self._min_interval_s:
                if self._keys or self._fetched_at is not None:
                    return  # rate-limited: answer from the keys at hand
                raise VerifierUnavailable("the authorization server's keys (JWKS) could not "
                                          "be fetched; retrying later")
            self._attempted_at = now
            self.fetches += 1
            try:
                self._keys = await self._fetch()
            except VerifierUnavailable as exc:
                log.warning("JWKS fetch failed: %s", exc.description)
                if not self._keys:
                    raise
                return
            self._fetched_at = self._clock()

    async def _fetch(self) -> list[tuple[str | None, PublicKey]]:
        reply = await self._http.get(self.jwks_uri, max_bytes=self._max_bytes)
        if reply.status != 200:
            raise VerifierUnavailable(f"the JWKS at {self.jwks_uri} answered {reply.status}")
        return parse_jwks(reply.body, self._max_keys, self.jwks_uri)


def parse_jwks(body: bytes, max_keys: int, where: str) -> list[tuple[str | None, PublicKey]]:
    """The public signing keys of a JWKS document (RFC 7517 §5): keys for encryption
    (`use: enc`), symmetric or private keys, and keys joserfc cannot import are skipped (an
    AS may publish key types this server does not know); over `max_keys` keys is refused."""
    from joserfc.errors import JoseError
    from joserfc.jwk import JWKRegistry

    try:
        document = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        raise VerifierUnavailable(f"the JWKS at {where} is not JSON") from None
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise VerifierUnavailable(f"the JWKS at {where} has no keys list")
    if len(entries) > max_keys:
        raise VerifierUnavailable(f"the JWKS at {where} has {len(entries)} keys, over the "
                                  f"limit of {max_keys}")
    keys: list[tuple[str | None, PublicKey]] = []
    for entry in entries:
        if (not isinstance(entry, dict) or entry.get("use", "sig") != "sig"
                or entry.get("kty") not in ("EC", "RSA", "OKP")
                or _PRIVATE_MEMBERS & entry.keys()):
            continue
        kid = entry.get("kid")
        try:
            key = JWKRegistry.import_key(entry)
        except (JoseError, ValueError, TypeError, KeyError):
            continue
        keys.append((kid if isinstance(kid, str) else None, key))  # type: ignore[arg-type]
    return keys


def _usable_for(key: PublicKey, alg: str) -> bool:
    """Whether a key's type fits the algorithm (and its own `alg`, when it names one)."""
    declared = key.get("alg")
    if declared is not None and declared != alg:
        return False
    family = {"E": "EC", "R": "RSA", "P": "RSA"}.get(alg[:1], "OKP")
    return bool(key.key_type == family)
