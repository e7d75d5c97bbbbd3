"""A scripted browser for server-rendered sign-in and consent pages (plain HTTP, a cookie
jar): GET the authorization URL, follow redirects, submit each page's first form as `fill`
completes it, and stop at the redirect back to the client. Used by the OAuth redirect
handlers of the oidc-provider tests (tests/auth_e2e/logins.py) and the hub's
(tests/hub/oauth_login.py)."""

from __future__ import annotations

import html.parser
import urllib.parse
from collections.abc import Callable

import aiohttp

MAX_STEPS = 16
"""Requests one authorization may take (redirects and forms) before it gives up."""
STEP_TIMEOUT_S = 15.0


class FirstForm(html.parser.HTMLParser):
    """The first form of a page: its action, its inputs' names and values, and the values of
    its `name="action"` buttons."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}
        self.buttons: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form" and self.action is None:
            self.action = found.get("action") or ""
        elif tag == "input" and self.action is not None and found.get("name"):
            self.fields[str(found["name"])] = found.get("value") or ""
        elif tag == "button" and found.get("name") == "action":
            self.buttons.append(found.get("value") or "")


async def walk(authorization_url: str, jar: aiohttp.CookieJar, *,
               arrived: Callable[[str], bool],
               fill: Callable[[dict[str, str]], dict[str, str]]) -> str:
    """The URL the pages redirect back to (the first for which `arrived` is true). Each page's
    first form is submitted with `fill(fields)`; any other answer than a page or a redirect
    fails the test."""
    timeout = aiohttp.ClientTimeout(total=STEP_TIMEOUT_S)
    async with aiohttp.ClientSession(cookie_jar=jar, timeout=timeout) as http:
        url, form = authorization_url, None
        for _ in range(MAX_STEPS):
            if form is None:
                reply = await http.get(url, allow_redirects=False)
            else:
                reply = await http.post(url, data=form, allow_redirects=False)
            async with reply:
                if reply.status in (302, 303):
                    url = urllib.parse.urljoin(url, reply.headers["Location"])
                    if arrived(url):
                        return url
                    form = None
                    continue
                text = await reply.text()
                if reply.status != 200:
                    raise AssertionError(f"{url} answered {reply.status}: {text[:500]}")
            page = FirstForm()
            page.feed(text)
            if page.action is None:
                raise AssertionError(f"{url} shows no form: {text[:500]}")
            url, form = urllib.parse.urljoin(url, page.action), fill(page.fields)
    raise AssertionError(f"no redirect back after {MAX_STEPS} requests")
