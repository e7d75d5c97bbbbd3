""""Try a tool" over real HTTP: a hub under uvicorn on 127.0.0.1, a real upstream process
(try_server.py), the console's form generated from the tool's schema, and the call through
the hub's own /mcp with the user's /mcp token - its progress streamed as NDJSON, its result
as text, an image and JSON, its cancellation when the browser goes away, its audit entry;
and the refusals (bad arguments at their fields, a switched-off tool, CSRF, another user's
upstream)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from markupsafe import escape
from tests.console.support import ConsoleBrowser, console_hub
from tests.console.test_console_security import signed_in
from tests.hub.hub_helpers import UPSTREAMS, Api, Hub, Upstream, call, upstream_process

from mcpkit.hub.console.try_pages import NOT_ON_MCP

pytestmark = pytest.mark.anyio
TRY_SERVER = Path(__file__).with_name("try_server.py")
NDJSON = "application/x-ndjson"


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    tmp: Path = tmp_path_factory.mktemp("console-try")
    with console_hub(f"sqlite+aiosqlite:///{tmp / 'hub.db'}") as running:
        yield running


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with upstream_process(str(TRY_SERVER)) as served:
        yield served


async def tried(hub: Hub, upstream: Upstream, name: str = "tryme"
                ) -> tuple[ConsoleBrowser, Api, str]:
    """A signed-in user with the try server as an upstream, its catalog fetched."""
    browser, api = await signed_in(hub)
    created = await api.create_upstream(name=name, url=upstream.url, transport="http")
    tools = await api.get(f"{UPSTREAMS}/{created['id']}/tools?refresh=true")
    assert tools.status == 200, tools.text
    return browser, api, str(created["id"])


def try_path(upstream_id: str) -> str:
    return f"/console/upstreams/{upstream_id}/try"


async def post_try(browser: ConsoleBrowser, upstream_id: str, tool: str,
                   **fields: str) -> Any:
    csrf = browser.session().csrf
    return await browser.post(try_path(upstream_id), {"csrf_token": csrf, "tool": tool,
                                                      **fields})


async def stream_lines(browser: ConsoleBrowser, upstream_id: str, tool: str,
                       fields: dict[str, str], *, stop_after: int | None = None
                       ) -> list[dict[str, Any]]:
    """The NDJSON lines of a streamed call, as console.js asks for it; with `stop_after`,
    the connection is closed after that many lines (the browser went away)."""
    lines: list[dict[str, Any]] = []
    form = {"csrf_token": browser.session().csrf, "tool": tool, **fields}
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(cookie_jar=browser.jar, timeout=timeout) as http, \
            http.post(browser.hub.url + try_path(upstream_id), data=form,
                      headers={"Origin": browser.hub.url, "Accept": NDJSON}) as reply:
        assert reply.status == 200 and reply.content_type == NDJSON, await reply.text()
        browser.jar.update_cookies(reply.cookies, reply.url)
        async for raw in reply.content:
            lines.append(json.loads(raw))
            if stop_after is not None and len(lines) >= stop_after:
                break
    return lines


async def test_the_form_follows_the_schema_and_bad_arguments_stay_at_their_fields(
        hub: Hub, upstream: Upstream) -> None:
    browser, _, upstream_id = await tried(hub, upstream)
    page = await browser.request("GET", try_path(upstream_id) + "?tool=describe")
    assert page.status == 200, page.text
    for control in ('name="arg.name" type="text"',
                    'name="arg.times" type="text" inputmode="numeric"',
                    'name="arg.ratio" type="text" inputmode="decimal"', 'name="arg.mood"',
                    '<option value="glad"', 'name="arg.tags"', 'name="arguments_json"'):
        assert control in page.text, control
    assert "tryme__describe" in page.text  # the name it is called by on /mcp
    bare = await browser.request("GET", try_path(upstream_id) + "?tool=pixel")
    assert "This tool takes no arguments." in bare.text
    assert '<details class="raw-arguments">' in bare.text  # folded: nothing to write there
    refused = await post_try(browser, upstream_id, "describe", **{
        "arg.name": "", "arg.times": "two"})
    assert refused.status == 422, refused.text
    assert refused.text.count('class="field-error"') == 2 and 'aria-invalid="true"' in refused.text
    assert 'value="two"' in refused.text  # what was typed is kept
    assert 'id="try-result"' in refused.text and "Took" not in refused.text  # nothing called


async def test_a_call_without_script_shows_the_result_and_keeps_its_mcp_token(
        hub: Hub, upstream: Upstream) -> None:
    browser, _, upstream_id = await tried(hub, upstream)
    assert browser.session().mcp_token == ""
    done = await post_try(browser, upstream_id, "describe", **{
        "arg.name": "Ann <b>", "arg.times": "3", "arg.loud": "true", "arg.mood": "glad",
        "arg.tags": '["x", "y"]'})
    assert done.status == 200, done.text
    assert "Structured content" in done.text and "&#34;times&#34;: 3" in done.text
    assert "Ann &lt;b&gt;" in done.text and "Ann <b>" not in done.text  # escaped
    session = browser.session()
    assert session.mcp_token and session.mcp_token != session.access_token
    again = await post_try(browser, upstream_id, "describe", arguments_json=json.dumps(
        {"name": "Bo", "times": 1}))
    assert again.status == 200 and "&#34;name&#34;: &#34;Bo&#34;" in again.text, again.text
    after = browser.session()
    assert (after.mcp_token, after.refresh_token) == (session.mcp_token, session.refresh_token)


async def test_progress_streams_before_the_result_and_images_show(
        hub: Hub, upstream: Upstream) -> None:
    browser, _, upstream_id = await tried(hub, upstream)
    lines = await stream_lines(browser, upstream_id, "count",
                               {"arg.steps": "3", "arg.delay": "0.2"})
    progress, last = lines[:-1], lines[-1]
    assert [line["progress"] for line in progress] == [1, 2, 3], lines
    assert progress[-1] == {"progress": 3, "total": 3, "message": "counted 3"}
    assert "counted to 3" in last["html"] and last["signed_out"] is False
    [image] = await stream_lines(browser, upstream_id, "pixel", {})
    assert '<img src="data:image/png;base64,iVBOR' in image["html"]
    assert "a red square" in image["html"]
    [broken] = await stream_lines(browser, upstream_id, "broken", {})
    assert "The tool reported an error" in broken["html"]
    assert "broken on purpose" in broken["html"]


async def test_a_browser_that_goes_away_cancels_the_call(hub: Hub, upstream: Upstream) -> None:
    browser, _, upstream_id = await tried(hub, upstream)
    first = await stream_lines(browser, upstream_id, "count",
                               {"arg.steps": "100", "arg.delay": "0.1"}, stop_after=1)
    assert first[0]["progress"] == 1
    deadline = time.monotonic() + 15
    seen = ""
    while time.monotonic() < deadline:
        [answer] = await stream_lines(browser, upstream_id, "was_cancelled", {})
        seen = answer["html"]
        if "count" in seen.split("Text")[1]:
            break
        await anyio.sleep(0.2)
    assert "count" in seen.split("Text")[1], seen


async def test_the_call_goes_through_mcp_and_is_audited(hub: Hub, upstream: Upstream) -> None:
    browser, api, upstream_id = await tried(hub, upstream, "audited")
    me = (await api.get("/api/v1/users/me")).body
    await stream_lines(browser, upstream_id, "pixel", {})
    deadline = time.monotonic() + 10
    rows: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not rows:
        audit = await call("GET", f"{hub.url}/api/v1/admin/audit?user_id={me['id']}",
                           token=hub.admin_token)
        rows = audit.body["items"]
        await anyio.sleep(0.2)
    assert [(row["upstream_name"], row["tool"], row["outcome"]) for row in rows] == \
        [("audited", "pixel", "ok")]


async def test_a_switched_off_tool_cannot_be_tried(hub: Hub, upstream: Upstream) -> None:
    browser, api, upstream_id = await tried(hub, upstream)
    await api.patch(f"{UPSTREAMS}/{upstream_id}", {"disabled_tools": ["pixel"]})
    page = await browser.request("GET", try_path(upstream_id) + "?tool=pixel")
    assert page.status == 200 and escape(NOT_ON_MCP) in page.text
    assert 'name="tool"' not in page.text
    refused = await post_try(browser, upstream_id, "pixel")
    assert refused.status == 409 and escape(NOT_ON_MCP) in refused.text
    tools = await browser.request("GET", f"/console/upstreams/{upstream_id}/tools")
    assert "try?tool=count" in tools.text and "try?tool=pixel" not in tools.text


async def test_refusals_csrf_origin_and_another_users_upstream(
        hub: Hub, upstream: Upstream) -> None:
    owner, _, theirs = await tried(hub, upstream, "owned")
    browser, _, mine = await tried(hub, upstream, "mine")
    form = {"csrf_token": browser.session().csrf, "tool": "pixel"}
    assert (await browser.post(try_path(mine), {**form, "csrf_token": "x"})).status == 403
    assert (await browser.post(try_path(mine), form, origin="http://evil.example")).status == 403
    assert (await browser.post(try_path(mine), form, origin=None)).status == 403
    for path in (try_path(theirs) + "?tool=pixel", try_path(theirs) + "?tool=nope",
                 try_path("../" + theirs) + "?tool=pixel"):
        page = await browser.request("GET", path)
        assert page.status == 404 and "owned" not in page.text, path
    posted = await browser.post(try_path(theirs), form)
    assert posted.status == 404 and "owned" not in posted.text
    assert (await browser.request("GET", try_path(mine) + "?tool=nope")).status == 404
    assert (await browser.request("GET", try_path(mine))).status == 404
    assert (await owner.request("GET", try_path(theirs) + "?tool=pixel")).status == 200
