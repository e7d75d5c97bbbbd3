"""The hub's /mcp over real HTTP: a user's upstreams (real server processes) as one server,
in both eras, with the token's user as the only one who sees them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.hub.hub_helpers import UPSTREAMS, Hub, call, fresh_user
from tests.hub.router.support import hub_client, register, router_hub, text, upstream

from mcpkit.client import ServerError

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    database = tmp_path_factory.mktemp("router") / "hub.db"
    with router_hub(f"sqlite+aiosqlite:///{database}") as running:
        yield running


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, str]]:
    with upstream("alpha") as alpha, upstream("beta", legacy_only=True) as beta:
        yield {"alpha": alpha.url, "beta": beta.url}


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_union_of_a_users_upstreams_in_either_era(
        hub: Hub, upstreams: dict[str, str], era: str) -> None:
    _user, api = await fresh_user(hub)
    await register(api, "alpha", upstreams["alpha"])
    await register(api, "beta", upstreams["beta"])
    async with hub_client(hub, api, era=era) as client:
        names = {tool.name for tool in await client.list_tools()}
        assert {"alpha__echo", "alpha__add", "beta__echo", "beta__add"} <= names
        assert text(await client.call_tool("alpha__echo", {"text": "hi"})) == "alpha: hi"
        assert text(await client.call_tool("beta__echo", {"text": "yo"})) == "beta: yo"
        summed = await client.call_tool("beta__add", {"a": 2, "b": 3})
        assert "5" in text(summed) and not summed.is_error
        failed = await client.call_tool("alpha__fail", {})
        assert failed.is_error and "always fails" in text(failed)
        prompts = {prompt.name for prompt in await client.list_prompts()}
        assert {"alpha__greet", "beta__greet"} <= prompts
        greeting = await client.get_prompt("beta__greet", {"who": "Ann"})
        assert "Hello Ann, from beta" in str(greeting)
        uris = {str(resource.uri) for resource in await client.list_resources()}
        assert {"note://alpha/readme", "note://beta/readme"} <= uris
        read = await client.read_resource("note://beta/readme")
        assert "readme of beta" in str(read)
        templated = await client.read_resource("note://alpha/cats")
        assert "alpha on cats" in str(templated)
        with pytest.raises(ServerError) as unknown:
            await client.call_tool("gamma__echo", {"text": "x"})
        assert unknown.value.code == -32602


async def test_the_apis_mcp_name_is_the_name_mcp_lists(
        hub: Hub, upstreams: dict[str, str]) -> None:
    """The REST API names each tool's name on /mcp (`mcp_name`): exactly what tools/list
    gives, and null for a tool switched off."""
    _user, api = await fresh_user(hub)
    await register(api, "alpha", upstreams["alpha"])
    dotted = await register(api, "beta-2", upstreams["beta"], disabled_tools=["add"])
    async with hub_client(hub, api) as client:
        listed = {tool.name for tool in await client.list_tools()}
    named: set[str] = set()
    for upstream_id in [item["id"] for item in (await api.get(UPSTREAMS)).body["items"]]:
        for tool in (await api.get(f"{UPSTREAMS}/{upstream_id}/tools")).body["items"]:
            if upstream_id == dotted["id"] and tool["name"] == "add":
                assert tool["mcp_name"] is None
            else:
                named.add(tool["mcp_name"])
    assert named == listed and len(listed) > 4


async def test_the_callers_token_is_never_sent_upstream(
        hub: Hub, upstreams: dict[str, str]) -> None:
    _user, api = await fresh_user(hub)
    await register(api, "alpha", upstreams["alpha"], bearer_token="upstream-secret")
    async with hub_client(hub, api) as client:
        seen = text(await client.call_tool("alpha__whoami", {}))
    assert "Bearer upstream-secret" in seen
    assert api.token is not None and api.token not in seen


async def test_another_user_can_neither_list_nor_call_nor_read(
        hub: Hub, upstreams: dict[str, str]) -> None:
    _owner, alice = await fresh_user(hub)
    _other, bob = await fresh_user(hub)
    await register(alice, "alpha", upstreams["alpha"])
    async with hub_client(hub, bob) as client:
        assert [tool.name for tool in await client.list_tools()] == []
        with pytest.raises(ServerError):
            await client.call_tool("alpha__echo", {"text": "x"})
        with pytest.raises(ServerError):
            await client.read_resource("note://alpha/readme")
        with pytest.raises(ServerError):
            await client.get_prompt("alpha__greet", {"who": "x"})


async def test_a_legacy_session_is_not_found_for_another_users_token(
        hub: Hub, upstreams: dict[str, str]) -> None:
    _owner, alice = await fresh_user(hub)
    _other, bob = await fresh_user(hub)
    async with hub_client(hub, alice, era="legacy") as client:
        session_id = client.session.transport.session_id  # type: ignore[attr-defined]
        assert session_id
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Mcp-Session-Id": session_id, "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2025-11-25"}
        stolen = await call("POST", f"{hub.url}/mcp", token=bob.token, json=body,
                            headers=headers)
        assert stolen.status == 404
        own = await call("POST", f"{hub.url}/mcp", token=alice.token, json=body,
                         headers=headers)
        assert own.status == 200


@pytest.mark.parametrize("token", [None, "not-a-token"])
async def test_mcp_needs_a_valid_token(hub: Hub, token: str | None) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    reply = await call("POST", f"{hub.url}/mcp", token=token, json=body,
                       headers={"Accept": "application/json, text/event-stream"})
    assert reply.status == 401
    assert reply.headers["WWW-Authenticate"].startswith("Bearer")
    assert reply.body["error"]["code"] == -32001


async def test_an_upstream_that_is_down_drops_out_with_a_reason(
        hub: Hub, tmp_path: Path) -> None:
    _user, api = await fresh_user(hub)
    with upstream("gone") as doomed:
        await register(api, "gone", doomed.url)
        async with hub_client(hub, api) as client:
            assert "gone__echo" in {tool.name for tool in await client.list_tools()}
    async with hub_client(hub, api) as client:
        failed = await client.call_tool("gone__echo", {"text": "x"})
        assert failed.is_error and "upstream unavailable" in text(failed)
        assert "gone__echo" not in {tool.name for tool in await client.list_tools()}
    listed = await api.get("/api/v1/users/mcp/upstreams")
    (record,) = [item for item in listed.body["items"] if item["name"] == "gone"]
    assert record["health_status"] == "unhealthy" and record["last_error"]


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "host-check", "version": "1"}}}


async def _initialize_status(hub: Hub, token: str, **headers: str) -> int:
    reply = await call("POST", f"{hub.url}/mcp", token=token, json=INITIALIZE, headers={
        "Accept": "application/json, text/event-stream", **headers})
    return reply.status


async def test_mcp_takes_only_loopback_hosts_by_default(hub: Hub) -> None:
    """A DNS-rebinding guard: a name the operator did not allow is refused (403), even with
    a valid token; so is a foreign browser Origin."""
    _user, api = await fresh_user(hub)
    assert await _initialize_status(hub, api.token) == 200
    assert await _initialize_status(hub, api.token, Host="hub.example.com") == 403
    assert await _initialize_status(hub, api.token, Origin="https://evil.example") == 403


@pytest.fixture
def proxied_hub(tmp_path: Path) -> Iterator[Hub]:
    with router_hub(f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}",
                    allowed_hosts=("hub.example.com",),
                    allowed_origins=("https://app.example.com",)) as running:
        yield running


async def test_mcp_takes_the_hosts_and_origins_the_operator_allows(proxied_hub: Hub) -> None:
    """Behind a proxy the hub is reached by its public name: --allowed-host lets that in
    (loopback stays allowed), --allowed-origin a browser app; others are still refused."""
    hub = proxied_hub
    _user, api = await fresh_user(hub)
    assert await _initialize_status(hub, api.token, Host="hub.example.com") == 200
    assert await _initialize_status(hub, api.token, Host="hub.example.com:8443") == 200
    assert await _initialize_status(hub, api.token) == 200
    assert await _initialize_status(hub, api.token, Host="other.example.com") == 403
    assert await _initialize_status(hub, api.token, Origin="https://app.example.com") == 200
    assert await _initialize_status(hub, api.token, Origin="https://evil.example") == 403
