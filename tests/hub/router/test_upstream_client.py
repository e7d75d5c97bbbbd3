"""The hub presents one client to its upstreams, on the catalog path (registration, refresh,
health checks) and on the call path (/mcp) alike - over real HTTP and stdio to real upstream
processes that list some tools only to clients that declared what they need:

- gated_server.py (ours): `needs_sampling` / `needs_elicitation` listed only with the
  capability, in a legacy session (from `initialize`) and in the modern era (from each
  request's `_meta`); it also reports what it saw of every tools/list and tools/call, so the
  two paths are held to the same capabilities, client info, protocol version and headers,
  and has a tool with an `x-mcp-header` argument (per-call headers the call path must send);
- the reference "everything" server (Node, over stdio), whose sampling and elicitation tools
  are registered only for a client that declared them.

Each gated tool must be in the hub's REST catalog (`GET …/tools?refresh=true`), in `/mcp`
tools/list, and callable through /mcp, its question answered by the caller.
"""

from __future__ import annotations

import ast
import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.hub.hub_helpers import (
    UPSTREAMS,
    Api,
    Hub,
    Upstream,
    fresh_user,
    open_store,
    upstream_process,
)
from tests.hub.router.support import hub_client, router_hub, text

import mcpkit.hub
from mcpkit.client import Responders, ServerError
from mcpkit.hub.catalog import fetch_catalog
from mcpkit.hub.health import HealthChecker
from mcpkit.hub.metrics import HubMetrics
from mcpkit.hub.refresh_slots import RefreshSlots
from mcpkit.hub.router.forward import MAX_INPUT_REQUESTS
from mcpkit.hub.upstream_client import HUB_CLIENT_INFO
from mcpkit.protocol.errors import MISSING_REQUIRED_CLIENT_CAPABILITY

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
GATED_SERVER = HERE / "gated_server.py"
ROOT = HERE.parents[2]
EVERYTHING = (ROOT / "tests" / "js" / "node_modules" / "@modelcontextprotocol"
              / "server-everything" / "dist" / "index.js")
NODE = shutil.which("node")
UPSTREAM_KEY = "key-of-the-upstream"
UPSTREAM_BEARER = "bearer-of-the-upstream"
GATED_TOOLS = {"needs_sampling", "needs_elicitation"}
ERAS = ["legacy", "modern"]
LIMIT_S = 60.0


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    database = tmp_path_factory.mktemp("upstream-client") / "hub.db"
    with router_hub(f"sqlite+aiosqlite:///{database}", allow_stdio=True) as running:
        yield running


def gated_upstream(era: str) -> contextlib.AbstractContextManager[Upstream]:
    args = [str(GATED_SERVER)] + (["--legacy-only"] if era == "legacy" else [])
    return upstream_process(*args)


@pytest.fixture(scope="module")
def gated() -> Iterator[dict[str, str]]:
    """One gated upstream per era: "modern" speaks 2026-07-28, "legacy" refuses it."""
    with gated_upstream("modern") as modern, gated_upstream("legacy") as legacy:
        yield {"modern": modern.url, "legacy": legacy.url}


async def model(params: Any) -> dict[str, Any]:
    question = params.messages[-1].content.text
    return {"role": "assistant", "model": "test-model",
            "content": {"type": "text", "text": f"an answer to {question}"}}


async def person(params: Any) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Ada"}}


async def catalog_names(api: Api, upstream_id: str) -> set[str]:
    """The tools of the hub's REST catalog, fetched from the upstream now (every page)."""
    names: set[str] = set()
    cursor: str | None = None
    for _page in range(100):
        query = f"cursor={cursor}" if cursor else "refresh=true"
        reply = await api.get(f"{UPSTREAMS}/{upstream_id}/tools?{query}")
        assert reply.status == 200, reply.text
        names.update(tool["name"] for tool in reply.body["items"])
        cursor = reply.body["next_cursor"]
        if not cursor:
            return names
    raise AssertionError("the catalog never ended")


