"""API tokens, "Connect a client" and single-tool switches in real headless Chromium (the
module fixtures of test_console_browser.py: one Chromium, the hub, the echo upstream): a
token created and seen once, working at /mcp, then revoked; a tool switched off and gone
from the hub's /mcp `tools/list` (mcpkit's Client with that API token), then on again - all
without a page reload. Screenshots at 1280 and 390 px in artifacts/screenshots/."""

from __future__ import annotations

from typing import Any

import pytest
from tests.console import test_console_browser as chromium
from tests.console.test_console_browser import new_page, shoot, sign_in_here
from tests.console.test_console_tokens import refused_at_mcp
from tests.console.test_console_tools import echo_upstream, hub_tools
from tests.hub.hub_browser import set_password
from tests.hub.hub_helpers import Hub, Upstream, fresh_user

pytestmark = pytest.mark.anyio
# the module fixtures of the console's Chromium test: one Chromium, the hub, the echo upstream
anyio_backend, browser, hub, upstream = (chromium.anyio_backend, chromium.browser,
                                         chromium.hub, chromium.upstream)


async def test_create_see_once_and_revoke_a_token_and_switch_a_tool_off_and_on(
        hub: Hub, upstream: Upstream, browser: Any) -> None:
    user_id, api = await fresh_user(hub)
    name, password = await set_password(hub, user_id)
    created = await echo_upstream(api, upstream, "echoes")
    context, page = await new_page(browser)
    try:
        await page.goto(hub.url + "/console/tokens")
        await sign_in_here(page, name, password)
        await page.wait_for_selector("h1:has-text('API tokens')")
        await page.evaluate("window.stillThisPage = true")  # gone if the page reloads

        # created: the secret shown once, with a copy button
        await page.fill("#token-name", "browser")
        await page.fill("#token-expiry", "30")
        await page.click("button:has-text('Create token')")
        await page.wait_for_selector("#new-secret")
        assert await page.evaluate("window.stillThisPage === true")
        secret = (await page.locator("#new-secret").text_content() or "").strip()
        assert secret.startswith("mcphub_"), secret
        assert await page.locator("button[data-copy=new-secret]").is_visible()
        await shoot(page, "tokens-created")
        assert sorted(await hub_tools(hub, secret)) == sorted(await hub_tools(hub, api.token
                                                                             or ""))
        # never again: the list shows its prefix only
        await page.click("nav >> text=API tokens")
        row = page.locator("tr[data-token=browser]")
        await row.wait_for()
        assert secret not in await page.content()
        await shoot(page, "tokens")

        # a tool switched off leaves /mcp, on again comes back; the page is never reloaded
        await page.goto(hub.url + "/")
        await page.locator("tr[data-upstream=echoes] a:has-text('Tools')").click()
        await page.wait_for_selector("h1:has-text('Tools of echoes')")
        await page.evaluate("window.stillThisPage = true")  # a link was followed: set again
        switch = page.locator("tr[data-tool=echo] button[role=switch]")
        assert await switch.get_attribute("aria-checked") == "true"
        before = await hub_tools(hub, secret)
        assert len(before) == 1
        await switch.click()
        await page.wait_for_selector("[role=status]:has-text('Tool disabled')")
        assert await page.evaluate("window.stillThisPage === true")
        switch = page.locator("tr[data-tool=echo] button[role=switch]")
        assert await switch.get_attribute("aria-checked") == "false"
        assert await hub_tools(hub, secret) == []
        await shoot(page, "upstream-tools")
        await switch.click()
        await page.wait_for_selector("[role=status]:has-text('Tool enabled')")
        assert await page.locator("tr[data-tool=echo] button[role=switch]").get_attribute(
            "aria-checked") == "true"
        assert await hub_tools(hub, secret) == before
        assert (await api.get(f"/api/v1/users/mcp/upstreams/{created['id']}")).body[
            "disabled_tools"] == []

        # the snippets page
        await page.click("nav >> text=Connect a client")
        await page.wait_for_selector("h1:has-text('Connect a client')")
        assert hub.settings.mcp_url in (await page.locator("#mcp-url").text_content() or "")
        await shoot(page, "connect")

        # revoked after a confirmation: it stops working at /mcp
        await page.click("nav >> text=API tokens")
        await page.locator("tr[data-token=browser] a:has-text('Revoke')").click()
        await page.wait_for_selector("h1:has-text('Revoke the token')")
        await shoot(page, "token-revoke")
        await page.click("button:has-text('Revoke')")
        await page.wait_for_selector("[role=status]:has-text('Token revoked')")
        state = page.locator("tr[data-token=browser] td[data-label=State]")
        assert (await state.text_content() or "").strip() == "revoked"
        assert await refused_at_mcp(hub, secret)
    finally:
        await context.close()
