"""A scripted browser for the hub's sign-in and consent pages (plain HTTP with a cookie jar,
as tests/auth_e2e/logins.py's FormLogin does for oidc-provider): an OAuth `redirect` handler
that takes the authorization URL and returns the URL the hub redirected back to."""

from __future__ import annotations

from dataclasses import dataclass, field

import aiohttp
from tests.form_walk import walk

from mcpkit.client.oauth import DEFAULT_REDIRECT_URI


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
        back = self.redirect_uri.rsplit(":", 1)[0]  # any loopback port (RFC 8252 §7.3)
        return await walk(authorization_url, self.jar,
                          arrived=lambda url: url.startswith(back), fill=self._fill)

    def _fill(self, fields: dict[str, str]) -> dict[str, str]:
        prompt = fields.get("prompt", "?")
        self.pages.append(prompt)
        if prompt == "login":
            fields.update(username=self.user, password=self.password, action="sign-in")
        else:
            fields["action"] = self.consent
        return fields