async def register_gated(api: Api, url: str) -> str:
    created = await api.create_upstream(
        name="gated", url=url, transport="http", headers={"X-Upstream-Key": UPSTREAM_KEY},
        bearer_token=UPSTREAM_BEARER)
    return str(created["id"])


def test_only_upstream_client_makes_the_hubs_clients() -> None:
    """Every connection to an upstream is made by `upstream_client` (one definition): no
    other module of the hub constructs an `mcpkit.Client` - but the console's "Try a tool",
    whose one Client talks to the hub's own /mcp on loopback (never to an upstream)."""
    hub_source = Path(mcpkit.hub.__file__).parent
    makers = set()
    for module in hub_source.rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(), str(module))):
            if isinstance(node, ast.Call):
                called = node.func
                name = called.id if isinstance(called, ast.Name) else getattr(called, "attr", "")
                if name == "Client":
                    makers.add(str(module.relative_to(hub_source)))
    assert makers == {"upstream_client.py", "console/tool_calls.py"}


@pytest.mark.parametrize("caller", ERAS)
@pytest.mark.parametrize("up", ERAS)
async def test_tools_gated_on_capabilities_are_cataloged_listed_and_callable(
        hub: Hub, gated: dict[str, str], up: str, caller: str) -> None:
    _user, api = await fresh_user(hub)
    upstream_id = await register_gated(api, gated[up])
    with anyio.fail_after(LIMIT_S):
        assert GATED_TOOLS | {"seen"} <= await catalog_names(api, upstream_id)
        async with hub_client(
            hub,
            api,
            era=caller,
            responders=Responders(sampling=model, elicitation=person),
        ) as client:
            listed = {tool.name for tool in await client.list_tools()}
            assert {f"gated__{name}" for name in GATED_TOOLS} <= listed, listed
            sampled = await client.call_tool("gated__needs_sampling", {"question": "life"})
            assert text(sampled) == "model said: an answer to life", sampled
            elicited = await client.call_tool("gated__needs_elicitation", {})
            assert text(elicited) == "user said: Ada (accept)", elicited


@pytest.mark.parametrize("caller", ERAS)
@pytest.mark.parametrize("up", ERAS)
async def test_x_mcp_header_arguments_go_with_calls_through_the_hub(
        hub: Hub, gated: dict[str, str], up: str, caller: str) -> None:
    """The catalog fetch learns a tool's `x-mcp-header` annotations, the pooled call client
    lists nothing: it must still mirror the argument into `Mcp-Param-Region` (a modern
    upstream refuses the call with -32020 otherwise)."""
    _user, api = await fresh_user(hub)
    await register_gated(api, gated[up])
    with anyio.fail_after(LIMIT_S):
        async with hub_client(hub, api, era=caller) as client:
            for region in ("eu-west", "zürich"):  # plain, and base64-encoded in the header
                result = await client.call_tool("gated__regional", {"region": region})
                assert text(result) == f"region {region}", result


@pytest.mark.parametrize("up", ERAS)
async def test_the_catalog_fetch_and_the_calls_present_the_same_client(
        hub: Hub, gated: dict[str, str], up: str) -> None:
    """What the upstream saw of the hub's catalog fetches (tools/list) and of its calls
    (tools/call): the same capabilities - sampling and elicitation, no roots -, client info,
    protocol version, and credentials (the upstream's own, never the caller's token)."""
    _user, api = await fresh_user(hub)
    upstream_id = await register_gated(api, gated[up])
    with anyio.fail_after(LIMIT_S):
        await catalog_names(api, upstream_id)
        async with hub_client(hub, api, era="modern") as client:
            await client.call_tool("gated__seen", {})  # one call recorded before reading
            seen = json.loads(text(await client.call_tool("gated__seen", {})))

    listings, calls = seen["tools/list"], seen["tools/call"]
    assert listings and calls
    presented = {json.dumps(record, sort_keys=True) for record in listings + calls}
    assert len(presented) == 1, presented  # one client, whichever path
    record = listings[0]
    assert record["modern"] is (up == "modern")
    assert {"sampling", "elicitation"} <= set(record["capabilities"])
    assert "roots" not in record["capabilities"]  # a shared connection has no one's roots
    assert record["client_info"]["name"] == HUB_CLIENT_INFO["name"]
    assert {tuple(headers) for headers in seen["headers"]} == {
        (f"Bearer {UPSTREAM_BEARER}", UPSTREAM_KEY)}


