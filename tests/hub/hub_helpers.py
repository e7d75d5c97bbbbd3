"""Pieces the hub's API tests share: the hub app under uvicorn in a thread on a free 127.0.0.1
port (its own event loop, so its store is opened there by the app's lifespan), an admin seeded
straight into the database, real upstream MCP servers as processes, and a small aiohttp
caller that returns status, JSON body, raw text and headers.

The fixtures are module-scoped where a server is costly to start: tests then keep to users and
upstreams of their own (`fresh_user` makes one through the admin API), so they never depend on
each other's data.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from tests.procs import free_port, serve_in_thread, stop_process, wait_for_port

from mcpkit.hub.api import create_app
from mcpkit.hub.api.context import CatalogFetcher, HostResolver
from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Store

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_SERVER = ROOT / "tests" / "manager" / "fixture_server.py"
UPSTREAMS = "/api/v1/users/mcp/upstreams"
ADMIN_USERS = "/api/v1/admin/users"


@dataclass
class Hub:
    url: str
    admin_token: str
    database_url: str
    settings: HubSettings
    box: SecretBox


async def open_store(hub: Hub) -> Store:
    """A store on the hub's database for the test's own event loop (close it after)."""
    return await Store.open(hub.database_url, hub.box)


@dataclass
class Reply:
    status: int
    text: str
    headers: Any
    body: Any = field(default=None)

    @property
    def error(self) -> dict[str, Any]:
        assert isinstance(self.body, dict) and "error" in self.body, self.text
        detail: dict[str, Any] = self.body["error"]
        return detail


async def call(
    method: str,
    url: str,
    *,
    token: str | None = None,
    json: Any = None,
    data: Any = None,
    headers: dict[str, str] | None = None,
    limit_s: float = 30.0,
) -> Reply:
    """One request on a fresh connection (bounded); the body parsed when it is JSON."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=limit_s)) as session:
        async with session.request(method, url, json=json, data=data, headers=sent) as response:
            text = await response.text()
            body = None
            if response.content_type == "application/json" and text:
                body = await response.json(content_type=None)
            return Reply(response.status, text, response.headers, body)


async def mcp_status(hub_url: str, access_token: str) -> int:
    """The HTTP status of an MCP initialize at the hub's /mcp with `access_token` (an API
    token or a hub-signed OAuth access token)."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    reply = await call("POST", hub_url + "/mcp", token=access_token, json=initialize,
                       headers={"Accept": "application/json, text/event-stream",
                                "MCP-Protocol-Version": "2025-11-25"})
    return reply.status


class Api:
    """Calls on one hub with one token: `await api.get("/api/v1/users/me")`."""

    def __init__(self, hub: Hub, token: str | None, user_id: int = 0) -> None:
        self.hub = hub
        self.token = token
        self.user_id = user_id

    async def request(self, method: str, path: str, **kwargs: Any) -> Reply:
        kwargs.setdefault("token", self.token)
        return await call(method, self.hub.url + path, **kwargs)

    async def get(self, path: str, **kwargs: Any) -> Reply:
        return await self.request("GET", path, **kwargs)

    async def post(self, path: str, json: Any = None, **kwargs: Any) -> Reply:
        return await self.request("POST", path, json=json, **kwargs)

    async def patch(self, path: str, json: Any = None, **kwargs: Any) -> Reply:
        return await self.request("PATCH", path, json=json, **kwargs)

    async def delete(self, path: str, **kwargs: Any) -> Reply:
        return await self.request("DELETE", path, **kwargs)

    async def create_upstream(self, **fields: Any) -> dict[str, Any]:
        reply = await self.post(UPSTREAMS, fields)
        assert reply.status == 201, reply.text
        body: dict[str, Any] = reply.body
        return body


def unique(prefix: str = "u") -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


async def fresh_user(hub: Hub, *, admin: bool = False) -> tuple[int, Api]:
    """A new user (through the admin API) and an `Api` with a token of theirs."""
    root = Api(hub, hub.admin_token)
    created = await root.post(ADMIN_USERS, {"name": unique("user"), "is_admin": admin})
    assert created.status == 201, created.text
    user_id = created.body["id"]
    token = await root.post(f"{ADMIN_USERS}/{user_id}/tokens", {"name": "tests"})
    assert token.status == 201, token.text
    return user_id, Api(hub, token.body["secret"], user_id)


# --- the hub ---------------------------------------------------------------------------------


def seed_admin(database_url: str, box: SecretBox) -> str:
    """Migrate the database, add the admin `root` and return a token of theirs."""

    async def seed() -> str:
        async with await Store.open(database_url, box) as store:
            user = await store.users.create("root", is_admin=True)
            return (await store.tokens.create(user.id, name="tests")).secret

    return anyio.run(seed)


@contextlib.contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """uvicorn with the app's lifespan in a daemon thread; the base URL; stopped after."""
    with serve_in_thread(app, lifespan="on", name="hub") as base:
        yield base


@contextlib.contextmanager
def running_hub(
    database_url: str,
    *,
    resolve: HostResolver | None = None,
    fetch: CatalogFetcher | None = None,
    **settings: Any,
) -> Iterator[Hub]:
    box = SecretBox([generate_key()])
    token = seed_admin(database_url, box)
    # These hubs answer many tokenless and wrong-token requests from 127.0.0.1 on purpose;
    # the per-address limit on those has its own tests (test_hub_limits.py).
    settings.setdefault("auth_failure_burst", 1_000_000)
    hub_settings = HubSettings(database_url=database_url, **settings)
    app = create_app(hub_settings, box=box, resolve=resolve, fetch=fetch)
    with serve_app(app) as url:
        yield Hub(url, token, database_url, hub_settings, box)


def database_for(request: pytest.FixtureRequest, kind: str, tmp: Path) -> str:
    """A fresh database of `kind` for a module-scoped hub."""
    if kind == "sqlite":
        return f"sqlite+aiosqlite:///{tmp / 'hub.db'}"
    server = request.getfixturevalue("postgres_server")
    name = server.create_database().rsplit("/", 1)[1]
    url: str = server.url_for(name)
    return url


# --- upstream servers ------------------------------------------------------------------------


@dataclass
class Upstream:
    url: str
    proc: subprocess.Popen[bytes]


@contextlib.contextmanager
def upstream_process(*args: str) -> Iterator[Upstream]:
    """An MCP server process serving Streamable HTTP on a free port (`args` before --port)."""
    port = free_port()
    # the caller's mcpkit first (a worktree's src), as the test process runs it
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)]))
    env = {**os.environ, "PYTHONPATH": path}
    proc = subprocess.Popen(
        [sys.executable, *args, str(port)], env=env, cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(proc, port)
        yield Upstream(f"http://127.0.0.1:{port}/mcp", proc)
    finally:
        stop_process(proc)


def echo_server() -> contextlib.AbstractContextManager[Upstream]:
    """mcpkit's echo server: one tool, `echo`."""
    return upstream_process("-m", "mcpkit.testing.echo_server", "--transport", "http",
                            "--port")


def fixture_server(name: str = "fx") -> contextlib.AbstractContextManager[Upstream]:
    """The manager tests' server: eight tools, a prompt and a resource."""
    return upstream_process(str(FIXTURE_SERVER), "--name", name, "--http")
