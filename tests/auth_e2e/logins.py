"""Ways through the provider's login and consent pages, as OAuth `redirect` handlers: each
takes the authorization URL and returns the final redirect URL (code, state, iss), the way a
user's browser would bring it back.

    FormLogin     scripted: plain HTTP (aiohttp, with a cookie jar) submits the pages' forms
                  and stops at the redirect to the redirect URI (nothing listens there)
    BrowserLogin  real headless Chromium (Playwright): fills the login form, presses the
                  consent button, and is redirected to a real loopback listener

Both record the pages they went through (`pages`, by the form's `prompt`: "login",
"consent"), so a test can tell a full login from a consent-only re-authorization."""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from tests.form_walk import MAX_STEPS, STEP_TIMEOUT_S, walk
from tests.procs import free_port, serving

from mcpkit.client.oauth import DEFAULT_REDIRECT_URI


@dataclass
class FormLogin:
    """Logs `user` in and consents, over plain HTTP; keeps its cookies across calls (the
    provider's session), like one browser profile."""

    user: str = "ada"
    redirect_uri: str = DEFAULT_REDIRECT_URI
    pages: list[str] = field(default_factory=list)
    """The login/consent pages shown, in order ("login", "consent")."""
    returned: list[list[str]] = field(default_factory=list)
    """The parameter names of each redirect back to the client (never their values)."""
    _jar: aiohttp.CookieJar | None = None

    async def __call__(self, authorization_url: str) -> str:
        if self._jar is None:
            self._jar = aiohttp.CookieJar(unsafe=True)  # cookies for an IP-address host
        url = await walk(authorization_url, self._jar,
                         arrived=lambda url: url.startswith(self.redirect_uri), fill=self._fill)
        self.returned.append(sorted(urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)))
        return url

    def _fill(self, fields: dict[str, str]) -> dict[str, str]:
        self.pages.append(fields.get("prompt", "?"))
        if "login" in fields:
            fields.update(login=self.user, password="any password")  # devInteractions
        return fields


@dataclass
class BrowserLogin:
    """Real headless Chromium through the provider's pages, one fresh browser profile per
    authorization (so each is a full login and consent). The redirect comes back, as it would
    for `mcp login`, to a loopback listener on `redirect_uri` (give it to `OAuth`), which
    answers the browser and hands the URL over."""

    executable: str
    user: str = "ada"
    redirect_uri: str = field(
        default_factory=lambda: f"http://127.0.0.1:{free_port()}/callback")
    pages: list[str] = field(default_factory=list)
    """The login/consent pages shown, in order ("login", "consent")."""

    async def __call__(self, authorization_url: str) -> str:
        return await browse_to_redirect(self.executable, authorization_url, self.redirect_uri,
                                        self._submit_button)

    async def _submit_button(self, page: Any) -> Any:
        self.pages.append(await page.locator("input[name=prompt]").get_attribute("value"))
        await fill_provider_login(page, self.user)
        return page.locator("button[type=submit]")


async def browse_to_redirect(executable: str, authorization_url: str, redirect_uri: str,
                             choose_button: Callable[[Any], Awaitable[Any]]) -> str:
    """Real headless Chromium from `authorization_url` until the redirect arrives at a loopback
    listener on `redirect_uri`; the URL it arrived at. On each page (once its submit button
    shows) `choose_button(page)` fills what it must and names the button to press."""
    from playwright.async_api import async_playwright
    from tests.browser import CHROMIUM_ARGS

    async with loopback_listener(redirect_uri) as arrived, async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(authorization_url, timeout=STEP_TIMEOUT_S * 1000)
            for _ in range(MAX_STEPS):
                if arrived:
                    return arrived[0]
                await page.locator("button[type=submit]").first.wait_for(
                    timeout=STEP_TIMEOUT_S * 1000)
                button = await choose_button(page)
                async with page.expect_navigation(timeout=STEP_TIMEOUT_S * 1000):
                    await button.click()
            raise AssertionError(f"no redirect to {redirect_uri} after {MAX_STEPS} pages")
        finally:
            await browser.close()


async def fill_provider_login(page: Any, account: str) -> None:
    """On oidc-provider's login page (its development pages take any password), the account's
    name; any other page is left as it is."""
    if await page.locator("input[name=login]").count():
        await page.fill("input[name=login]", account)
        await page.fill("input[name=password]", "any password")


@contextlib.asynccontextmanager
async def loopback_listener(redirect_uri: str) -> AsyncIterator[list[str]]:
    """An HTTP listener at `redirect_uri` for the block; yields the list the URLs it was
    sent to arrive in."""
    arrived: list[str] = []
    where = urllib.parse.urlsplit(redirect_uri)

    async def callback(request: web.Request) -> web.Response:
        arrived.append(f"{redirect_uri}?{request.query_string}")
        return web.Response(text="<title>done</title>You may close this window.",
                            content_type="text/html")

    app = web.Application()
    app.router.add_get(where.path, callback)
    async with serving(app, where.port, where.hostname):
        yield arrived
