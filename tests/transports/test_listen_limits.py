"""Issue 20 §3, round two: a `subscriptions/listen` stream keeps its resource URIs for as
long as it is open, so they have the bounds a legacy session's `resources/subscribe` has:
at most `Server.max_subscriptions` (128) URIs of at most `max_subscription_uri_chars` (2048)
characters, -32602 naming the limit past either. Unbounded, a 3.9 MiB body of 420,000 short
URIs held ~3.4 MiB per open stream (22 streams: +74 MiB), and one caller may hold 512.
Over a real uvicorn process."""

from __future__ import annotations

import io
import json
from typing import Any

import aiohttp
import pytest
from tests.transports.test_slow_listener import _body, _headers, notify_server

from mcpkit.server.connection import DEFAULT_MAX_SUBSCRIPTION_URI_CHARS, DEFAULT_MAX_SUBSCRIPTIONS

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _listen(client: aiohttp.ClientSession, url: str, uris: list[str]) -> dict[str, Any]:
    """The first message the listen request answers with (its error, or the ack)."""
    body = _body(1, "subscriptions/listen", {"notifications": {"resourceSubscriptions": uris}})
    data = io.BytesIO(json.dumps(body).encode())  # aiohttp warns of big bytes bodies
    async with client.post(url, data=data, headers=_headers("subscriptions/listen")) as resp:
        if resp.content_type == "application/json":
            answer: dict[str, Any] = await resp.json()
            return answer
        async for line in resp.content:
            if line.startswith(b"data:"):
                first: dict[str, Any] = json.loads(line[5:])
                return first
    raise AssertionError("no message")


@pytest.mark.parametrize(("uris", "limit"), [
    ([f"mem://{i}" for i in range(DEFAULT_MAX_SUBSCRIPTIONS + 1)], DEFAULT_MAX_SUBSCRIPTIONS),
    ([str(i) for i in range(400_000)], DEFAULT_MAX_SUBSCRIPTIONS),
    (["mem://" + "u" * DEFAULT_MAX_SUBSCRIPTION_URI_CHARS], DEFAULT_MAX_SUBSCRIPTION_URI_CHARS),
])
async def test_a_listen_filter_past_the_limits_is_refused(uris: list[str], limit: int) -> None:
    with notify_server() as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with aiohttp.ClientSession() as client:
            refused = await _listen(client, url, uris)
            assert refused["error"]["code"] == -32602
            assert refused["error"]["data"]["limit"] == limit
            # at the limits, a listen is served
            most = [f"mem://{i:04d}" + "u" * (DEFAULT_MAX_SUBSCRIPTION_URI_CHARS - 10)
                    for i in range(DEFAULT_MAX_SUBSCRIPTIONS)]
            assert all(len(uri) == DEFAULT_MAX_SUBSCRIPTION_URI_CHARS for uri in most)
            ack = await _listen(client, url, most)
            assert ack["method"] == "notifications/subscriptions/acknowledged", ack