async def test_the_health_checker_keeps_the_gated_tools(
        hub: Hub, gated: dict[str, str]) -> None:
    """A health check stores the catalog the same client fetches: the gated tools stay."""
    _user, api = await fresh_user(hub)
    upstream_id = await register_gated(api, gated["legacy"])
    store = await open_store(hub)
    try:
        record = await store.upstreams.get(api.user_id, upstream_id)
        context = _Context(store, hub)
        with anyio.fail_after(LIMIT_S):
            assert await HealthChecker(context).check(record)  # type: ignore[arg-type]
        catalog = await store.catalog.get(api.user_id, upstream_id)
    finally:
        await store.close()
    assert GATED_TOOLS <= {tool["name"] for tool in catalog.tools}


class _Context:
    """The part of a `HubContext` a health check uses, on the test's own store."""

    def __init__(self, store: Any, hub: Hub) -> None:
        self.store = store
        self.settings = hub.settings
        self.redis = None
        self.fetch = fetch_catalog
        self.refresh_slots = RefreshSlots(2)
        self.catalog_listeners: list[Any] = []
        self.metrics = HubMetrics()


# --- the reference "everything" server ------------------------------------------------------


def all_text(result: Any) -> str:
    return "\n".join(getattr(item, "text", "") for item in result.content)


needs_everything = pytest.mark.skipif(
    NODE is None or not EVERYTHING.exists(),
    reason="needs node and tests/js/node_modules (scripts/install_js_peers.sh)")


@needs_everything
@pytest.mark.parametrize("caller", ERAS)
async def test_everything_servers_conditional_tools_through_the_hub(
        hub: Hub, caller: str) -> None:
    assert NODE is not None
    _user, api = await fresh_user(hub)
    created = await api.create_upstream(
        name="everything", transport="stdio", command=[NODE, str(EVERYTHING), "stdio"])
    with anyio.fail_after(LIMIT_S):
        cataloged = await catalog_names(api, str(created["id"]))
        # registered by server-everything only for a client that declared them
        assert {"trigger-sampling-request", "trigger-elicitation-request",
                "trigger-url-elicitation"} <= cataloged, cataloged
        async with hub_client(
            hub,
            api,
            era=caller,
            responders=Responders(
                sampling=model,
                elicitation=person,
                elicitation_modes=("form", "url"),
            ),
        ) as client:
            listed = {tool.name for tool in await client.list_tools()}
            assert {"everything__trigger-sampling-request",
                    "everything__trigger-elicitation-request"} <= listed, listed
            sampled = await client.call_tool(
                "everything__trigger-sampling-request", {"prompt": "Capital?", "maxTokens": 20})
            assert "an answer to Resource trigger-sampling-request context: Capital?" in (
                all_text(sampled)), sampled
            elicited = await client.call_tool("everything__trigger-elicitation-request", {})
            assert '"name": "Ada"' in all_text(elicited), elicited


