"""A hostile upstream cannot make the hub fetch, hold, store or serve without end: its catalog
is bounded in items, bytes, nesting, name length and pages (catalog_limits.py), and in time by
the upstream's own timeouts.

Over real processes: hostile_server.py (a bare ASGI upstream whose tools/list floods, sends a
giant or deeply nested tool, a megabyte name, endless pages, or drips one byte at a time)
against the hub in a thread, and - for memory - against `mcpkit hub serve` as its own process,
whose RSS is read from /proc before and after the flood. Unit tests (hypothesis for the nesting
check) hold `CatalogBudget` to each bound and its message.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.hub.hub_helpers import UPSTREAMS, Api, Hub, Upstream, call, fresh_user, upstream_process
from tests.hub.router.support import hub_client, router_hub
from tests.procs import free_port, wait_for_port

from mcpkit.hub.catalog_limits import (
    CatalogBudget,
    CatalogLimits,
    CatalogTooLarge,
    nested_deeper_than,
)
from mcpkit.hub.settings import HubSettings

pytestmark = pytest.mark.anyio

HOSTILE_SERVER = Path(__file__).resolve().parent / "hostile_server.py"
LIMIT_S = 60.0
SMALL_CATALOG_BYTES = 64 * 1024
MIB = 1024 * 1024


def hostile(mode: str, *args: str) -> contextlib.AbstractContextManager[Upstream]:
    return upstream_process(str(HOSTILE_SERVER), mode, *args)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    database = tmp_path_factory.mktemp("catalog-limits") / "hub.db"
    with router_hub(f"sqlite+aiosqlite:///{database}") as running:
        yield running


async def refresh(api: Api, upstream_id: str) -> Any:
    return await api.get(f"{UPSTREAMS}/{upstream_id}/tools?refresh=true", limit_s=LIMIT_S)


async def register(api: Api, url: str, **fields: Any) -> str:
    created = await api.create_upstream(name="hostile", url=url, transport="http", **fields)
    return str(created["id"])


# --- over real processes ---------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "args", "expected"), [
    ("flood", ("--size", "1000"), "more than 2000 tools (MCPKIT_HUB_MAX_CATALOG_ITEMS)"),
    ("flood", ("--size", "0"), "tools/list goes on past 100 pages"),
    ("giant", ("--size", "3000000"), "tool 'giant' is 3,000,065 bytes; at most 262,144"),
    ("long-name", ("--size", "100000"), "a tool name of 100,000 characters"),
    ("deep", ("--size", "40"), "tool 'deep' nests deeper than 64 levels"),
])
async def test_a_hostile_catalog_is_refused_with_its_reason(
        hub: Hub, mode: str, args: tuple[str, ...], expected: str) -> None:
    """Each refused with the bound it broke: 502 on refresh, the upstream unhealthy with the
    reason as `last_error`, nothing stored, and the hub's lists unharmed."""
    _user, api = await fresh_user(hub)
    with hostile(mode, *args) as upstream:
        upstream_id = await register(api, upstream.url)
        with anyio.fail_after(LIMIT_S):
            refused = await refresh(api, upstream_id)
    assert refused.status == 502, refused.text
    assert expected in refused.error["message"], refused.error
    record = (await api.get(f"{UPSTREAMS}/{upstream_id}")).body
    assert record["health_status"] == "unhealthy"
    assert expected in record["last_error"]
    assert record["tool_count"] == 0
    async with hub_client(hub, api) as client:
        assert await client.list_tools() == []


async def test_a_catalog_at_the_bounds_is_stored_served_and_listed(hub: Hub) -> None:
    """Just inside the nesting bound (63 levels): stored, on the REST catalog, in /mcp."""
    _user, api = await fresh_user(hub)
    with hostile("deep", "--size", "31") as upstream:
        upstream_id = await register(api, upstream.url)
        with anyio.fail_after(LIMIT_S):
            stored = await refresh(api, upstream_id)
            assert stored.status == 200, stored.text
            assert [tool["name"] for tool in stored.body["items"]] == ["deep"]
            async with hub_client(hub, api) as client:
                listed = await client.list_tools()
    assert [tool.name for tool in listed] == ["hostile__deep"]
    schema = json.loads(json.dumps(listed[0].input_schema))
    assert reference_depth(schema) == 63  # the tool around it: 64


@pytest.fixture
def small_hub(tmp_path: Path) -> Iterator[Hub]:
    with router_hub(f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}",
                    max_catalog_bytes=SMALL_CATALOG_BYTES) as running:
        yield running


