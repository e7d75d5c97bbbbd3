"""Through the hub's sign-in page and its OpenID Connect provider (tests/auth_e2e's
oidc-provider), as a browser would: plain HTTP with a cookie jar (`OidcWalk`, also an OAuth
`redirect` handler), or real headless Chromium (`BrowserOidcLogin`).

On the hub's sign-in page the "Sign in with …" form is chosen (not the password form); at the
provider the login form gets the account name (any password: its development pages); the
provider's consent and the hub's consent are allowed. A walk stops at the redirect back to the
client, or at a page without a form (an error page: `Stopped` holds its status and text), or
- `stop_at_callback` - at the provider's redirect to the hub's callback, so a test can tamper
with it."""

from __future__ import annotations

import html.parser
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from tests.auth_e2e.logins import browse_to_redirect, fill_provider_login
from tests.form_walk import MAX_STEPS, STEP_TIMEOUT_S
from tests.procs import free_port

from mcpkit.client.oauth import DEFAULT_REDIRECT_URI

CALLBACK_PATH = "/oauth/oidc/callback"


class Forms(html.parser.HTMLParser):
    """Every form of a page: (action, fields) in order; a `name="action"` button's value is
    the field `action`."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self.forms.append((found.get("action") or "", {}))
        elif tag in ("input", "button") and self.forms and found.get("name"):
            fields = self.forms[-1][1]
            fields.setdefault(str(found["name"]), found.get("value") or "")


def on_hub(url: str, hub_url: str) -> bool:
    return urllib.parse.urlsplit(url).netloc == urllib.parse.urlsplit(hub_url).netloc


@dataclass
class Stopped:
    """Where a walk stopped short of the client: an error page, or the callback URL."""

    url: str
    status: int = 0
    text: str = field(default="", repr=False)
    pages: list[str] = field(default_factory=list)


@dataclass
class OidcWalk:
    """Signs `account` in at the provider from the hub's sign-in page (one cookie jar: one
    browser profile)."""

    hub_url: str
    account: str
    redirect_uri: str = DEFAULT_REDIRECT_URI
    jar: aiohttp.CookieJar = field(default_factory=lambda: aiohttp.CookieJar(unsafe=True))
    pages: list[str] = field(default_factory=list)
    """The pages shown: "hub:login", "provider:login", "provider:consent", "hub:consent"."""

    async def __call__(self, authorization_url: str) -> str:
        """The OAuth client's redirect handler: the URL back at the client."""
        ended = await self.walk(authorization_url)
        assert isinstance(ended, str), f"the sign-in stopped at {ended}"
        return ended

    async def walk(self, url: str, *, stop_at_callback: bool = False) -> str | Stopped:
        back = urllib.parse.urlsplit(self.redirect_uri).path  # any loopback port (RFC 8252)
        timeout = aiohttp.ClientTimeout(total=STEP_TIMEOUT_S)
        async with aiohttp.ClientSession(cookie_jar=self.jar, timeout=timeout) as http:
            form: dict[str, str] | None = None
            for _ in range(MAX_STEPS):
                if stop_at_callback and urllib.parse.urlsplit(url).path == CALLBACK_PATH:
                    return Stopped(url, pages=list(self.pages))
                request = http.post(url, data=form, allow_redirects=False) \
                    if form is not None else http.get(url, allow_redirects=False)
                async with request as reply:
                    text = await reply.text()
                    status, location = reply.status, reply.headers.get("Location")
                if status in (302, 303) and location:
                    url, form = urllib.parse.urljoin(url, location), None
                    if urllib.parse.urlsplit(url).path == back:
                        return url
                    continue
                parsed = Forms()
                parsed.feed(text)
                if status != 200 or not parsed.forms:
                    return Stopped(url, status, text, list(self.pages))
                url, form = self._fill(url, parsed.forms)
        raise AssertionError(f"no end after {MAX_STEPS} requests")

    def _fill(self, url: str, forms: list[tuple[str, dict[str, str]]]
              ) -> tuple[str, dict[str, str]]:
        side = "hub" if on_hub(url, self.hub_url) else "provider"
        if side == "hub":
            oidc = [f for f in forms if f[1].get("action") == "oidc"]
            action, fields = oidc[0] if oidc else forms[0]
            prompt = "login" if oidc else fields.get("prompt", "?")
            if prompt == "consent":
                fields["action"] = "allow"
        else:
            action, fields = forms[0]
            prompt = fields.get("prompt", "?")
            if "login" in fields:
                fields.update(login=self.account, password="any password")
        self.pages.append(f"{side}:{prompt}")
        return urllib.parse.urljoin(url, action), fields


@dataclass
class BrowserOidcLogin:
    """Real headless Chromium from the hub's sign-in page through the provider and back; the
    client's redirect arrives at a real loopback listener on `redirect_uri`."""

    executable: str
    hub_url: str
    account: str
    redirect_uri: str = field(
        default_factory=lambda: f"http://127.0.0.1:{free_port()}/callback")
    pages: list[str] = field(default_factory=list)

    async def __call__(self, authorization_url: str) -> str:
        return await browse_to_redirect(self.executable, authorization_url, self.redirect_uri,
                                        self._button)

    async def _button(self, page: Any) -> Any:
        hub_page = on_hub(page.url, self.hub_url)
        if hub_page and await page.locator("button[value=oidc]").count():
            self.pages.append("hub:login")
            return page.locator("button[value=oidc]")
        if hub_page:
            self.pages.append("hub:consent")
            return page.locator("button[value=allow]")
        await fill_provider_login(page, self.account)
        self.pages.append("provider:" + str(
            await page.locator("input[name=prompt]").get_attribute("value")))
        return page.locator("button[type=submit]").first
