"""The console end to end in real headless Chromium (Debian's chromium driven by Playwright,
tests/browser.py): sign in with a hub password account on the hub's sign-in page, add an
upstream with a validation error shown next to its field and then fixed, see it listed with
its health, refresh it, remove it, sign out. Every page is saved as a PNG at 1280 px and at
390 px (phone) width in artifacts/screenshots/ (the README names it; CI keeps it)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.console.support import console_hub
from tests.hub.hub_browser import set_password
from tests.hub.hub_helpers import ROOT, UPSTREAMS, Hub, Upstream, echo_server, fresh_user

pytestmark = pytest.mark.anyio

SCREENSHOTS = ROOT / "artifacts" / "screenshots"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
STEP_MS = 15_000


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    tmp: Path = tmp_path_factory.mktemp("console-browser")
    with console_hub(f"sqlite+aiosqlite:///{tmp / 'hub.db'}") as running:
        yield running


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with echo_server() as served:
        yield served


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def browser(anyio_backend: str) -> AsyncIterator[Any]:
    """One Chromium for the module."""
    from playwright.async_api import async_playwright
    from tests.browser import CHROMIUM_ARGS, chromium_path

    executable = chromium_path()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=executable, headless=True,
                                                    args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


async def new_page(launched: Any, viewport: dict[str, int] = DESKTOP) -> tuple[Any, Any]:
    """A fresh browser context (its own cookies: another browser profile) and its page."""
    context = await launched.new_context(viewport=viewport)
    page = await context.new_page()
    page.set_default_timeout(STEP_MS)
    return context, page


async def sign_in_here(page: Any, name: str, password: str) -> None:
    """Fill in and send the hub's sign-in page the browser is on (a password account)."""
    await page.fill("input[name=username]", name)
    await page.fill("input[name=password]", password)
    await page.click("button[value=sign-in]")


async def shoot(page: Any, name: str) -> None:
    """The page as PNGs at desktop and phone width (the desktop size restored after)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for suffix, size in (("1280", DESKTOP), ("390", PHONE)):
        await page.set_viewport_size(size)
        await page.screenshot(path=str(SCREENSHOTS / f"{name}-{suffix}.png"), full_page=True)
    await page.set_viewport_size(DESKTOP)


async def test_sign_in_add_fix_list_refresh_remove_sign_out(
        hub: Hub, upstream: Upstream, browser: Any) -> None:
    user_id, api = await fresh_user(hub)
    name, password = await set_password(hub, user_id)
    context, page = await new_page(browser, DESKTOP)
    try:
        # signing in: the console sends the browser to the hub's sign-in page
        await page.goto(hub.url + "/")
        await page.wait_for_selector("input[name=username]")
        await shoot(page, "sign-in")
        await sign_in_here(page, name, password)
        await page.wait_for_selector("h1:has-text('Your upstreams')")
        assert page.url == hub.url + "/"
        await shoot(page, "upstreams-empty")

        # adding, with a wrong name first: the API's message next to the name field
        await page.click("text=Add upstream")
        await page.wait_for_selector("form.upstream-form")
        await shoot(page, "upstream-add")
        await page.evaluate("window.stillThisPage = true")  # gone if the page reloads
        await page.fill("#name", "Not A Slug!")
        await page.fill("#url", upstream.url)
        await page.click("button:has-text('Add upstream')")
        error = page.locator("#name-error")
        await error.wait_for()
        said = await api.post(UPSTREAMS, {"name": "Not A Slug!", "url": upstream.url})
        assert said.status == 422 and said.error["field"] == "name"
        assert (await error.text_content() or "").strip() == said.error["message"]
        assert await page.get_attribute("#name", "aria-invalid") == "true"
        assert "name-error" in (await page.get_attribute("#name", "aria-describedby") or "")
        assert await page.input_value("#url") == upstream.url  # what was typed is kept
        await shoot(page, "upstream-add-error")
        await page.fill("#name", "echoes")
        await page.click("button:has-text('Add upstream')")
        row = page.locator("tr[data-upstream=echoes]")
        await row.wait_for()
        assert await page.evaluate("window.stillThisPage === true")  # enhanced: no reload
        assert page.url.startswith(hub.url + "/?notice=added")
        assert "Upstream added." in (await page.locator("[role=status]").text_content() or "")

        # listed with its health; refresh now
        await row.locator("button:has-text('Refresh now')").click()
        await page.wait_for_selector("[role=status]:has-text('Catalog refreshed.')")
        row = page.locator("tr[data-upstream=echoes]")
        assert (await row.locator(".badge").first.text_content() or "").strip() == "healthy"
        assert (await row.locator("td[data-label=Tools]").text_content() or "").strip() == "1"
        assert (await row.locator("td[data-label=Transport]").text_content() or "") == "http"
        assert "UTC" in (await row.locator("td[data-label='Last checked']").text_content()
                         or "")
        await shoot(page, "upstreams")

        # editing shows the stored values
        await row.locator("a:has-text('Edit')").click()
        await page.wait_for_selector("h1:has-text('Edit echoes')")
        assert await page.input_value("#url") == upstream.url
        await shoot(page, "upstream-edit")
        await page.click("text=Cancel")

        # removing, after a confirmation page
        await page.locator("tr[data-upstream=echoes] a:has-text('Remove')").click()
        await page.wait_for_selector("h1:has-text('Remove echoes?')")
        await shoot(page, "upstream-remove")
        await page.click("button:has-text('Remove')")
        await page.wait_for_selector("[role=status]:has-text('Upstream removed.')")
        assert await page.locator("tr[data-upstream=echoes]").count() == 0
        listed = await api.get(UPSTREAMS)
        assert listed.body["items"] == []

        # keyboard: the skip link is the first stop and leads to the content
        await page.keyboard.press("Tab")
        assert await page.evaluate("document.activeElement.textContent") == "Skip to content"

        # signing out
        await page.click("button:has-text('Sign out')")
        await page.wait_for_selector("h1:has-text('You are signed out')")
        await shoot(page, "signed-out")
        assert not [cookie for cookie in await context.cookies()
                    if cookie["name"] == "mcpkit_console"]
    finally:
        await context.close()


async def test_a_page_is_readable_at_phone_width(hub: Hub, browser: Any) -> None:
    """At 390 px nothing scrolls sideways (the list is one card per upstream); a click while
    the hub is unreachable shows an error in the page."""
    user_id, api = await fresh_user(hub)
    name, password = await set_password(hub, user_id)
    for number in range(3):
        await api.create_upstream(name=f"phone-{number}", url="http://127.0.0.1:9/mcp")
    context, page = await new_page(browser, PHONE)
    try:
        await page.goto(hub.url + "/")
        await sign_in_here(page, name, password)
        await page.wait_for_selector("tr[data-upstream=phone-2]")
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], width
        # the hub unreachable mid-click: the page says so and the button works again
        await page.route("**/refresh", lambda route: route.abort())
        button = page.locator("tr[data-upstream=phone-0] button:has-text('Refresh now')")
        await button.click()
        alert = page.locator("tr[data-upstream=phone-0] .alert.network")
        await alert.wait_for()
        assert "could not be reached" in (await alert.text_content() or "")
        assert await button.is_enabled()
        assert await button.get_attribute("aria-busy") is None
        # its own label back, the name for screen readers still hidden from sight
        assert await button.locator(".visually-hidden").count() == 1
        await shoot(page, "upstreams-network-error")
    finally:
        await context.close()