async def test_the_catalog_byte_bound_is_a_setting(small_hub: Hub) -> None:
    _user, api = await fresh_user(small_hub)
    with hostile("flood", "--size", "100", "--pages", "1") as upstream:
        upstream_id = await register(api, upstream.url)
        with anyio.fail_after(LIMIT_S):
            refused = await refresh(api, upstream_id)
    assert refused.status == 502, refused.text
    assert (f"the catalog passes {SMALL_CATALOG_BYTES:,} bytes (MCPKIT_HUB_MAX_CATALOG_BYTES)"
            in refused.error["message"])


USER_CATALOG_BYTES = 600 * 1024


@pytest.fixture
def hub_with_user_bound(tmp_path: Path) -> Iterator[Hub]:
    with router_hub(f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}",
                    max_user_catalog_bytes=USER_CATALOG_BYTES) as running:
        yield running


async def test_a_users_upstreams_together_are_bounded(hub_with_user_bound: Hub) -> None:
    """Many upstreams, each within its own bounds (60 tools of 4 KiB: ~250 KB): the third one
    of a user passes the user's bound and is refused; another user is not affected; the
    user's /mcp list holds what fits."""
    hub = hub_with_user_bound
    _user, api = await fresh_user(hub)
    _other, other_api = await fresh_user(hub)
    with hostile("flood", "--size", "60", "--pages", "1") as upstream, \
            anyio.fail_after(LIMIT_S):
        outcomes = []
        for index in range(3):
            created = await api.create_upstream(name=f"h{index}", url=upstream.url,
                                                transport="http")
            outcomes.append(await refresh(api, str(created["id"])))
        theirs = await register(other_api, upstream.url)
        assert (await refresh(other_api, theirs)).status == 200
        async with hub_client(hub, api) as client:
            listed = await client.list_tools()
    assert [reply.status for reply in outcomes] == [200, 200, 502]
    assert (f"h2: catalog too large: with the user's other upstreams it passes "
            f"{USER_CATALOG_BYTES:,} bytes (MCPKIT_HUB_MAX_USER_CATALOG_BYTES)"
            in outcomes[2].error["message"])
    assert len(listed) == 120


