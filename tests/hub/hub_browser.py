"""A scripted browser signed in to the hub as one user (plain HTTP with a cookie jar, as
tests/form_walk.py drives forms): it opens a hub page that asks for a sign-in - the
upstream-login callback - and, when the hub's sign-in page answers, fills its password form,
follows the redirect back to the page, and returns that page's answer.

    browser = await hub_browser(hub, user_id)   # a password set for the user (in the store)
    reply = await browser.open(callback_url)     # signed in on the way when asked
"""

from __future__ import annotations

import secrets
import urllib.parse
from dataclasses import dataclass, field

import aiohttp
from tests.form_walk import STEP_TIMEOUT_S, FirstForm
from tests.hub.hub_helpers import Hub, Reply

from mcpkit.hub.passwords import hash_password
from mcpkit.hub.store import Store

SIGN_IN_TITLE = "Sign in to the mcpkit hub"


@dataclass
class HubBrowser:
    """One browser profile: its cookies (the hub's session once signed in) kept across
    `open`s; `password=None` never signs in (the page is returned as shown)."""

    name: str
    password: str | None
    jar: aiohttp.CookieJar = field(default_factory=lambda: aiohttp.CookieJar(unsafe=True))
    pages: list[str] = field(default_factory=list)
    """"sign-in" each time the hub's sign-in page was filled in."""

    async def open(self, url: str) -> Reply:
        """GET `url` (no redirect followed); when it is the hub's sign-in page and this
        browser has a password: sign in, and open the page it sends back to (a 303 to the
        same URL), whose answer is returned."""
        reply = await self.request("GET", url)
        if self.password is None or reply.status != 200 or SIGN_IN_TITLE not in reply.text:
            return reply
        form = FirstForm()
        form.feed(reply.text)
        assert form.action is not None, reply.text
        self.pages.append("sign-in")
        fields = {**form.fields, "username": self.name, "password": self.password,
                  "action": "sign-in"}
        signed = await self.request("POST", urllib.parse.urljoin(url, form.action), data=fields)
        assert signed.status == 303, f"the sign-in answered {signed.status}: {signed.text[:300]}"
        back = urllib.parse.urljoin(url, signed.headers["Location"])
        assert same_page(back, url), f"the sign-in went back to {back}, not {url}"
        return await self.request("GET", back)

    async def request(self, method: str, url: str, **kwargs: object) -> Reply:
        timeout = aiohttp.ClientTimeout(total=STEP_TIMEOUT_S)
        async with aiohttp.ClientSession(cookie_jar=self.jar, timeout=timeout) as http, \
                http.request(method, url, allow_redirects=False, **kwargs) as reply:  # type: ignore[arg-type]
            return Reply(reply.status, await reply.text(), reply.headers)


def same_page(one: str, other: str) -> bool:
    """The same URL, however its query is percent-encoded."""
    first, second = urllib.parse.urlsplit(one), urllib.parse.urlsplit(other)
    return first[:3] == second[:3] and urllib.parse.parse_qs(first.query) == \
        urllib.parse.parse_qs(second.query)


async def set_password(hub: Hub, user_id: int) -> tuple[str, str]:
    """A new password for the user (in the hub's store): (their name, the password)."""
    password = "pw-" + secrets.token_urlsafe(12)
    async with await Store.open(hub.database_url, hub.box, migrate=False) as store:
        await store.users.set_password_hash(user_id, hash_password(password))
        name = (await store.users.get(user_id)).name
    return name, password


async def hub_browser(hub: Hub, user_id: int) -> HubBrowser:
    """A fresh browser that signs in as the user (a password set for them now)."""
    name, password = await set_password(hub, user_id)
    return HubBrowser(name, password)
