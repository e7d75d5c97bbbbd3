"""Switching single tools of an upstream on and off in the console, over real HTTP (a hub
under uvicorn on 127.0.0.1, mcpkit's echo server as the upstream): the switch reaches the
hub's /mcp `tools/list`, needs the session's CSRF token, says "changed elsewhere" for a stale
version, and never reaches another user's upstream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.console.support import ConsoleBrowser, console_hub
from tests.console.test_console_security import signed_in
from tests.hub.hub_helpers import UPSTREAMS, Api, Hub, Upstream, echo_server, fresh_user

from mcpkit import Client
from mcpkit.client import Timeouts
from mcpkit.hub.console.tool_pages import STALE, switched

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    tmp: Path = tmp_path_factory.mktemp("console-tools")
    with console_hub(f"sqlite+aiosqlite:///{tmp / 'hub.db'}") as running:
        yield running


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with echo_server() as served:
        yield served


async def echo_upstream(api: Api, upstream: Upstream, name: str) -> dict[str, object]:
    """The user's upstream of the echo server, its catalog fetched."""
    created = await api.create_upstream(name=name, url=upstream.url)
    tools = await api.get(f"{UPSTREAMS}/{created['id']}/tools?refresh=true")
    assert tools.status == 200 and [t["name"] for t in tools.body["items"]] == ["echo"], \
        tools.text
    return created


async def hub_tools(hub: Hub, token: str) -> list[str]:
    """The hub's /mcp tools/list, by mcpkit's Client with the API token."""
    async with Client(hub.url + "/mcp", bearer_token=token,
                      timeouts=Timeouts(timeout=30.0)) as client:
        return sorted(tool.name for tool in await client.list_tools())


async def switch(browser: ConsoleBrowser, upstream_id: object, enable: bool,
                 version: object, csrf: str | None = None, **post: str | None) -> int:
    path = f"/console/upstreams/{upstream_id}/tools"
    fields = {"csrf_token": csrf if csrf is not None else await browser.csrf(path),
              "tool": "echo", "enable": "1" if enable else "0", "version": str(version)}
    return (await browser.post(path, fields, **post)).status  # type: ignore[arg-type]


async def test_a_switched_off_tool_leaves_mcp_and_comes_back(
        hub: Hub, upstream: Upstream) -> None:
    browser, api = await signed_in(hub)
    created = await echo_upstream(api, upstream, "echoes")
    assert api.token is not None
    before = await hub_tools(hub, api.token)
    assert len(before) == 1 and "echo" in before[0], before
    page = await browser.request("GET", f"/console/upstreams/{created['id']}/tools")
    assert page.status == 200 and 'aria-checked="true"' in page.text
    assert await switch(browser, created["id"], False, created["version"]) == 303
    assert await hub_tools(hub, api.token) == []
    page = await browser.request("GET", f"/console/upstreams/{created['id']}/tools")
    assert 'aria-checked="false"' in page.text and "Tool disabled" not in page.text
    current = (await api.get(f"{UPSTREAMS}/{created['id']}")).body
    assert current["disabled_tools"] == ["echo"]
    assert await switch(browser, created["id"], True, current["version"]) == 303
    assert await hub_tools(hub, api.token) == before


async def test_a_stale_version_says_changed_elsewhere(hub: Hub, upstream: Upstream) -> None:
    browser, api = await signed_in(hub)
    created = await echo_upstream(api, upstream, "stale")
    path = f"/console/upstreams/{created['id']}/tools"
    csrf = await browser.csrf(path)  # the page as shown, then changed elsewhere
    changed = await api.patch(f"{UPSTREAMS}/{created['id']}", {"call_timeout_s": 9})
    assert changed.status == 200, changed.text
    reply = await browser.post(path, {"csrf_token": csrf, "tool": "echo", "enable": "0",
                                      "version": str(created["version"])})
    assert reply.status == 409 and STALE.split(":")[0] in reply.text
    assert (await api.get(f"{UPSTREAMS}/{created['id']}")).body["disabled_tools"] == []


@pytest.mark.parametrize("attempt", ["missing", "cross-origin"])
async def test_a_switch_without_the_sessions_csrf_token_is_refused(
        hub: Hub, upstream: Upstream, attempt: str) -> None:
    browser, api = await signed_in(hub)
    created = await echo_upstream(api, upstream, "guarded-" + attempt)
    path = f"/console/upstreams/{created['id']}/tools"
    fields = {"tool": "echo", "enable": "0", "version": str(created["version"])}
    if attempt == "missing":
        reply = await browser.post(path, fields)
    else:
        fields["csrf_token"] = await browser.csrf(path)
        reply = await browser.post(path, fields, origin="http://evil.example")
    assert reply.status == 403, reply.text
    assert (await api.get(f"{UPSTREAMS}/{created['id']}")).body["disabled_tools"] == []


async def test_another_users_upstreams_tools_are_out_of_reach(
        hub: Hub, upstream: Upstream) -> None:
    _, owner = await fresh_user(hub)
    theirs = await echo_upstream(owner, upstream, "owned")
    browser, _ = await signed_in(hub)
    path = f"/console/upstreams/{theirs['id']}/tools"
    page = await browser.request("GET", path)
    assert page.status == 404 and "owned" not in page.text
    csrf = await browser.csrf("/console/tokens")
    assert await switch(browser, theirs["id"], False, theirs["version"], csrf=csrf) == 404
    assert (await owner.get(f"{UPSTREAMS}/{theirs['id']}")).body["disabled_tools"] == []


def test_switching_keeps_the_other_lists_entries() -> None:
    upstream = {"disabled_tools": ["a", "b"], "enabled_tools": ["a", "c"]}
    assert switched(upstream, "b", True) == {"disabled_tools": ["a"],
                                             "enabled_tools": ["a", "c", "b"]}
    assert switched(upstream, "c", False) == {"disabled_tools": ["a", "b", "c"]}
    assert switched({"disabled_tools": [], "enabled_tools": None}, "x", True) == \
        {"disabled_tools": []}