async def test_a_dripping_upstream_costs_its_timeout_and_nobody_else_waits(hub: Hub) -> None:
    """tools/list answered one byte every 0.2 s, never ending: the refresh gives up after the
    upstream's call timeout (1 s), and other requests are answered meanwhile."""
    _user, api = await fresh_user(hub)
    with hostile("drip") as upstream:
        upstream_id = await register(api, upstream.url, call_timeout_s=1.0,
                                     connect_timeout_s=2.0)
        answered: list[int] = []

        async def meanwhile() -> None:
            for _ in range(5):
                with anyio.fail_after(5.0):  # liveness, not timing
                    answered.append((await api.get("/api/v1/users/me")).status)
                await anyio.sleep(0.1)

        with anyio.fail_after(LIMIT_S):
            async with anyio.create_task_group() as group:
                group.start_soon(meanwhile)
                refused = await refresh(api, upstream_id)
    assert refused.status == 502, refused.text
    assert "no catalog within" in refused.error["message"]
    assert answered == [200] * 5


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@contextlib.contextmanager
def hub_process(data: Path) -> Iterator[tuple[str, str, int]]:
    """`mcpkit hub serve` as its own process: (base URL, a user's token, its pid)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPKIT_HUB_")}
    env["MCPKIT_HUB_DATA"] = str(data)

    def hub_command(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "mcpkit", "hub", *args], env=env,
                              capture_output=True, text=True, timeout=60, check=True)
        return done.stdout.strip()

    hub_command("user", "add", "mallory")
    token = hub_command("token", "create", "mallory")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpkit", "hub", "serve", "--port", str(port),
         "--allow-private-upstreams"], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(proc, port, timeout=30)
        yield f"http://127.0.0.1:{port}", token, proc.pid
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


FLOOD_GROWTH_BOUND_MIB = 64.0
"""What the hub process may grow by while refusing an endless flood of 4 KiB tools (it holds
at most one 8 MiB catalog and one page; unbounded, 100 pages of 1000 grew it by ~2.3 GiB)."""


async def test_an_endless_flood_leaves_the_hub_process_its_memory(tmp_path: Path) -> None:
    """An upstream whose tools/list never ends (pages of 1000 tools of 4 KiB each): the real
    hub process refuses it at the bound, grows by less than FLOOD_GROWTH_BOUND_MIB, and
    answers a normal request within 5 s throughout."""
    with hub_process(tmp_path / "data") as (base, token, pid), \
            hostile("flood", "--size", "1000") as upstream:
        created = await call("POST", base + UPSTREAMS, token=token, json={
            "name": "flood", "url": upstream.url, "transport": "http"})
        assert created.status == 201, created.text
        warm = await call("GET", f"{base}{UPSTREAMS}/{created.body['id']}", token=token)
        assert warm.status == 200
        before = rss_mib(pid)
        peak = before
        answered: list[int] = []

        async def meanwhile() -> None:
            nonlocal peak
            for _ in range(10):
                peak = max(peak, rss_mib(pid))
                with anyio.fail_after(5.0):  # liveness, not timing
                    answered.append((await call("GET", base + "/api/v1/users/me",
                                                token=token)).status)
                await anyio.sleep(0.05)

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(meanwhile)
            refused = await call("GET", f"{base}{UPSTREAMS}/{created.body['id']}/tools"
                                        "?refresh=true", token=token, limit_s=LIMIT_S)
        took = time.monotonic() - started
        after = rss_mib(pid)
    print(f"endless flood: refused in {took:.2f} s; hub RSS {before:.0f} -> peak "
          f"{peak:.0f} -> {after:.0f} MiB")
    assert refused.status == 502, refused.text
    assert "more than 2000 tools" in refused.text
    assert max(peak, after) - before < FLOOD_GROWTH_BOUND_MIB
    assert answered == [200] * 10


# --- the budget itself -----------------------------------------------------------------------


def tool(name: str = "t", **members: Any) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}, **members}


def refusal(limits: CatalogLimits, kind: str, items: list[dict[str, Any]]) -> str:
    budget = CatalogBudget(limits, "up")
    with pytest.raises(CatalogTooLarge) as refused:
        for item in items:
            budget.admit(kind, item)
    return str(refused.value)


def test_each_bound_refuses_with_what_was_too_large() -> None:
    small = CatalogLimits(max_items=3, max_bytes=1000, max_item_bytes=400, max_depth=4,
                          max_name_chars=10, max_uri_chars=20, max_pages=2)
    assert refusal(small, "tools", [tool(f"t{i}") for i in range(4)]) == (
        "up: catalog too large: more than 3 tools (MCPKIT_HUB_MAX_CATALOG_ITEMS)")
    assert "a tool name of 11 characters" in refusal(small, "tools", [tool("n" * 11)])
    assert "a prompt name of 11 characters" in refusal(small, "prompts", [{"name": "p" * 11}])
    assert "a resource uri of 21 characters" in refusal(
        small, "resources", [{"uri": "u" * 21, "name": "r"}])
    assert "nests deeper than 4 levels" in refusal(
        small, "tools", [tool(inputSchema={"a": {"b": {"c": {}}}})])
    assert "tool 't' is 461 bytes; at most 400" in refusal(
        small, "tools", [tool(description="d" * 400)])
    assert "the catalog passes 1,000 bytes" in refusal(
        small, "resource_templates", [{"uriTemplate": f"x/{i}", "name": "t" * 350}
                                      for i in range(3)])
    budget = CatalogBudget(small, "up")
    budget.next_page("tools/list")
    budget.next_page("tools/list")
    budget.next_page("prompts/list")  # pages count per list
    with pytest.raises(CatalogTooLarge, match="tools/list goes on past 2 pages"):
        budget.next_page("tools/list")


def test_the_settings_defaults_are_the_limits_defaults() -> None:
    assert CatalogLimits.from_settings(HubSettings()) == CatalogLimits()


def reference_depth(value: Any) -> int:
    """Arrays and objects nested in `value` (recursive: only for the small test values)."""
    if isinstance(value, dict):
        return 1 + max((reference_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((reference_depth(v) for v in value), default=0)
    return 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=40,
)


@given(value=st.dictionaries(st.text(max_size=5), json_values, max_size=4),
       limit=st.integers(min_value=1, max_value=12))
def test_nesting_check_agrees_with_a_recursive_reference(value: dict[str, Any],
                                                         limit: int) -> None:
    assert nested_deeper_than(value, limit) == (reference_depth(value) > limit)


def test_nesting_check_survives_what_recursion_cannot() -> None:
    deep: dict[str, Any] = {}
    for _ in range(100_000):
        deep = {"a": deep}
    assert nested_deeper_than(deep, 64)
    assert not nested_deeper_than(deep, 100_001)
