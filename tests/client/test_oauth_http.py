"""The OAuth flow's HTTP reads: a body sent in many chunks is read whole, and one over the
limit is refused, over real HTTP on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from mcpkit.auth.errors import AuthorizationError
from mcpkit.client.oauth_http import OAuthHttp

from .support import serve_in_thread

DOC = msgspec.json.encode({"resource": "http://127.0.0.1/mcp", "pad": "x" * 20_000})


async def chunked(request: Request) -> StreamingResponse:
    size = int(request.query_params["size"])

    data = (DOC * (size // len(DOC) + 1))[:size]

    async def body() -> AsyncIterator[bytes]:
        for start in range(0, size, 1000):  # many small chunks
            yield data[start: start + 1000]

    return StreamingResponse(body(), media_type="application/json")


APP = Starlette(routes=[Route("/doc", chunked)])
pytestmark = pytest.mark.anyio


async def test_a_body_in_many_chunks_is_read_whole() -> None:
    with serve_in_thread(APP) as base:
        reply = await OAuthHttp().get(f"{base}/doc?size={len(DOC)}")
    assert reply.ok and reply.body == DOC


async def test_a_body_over_the_limit_is_refused() -> None:
    with serve_in_thread(APP) as base:
        with pytest.raises(AuthorizationError, match="over the 10000-byte limit"):
            await OAuthHttp(max_bytes=10_000).get(f"{base}/doc?size=50000")
