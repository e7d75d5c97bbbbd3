"""The router tests' pieces: a hub with its `/mcp` endpoint under uvicorn in a thread, upstream
server processes (upstream_server.py), and MCP clients of the hub with a user's token."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.hub.hub_helpers import (
    Api,
    Hub,
    Upstream,
    seed_admin,
    serve_app,
    unique,
    upstream_process,
)
from tests.procs import free_port, serve_in_thread

from mcpkit import Client
from mcpkit.client import Timeouts
from mcpkit.hub.api import create_app
from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.router import McpEndpoint
from mcpkit.hub.settings import HubSettings

HERE = Path(__file__).resolve().parent
UPSTREAM_SERVER = HERE / "upstream_server.py"


def hub_app(settings: HubSettings, box: SecretBox, *, view_ttl_s: float = 5.0) -> Any:
    endpoint = McpEndpoint(view_ttl_s=view_ttl_s)
    return create_app(settings, box=box, components=[endpoint.component],
                      mounts={"/mcp": endpoint})


@contextlib.contextmanager
def hub_replicas(box: SecretBox, **settings: Any) -> Iterator[tuple[str, str]]:
    """Two hubs (`hub_app`) with one secret `box` and `settings` (one shared database_url,
    ...) behind one public URL, the first's: replicas; their base URLs. Failed-token limits
    per address are lifted, as in `running_hub` (their own tests are test_hub_limits.py)."""
    ports = [free_port(), free_port()]
    settings.setdefault("public_url", f"http://127.0.0.1:{ports[0]}")
    settings.setdefault("auth_failure_burst", 1_000_000)

    def replica(port: int) -> Any:
        return serve_in_thread(hub_app(HubSettings(port=port, **settings), box),
                               lifespan="on", name="hub", port=port)

    with replica(ports[0]) as first, replica(ports[1]) as second:
        yield first, second


@contextlib.contextmanager
def router_hub(database_url: str, *, box: SecretBox | None = None, seed: bool = True,
               admin_token: str = "", **settings: Any) -> Iterator[Hub]:
    """A hub (REST + /mcp) on `database_url`, private upstreams allowed."""
    box = box or SecretBox([generate_key()])
    token = seed_admin(database_url, box) if seed else admin_token
    settings.setdefault("allow_private_upstreams", True)
    # These hubs answer many tokenless and wrong-token requests from 127.0.0.1 on purpose;
    # the per-address limit on those has its own tests (test_hub_limits.py).
    settings.setdefault("auth_failure_burst", 1_000_000)
    hub_settings = HubSettings(database_url=database_url, **settings)
    with serve_app(hub_app(hub_settings, box)) as url:
        yield Hub(url, token, database_url, hub_settings, box)


def upstream(name: str, *, legacy_only: bool = False) -> contextlib.AbstractContextManager[
        Upstream]:
    args = [str(UPSTREAM_SERVER), "--name", name]
    if legacy_only:
        args.append("--legacy-only")
    return upstream_process(*args)


def hub_client(hub: Hub, api: Api, **options: Any) -> Client:
    """An MCP client of the hub's /mcp with the user's token."""
    options.setdefault("timeouts", Timeouts(timeout=30.0))
    return Client(f"{hub.url}/mcp", bearer_token=api.token, **options)


async def register(api: Api, name: str, url: str, **fields: Any) -> dict[str, Any]:
    return await api.create_upstream(name=name, url=url, transport="http", **fields)


def text(result: Any) -> str:
    """The text of a CallToolResult (typed) or of a raw result dict."""
    content = result["content"] if isinstance(result, dict) else result.content
    first = content[0]
    return str(first["text"] if isinstance(first, dict) else first.text)


__all__ = ["Api", "Hub", "hub_client", "register", "router_hub", "text", "unique", "upstream"]
