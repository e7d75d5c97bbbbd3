""""Try a tool" in real headless Chromium (one Chromium from test_console_browser.py; the hub
and the try server from test_console_try.py): a tool picked from its upstream's tools page,
its form filled in, the call's progress bar moving while the tool runs and its result shown
after - without a page reload; an image result drawn (that call made by keyboard alone); an
argument the schema refuses shown at its field, then fixed; a long call stopped. Screenshots
at 1280 and 390 px."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from tests.console import test_console_browser as chromium
from tests.console import test_console_try as tries
from tests.console.test_console_browser import STEP_MS, new_page, shoot, sign_in_here
from tests.hub.hub_browser import set_password
from tests.hub.hub_helpers import UPSTREAMS, Hub, Upstream, fresh_user

pytestmark = pytest.mark.anyio
anyio_backend, browser = chromium.anyio_backend, chromium.browser
hub, upstream = tries.hub, tries.upstream


async def until(page: Any, expression: str) -> bool:
    """Whether `expression` becomes true within STEP_MS (polled: the console's CSP forbids the
    eval that Playwright's wait_for_function uses)."""
    for _ in range(STEP_MS // 50):
        if await page.evaluate(expression):
            return True
        await anyio.sleep(0.05)
    return False


async def test_try_tools_with_progress_an_image_a_fixed_error_and_a_stop(
        hub: Hub, upstream: Upstream, browser: Any) -> None:
    user_id, api = await fresh_user(hub)
    name, password = await set_password(hub, user_id)
    created = await api.create_upstream(name="tries", url=upstream.url, transport="http")
    assert (await api.get(f"{UPSTREAMS}/{created['id']}/tools?refresh=true")).status == 200
    context, page = await new_page(browser)
    try:
        await page.goto(f"{hub.url}/console/upstreams/{created['id']}/tools")
        await sign_in_here(page, name, password)
        await page.locator("tr[data-tool=count] a:has-text('Try')").click()
        await page.wait_for_selector("h1:has-text('Try count')")
        await page.evaluate("window.stillThisPage = true")  # gone if the page reloads
        await shoot(page, "try-form")

        # progress while it runs, then the result, on the same page
        await page.fill("[name='arg.steps']", "4")
        await page.fill("[name='arg.delay']", "0.5")
        await page.click("button:has-text('Call the tool')")
        assert await until(page, "document.querySelector('#try-status progress').value >= 1 "
                                     "&& !document.querySelector('#try-result h2')")
        assert "counted" in (await page.locator("#try-status").text_content() or "")
        await shoot(page, "try-progress")
        await page.wait_for_selector("#try-result h2:has-text('Result')")
        assert "counted to 4" in (await page.locator("#try-result").text_content() or "")
        assert await page.locator("#try-status").is_hidden()
        assert await page.evaluate("window.stillThisPage === true")
        await shoot(page, "try-result")

        # an image result, drawn; called by keyboard alone (Tab to the button, Enter), the
        # focus then on the result
        await page.goto(f"{hub.url}/console/upstreams/{created['id']}/try?tool=pixel")
        for _ in range(40):
            await page.keyboard.press("Tab")
            if await page.evaluate("document.activeElement.textContent.trim()") == \
                    "Call the tool":
                break
        await page.keyboard.press("Enter")
        image = page.locator("#try-result img")
        await image.wait_for()
        assert await page.evaluate("document.activeElement.id") == "try-result"
        assert await image.evaluate("img => img.complete && img.naturalWidth") == 2
        await shoot(page, "try-image")

        # an argument the form cannot read, shown at its field, then fixed
        await page.goto(f"{hub.url}/console/upstreams/{created['id']}/try?tool=describe")
        await page.fill("[name='arg.name']", "Ann")
        await page.fill("[name='arg.times']", "two")
        await page.click("button:has-text('Call the tool')")
        error = page.locator(".field.invalid .field-error")
        await error.wait_for()
        assert "whole number" in (await error.text_content() or "")  # what was wrong with "two"
        assert await page.locator("[name='arg.times']").input_value() == "two"
        assert await page.locator("[name='arg.times']").get_attribute("aria-invalid") == "true"
        await page.fill("[name='arg.times']", "2")
        await page.click("button:has-text('Call the tool')")
        await page.wait_for_selector("#try-result figcaption:has-text('Structured content')")
        assert '"times": 2' in (await page.locator("#try-result").text_content() or "")

        # a long call, stopped
        await page.goto(f"{hub.url}/console/upstreams/{created['id']}/try?tool=count")
        await page.fill("[name='arg.steps']", "100")
        await page.fill("[name='arg.delay']", "0.2")
        await page.click("button:has-text('Call the tool')")
        assert await until(page, "document.querySelector('#try-status progress').value >= 1")
        await page.click("button:has-text('Stop')")
        await page.wait_for_selector("#try-status:has-text('Stopped')")
        assert await page.locator("button:has-text('Call the tool')").is_enabled()
    finally:
        await context.close()
