"""Which client the hub is at an upstream's authorization server, in users' upstream logins:
its Client ID Metadata Document URL (`--upstream-client-metadata-url`) where the server
supports CIMD, else a dynamic client registration.

The authorization server here is a small recording one over real HTTP on 127.0.0.1 (in the
test's loop): it says whether it supports CIMD and counts the registrations it is sent; the
hub is a real one. The whole login against the real oidc-provider (DCR) is
test_upstream_login.py's."""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web
from tests.hub.hostile_auth_server import add_protected_mcp, authorization_server_metadata
from tests.hub.hub_helpers import Hub, call, fresh_user, running_hub
from tests.hub.upstream_login_support import land, register_oauth, start, state_of
from tests.procs import free_port, serving

from mcpkit.hub.settings import HubSettings, SettingsError
from mcpkit.hub.upstream_login import CLIENT_METADATA_PATH

pytestmark = pytest.mark.anyio

ELSEWHERE = "https://clients.example/mcpkit-hub.json"


@dataclass
class RecordingServer:
    base: str
    cimd: bool = False
    registrations: list[dict[str, object]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"


@contextlib.asynccontextmanager
async def recording_server() -> AsyncIterator[RecordingServer]:
    """A protected upstream (401 + RFC 9728 metadata) that is its own authorization server."""
    port = free_port()
    server = RecordingServer(f"http://127.0.0.1:{port}")

    async def metadata(_: web.Request) -> web.Response:
        return web.json_response({**authorization_server_metadata(server.base),
                                  "client_id_metadata_document_supported": server.cimd})

    async def token(_: web.Request) -> web.Response:
        return web.json_response({"error": "invalid_client"}, status=401)

    async def register(request: web.Request) -> web.Response:
        server.registrations.append(await request.json())
        return web.json_response({"client_id": f"registered-{len(server.registrations)}",
                                  "token_endpoint_auth_method": "none"}, status=201)

    app = web.Application()
    add_protected_mcp(app, server.base, methods=("POST", "GET"))
    app.router.add_get("/.well-known/oauth-authorization-server", metadata)
    app.router.add_post("/register", register)
    app.router.add_post("/token", token)
    async with serving(app, port):
        yield server


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    """A hub whose Client ID Metadata Document is published elsewhere."""
    path: Path = tmp_path_factory.mktemp("hub") / "hub.db"
    with running_hub(f"sqlite+aiosqlite:///{path}", allow_private_upstreams=True,
                     upstream_client_metadata_url=ELSEWHERE) as running:
        yield running


def client_id(authorization_url: str) -> str:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(authorization_url).query)["client_id"][0]


async def test_the_metadata_document_url_is_the_client_id_where_the_server_supports_it(
        hub: Hub) -> None:
    _, api = await fresh_user(hub)
    async with recording_server() as server:
        upstream = await register_oauth(api, "cimd", server.url)
        server.cimd = True
        started = await start(api, upstream["id"])
        assert started.status == 200, started.text
        assert client_id(started.body["authorization_url"]) == ELSEWHERE
        assert server.registrations == []
        server.cimd = False  # not supported: a registration, for the hub's callback
        started = await start(api, upstream["id"])
        assert started.status == 200, started.text
        assert client_id(started.body["authorization_url"]).startswith("registered-")
        assert [r["redirect_uris"] for r in server.registrations] == [
            [hub.settings.issuer + "/oauth/upstream/callback"]]
    # published elsewhere: this hub serves no document
    assert (await call("GET", hub.url + CLIENT_METADATA_PATH)).status == 404


PUBLIC = "https://hub.example"
"""The URL a hub is reached by behind its proxy."""


@pytest.fixture
def serving_hub(tmp_path: Path) -> Iterator[Hub]:
    """A hub whose document URL is its own: it serves the document."""
    with running_hub(f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}", public_url=PUBLIC,
                     upstream_client_metadata_url=PUBLIC + CLIENT_METADATA_PATH) as running:
        yield running


async def test_the_hub_serves_its_document_when_its_url_is_the_hubs(serving_hub: Hub) -> None:
    public = PUBLIC
    reply = await call("GET", serving_hub.url + CLIENT_METADATA_PATH)
    assert reply.status == 200, reply.text
    assert reply.body["client_id"] == public + CLIENT_METADATA_PATH
    assert reply.body["redirect_uris"] == [public + "/oauth/upstream/callback"]
    assert reply.body["token_endpoint_auth_method"] == "none"
    assert reply.body["application_type"] == "web"


def test_the_setting_comes_from_the_environment_or_the_command_line() -> None:
    from mcpkit.cli import build_parser

    url = "https://hub.example/oauth/upstream/client.json"
    environ = {"MCPKIT_HUB_UPSTREAM_CLIENT_METADATA_URL": url}
    assert HubSettings.from_env({}).upstream_client_metadata_url is None
    assert HubSettings.from_env(environ).upstream_client_metadata_url == url
    other = "https://other.example/client.json"
    args = build_parser().parse_args(["hub", "serve", "--upstream-client-metadata-url", other])
    assert HubSettings.from_args(args, environ).upstream_client_metadata_url == other
    for bad, why in (("http://hub.example/client.json", "https"),
                     ("https://hub.example/", "path"),
                     ("https://hub.example/c.json#x", "fragment")):
        with pytest.raises(SettingsError, match=f"upstream_client_metadata_url: .*{why}"):
            HubSettings(upstream_client_metadata_url=bad)


async def test_one_registration_per_server_is_reused_until_the_server_refuses_it(
        hub: Hub) -> None:
    """Three logins of two users at one authorization server: one registration. When the
    server answers invalid_client (it forgot the client), the hub forgets it too: the next
    login registers again."""
    (_, ada), (_, bob) = await fresh_user(hub), await fresh_user(hub)
    async with recording_server() as server:
        ada_upstream = await register_oauth(ada, "shared", server.url)
        bob_upstream = await register_oauth(bob, "shared", server.url)
        urls = []
        for api, upstream in ((ada, ada_upstream), (bob, bob_upstream), (ada, ada_upstream)):
            started = await start(api, upstream["id"])
            assert started.status == 200, started.text
            urls.append(started.body["authorization_url"])
        assert len(server.registrations) == 1
        assert {client_id(url) for url in urls} == {"registered-1"}
        landed = (f"{hub.url}/oauth/upstream/callback?state={state_of(urls[-1])}"
                  "&code=abc")
        refused = await land(ada, landed)  # the token endpoint answers invalid_client
        assert refused.status == 400 and "invalid_client" in refused.text, refused.text
        again = await start(bob, bob_upstream["id"])
        assert again.status == 200, again.text
        assert client_id(again.body["authorization_url"]) == "registered-2"
        assert len(server.registrations) == 2