@pytest.mark.parametrize("caller", ERAS)
async def test_a_caller_without_the_capability_is_refused_not_answered_by_the_hub(
        hub: Hub, gated: dict[str, str], caller: str) -> None:
    """The hub declares sampling for its callers, not in their place: a caller that cannot
    sample is told what it lacks (-32021), and no model is asked."""
    _user, api = await fresh_user(hub)
    await register_gated(api, gated["legacy"])
    with anyio.fail_after(LIMIT_S):
        async with hub_client(hub, api, era=caller) as client:
            with pytest.raises(ServerError) as refused:
                await client.call_tool("gated__needs_sampling", {"question": "x"})
            assert text(await client.call_tool("gated__seen", {}))  # the connection lives on
    assert refused.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert refused.value.data == {"requiredCapabilities": {"sampling": {}}}


BURST = 2000
"""list_changed notifications an upstream sends at once (a hostile burst)."""
REFRESHES_AFTER_BURST = 4
"""Catalog fetches a burst may cost: one round in flight and one to follow (the catalog
fetch's tools/list), with room for a health check or a slow round's tail."""


@pytest.mark.parametrize("up", ERAS)
async def test_a_burst_of_list_changed_costs_a_round_or_two_not_one_refresh_each(
        hub: Hub, up: str) -> None:
    """Each list_changed from an upstream makes the hub refresh its catalog; refreshes share
    slots with every user's. A burst of BURST of them is coalesced: a couple of refreshes,
    and another user's refresh is answered meanwhile. (An upstream of its own: the burst
    reaches every session of the upstream, and only this user's may have one.)"""
    _user, api = await fresh_user(hub)
    _other, other_api = await fresh_user(hub)
    with gated_upstream(up) as own, anyio.fail_after(LIMIT_S):
        upstream_id = await register_gated(api, own.url)
        other_id = await register_gated(other_api, own.url)
        await catalog_names(api, upstream_id)
        async with hub_client(hub, api) as client:
            before = json.loads(text(await client.call_tool("gated__seen", {})))
            sent = await client.call_tool("gated__spam_list_changed", {"count": BURST})
            assert text(sent) == f"sent {BURST}"
            with anyio.fail_after(10.0):  # liveness, not timing
                assert GATED_TOOLS <= await catalog_names(other_api, other_id)
            await anyio.sleep(2.5)  # rounds are LIST_CHANGED_SPACING_S (1 s) apart
            after = json.loads(text(await client.call_tool("gated__seen", {})))
    refreshes = len(after["tools/list"]) - len(before["tools/list"]) - 1  # the other's
    print(f"{BURST} list_changed -> {refreshes} catalog refreshes")
    assert 1 <= refreshes <= REFRESHES_AFTER_BURST


@pytest.mark.parametrize("caller", ERAS)
async def test_an_upstream_asks_at_most_so_many_questions_at_once(
        hub: Hub, gated: dict[str, str], caller: str) -> None:
    """A modern upstream's `input_required` with 2000 questions: refused before any reaches
    the caller (a legacy caller would have been asked all of them concurrently: on main its
    call timed out after 30 s); MAX_INPUT_REQUESTS of them are relayed."""
    _user, api = await fresh_user(hub)
    await register_gated(api, gated["modern"])
    asked: list[str] = []

    async def answer(params: Any) -> dict[str, Any]:
        asked.append(params.message)
        return {"action": "accept", "content": {"n": "x"}}

    with anyio.fail_after(LIMIT_S):
        async with hub_client(
            hub,
            api,
            era=caller,
            responders=Responders(elicitation=answer),
        ) as client:
            most = await client.call_tool("gated__ask_many", {"count": MAX_INPUT_REQUESTS})
            assert text(most) == f"{MAX_INPUT_REQUESTS} answers"
            assert len(asked) == MAX_INPUT_REQUESTS
            with pytest.raises(ServerError) as refused:
                await client.call_tool("gated__ask_many", {"count": 2000})
            assert text(await client.call_tool("gated__seen", {}))  # the connection lives on
    assert refused.value.message == (
        f"upstream gated asked 2000 questions at once; the hub relays at most "
        f"{MAX_INPUT_REQUESTS}")
    assert len(asked) == MAX_INPUT_REQUESTS
