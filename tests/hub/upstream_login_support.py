"""Pieces of the upstream-login tests: the real oidc-provider (tests/auth_e2e/stack.py) as
the upstream's authorization server, a protected `whoami` upstream trusting it
(whoami_upstream.py), hubs with the /mcp router whose public URL is known in advance (their
OAuth callback names it), and a user's whole login: start over the REST API, the provider's
login and consent pages walked as `account` (tests/auth_e2e/logins.FormLogin), the browser's
landing at the hub's callback - the user's own browser, signed in to the hub
(tests/hub/hub_browser.py), as the callback requires."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
import time
import urllib.parse
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.auth_e2e.logins import FormLogin
from tests.auth_e2e.stack import STARTUP_S, Stack
from tests.hub.hub_browser import HubBrowser, hub_browser
from tests.hub.hub_helpers import UPSTREAMS, Api, Hub, Reply, seed_admin
from tests.hub.router.support import hub_app, text
from tests.procs import free_port, serve_in_thread, stop_process, wait_for_port

from mcpkit import Client
from mcpkit.client import Timeouts
from mcpkit.client.token_records import decode_grant, encode_grant
from mcpkit.hub.crypto import SecretBox
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Store

WHOAMI = Path(__file__).with_name("whoami_upstream.py")
CALLBACK = "/oauth/upstream/callback"


@contextlib.contextmanager
def whoami_upstream(stack: Stack, log_dir: Path) -> Iterator[str]:
    """The protected whoami server on a free port (the provider told about it); its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    stack.add_resource(url)
    root = Path(__file__).resolve().parents[2]
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(root)]))
    with open(log_dir / f"whoami-{port}.log", "w+b") as log:
        proc = subprocess.Popen([sys.executable, str(WHOAMI), "--issuer", stack.issuer,
                                 "--port", str(port)], cwd=root, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONPATH": path},
                                start_new_session=True)
        try:
            wait_for_port(proc, port, timeout=STARTUP_S)
            yield url
        finally:
            stop_process(proc, group=True)


@contextlib.contextmanager
def router_hubs(database_url: str, box: SecretBox, count: int = 1, *,
                redis_url: str | None = None, admin_token: str | None = None,
                first_port: int | None = None, **extra: Any) -> Iterator[list[Hub]]:
    """`count` replicas of one hub (REST + /mcp) on one database (and Redis), all with the
    first one's URL (on `first_port` when given) as their public URL, and the `extra`
    settings; an admin seeded (or `admin_token`'s, seeded by the caller: inside an event
    loop, with `seed_admin_async`)."""
    token = admin_token or seed_admin(database_url, box)
    ports = [first_port or free_port()] + [free_port() for _ in range(count - 1)]
    public = f"http://127.0.0.1:{ports[0]}"
    with contextlib.ExitStack() as stack:
        hubs = []
        for port in ports:
            settings = HubSettings(database_url=database_url, port=port, public_url=public,
                                   allow_private_upstreams=True, auth_failure_burst=1_000_000,
                                   redis_url=redis_url, **extra)
            url = stack.enter_context(serve_in_thread(hub_app(settings, box), lifespan="on",
                                                      name="hub", port=port))
            hubs.append(Hub(url, token, database_url, settings, box))
        yield hubs


async def register_oauth(api: Api, name: str, url: str) -> dict[str, Any]:
    return await api.create_upstream(name=name, url=url, transport="http", auth_mode="oauth")


async def start(api: Api, upstream_id: str, **body: Any) -> Reply:
    return await api.post(f"{UPSTREAMS}/{upstream_id}/oauth/start", body or None)


async def authorize(api: Api, upstream_id: str, account: str) -> str:
    """Start a login and walk the provider's pages as `account`: the URL the provider
    redirects the browser to (the hub's callback, not yet visited)."""
    started = await start(api, upstream_id)
    assert started.status == 200, started.text
    login = FormLogin(user=account, redirect_uri=api.hub.settings.issuer + CALLBACK)
    return await login(started.body["authorization_url"])


async def browser_of(api: Api) -> HubBrowser:
    """The user's own browser (signs in to the hub with a password set on first use)."""
    if api not in _browsers:
        _browsers[api] = await hub_browser(api.hub, api.user_id)
    return _browsers[api]


_browsers: weakref.WeakKeyDictionary[Api, HubBrowser] = weakref.WeakKeyDictionary()


async def land(api: Api, url: str) -> Reply:
    """The browser of `api`'s user opens `url` (the callback): signed in to the hub first
    when the hub asks."""
    return await (await browser_of(api)).open(url)


