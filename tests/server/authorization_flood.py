"""Floods the resource server's in-memory caches in this process and prints its resident
memory before and after, as JSON (tests/server/test_authorization_verifiers.py runs it):

    python -m tests.server.authorization_flood BOUND_BYTES

- the DPoP replay cache (bound BOUND_BYTES) is offered 200 000 distinct live proofs: it keeps
  what fits and refuses the rest (fail closed), so memory stays at the bound;
- the introspection cache (bound BOUND_BYTES) is offered 20 000 decoded answers: it evicts
  the oldest.
Unbounded, the two would hold about 39 MB and 30 MB."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import sys
import time

from mcpkit.auth.introspection import IntrospectionPolicy, introspection_info
from mcpkit.server.authorization import MemoryReplayCache, ReplayCacheFull
from mcpkit.server.authorization.introspection import IntrospectionCache

RESOURCE = "https://mcp.example/mcp"


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def flood(bound: int) -> dict[str, int]:
    replay = MemoryReplayCache(max_bytes=bound)
    refused = 0
    for i in range(200_000):
        try:
            await replay.first_use(hashlib.sha256(b"%d" % i).digest(), time.time() + 3600)
        except ReplayCacheFull:
            refused += 1
    cache = IntrospectionCache(ttl_s=3600, max_entries=10**9, max_bytes=bound,
                               clock=time.time)
    for i in range(20_000):
        body = json.dumps({"active": True, "sub": f"user-{i:012d}", "client_id": "client",
                           "scope": "mcp:read mcp:write", "aud": RESOURCE,
                           "exp": int(time.time()) + 600, "jti": f"{i:032d}"}).encode()
        info = introspection_info(body, IntrospectionPolicy(RESOURCE), time.time())
        cache.put(hashlib.sha256(body).digest(), info, len(body))
    return {"replay_kept": len(replay), "replay_refused": refused,
            "introspection_kept": len(cache), "introspection_bytes": cache.bytes}


def main() -> None:
    bound = int(sys.argv[1])
    gc.collect()
    before = rss_bytes()
    counts = asyncio.run(flood(bound))
    gc.collect()
    print(json.dumps({"before": before, "after": rss_bytes(), **counts}))


if __name__ == "__main__":
    main()
