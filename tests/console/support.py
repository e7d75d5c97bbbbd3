"""A scripted browser for the console over plain HTTP (a cookie jar, no redirect followed):
its sign-in through the hub's own sign-in page, its pages, and its forms with the session's
CSRF token. The console's end-to-end test in Chromium is test_console_browser.py."""

from __future__ import annotations

import contextlib
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from tests.form_walk import STEP_TIMEOUT_S, FirstForm
from tests.hub.hub_helpers import Hub, Reply, seed_admin
from tests.hub.router.support import hub_app
from tests.procs import free_port, serve_in_thread
from yarl import URL

from mcpkit.hub.console.session import COOKIE, Session, open_sealed
from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.settings import HubSettings

CSRF_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')
CSRF_ATTEMPTS = ["missing", "wrong", "cross-origin", "no-origin"]
"""The ways a forged state change comes (`forged`)."""


def forged(form: dict[str, str], attempt: str) -> tuple[dict[str, str], str | None]:
    """`form` (holding the session's csrf_token) as a forged POST sends it, and the Origin it
    comes with (`ConsoleBrowser.post`'s `origin`): the token left out, a wrong token, another
    site's Origin, or no Origin at all (nor Referer)."""
    form = dict(form)
    if attempt == "missing":
        del form["csrf_token"]
    elif attempt == "wrong":
        csrf = form["csrf_token"]
        form["csrf_token"] = csrf[:-2] + ("AA" if not csrf.endswith("AA") else "BB")
    elif attempt == "cross-origin":
        return form, "http://evil.example"
    elif attempt == "no-origin":
        return form, None
    return form, "own"


@contextlib.contextmanager
def console_hub(database_url: str, *, port: int | None = None,
                **settings: Any) -> Iterator[Hub]:
    """A hub serving the console, its API and its /mcp on a free 127.0.0.1 port, or `port`
    when a provider must know it in advance (its issuer, so the sign-in's redirects come back
    to it), an admin seeded; private upstreams allowed and failed-token limits per address
    lifted (their own tests are elsewhere)."""
    box = SecretBox([generate_key()])
    token = seed_admin(database_url, box)
    port = port or free_port()
    hub_settings = HubSettings(database_url=database_url, port=port,
                               allow_private_upstreams=True, auth_failure_burst=1_000_000,
                               **settings)
    with serve_in_thread(hub_app(hub_settings, box), lifespan="on", name="hub",
                         port=port) as url:
        yield Hub(url, token, database_url, hub_settings, box)


@dataclass
class ConsoleBrowser:
    hub: Hub
    jar: aiohttp.CookieJar = field(default_factory=lambda: aiohttp.CookieJar(unsafe=True))
    last_set_cookies: list[str] = field(default_factory=list)

    async def request(self, method: str, path: str, **kwargs: Any) -> Reply:
        url = path if path.startswith("http") else self.hub.url + path
        timeout = aiohttp.ClientTimeout(total=STEP_TIMEOUT_S)
        async with aiohttp.ClientSession(cookie_jar=self.jar, timeout=timeout) as http, \
                http.request(method, url, allow_redirects=False, **kwargs) as reply:
            self.last_set_cookies = reply.headers.getall("Set-Cookie", [])
            return Reply(reply.status, await reply.text(), reply.headers)

    async def sign_in(self, name: str, password: str) -> Reply:
        """The whole sign-in: the console's start, the hub's sign-in page (password), the
        callback; the callback's answer (a 303 to the console)."""
        started = await self.request("GET", "/console/sign-in?next=/")
        assert started.status == 303, started.text
        authorize = started.headers["Location"]
        page = await self.request("GET", authorize)
        if page.status == 200:  # the hub's sign-in page (skipped when already signed in)
            form = FirstForm()
            form.feed(page.text)
            assert form.action is not None, page.text
            fields = {**form.fields, "username": name, "password": password,
                      "action": "sign-in"}
            posted = await self.request("POST", urllib.parse.urljoin(
                self.hub.url + "/", form.action), data=fields)
            assert posted.status == 302, f"{posted.status}: {posted.text[:300]}"
            back = posted.headers["Location"]
        else:
            assert page.status == 302, page.text
            back = page.headers["Location"]
        assert back.startswith(self.hub.url + "/console/callback?"), back
        return await self.request("GET", back)

    def plant(self, value: str) -> None:
        """Set the console's cookie in this browser, as the hub would (same host and path)."""
        self.jar.update_cookies({COOKIE: value}, response_url=URL(self.hub.url + "/"))

    def cookie(self, name: str = COOKIE) -> str | None:
        for morsel in self.jar:
            if morsel.key == name:
                return morsel.value
        return None

    def session(self) -> Session:
        """The session the console's cookie holds (the test has the hub's key)."""
        session = open_sealed(self.hub.box, self.cookie())
        assert session is not None
        return session

    async def csrf(self, path: str = "/") -> str:
        page = await self.request("GET", path)
        assert page.status == 200, page.text
        found = CSRF_FIELD.search(page.text)
        assert found is not None, page.text
        return found.group(1)

    async def post(self, path: str, fields: dict[str, str], *,
                   origin: str | None = "own") -> Reply:
        headers = {} if origin is None else {
            "Origin": self.hub.url if origin == "own" else origin}
        return await self.request("POST", path, data=fields, headers=headers)