async def connect(api: Api, upstream_id: str, account: str) -> None:
    """A whole login as `account`, the catalog fetched with it."""
    landed = await land(api, await authorize(api, upstream_id, account))
    assert landed.status == 200 and "Connected" in landed.text, landed.text
    refreshed = await api.post(f"{UPSTREAMS}/{upstream_id}/refresh")
    assert refreshed.status == 200, refreshed.text


async def whoami(hub: Hub, token: str, tool: str) -> str:
    """Call `tool` through the hub's /mcp with `token`: the subject the upstream saw."""
    async with Client(f"{hub.url}/mcp", bearer_token=token,
                      timeouts=Timeouts(timeout=30.0)) as client:
        return text(await client.call_tool(tool, {}))


def state_of(authorization_url: str) -> str:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(authorization_url).query)["state"][0]


async def age_login(hub: Hub, user_id: int, upstream_id: str) -> dict[str, Any]:
    """Make the stored login's access token look expired (to the hub: the upstream would
    still take it) and return what was stored, decoded."""
    return await alter_login(hub, user_id, upstream_id, expires_at=time.time() - 1)


async def alter_login(hub: Hub, user_id: int, upstream_id: str,
                      **changes: Any) -> dict[str, Any]:
    """Change the stored login's tokens (`changes` of its TokenSet); what was stored."""
    async with await Store.open(hub.database_url, hub.box, migrate=False) as store:
        record = await store.upstream_logins.get(user_id, upstream_id)
        assert record is not None
        grant = decode_grant(record.encode(), "test")
        altered = dataclasses.replace(grant, tokens=dataclasses.replace(grant.tokens, **changes))
        await store.upstream_logins.put(user_id, upstream_id, encode_grant(altered).decode())
        return {"refresh_token": grant.tokens.refresh_token, "client": grant.client,
                "metadata": grant.metadata, "resource": grant.resource}



async def outcome(hub: Hub, token: str, tool: str) -> str:
    """`whoami`'s answer, or the error the call ended with, as text (never raises)."""
    try:
        return await whoami(hub, token, tool)
    except Exception as error:  # the refusal is what the test looks at
        return f"error: {error}"


async def refresh_at_provider(stored: dict[str, Any]) -> int:
    """Redeem the stored refresh token at the provider ourselves (as a thief with a copy
    would): the status; the provider rotates it, so the hub's copy is now a used one."""
    import aiohttp

    form = {"grant_type": "refresh_token", "refresh_token": stored["refresh_token"],
            "client_id": stored["client"].client_id, "resource": stored["resource"]}
    async with aiohttp.ClientSession() as http, http.post(
            stored["metadata"].token_endpoint, data=form) as reply:
        await reply.read()
        return reply.status


async def seed_admin_async(database_url: str, box: SecretBox) -> str:
    """Migrate the database, add an admin and return a token of theirs (in a running loop)."""
    async with await Store.open(database_url, box) as store:
        user = await store.users.create("root", is_admin=True)
        return (await store.tokens.create(user.id, name="tests")).secret


LEGACY = "2025-11-25"
MCP_ACCEPT = "application/json, text/event-stream"


async def mcp_session(hub: Hub, token: str) -> str:
    """A legacy-era MCP session of the hub's /mcp opened with `token`: its session id."""
    import aiohttp

    headers = {"Authorization": f"Bearer {token}", "Accept": MCP_ACCEPT}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "isolation", "version": "1"}}}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{hub.url}/mcp", json=hello, headers=headers) as reply:
            await reply.read()
            session = reply.headers["Mcp-Session-Id"]
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        async with http.post(f"{hub.url}/mcp", json=done, headers={
                **headers, "Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}) as reply:
            await reply.read()
    return session


async def raw_call(hub: Hub, token: str, session: str | None, tool: str) -> str:
    """tools/call `tool` on the hub's /mcp as sent: `token`, `session` (any, or none); the
    whole answer as text (status, then body)."""
    import aiohttp

    headers = {"Authorization": f"Bearer {token}", "Accept": MCP_ACCEPT,
               "MCP-Protocol-Version": LEGACY}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": tool, "arguments": {}}}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http, \
            http.post(f"{hub.url}/mcp", json=message, headers=headers) as reply:
        return f"{reply.status} {await reply.text()}"


async def expire_pending(hub: Hub) -> None:
    """Every pending login of the hub's database ends now (as if started long ago)."""
    from sqlalchemy import update

    from mcpkit.hub.db.models import UpstreamLoginState, utcnow

    async with await Store.open(hub.database_url, hub.box, migrate=False) as store:
        assert store.engine is not None
        async with store.engine.begin() as connection:
            await connection.execute(update(UpstreamLoginState).values(expires_at=utcnow()))
