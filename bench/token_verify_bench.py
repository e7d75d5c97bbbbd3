"""Cost of one resource-server token verification with the issuer's keys already cached:
`JwtVerifier.verify` on an ES256 and an RS256 bearer token, and on an ES256 DPoP-bound token
with its proof (a new proof each time: the replay cache is part of the cost), against a bare
`joserfc.jwt.decode` of the same token (the signature check alone).

    .venv/bin/python bench/token_verify_bench.py            # 2000 verifications per case
    .venv/bin/python bench/token_verify_bench.py --n 500

The JWKS is served once by aiohttp on 127.0.0.1 (the first verification fetches it; the
timing starts after). Prints µs per verification, the median of 3 runs per case."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

from mcpkit.auth.dpop import DPoPKey
from mcpkit.auth.resource import TokenRequest
from mcpkit.server.authorization import JwtVerifier

ISSUER = "https://as.example"
RESOURCE = "https://mcp.example/mcp"


def mint(key: ECKey | RSAKey, alg: str, kid: str, **claims: Any) -> str:
    now = int(time.time())
    payload = {"iss": ISSUER, "aud": RESOURCE, "sub": "bench", "client_id": "bench",
               "iat": now, "exp": now + 3600, "scope": "mcp:read", **claims}
    return jwt.encode({"alg": alg, "typ": "at+jwt", "kid": kid}, payload, key,
                      algorithms=[alg])


async def timed(n: int, one: Callable[[], Awaitable[object]]) -> float:
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            await one()
        runs.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(runs)


async def main(n: int) -> None:
    ec = ECKey.generate_key("P-256", private=True)
    rsa = RSAKey.generate_key(2048, private=True)
    keys = {"keys": [{**ec.as_dict(private=False), "kid": "ec", "alg": "ES256"},
                     {**rsa.as_dict(private=False), "kid": "rsa", "alg": "RS256"}]}
    app = web.Application()
    app.router.add_get("/jwks", lambda _request: web.json_response(keys))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        verifier = JwtVerifier(ISSUER, RESOURCE, jwks_uri=f"http://127.0.0.1:{port}/jwks")
        es = mint(ec, "ES256", "ec")
        rs = mint(rsa, "RS256", "rsa")
        holder = DPoPKey.generate()
        bound = mint(ec, "ES256", "ec", cnf={"jkt": holder.jkt})
        await verifier.verify(TokenRequest("Bearer", es, "POST", RESOURCE))  # fetches keys

        def bearer(token: str) -> Callable[[], Awaitable[object]]:
            return lambda: verifier.verify(TokenRequest("Bearer", token, "POST", RESOURCE))

        proofs = iter([holder.proof("POST", RESOURCE, access_token=bound)
                       for _ in range(3 * n)])  # made outside the timing (a client's cost)

        def dpop() -> Awaitable[object]:
            return verifier.verify(TokenRequest("DPoP", bound, "POST", RESOURCE,
                                                dpop_proof=next(proofs)))

        async def bare() -> object:
            return jwt.decode(es, ec, algorithms=["ES256"])

        print(f"joserfc.jwt.decode ES256 alone     {await timed(n, bare):8.1f} µs")
        print(f"JwtVerifier ES256 bearer           {await timed(n, bearer(es)):8.1f} µs")
        print(f"JwtVerifier RS256 bearer           {await timed(n, bearer(rs)):8.1f} µs")
        print(f"JwtVerifier ES256 DPoP + proof     {await timed(n, dpop):8.1f} µs")
        assert verifier.jwks is not None and verifier.jwks.fetches == 1
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    asyncio.run(main(parser.parse_args().n))
