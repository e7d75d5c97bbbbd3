"""A scripted browser for the hub's sign-in and consent pages (plain HTTP with a cookie jar,
as tests/auth_e2e/logins.py's FormLogin does for oidc-provider): an OAuth `redirect` handler
that takes the authorization URL and returns the URL the hub redirected back to."""

from __future__ import annotations

import html.parser
import urllib.parse
from dataclasses import dataclass, field

import aiohttp

from mcpkit.client.oauth import DEFAULT_REDIRECT_URI

MAX_STEPS = 8
STEP_TIMEOUT_S = 15.0


class Form(html.parser.HTMLParser):
    """The first form of a page: its action and its inputs (buttons as `buttons`)."""

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


@dataclass
class HubLogin:
    """Signs `user` in with `password` and answers the consent page with `consent`; keeps
    its cookies across calls (one browser profile)."""

    user: str
    password: str
    consent: str = "allow"
    redirect_uri: str = DEFAULT_REDIRECT_URI
    pages: list[str] = field(default_factory=list)
    """The pages shown, in order ("login", "consent")."""
    jar: aiohttp.CookieJar | None = None

    async def __call__(self, authorization_url: str) -> str:
        if self.jar is None:
            self.jar = aiohttp.CookieJar(unsafe=True)  # cookies for an IP-address host
        timeout = aiohttp.ClientTimeout(total=STEP_TIMEOUT_S)
        async with aiohttp.ClientSession(cookie_jar=self.jar, timeout=timeout) as http:
            url, form = authorization_url, None
            for _ in range(MAX_STEPS):
                if form is None:
                    reply = await http.get(url, allow_redirects=False)
                else:
                    reply = await http.post(url, data=form, allow_redirects=False)
                async with reply:
                    if reply.status in (302, 303):
                        url = urllib.parse.urljoin(url, reply.headers["Location"])
                        if url.startswith(self.redirect_uri.rsplit(":", 1)[0]):
                            return url
                        form = None
                        continue
                    text = await reply.text()
                    if reply.status != 200:
                        raise AssertionError(f"{url} answered {reply.status}: {text[:300]}")
                url, form = self._submit(url, text)
        raise AssertionError(f"no redirect back after {MAX_STEPS} requests")

    def _submit(self, url: str, page: str) -> tuple[str, dict[str, str]]:
        parsed = Form()
        parsed.feed(page)
        assert parsed.action is not None, page[:300]
        fields = parsed.fields
        prompt = fields.get("prompt", "?")
        self.pages.append(prompt)
        if prompt == "login":
            fields.update(username=self.user, password=self.password, action="sign-in")
        else:
            fields["action"] = self.consent
        return urllib.parse.urljoin(url, parsed.action), fields
