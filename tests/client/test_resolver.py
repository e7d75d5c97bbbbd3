"""`Client(resolver=...)`: the SSRF guard checks addresses when the connection is made."""

from __future__ import annotations

import anyio
import pytest

from mcpkit import netguard
from mcpkit.client import Client, ConnectOptions, TransportError
from mcpkit.testing.echo_server import build_server

from .support import serve_in_thread

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("scheme", ["http", "ws"])
async def test_the_guard_refuses_a_loopback_name_at_connect(scheme: str) -> None:
    with serve_in_thread(build_server().asgi_app()) as base:
        url = base.replace("http://127.0.0.1", f"{scheme}://localhost") + "/mcp"
        with anyio.fail_after(15), pytest.raises(TransportError, match="a loopback name"):
            async with Client(url, connect=ConnectOptions(resolver=netguard.GuardedResolver())):
                pass


async def test_the_guard_lets_allowed_addresses_through() -> None:
    with serve_in_thread(build_server().asgi_app()) as base:
        url = base.replace("127.0.0.1", "localhost") + "/mcp"
        with anyio.fail_after(15):
            async with Client(
                url,
                connect=ConnectOptions(resolver=netguard.GuardedResolver(allow_private=True)),
            ) as c:
                result = await c.call_tool("echo", {"text": "hi"})
        assert result.content[0].text == "hi"  # type: ignore[union-attr]
